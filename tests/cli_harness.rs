//! The CLI harnesses `claude`, `codex` and `pi`, driven for real: the pinned CLIs (`.ci/run`
//! installs them) run against the fake model server on 127.0.0.1, which makes each call its own
//! shell tool with a command that pipes the answer into the launcher. Each test re-runs itself in a
//! loopback-only network namespace (`unshare -n`, lo up) when this machine allows one, so that no
//! CLI can reach the network; otherwise it runs as is, against 127.0.0.1 only. A CLI that is not
//! installed is a failure; every such test is #[ignore]d, so that a machine without the CLIs reports
//! them skipped, and `.ci/test` (the README's test command) installs the CLIs and runs them.

use crate::common;
use crate::common::fake_model;

use common::cli::{installed, rerun_in_netns, runtime, OPERATOR_VARS};
use common::{read_jsonl, Env, Out};
use fake_model::{FakeModel, Reply};
use serde_json::{json, Value};
use std::process::Stdio;

/// A working folder with `awf.toml` whose default runtime is `cli` at `base`, and a home of its
/// own for the operator (no credentials of the machine's are read or written).
fn setup(cli: &str, base: &str) -> Env {
    setup_with(cli, base, "", "15s")
}

/// As `setup`, with extra lines for the runtime table and a stall timeout.
fn setup_with(cli: &str, base: &str, extra: &str, stall: &str) -> Env {
    let env = Env::new();
    env.write(
        "awf.toml",
        &format!(
            "default_runtime = \"m\"\n[runtimes.m]\n{}{extra}\n[prices.\"fake-model\"]\ninput = 1.0\noutput = 2.0\n[limits]\nstall_timeout = \"{stall}\"\n",
            runtime(cli, base)
        ),
    );
    std::fs::create_dir_all(env.path().join("operator-home")).expect("home");
    env
}

/// Runs a workflow with the operator's home and keys kept out.
fn run(env: &Env, script: &str) -> Out {
    run_as(env, script, &env.path().join("operator-home"))
}

/// As `run`, with the operator's home at `home`.
fn run_as(env: &Env, script: &str, home: &std::path::Path) -> Out {
    env.write("wf.rhai", script);
    let mut cmd = common::command(env.path(), &["script", "run", "wf.rhai"]);
    cmd.env("HOME", home);
    for var in OPERATOR_VARS {
        cmd.env_remove(var);
    }
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn awf");
    wait_long(child)
}

/// As `common::wait_with_timeout`, with room for several CLI start-ups on a busy machine.
fn wait_long(child: std::process::Child) -> Out {
    let limit = std::time::Duration::from_secs(120);
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(limit) {
        Ok(out) => out.expect("wait for awf"),
        Err(_) => {
            common::signal(pid, "-KILL");
            panic!("awf did not finish within {limit:?}; killed it");
        }
    };
    Out {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

const SCHEMA: &str = r#"#{ type: "object", properties: #{ verdict: #{ type: "string" } }, required: ["verdict"] }"#;

fn two_turns() -> String {
    common::two_turn_workflow()
}

/// The body of the first request that shows `needle` in its conversation.
fn first_request_with(server: &FakeModel, needle: &str) -> Value {
    server
        .bodies()
        .into_iter()
        .find(|b| b.to_string().contains(needle))
        .unwrap_or_else(|| panic!("no request shows {needle:?}"))
}

fn answers_through_the_launcher_and_resumes(cli: &str, test: &str) {
    if !installed(cli, test) || rerun_in_netns(test) {
        return;
    }
    // The second answer shows a variable of the runtime's `env`: it reached the CLI's shell tool.
    let from_env = r#"printf '{"verdict":"%s"}' "$AWF_TEST_MARK" | {launcher} result {op}"#;
    let server = FakeModel::start_cli(vec![Reply::answer(json!({ "verdict": "one" })), Reply::shell(from_env)]);
    let extra_args = match cli {
        "claude" => r#"["--max-turns", "7"]"#,
        "codex" => r#"["-c", "hide_agent_reasoning=true"]"#,
        _ => r#"["--no-skills"]"#,
    };
    let extra = format!("args = {extra_args}\nenv = {{ AWF_TEST_MARK = \"two\" }}\n");
    let env = setup_with(cli, &server.base(), &extra, "15s");
    // The operator's credentials are copied into the agent's home (pi's and Codex's: Claude
    // Code would try to use OAuth credentials).
    let credential = match cli {
        "codex" => Some((".codex/auth.json", "auth.json", r#"{"OPENAI_API_KEY":"sk-awf-test-unused"}"#)),
        "pi" => Some((".pi/agent/auth.json", "auth.json", "{}")),
        _ => None,
    };
    if let Some((operator, _, text)) = credential {
        env.write(&format!("operator-home/{operator}"), text);
    }
    let out = run(&env, &two_turns());
    out.expect_code(0);
    let v = out.json();
    assert_eq!((v["one"].as_str(), v["two"].as_str()), (Some("answered"), Some("answered")), "{cli}: {v}");
    assert_eq!(v["v1"]["verdict"], "one", "{cli}: {v}");
    assert_eq!(v["v2"]["verdict"], "two", "{cli}: {v}");
    for u in [&v["u1"], &v["u2"]] {
        assert!(u["input_tokens"].as_u64().unwrap_or(0) > 0, "{cli}: tokens recorded: {v}");
        assert!(u["output_tokens"].as_u64().unwrap_or(0) > 0, "{cli}: tokens recorded: {v}");
        assert!(u["cost_usd"].as_f64().unwrap_or(0.0) > 0.0, "{cli}: cost recorded: {v}");
    }
    // The second turn resumed the session: the model saw the first turn in its history.
    let second = first_request_with(&server, "Give a second verdict.").to_string();
    assert!(second.contains("Give a first verdict."), "{cli}: the second turn carries the first: {second}");
    assert!(second.contains("You judge carefully."), "{cli}: the instructions reached the model");
    let turns = env.turns();
    assert_eq!(turns.len(), 2);
    let source = if cli == "claude" { "harness" } else { "priced" };
    for t in &turns {
        assert_eq!(t["harness"], cli);
        assert_eq!(t["cost_source"], source, "{cli}: {t}");
    }
    let subs = env.events_of("op-submission");
    assert_eq!(subs.len(), 2, "{cli}: both answers came through the launcher: {subs:?}");
    let dir = env.run_dir().join("agents/a");
    assert!(dir.join("home").is_dir(), "{cli}: the agent has a home of its own");
    let log = read_jsonl(&dir.join("ops/a-2.jsonl"));
    assert!(log.iter().any(|e| e["type"] == "spawned"), "{log:?}");
    assert!(log.iter().any(|e| e["type"] == "answered"), "{log:?}");
    assert!(std::fs::metadata(dir.join("ops/a-2.stdout")).map(|m| m.len()).unwrap_or(0) > 0, "events captured");
    let args = |log: &[Value]| log.iter().find(|e| e["type"] == "spawned").map(|e| e["data"]["args"].to_string());
    let first = args(&read_jsonl(&dir.join("ops/a-1.jsonl"))).unwrap_or_default();
    let second = args(&log).unwrap_or_default();
    let extra: Vec<String> = serde_json::from_str(extra_args).expect("args");
    assert!(extra.iter().all(|a| first.contains(a.as_str())), "{cli}: runtime args passed: {first}");
    let effort = match cli {
        "claude" => r#""--effort","high""#,
        "codex" => r#"model_reasoning_effort=\"high\""#,
        _ => r#""--thinking","high""#,
    };
    assert!(!first.contains(effort) && second.contains(effort), "{cli}: set() changed the effort: {second}");
    if let Some((operator, local, text)) = credential {
        let copy = std::fs::read_to_string(dir.join("home").join(local)).expect("the credential was seeded");
        assert_eq!(copy, text, "{cli}");
        let original = std::fs::read_to_string(env.path().join("operator-home").join(operator)).expect("kept");
        assert!(serde_json::from_str::<Value>(&original).is_ok(), "{cli}: the operator's file stays valid");
    }
}

fn failures_are_judged_by_events(cli: &str, test: &str, expect: &str) {
    if !installed(cli, test) || rerun_in_netns(test) {
        return;
    }
    let script = format!(
        r#"let o = ctx.agents.open(#{{ key: "a" }}).run(#{{ prompt: "Give a verdict.", schema: {SCHEMA} }});
#{{ kind: o.kind, reason: o.reason }}"#
    );
    // A server that is down.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    let env = setup(cli, &format!("http://127.0.0.1:{port}"));
    let out = run(&env, &script);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["kind"], "failed", "{cli}: {v}");
    assert!(v["reason"].as_str().unwrap_or("").contains(expect), "{cli}: {v}");

    // A server that refuses the request.
    let refusal =
        json!({ "type": "error", "error": { "type": "invalid_request_error", "message": "scripted refusal" } });
    let server = FakeModel::start_cli(vec![Reply::Status { code: 400, retry_after: None, body: refusal.to_string() }]);
    let env = setup(cli, &server.base());
    let out = run(&env, &script);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["kind"], "failed", "{cli}: {v}");
    assert!(v["reason"].as_str().unwrap_or("").contains(expect), "{cli}: {v}");
    assert_eq!(env.events_of("op-nudged").len(), 0, "{cli}: a failed turn is not nudged");
}

/// A sandboxed fork (`sandboxed`) sits in its parent's sandbox, with a home of its own.
fn forks_and_compacts(cli: &str, test: &str, sandboxed: bool) {
    if !installed(cli, test) || rerun_in_netns(test) {
        return;
    }
    let server = FakeModel::start_cli(vec![
        Reply::answer(json!({ "verdict": "parent" })),
        Reply::answer(json!({ "verdict": "child" })),
        Reply::answer(json!({ "verdict": "parent again" })),
        Reply::text("SUMMARY: the verdicts were parent and child."),
    ]);
    let env = setup(cli, &server.base());
    // A sandbox needs the operator's home outside the workspace.
    let operator = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("the operator's home");
    let (home, spec) = if sandboxed {
        let toml = std::fs::read_to_string(env.path().join("awf.toml")).expect("awf.toml");
        env.write("awf.toml", &format!("{toml}\n[sandboxes.cli]\nnetwork = \"host\"\n"));
        (operator.path().to_path_buf(), r#", sandbox: "cli""#)
    } else {
        (env.path().join("operator-home"), "")
    };
    let script = format!(
        r#"
let a = ctx.agents.open(#{{ key: "a"{spec} }});
let one = a.run(#{{ prompt: "Parent speaks first.", schema: {SCHEMA} }});
let b = a.fork(#{{ key: "b" }});
let two = b.run(#{{ prompt: "Child speaks.", schema: {SCHEMA} }});
let three = a.run(#{{ prompt: "Parent speaks again.", schema: {SCHEMA} }});
let summary = "";
try {{ summary = a.compact(#{{ prompt: "Keep the verdicts." }}); }} catch (e) {{ summary = `error: ${{e}}`; }}
#{{ one: one.value, two: two.value, two_reason: two.reason, three: three.value, three_reason: three.reason, summary: summary }}
"#
    );
    let out = run_as(&env, &script, &home);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["one"]["verdict"], "parent", "{cli}: {v}");
    assert_eq!(v["two"]["verdict"], "child", "{cli}: the fork answers through its own launcher: {v}");
    assert_eq!(v["three"]["verdict"], "parent again", "{cli}: {v}");
    let child = first_request_with(&server, "Child speaks.").to_string();
    assert!(child.contains("Parent speaks first."), "{cli}: the fork carries the parent's history: {child}");
    assert!(child.contains("agents/b/wf"), "{cli}: the fork's launcher is its own");
    let parent = first_request_with(&server, "Parent speaks again.").to_string();
    assert!(
        parent.contains("Parent speaks first.") && !parent.contains("Child speaks."),
        "{cli}: the parent's session is its own: {parent}"
    );
    // Each operation records the CLI session it ran in, and a fork its parent's, so that a user can
    // resume either with the CLI itself.
    let turns = env.turns();
    let session = |op: &str| turns.iter().find(|t| t["op_id"] == op).map(|t| t["session"].clone()).unwrap_or_default();
    let (a1, b1, a2) = (session("a#1"), session("b#1"), session("a#2"));
    let parent_id = a1["id"].as_str().unwrap_or("");
    assert!(!parent_id.is_empty(), "{cli}: the parent's turn names its session: {turns:?}");
    assert_eq!(a2["id"], a1["id"], "{cli}: the parent keeps its session");
    assert_eq!(b1["forked_from"], a1["id"], "{cli}: the fork names its parent's session: {b1}");
    assert!(b1["id"].as_str().is_some_and(|id| !id.is_empty()), "{cli}: the fork names its own session: {b1}");
    let summary = v["summary"].as_str().unwrap_or("");
    if cli == "codex" {
        assert!(summary.contains("cannot compact"), "{cli}: {v}");
    } else {
        assert!(summary.contains("SUMMARY: the verdicts were parent and child."), "{cli}: native compaction: {v}");
        assert_eq!(env.events_of("agent-compacted").len(), 1);
    }
    if sandboxed {
        let result = env.result();
        let seated = &result["sandboxes"][0]["agents"];
        assert_eq!((seated[0]["agent"].as_str(), seated[1]["agent"].as_str()), (Some("a"), Some("b")), "{result:#}");
        assert_eq!(seated[1]["seat"]["home"], env.run_dir().join("agents/b/home").display().to_string());
        let log = read_jsonl(&env.run_dir().join("agents/b/ops/b-1.jsonl"));
        let spawned = log.iter().find(|e| e["type"] == "spawned").expect("spawned");
        assert_eq!(spawned["data"]["sandbox"], "cli", "{cli}: the fork runs sandboxed: {spawned}");
    }
}

fn a_silent_cli_stalls(cli: &str, test: &str) {
    if !installed(cli, test) || rerun_in_netns(test) {
        return;
    }
    let slow = Reply::Slow { pause_ms: 6000, then: Box::new(Reply::answer(json!({ "verdict": "late" }))) };
    let server = FakeModel::start_cli(vec![slow]);
    let env = setup_with(cli, &server.base(), "", "2s");
    let out = run(
        &env,
        &format!(
            r#"let o = ctx.agents.open(#{{ key: "a" }}).run(#{{ prompt: "Give a verdict.", schema: {SCHEMA} }});
#{{ kind: o.kind, reason: o.reason }}"#
        ),
    );
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["kind"], "failed", "{cli}: {v}");
    assert!(v["reason"].as_str().unwrap_or("").starts_with("stalled"), "{cli}: {v}");
    let log = read_jsonl(&env.run_dir().join("agents/a/ops/a-1.jsonl"));
    assert!(log.iter().any(|e| e["type"] == "stalled"), "{cli}: {log:?}");
}

fn a_long_prompt_is_not_put_on_the_command_line(cli: &str, test: &str) {
    if !installed(cli, test) || rerun_in_netns(test) {
        return;
    }
    let server = FakeModel::start_cli(vec![Reply::answer(json!({ "verdict": "long" }))]);
    let env = setup(cli, &server.base());
    let out = run(
        &env,
        &format!(
            r#"let long = "LONG-START "; for i in 0..5000 {{ long += "filler text, line by line. "; }} long += "LONG-END";
let o = ctx.agents.open(#{{ key: "a" }}).run(#{{ prompt: long, schema: {SCHEMA} }});
#{{ kind: o.kind, value: o.value, reason: o.reason }}"#
        ),
    );
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["value"]["verdict"], "long", "{cli}: {v}");
    let body = first_request_with(&server, "LONG-START").to_string();
    assert!(body.contains("LONG-END"), "{cli}: the whole prompt reached the model");
}

/// The session files each CLI keeps in its home.
fn session_files(cli: &str) -> &'static str {
    match cli {
        "claude" => "projects",
        "codex" => "sessions",
        _ => "awf-session/session.jsonl",
    }
}

/// A CLI agent in a sandbox with `network = "host"` reaches the fake and answers through the
/// launcher; its shell tool does not see the operator's home, its HOME is its own home, where
/// its session files are. With `network = "none"` it cannot reach the fake: the CLI's own
/// failure fails the turn.
fn runs_sandboxed(cli: &str, test: &str, expect: &str) {
    if !installed(cli, test) || rerun_in_netns(test) {
        return;
    }
    // The operator's home lies outside the workspace (the sandbox refuses a workspace holding it)
    // and outside /tmp (which the sandbox replaces anyway), so that hiding it is what is tested.
    let operator = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("the operator's home");
    let marker = operator.path().join("awf-marker.txt");
    std::fs::write(&marker, "the operator's secret\n").expect("marker");
    if cli == "pi" {
        std::fs::create_dir_all(operator.path().join(".pi/agent")).expect("mkdir");
        std::fs::write(operator.path().join(".pi/agent/auth.json"), "{}").expect("credential");
    }
    let probe = format!(
        r#"if [ -e {m} ]; then s=seen; else s=hidden; fi; printf '{{"verdict":"%s:%s"}}' "$s" "$HOME" | {{launcher}} result {{op}}"#,
        m = fake_model::shell_quote(&marker.display().to_string())
    );
    let script = format!(
        r#"let o = ctx.agents.open(#{{ key: "a", sandbox: "cli" }}).run(#{{ prompt: "Give a verdict.", schema: {SCHEMA} }});
#{{ kind: o.kind, value: o.value, reason: o.reason }}"#
    );
    // Unsandboxed, the same command sees the marker: the check below is not vacuous.
    let server = FakeModel::start_cli(vec![Reply::shell(&probe)]);
    let env = setup(cli, &server.base());
    let bare = script.replace(r#", sandbox: "cli""#, "");
    let out = run_as(&env, &bare, operator.path());
    out.expect_code(0);
    assert!(out.json()["value"]["verdict"].as_str().unwrap_or("").starts_with("seen:"), "{cli}: {}", out.stdout);

    let server = FakeModel::start_cli(vec![Reply::shell(&probe)]);
    let env = setup(cli, &server.base());
    let toml = std::fs::read_to_string(env.path().join("awf.toml")).expect("awf.toml");
    env.write("awf.toml", &format!("{toml}\n[sandboxes.cli]\nnetwork = \"host\"\n"));
    let out = run_as(&env, &script, operator.path());
    out.expect_code(0);
    let v = out.json();
    let home = env.run_dir().join("agents/a/home");
    assert_eq!(v["kind"], "answered", "{cli}: {v}\n{}", out.stderr);
    assert_eq!(v["value"]["verdict"], format!("hidden:{}", home.display()), "{cli}: {v}");
    assert!(home.join(session_files(cli)).exists(), "{cli}: its session files are in its home");
    let log = read_jsonl(&env.run_dir().join("agents/a/ops/a-1.jsonl"));
    let spawned = log.iter().find(|e| e["type"] == "spawned").expect("spawned");
    assert_eq!(spawned["data"]["sandbox"], "cli", "{cli}: {spawned}");
    let result = env.result();
    let seated = &result["sandboxes"][0]["agents"][0];
    assert_eq!((seated["harness"].as_str(), &seated["confined"]), (Some(cli), &json!(true)), "{result:#}");
    assert_eq!(seated["seat"]["home"], home.display().to_string());

    // No network: a new network namespace, where 127.0.0.1 is not the fake's.
    let server = FakeModel::start_cli(vec![Reply::shell(&probe)]);
    let env = setup(cli, &server.base());
    let toml = std::fs::read_to_string(env.path().join("awf.toml")).expect("awf.toml");
    env.write("awf.toml", &format!("{toml}\n[sandboxes.cli]\nnetwork = \"none\"\n"));
    let out = run_as(&env, &script, operator.path());
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["kind"], "failed", "{cli}: {v}");
    let reason = v["reason"].as_str().unwrap_or("");
    assert!(reason.contains(expect) && reason.contains("network = \"host\""), "{cli}: {v}");
    assert!(server.bodies().is_empty(), "{cli}: nothing reached the fake");
}

#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn claude_runs_sandboxed() {
    runs_sandboxed("claude", "claude_runs_sandboxed", "Claude Code reported an error");
}

#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn codex_runs_sandboxed() {
    runs_sandboxed("codex", "codex_runs_sandboxed", "Codex reported the turn failed");
}

#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn pi_runs_sandboxed() {
    runs_sandboxed("pi", "pi_runs_sandboxed", "stopReason: error");
}

#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn claude_answers_through_the_launcher_and_resumes() {
    answers_through_the_launcher_and_resumes("claude", "claude_answers_through_the_launcher_and_resumes");
}

#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn codex_answers_through_the_launcher_and_resumes() {
    answers_through_the_launcher_and_resumes("codex", "codex_answers_through_the_launcher_and_resumes");
}

#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn pi_answers_through_the_launcher_and_resumes() {
    answers_through_the_launcher_and_resumes("pi", "pi_answers_through_the_launcher_and_resumes");
}

#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn claude_failures_are_judged_by_events() {
    failures_are_judged_by_events("claude", "claude_failures_are_judged_by_events", "Claude Code reported an error");
}

#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn codex_failures_are_judged_by_events() {
    failures_are_judged_by_events("codex", "codex_failures_are_judged_by_events", "Codex reported the turn failed");
}

#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn pi_failures_are_judged_by_events() {
    failures_are_judged_by_events("pi", "pi_failures_are_judged_by_events", "stopReason: error");
}

#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn claude_forks_and_compacts() {
    forks_and_compacts("claude", "claude_forks_and_compacts", false);
}

#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn codex_forks_and_refuses_to_compact() {
    forks_and_compacts("codex", "codex_forks_and_refuses_to_compact", false);
}

#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn pi_forks_and_compacts() {
    forks_and_compacts("pi", "pi_forks_and_compacts", false);
}

#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn claude_forks_and_compacts_sandboxed() {
    forks_and_compacts("claude", "claude_forks_and_compacts_sandboxed", true);
}

#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn codex_forks_sandboxed() {
    forks_and_compacts("codex", "codex_forks_sandboxed", true);
}

#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn pi_forks_and_compacts_sandboxed() {
    forks_and_compacts("pi", "pi_forks_and_compacts_sandboxed", true);
}

#[test]
fn a_missing_cli_fails_the_turn_naming_the_install() {
    let env = Env::new();
    env.write("awf.toml", "[runtimes.m]\nharness = \"pi\"\n[harnesses.pi]\ncommand = \"awf-test-no-such-pi\"\n");
    let out = run(
        &env,
        &format!(
            r#"let o = ctx.agents.open(#{{ key: "a", runtime: "m" }}).run(#{{ prompt: "x", schema: {SCHEMA} }}); o.reason"#
        ),
    );
    out.expect_code(0);
    out.stdout_has("awf-test-no-such-pi").stdout_has("npm install -g @mariozechner/pi-coding-agent@0.73.1");
}

#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn claude_stalls_are_detected() {
    a_silent_cli_stalls("claude", "claude_stalls_are_detected");
}

#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn codex_stalls_are_detected() {
    a_silent_cli_stalls("codex", "codex_stalls_are_detected");
}

#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn pi_stalls_are_detected() {
    a_silent_cli_stalls("pi", "pi_stalls_are_detected");
}

#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn claude_takes_a_long_prompt() {
    a_long_prompt_is_not_put_on_the_command_line("claude", "claude_takes_a_long_prompt");
}

#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn codex_takes_a_long_prompt() {
    a_long_prompt_is_not_put_on_the_command_line("codex", "codex_takes_a_long_prompt");
}

#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn pi_takes_a_long_prompt() {
    a_long_prompt_is_not_put_on_the_command_line("pi", "pi_takes_a_long_prompt");
}

#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn claude_without_a_model_runs_its_own_default() {
    let test = "claude_without_a_model_runs_its_own_default";
    if !installed("claude", test) || rerun_in_netns(test) {
        return;
    }
    let server = FakeModel::start_cli(vec![Reply::answer(json!("done"))]);
    let env = Env::new();
    env.write(
        "awf.toml",
        &format!("default_runtime = \"m\"\n[runtimes.m]\nharness = \"claude\"\nbase_url = \"{}\"\n", server.base()),
    );
    std::fs::create_dir_all(env.path().join("operator-home")).expect("home");
    let out = run(&env, "let a = ctx.agents.open(#{ key: \"a\" }); a.ask(\"go\")");
    out.expect_code(0);
    let bodies = server.bodies();
    let asked: Vec<&str> = bodies.iter().filter_map(|b| b["model"].as_str()).collect();
    assert!(!asked.is_empty(), "the fake saw no request");
    // awf passed no --model: what reached the server is Claude Code's own choice, not awf's old
    // stand-in, and the records say the CLI's default ran.
    assert!(asked.iter().all(|m| *m != "claude-sonnet-4-5"), "awf chose the model: {asked:?}");
    assert_eq!(env.turns()[0]["model"], "default");
}
