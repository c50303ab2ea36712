//! The calling session: `awf script run --caller HARNESS:SESSION` (and a council convened with `wf
//! council` from a CLI agent) records the caller in `run.json`; `ctx.agents.caller()` shows its
//! facts and refuses a turn on it; `ctx.agents.fork_caller(spec)` opens an agent whose first turn
//! forks the caller's session, so the model sees the caller's conversation (claude and pi, driven
//! by the fake model server); where it cannot fork it returns `()` and logs why; the strategies'
//! `fork_caller` param falls back to a fresh member. Bad flags are refused before the run (exit 2).

use crate::common;
use crate::common::fake_model;

use common::cli::{awf_as, installed, rerun_in_netns, setup, OPERATOR_VARS};
use common::{read_json, Env};
use fake_model::{FakeModel, Reply};
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Stdio};

const SCHEMA: &str = r#"#{ type: "object", properties: #{ verdict: #{ type: "string" } }, required: ["verdict"] }"#;

/// The workflow: the caller's facts, a refused turn on it, and a fork of it that answers.
fn fork_workflow() -> String {
    format!(
        r#"let c = ctx.agents.caller();
let refused = "";
try {{ c.ask("Hello?"); }} catch (e) {{ refused = `${{e}}`; }}
let f = ctx.agents.fork_caller(#{{ key: "f" }});
let o = f.run(#{{ prompt: "Fork speaks.", schema: {SCHEMA} }});
#{{ harness: c.harness, session: c.session, home: c.home, refused: refused, value: o.value, reason: o.reason }}"#
    )
}

/// Runs one operator turn of `cli` in `home` (the CLI's own folder) against the fake; returns
/// the session id.
fn operator_session(cli: &str, home: &Path, base: &str, cwd: &Path) -> String {
    let mut cmd = Command::new(cli);
    for var in OPERATOR_VARS {
        cmd.env_remove(var);
    }
    let prompt = "Remember the word PINEAPPLE-4242.";
    match cli {
        "claude" => {
            cmd.env("CLAUDE_CONFIG_DIR", home).env("ANTHROPIC_BASE_URL", base).env("ANTHROPIC_API_KEY", "dummy");
            cmd.env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1").env("CLAUDE_CODE_MAX_RETRIES", "1");
            cmd.args(["-p", "--output-format", "stream-json", "--verbose", prompt]);
        }
        _ => {
            let models = json!({ "providers": { "fake": { "baseUrl": format!("{base}/v1"), "api": "openai-completions",
                "apiKey": "dummy", "compat": { "supportsDeveloperRole": false, "supportsReasoningEffort": false },
                "models": [{ "id": "fake-model", "reasoning": false, "input": ["text"], "contextWindow": 128000, "maxTokens": 4096 }] } } });
            std::fs::create_dir_all(home).expect("home");
            std::fs::write(home.join("models.json"), models.to_string()).expect("models.json");
            std::fs::write(home.join("settings.json"), r#"{"retry":{"enabled":false}}"#).expect("settings");
            cmd.env("PI_CODING_AGENT_DIR", home).env("PI_OFFLINE", "1");
            cmd.args(["-p", "--mode", "json", "--provider", "fake", "--model", "fake-model", prompt]);
        }
    }
    cmd.env("HOME", home.parent().expect("parent")).current_dir(cwd).stdin(Stdio::null());
    let out = cmd.output().expect("run the operator's CLI");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let id = stdout.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).find_map(|v| {
        let id = if cli == "claude" { &v["session_id"] } else { &v["id"] };
        id.as_str().filter(|_| cli == "claude" || v["type"] == "session").map(String::from)
    });
    id.unwrap_or_else(|| panic!("{cli}: no session id in the operator's turn: {stdout}"))
}

fn forks_the_callers_session(cli: &str, test: &str) {
    if !installed(cli, test) || rerun_in_netns(test) {
        return;
    }
    let server = FakeModel::start_cli(vec![]);
    let env = setup(cli, &server.base(), "");
    let operator = env.path().join("operator-home");
    let cli_home = operator.join(if cli == "claude" { ".claude" } else { ".pi/agent" });
    let id = operator_session(cli, &cli_home, &server.base(), env.path());
    let before = server.bodies().len();
    server.push(vec![Reply::answer(json!({ "verdict": "forked" }))]);
    env.write("wf.rhai", &fork_workflow());
    let caller = format!("{cli}:{id}");
    let home = cli_home.display().to_string();
    let out = awf_as(&env, &["script", "run", "wf.rhai", "--caller", &caller, "--caller-home", &home], &operator);
    out.expect_code(0);
    let v = out.json();
    assert_eq!((v["harness"].as_str(), v["session"].as_str()), (Some(cli), Some(id.as_str())), "{v}");
    assert_eq!(v["home"], home, "{v}");
    assert!(v["refused"].as_str().unwrap_or("").contains("the caller's session belongs to the operator"), "{v}");
    assert_eq!(v["value"]["verdict"], "forked", "{cli}: {v}");
    // The fork's first request carries the operator's earlier conversation.
    let fork = server.bodies()[before..].iter().find(|b| b.to_string().contains("Fork speaks.")).cloned();
    let fork = fork.expect("the fork's request").to_string();
    assert!(fork.contains("PINEAPPLE-4242"), "{cli}: the fork starts with the caller's conversation: {fork}");
    let run = env.run_json();
    assert_eq!(run["caller"], json!({ "harness": cli, "session": id, "home": home }), "{run}");
    let turn = env.turn("f#1");
    assert_eq!(turn["session"]["forked_from"], id.as_str(), "{turn}");
    assert_ne!(turn["session"]["id"], id.as_str(), "{cli}: the fork has a session of its own: {turn}");
}

#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn claude_forks_the_callers_session() {
    forks_the_callers_session("claude", "claude_forks_the_callers_session");
}

#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn pi_forks_the_callers_session() {
    forks_the_callers_session("pi", "pi_forks_the_callers_session");
}

const BALLOT: &str = r#"
fn respond(turn) {
    #{ answer: #{ choice: "yes", confidence: 0.9, reason: "It holds." }, usage: #{ input_tokens: 100, output_tokens: 20 } }
}
"#;

/// A Claude Code agent convenes magi from its turn: the child run's caller is that agent's session,
/// and magi's `fork_caller` members (on the fake harness, not claude) start fresh, saying why.
#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn a_council_convened_by_a_claude_agent_knows_its_caller() {
    a_council_convened_by_a_cli_agent_knows_its_caller(
        "claude",
        "a_council_convened_by_a_claude_agent_knows_its_caller",
    );
}

#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn a_council_convened_by_a_pi_agent_knows_its_caller() {
    a_council_convened_by_a_cli_agent_knows_its_caller("pi", "a_council_convened_by_a_pi_agent_knows_its_caller");
}

fn a_council_convened_by_a_cli_agent_knows_its_caller(cli: &str, test: &str) {
    if !installed(cli, test) || rerun_in_netns(test) {
        return;
    }
    let convene = r#"printf '%s' '{"task":"Ship on Friday?","reflect":false,"fork_caller":true}' | {launcher} council magi | python3 -c 'import json,sys; print(json.dumps({"verdict": sys.stdin.read().strip()}))' | {launcher} result {op}"#;
    let server = FakeModel::start_cli(vec![Reply::shell(convene)]);
    let env = Env::new();
    env.write("responder.rhai", BALLOT);
    env.write(
        "awf.toml",
        &format!(
            "default_runtime = \"scripted\"\n[runtimes.scripted]\nharness = \"fake\"\nmodel = \"fake\"\nresponder = \"responder.rhai\"\n\
             [runtimes.m]\n{}",
            common::cli::runtime(cli, &server.base())
        ),
    );
    std::fs::create_dir_all(env.path().join("operator-home")).expect("home");
    env.write(
        "wf.rhai",
        &format!(
            r#"let boss = ctx.agents.open(#{{ key: "boss", runtime: "m", councils: ["magi"] }});
boss.ask("Decide; convene magi.", {SCHEMA})"#
        ),
    );
    let out = awf_as(&env, &["script", "run", "wf.rhai", "--json"], &env.path().join("operator-home"));
    out.expect_code(0);
    let result = out.json();
    assert!(result["value"]["verdict"].as_str().unwrap_or("").starts_with("Ruling: yes"), "{result}");
    let dirs = env.run_dirs();
    let (children, parents): (Vec<_>, Vec<_>) =
        dirs.iter().partition(|d| read_json(&d.join("run.json")).get("parent").is_some());
    assert_eq!((children.len(), parents.len()), (1, 1), "{dirs:?}");
    let boss_session = common::read_jsonl(&parents[0].join("turns.jsonl"))[0]["session"]["id"].clone();
    let caller = read_json(&children[0].join("run.json"))["caller"].clone();
    assert_eq!(caller["harness"], cli, "{caller}");
    assert!(boss_session.is_string(), "{boss_session}");
    assert_eq!(caller["session"], boss_session, "the boss's own session: {caller}");
    assert_eq!(caller["agent"], "boss", "{caller}");
    assert_eq!(caller["run"], parents[0].file_name().expect("id").to_string_lossy().as_ref(), "{caller}");
    let home = parents[0].join("agents/boss/home").display().to_string();
    assert!(caller["home"].as_str().is_some_and(|h| h.starts_with(&home)), "{caller}");
    let logs = common::read_jsonl(&children[0].join("events.jsonl"));
    let text: Vec<&str> =
        logs.iter().filter(|e| e["type"] == "log").filter_map(|e| e["data"]["text"].as_str()).collect();
    assert!(
        text.iter().any(|t| t.contains("forks only into its own harness")),
        "the fork's refusal is logged: {text:?}"
    );
    assert!(text.iter().any(|t| t.contains("a fresh agent takes the seat")), "{text:?}");
}

/// A hand-made Claude Code home holding session `abc` (never run: the fake harness answers).
fn claude_home(env: &Env) -> String {
    env.write("caller-home/projects/-work/abc.jsonl", "{\"type\":\"user\"}\n");
    env.path().join("caller-home").display().to_string()
}

#[test]
fn the_callers_facts_show_and_a_turn_on_it_is_refused() {
    let env = Env::new();
    env.with_responder("fn respond(turn) { #{ answer: #{ verdict: \"fresh\" } } }");
    let home = claude_home(&env);
    let script = r#"let c = ctx.agents.caller();
let refused = "";
try { c.run(#{ prompt: "Hello?" }); } catch (e) { refused = `${e}`; }
let f = ctx.agents.fork_caller(#{ key: "f" });
#{ unit: type_of(f) == "()", refused: refused, harness: c.harness, session: c.session, home: c.home, agent: c.agent }"#;
    let out = env.run(script, &["--caller", "claude:abc", "--caller-home", &home]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["harness"], "claude", "{v}");
    assert_eq!((v["session"].as_str(), v["home"].as_str()), (Some("abc"), Some(home.as_str())), "{v}");
    assert_eq!(v["agent"], Value::Null, "a caller from the command line has no agent: {v}");
    assert_eq!(
        v["refused"], "the caller's session belongs to the operator: fork it with ctx.agents.fork_caller(spec)",
        "{v}"
    );
    // The default runtime is the fake harness: the claude session does not fork into it.
    assert_eq!(v["unit"], true, "{v}");
    out.stderr_has("forks only into its own harness");
    let logs = env.events_of("log");
    assert!(logs.iter().any(|e| e["data"]["fields"]["agent"] == "f"), "{logs:?}");
    assert_eq!(env.run_json()["caller"], json!({ "harness": "claude", "session": "abc", "home": home }));
    assert!(!env.run_dir().join("agents/f").exists(), "nothing opened");
}

#[test]
fn a_resumed_run_keeps_its_caller() {
    let env = Env::new();
    env.with_responder("fn respond(turn) { #{ answer: \"x\" } }");
    let home = claude_home(&env);
    let script = r#"if ctx.attempt == 1 { throw "first attempt fails"; }
let c = ctx.agents.caller();
#{ harness: c.harness, session: c.session, attempt: ctx.attempt }"#;
    env.run(script, &["--caller", "claude:abc", "--caller-home", &home]).expect_code(1);
    let out = env.awf(&["runs", "resume", &env.run_id()]);
    out.expect_code(0);
    assert_eq!(out.json(), json!({ "harness": "claude", "session": "abc", "attempt": 2 }));
    assert_eq!(env.run_json()["caller"]["session"], "abc");
}

#[test]
fn without_a_caller_fork_caller_is_unit_with_the_reason() {
    let env = Env::new();
    env.with_responder("fn respond(turn) { #{ answer: \"x\" } }");
    let out = env.run(
        r#"let f = ctx.agents.fork_caller(#{ key: "f" });
#{ caller: type_of(ctx.agents.caller()), fork: type_of(f) }"#,
        &[],
    );
    out.expect_code(0);
    assert_eq!(out.json(), json!({ "caller": "()", "fork": "()" }));
    out.stderr_has("agent f not opened: this run has no caller");
    assert!(env.run_json().get("caller").is_none());
    // A spec that cannot open at all still throws.
    let out = env.run(r#"ctx.agents.fork_caller(#{ runtime: "scripted" })"#, &[]);
    out.expect_code(1);
    out.stderr_has("agent spec needs `key`");
}

#[test]
fn a_caller_flag_naming_no_session_is_refused_before_the_run() {
    let env = Env::new();
    env.with_responder("fn respond(turn) { #{ answer: \"x\" } }");
    let home = claude_home(&env);
    env.write("wf.rhai", "1");
    for (flags, expect) in [
        (vec!["--caller", "claude:nope", "--caller-home", &home], "--caller claude:nope: no claude session `nope` in"),
        (vec!["--caller", "claude:"], "names no session"),
        (vec!["--caller", "openai:abc"], "`openai` is not an agent CLI harness"),
        (vec!["--caller", "abc"], "is not HARNESS:SESSION"),
        (vec!["--caller", "pi:abc", "--caller-home", "no-such-folder"], "--caller-home"),
        (vec!["--caller-home", &home], "--caller"),
    ] {
        let mut args = vec!["script", "run", "wf.rhai"];
        args.extend(flags.iter().copied());
        let out = env.awf(&args);
        out.expect_code(2);
        out.stderr_has(expect);
    }
    assert!(env.run_dirs().is_empty(), "no run started");
}

#[test]
fn a_strategys_fork_caller_members_start_fresh_when_the_caller_cannot_be_forked() {
    let env = common::council::council(BALLOT);
    let home = claude_home(&env);
    let out = env.awf(&[
        "council",
        "run",
        "magi",
        "--task",
        "Ship on Friday?",
        "--param",
        "reflect=false",
        "--param",
        "fork_caller=true",
        "--caller",
        "claude:abc",
        "--caller-home",
        &home,
    ]);
    out.expect_code(0);
    assert!(out.stdout.contains("Ruling: yes"), "{}", out.stdout);
    out.stderr_has("forks only into its own harness");
    out.stderr_has("a fresh agent takes the seat");
    assert_eq!(env.run_json()["caller"]["session"], "abc");
}
