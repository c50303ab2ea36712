//! The script API as users meet it: the generated reference in README.md, the forgiving forms
//! (facts as properties and calls, shorthands), `script check` refusing calls no form takes, the
//! editor definitions and the shell completions.

use crate::common;
use common::Env;

const BEGIN: &str = "<!-- BEGIN awf script api -->\n";
const END: &str = "<!-- END awf script api -->";

#[test]
fn readme_reference_is_the_engines() {
    let env = Env::new();
    let out = env.awf(&["script", "api"]);
    out.expect_code(0);
    let readme_path = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
    let readme = std::fs::read_to_string(readme_path).expect("read README.md");
    let start = readme.find(BEGIN).expect("README.md has the BEGIN marker") + BEGIN.len();
    let end = readme.find(END).expect("README.md has the END marker");
    if readme[start..end] != out.stdout && std::env::var_os("AWF_BLESS").is_some() {
        let updated = format!("{}{}{}", &readme[..start], out.stdout, &readme[end..]);
        std::fs::write(readme_path, updated).expect("write README.md");
        return;
    }
    assert_eq!(
        readme[start..end],
        out.stdout,
        "README.md's reference differs from `awf script api`: rerun this test with AWF_BLESS=1 to update it"
    );
    // Every part of the API a workflow uses is in it.
    for needle in
        ["`ctx.stage(", "`ctx.parallel(", "`ctx.agents.open(spec: Map)`", "`a.turn(turn: Map)`", "`ctx.messages.allow("]
    {
        assert!(out.stdout.contains(needle), "the reference lacks {needle}");
    }
}

#[test]
fn facts_read_as_properties_and_calls_and_turns_take_a_prompt() {
    let env = Env::new();
    let out = env.run(
        r#"
        let a = ctx.agents.open(#{ key: "w" });
        let turned = a.turn("hello there");
        let ran = run(a, "again");
        let summary = a.compact();
        #{
            run_id: ctx.run_id == ctx.run_id(),
            attempt: ctx.attempt(),
            cwd: ctx.cwd == ctx.cwd(),
            deadline: ctx.deadline(),
            budget: ctx.budget().usd,
            spent: ctx.spent().tokens == ctx.spent.tokens,
            usage: ctx.usage().len() == ctx.usage.len(),
            key: a.key(),
            model: a.model == a.model(),
            harness: a.harness(),
            turned: turned.ok,
            ran: ran.kind,
            summary: type_of(summary),
            operations: a.usage().operations,
        }
        "#,
        &["--budget-usd", "2", "--json"],
    );
    out.expect_code(0);
    let v = out.json()["value"].clone();
    assert_eq!(v["run_id"], true, "{v}");
    assert_eq!(v["attempt"], 1);
    assert_eq!(v["cwd"], true);
    assert!(v["deadline"].is_null());
    assert_eq!(v["budget"], 2.0);
    assert_eq!(v["spent"], true);
    assert_eq!(v["usage"], true);
    assert_eq!(v["key"], "w");
    assert_eq!(v["model"], true);
    assert_eq!(v["harness"], "fake");
    assert_eq!(v["turned"], true);
    assert_eq!(v["ran"], "answered");
    assert_eq!(v["summary"], "string");
    assert_eq!(v["operations"], 3, "two turns and a compaction: {v}");
}

#[test]
fn check_refuses_a_call_no_form_takes_before_anything_runs() {
    let env = Env::new();
    env.write("wf.rhai", "let a = ctx.agents.open(#{ key: \"w\" });\na.turn(#{ prompt: \"x\" }, 3);\n");
    let out = env.awf(&["script", "check", "wf.rhai"]);
    out.expect_code(2);
    out.stderr_has("`.turn(...)` is given 2 arguments here, but it takes 1").stderr_has("wf.rhai:2:3");
    let out = env.awf(&["script", "run", "wf.rhai"]);
    out.expect_code(2).stderr_has("but it takes 1");
    assert!(env.run_dirs().is_empty(), "a script refused by the checks opens no run");

    env.write("wf.rhai", "let a = ctx.agents().open(#{ key: \"w\" });\n");
    env.awf(&["script", "check", "wf.rhai"])
        .expect_code(2)
        .stderr_has("`agents` is a property: write `.agents` without parentheses");

    // A function the script defines itself, or a closure in a map, is left to the script.
    env.write(
        "wf.rhai",
        "fn turn(x, y) { x + y }\nlet obj = #{ ask: |a, b, c| a + b + c };\nlet n = turn(1, 2) + obj.ask(1, 2, 3);\n",
    );
    env.awf(&["script", "check", "wf.rhai"]).expect_code(0);
}

#[test]
fn defs_declare_the_whole_api_with_its_texts() {
    let env = Env::new();
    let out = env.awf(&["script", "defs", "defs"]);
    out.expect_code(0).stdout_has("__static__.d.rhai");
    let dir = env.path().join("defs");
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let host = read("__static__.d.rhai");
    for line in [
        "fn turn(agent: Agent, prompt: String) -> map;",
        "fn turn(agent: Agent, turn: map) -> map;",
        "fn get run_id(ctx: Ctx) -> String;",
        "fn open(agents: Agents, spec: map) -> Agent;",
        "fn get budget(ctx: Ctx) -> ?;",
        "/// Shorthand for `turn(#{ prompt })`",
    ] {
        assert!(host.contains(line), "the definitions lack `{line}`");
    }
    assert!(read("__scope__.d.rhai").contains("let ctx: Ctx;"));

    // Every method the example workflows and the strategies call is declared somewhere.
    let mut declared = String::new();
    for entry in std::fs::read_dir(&dir).expect("list defs") {
        declared += &std::fs::read_to_string(entry.expect("entry").path()).expect("read def");
    }
    let root = env!("CARGO_MANIFEST_DIR");
    let mut sources = Vec::new();
    for folder in ["scripts", "stdlib/council"] {
        for entry in std::fs::read_dir(format!("{root}/{folder}")).expect("list scripts") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "rhai") {
                sources.push(std::fs::read_to_string(&path).expect("read script"));
            }
        }
    }
    for text in sources {
        for (i, _) in text.match_indices("ctx.") {
            let name: String = text[i + 4..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if name.is_empty() {
                continue; // `ctx.` in prose
            }
            let called = text[i + 4 + name.len()..].starts_with('(');
            let call = format!("fn {name}(ctx: Ctx");
            let property = format!("fn get {name}(ctx: Ctx");
            let found = declared.contains(&call) || (!called && declared.contains(&property));
            assert!(found, "`ctx.{name}` is used by a script but not declared: {call}");
        }
    }
}

#[test]
fn completions_for_each_shell() {
    let env = Env::new();
    for shell in ["bash", "zsh", "fish"] {
        let out = env.awf(&["completions", shell]);
        out.expect_code(0);
        assert!(out.stdout.contains("council") && out.stdout.contains("script"), "{shell}: {}", out.stdout);
    }
    env.awf(&["completions", "tcsh"]).expect_code(2).stderr_has("invalid value 'tcsh'");
}

#[test]
fn wf_outside_an_agent_says_how_it_is_meant_to_run() {
    let env = Env::new();
    let out = common::command(env.path(), &["wf", "inbox"]).env_remove("AWF_SOCKET").output().expect("run awf wf");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no control socket: agents run `wf` through their launcher"), "{stderr}");
    let help = env.awf(&["wf", "--help"]);
    help.expect_code(0);
    assert!(help.stdout.contains("Usage: awf wf [OPTIONS] <COMMAND>"), "--socket is optional: {}", help.stdout);
}
