//! `awf script plan` (issue 29): a workflow planned on the fake harness starts no program, CLI or
//! HTTP request; bad input is refused as `script run` refuses it; unpriced models, checkpoints and
//! runs that never end on the fake; and the range against what a run on a fake model server spent.

use crate::common;
use crate::common::fake_model::{FakeModel, Reply};

use common::Env;
use serde_json::{json, Value};
use std::process::Stdio;

/// `awf ARGS` in `env` with the variable `var` set to `value`.
fn awf_with(env: &Env, args: &[&str], (var, value): (&str, &str)) -> common::Out {
    let child = common::command(env.path(), args)
        .env(var, value)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn awf");
    common::wait_with_timeout(child)
}

/// `awf script plan wf.rhai --json EXTRA` in `env`, its scratch folders under `env`'s `tmp/`.
fn plan(env: &Env, extra: &[&str]) -> common::Out {
    let tmp = env.path().join("tmp");
    std::fs::create_dir_all(&tmp).expect("tmp");
    let mut args = vec!["script", "plan", "wf.rhai", "--json"];
    args.extend_from_slice(extra);
    awf_with(env, &args, ("TMPDIR", &tmp.display().to_string()))
}

/// A port on 127.0.0.1 nothing listens on.
fn dead_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

const SAY: &str = r#"#{ type: "object", properties: #{ text: #{ type: "string" } }, required: ["text"] }"#;

#[test]
fn a_plan_starts_no_program_and_sends_no_request() {
    let env = Env::new();
    env.write(
        "awf.toml",
        &format!(
            "[runtimes.dead]\nharness = \"openai\"\nmodel = \"local-small\"\nbase_url = \"http://127.0.0.1:{}/v1\"\nmax_tokens = 500\n",
            dead_port()
        ),
    );
    env.write(
        "wf.rhai",
        &format!(
            r#"
ctx.stage("make", || {{
    let maker = ctx.agents.open(#{{ key: "maker", runtime: #{{ harness: "command", command: ["sh", "-c", "touch made.txt"] }} }});
    maker.turn(#{{ prompt: "make the file" }});
    ()
}});
let local = ctx.agents.open(#{{ key: "local", runtime: "dead" }});
local.turn(#{{ prompt: "Say something.", schema: {SAY} }});
local.turn(#{{ prompt: "Say something else.", schema: {SAY} }});
"done"
"#
        ),
    );
    let p = plan(&env, &[]).expect_code(0).json();
    assert!(!env.path().join("made.txt").exists(), "the command agent ran");
    assert!(!env.runs_root().exists(), "a plan leaves no run folder");
    let left: Vec<_> = std::fs::read_dir(env.path().join("tmp")).expect("tmp").collect();
    assert!(left.is_empty(), "the throwaway runs folder is removed: {left:?}");
    assert_eq!((p["agents"].as_u64(), p["operations"].as_u64()), (Some(2), Some(3)), "{p:#}");
    assert_eq!(p["stages"], json!(["make"]));
    assert_eq!(p["widest"], 1);
    assert_eq!(p["unpriced"], json!(["local-small"]), "a model with no price is named");
    let local = &p["by_model"]["local-small"];
    assert_eq!((local["agents"].as_u64(), local["operations"].as_u64()), (Some(1), Some(2)), "{p:#}");
    let [lo, hi] = [local["tokens"][0].as_u64().unwrap_or(0), local["tokens"][1].as_u64().unwrap_or(0)];
    assert!(lo > 0 && hi >= 2 * 500 && lo < hi, "tokens without a price: {lo}-{hi}");
    assert_eq!(local["usd"], Value::Null);
    assert_eq!(p["by_model"]["command"]["basis"], "nothing");
    assert_eq!(p["basis"], "estimate");
    assert_eq!(p["one_path"], true);
}

/// The exit code and the first line of stderr.
fn refusal(out: &common::Out) -> (Option<i32>, String) {
    (out.code, out.stderr.lines().next().unwrap_or("").to_string())
}

#[test]
fn what_script_run_refuses_plan_refuses_the_same_way() {
    let env = Env::new();
    let cases: [(&str, &[&str]); 4] = [
        ("let x = ;", &[]),
        (r#"export const META = #{ name: "m", args: #{ type: "object", required: ["n"] } }; fn run(args) { 1 }"#, &[]),
        ("1", &["--runtime", "nope"]),
        (r#"let a = ctx.agents.open(#{ key: "a", runtime: "nope" }); a.turn(#{ prompt: "x" })"#, &[]),
    ];
    for (script, extra) in cases {
        let ran = env.run(script, extra);
        let planned = plan(&env, extra);
        assert_eq!(ran.code, Some(2), "script run refuses {script:?}: {}", ran.stderr);
        assert_eq!(refusal(&planned), refusal(&ran), "{script:?}\n--- plan:\n{}", planned.stderr);
        assert_eq!(planned.stdout, "", "no plan is printed for {script:?}");
    }
}

#[test]
fn checkpoints_are_answered_with_their_example_and_a_run_that_never_ends_is_cut() {
    let env = Env::new();
    env.write(
        "wf.rhai",
        r#"
let answer = ctx.checkpoint("Go on?", #{ type: "object", properties: #{ proceed: #{ type: "boolean" } }, required: ["proceed"] });
let a = ctx.agents.open(#{ key: "a" });
a.turn(#{ prompt: "first" });
ctx.stage("wait", || { ctx.sleep(600000); () });
a.turn(#{ prompt: "never" });
"#,
    );
    let p = plan(&env, &["--bound", "300ms"]).expect_code(0).json();
    assert_eq!(p["checkpoints"], json!(["checkpoint-1"]), "{p:#}");
    assert_eq!(p["operations"], 1, "the plan covers what ran before the cut: {p:#}");
    assert_eq!(p["cut"]["kind"], "bound", "{p:#}");
    assert_eq!(p["cut"]["stage"], "wait", "where it stopped: {p:#}");
}

#[test]
fn a_script_that_fails_on_the_fake_answers_is_planned_up_to_the_failure() {
    let env = Env::new();
    env.write("wf.rhai", "let a = ctx.agents.open(#{ key: \"a\" });\na.turn(#{ prompt: \"x\" });\nthrow \"no\";\n");
    let p = plan(&env, &[]).expect_code(1).json();
    assert_eq!(p["operations"], 1);
    assert_eq!(p["cut"]["kind"], "failed", "{p:#}");
}

fn priced_runtime(server: &FakeModel) -> String {
    format!(
        "default_runtime = \"m\"\n[runtimes.m]\nharness = \"openai\"\nmodel = \"small\"\nbase_url = \"{}/v1\"\n\
         [prices.small]\ninput = 1.0\noutput = 10.0\n",
        server.base()
    )
}

#[test]
fn earlier_runs_narrow_the_range_to_what_their_operations_spent() {
    let server = FakeModel::start(vec![
        Reply::with_usage(1000, 100, Reply::result(json!({ "text": "one" }))),
        Reply::with_usage(3000, 300, Reply::result(json!({ "text": "two" }))),
    ]);
    let env = Env::new();
    env.write("awf.toml", &priced_runtime(&server));
    let script = format!(
        "let a = ctx.agents.open(#{{ key: \"a\" }});\na.turn(#{{ prompt: \"One.\", schema: {SAY} }});\na.turn(#{{ prompt: \"Two.\", schema: {SAY} }});\n"
    );
    env.write("wf.rhai", &script);
    let before = plan(&env, &[]).expect_code(0).json();
    assert_eq!(before["basis"], "estimate");
    assert_eq!(server.bodies().len(), 0, "a plan sends no request");
    env.run(&script, &[]).expect_code(0);
    let spent = env.result()["accounting"]["totals"].clone();
    assert_eq!(spent["tokens"], 4400, "{spent}");
    let after = plan(&env, &[]).expect_code(0).json();
    assert_eq!(after["basis"], "history", "{after:#}");
    assert_eq!(after["history_runs"], json!([env.run_id()]));
    // Two operations, each between the least (1100 tokens, $0.002) and the most (3300, $0.006)
    // one operation of the earlier run spent.
    assert_eq!(after["tokens"], json!([2200, 6600]));
    assert_eq!(after["usd"], json!([0.004, 0.012]));
    let (lo, hi) = (after["tokens"][0].as_u64().unwrap_or(0), after["tokens"][1].as_u64().unwrap_or(0));
    let real = spent["tokens"].as_u64().unwrap_or(0);
    assert!(lo <= real && real <= hi, "the spent {real} lies in the planned {lo}-{hi}");
}

#[test]
fn the_text_plan_names_stages_agents_and_the_spend_by_model() {
    let env = Env::new();
    env.write(
        "awf.toml",
        "default_runtime = \"s\"\n[runtimes.s]\nharness = \"claude\"\nmodel = \"claude-sonnet-4-5\"\n",
    );
    env.write(
        "wf.rhai",
        r#"ctx.stage("fan", #{ result: #{ type: "array" } }, || { ctx.parallel([1, 2, 3], |x, i| { ctx.agents.open(#{ key: `r-${i}` }).turn(#{ prompt: "hi" }) }, #{ concurrency: 2 }) });"#,
    );
    let out = env.awf(&["script", "plan", "wf.rhai"]).expect_code(0).stdout.clone();
    for needle in [
        "stages: fan",
        "3 agents, 3 operations; widest step: 2 at once",
        "claude / claude-sonnet-4-5: 3 agents, 3 operations (r-0 ×1, r-1 ×1, r-2 ×1)",
        "estimated spend (estimated from the prompts' sizes):",
        "  total: ",
    ] {
        assert!(out.contains(needle), "{needle:?} in\n{out}");
    }
}

#[test]
fn a_council_is_planned_as_council_run_would_run_it() {
    let env = Env::new();
    let p = env.awf(&["council", "plan", "magi", "--task", "Ship it?", "--json"]).expect_code(0).json();
    assert_eq!((p["agents"].as_u64(), p["operations"].as_u64()), (Some(3), Some(6)), "{p:#}");
    assert_eq!(p["widest"], 3);
    let empty = env.awf(&["council", "plan", "pipeline", "--task", "x", "--json"]).expect_code(1).json();
    assert_eq!(empty["cut"]["error"], "pipeline: a non-empty roster is required", "a strategy's ok: false");
    let ran = env.awf(&["council", "run", "nope", "--task", "x"]);
    let planned = env.awf(&["council", "plan", "nope", "--task", "x"]);
    assert_eq!(refusal(&planned), refusal(&ran));
    assert_eq!(planned.code, Some(2));
}

#[test]
fn a_plan_exports_no_traces_where_a_run_does() {
    let collector = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    collector.set_nonblocking(true).expect("nonblocking");
    let endpoint = format!("http://{}", collector.local_addr().expect("addr"));
    let env = Env::new();
    env.write("wf.rhai", "ctx.agents.open(#{ key: \"a\" }).turn(#{ prompt: \"x\" }).kind");
    let awf = |verb: &str| awf_with(&env, &["script", verb, "wf.rhai"], ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint));
    awf("plan").expect_code(0);
    let accepted = collector.accept().map(|_| ());
    assert!(
        matches!(&accepted, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the plan connected to the collector: {accepted:?}"
    );
    awf("run").expect_code(0);
    common::poll("the run's traces", common::TIMEOUT, || collector.accept().ok().map(|_| ()));
}

#[test]
fn an_unpriced_models_earlier_runs_narrow_its_tokens() {
    let server = FakeModel::start(vec![Reply::with_usage(500, 50, Reply::result(json!({ "text": "one" })))]);
    let env = Env::new();
    env.write(
        "awf.toml",
        &format!(
            "default_runtime = \"m\"\n[runtimes.m]\nharness = \"openai\"\nmodel = \"local-x\"\nbase_url = \"{}/v1\"\n",
            server.base()
        ),
    );
    let script = format!("ctx.agents.open(#{{ key: \"a\" }}).turn(#{{ prompt: \"One.\", schema: {SAY} }}).kind\n");
    env.run(&script, &[]).expect_code(0);
    let p = plan(&env, &[]).expect_code(0).json();
    assert_eq!(p["basis"], "history", "{p:#}");
    assert_eq!(p["by_model"]["local-x"]["tokens"], json!([550, 550]));
    assert_eq!(p["by_model"]["local-x"]["usd"], Value::Null);
    assert_eq!(p["unpriced"], json!(["local-x"]));
}

#[test]
fn operations_are_counted_by_kind() {
    let env = Env::new();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/cooperate.rhai");
    let p = env.awf(&["script", "plan", &script.display().to_string(), "--json"]).expect_code(0).json();
    assert_eq!(p["operation_kinds"], json!({ "message": 1, "turn": 2 }), "{p:#}");
    let text = env.awf(&["script", "plan", &script.display().to_string()]).expect_code(0).stdout.clone();
    assert!(text.contains("2 agents, 3 operations (message 1, turn 2); widest step: 1 at once"), "{text}");
}

#[test]
fn a_plan_of_agents_in_worktrees_adds_no_worktree_and_is_refused_outside_a_repository_as_run_is() {
    let env = common::git::repo();
    let head = common::git::git(env.path(), &["rev-parse", "HEAD"]);
    let out = env.awf(&["script", "plan", "scripts/worktrees/fix_issues.rhai", "--json"]);
    out.expect_code(0);
    assert_eq!(common::git::git(env.path(), &["rev-parse", "HEAD"]), head, "the plan's merge merged nothing");
    assert_eq!(out.json()["agents"], 3, "{}", out.stdout);
    assert!(!env.path().join(".awf/worktrees").exists(), "a plan adds no worktree");
    let branches = common::git::git(env.path(), &["branch", "--list", "awf/*"]);
    assert!(branches.trim().is_empty(), "a plan makes no branch: {branches}");
    let bare = Env::new();
    bare.write("wf.rhai", r#"ctx.agents.open(#{ key: "a", isolation: "worktree" }).ask("hi")"#);
    let planned = bare.awf(&["script", "plan", "wf.rhai"]);
    let ran = bare.awf(&["script", "run", "wf.rhai"]);
    assert_eq!(planned.code, ran.code, "{planned:?} {ran:?}");
    planned.stderr_has("is not inside a git repository");
}
