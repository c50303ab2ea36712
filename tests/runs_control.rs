//! Runs managed from another terminal: `awf runs stop` (as Ctrl-C, or `--now`) through the run's
//! control socket, `awf runs logs` (readable, raw, followed), `awf runs list` (status, age, spend,
//! the resume command of an interrupted run), resuming a council run, and `--values`.

use crate::common;

use common::{
    command, file_mode, read_json, run_id_of, wait_for_file, wait_for_run_dir, wait_until, wait_with_timeout, Env,
    Running,
};
use std::path::PathBuf;
use std::process::Stdio;

const HANG: &str = r#"fn respond(turn) { if turn.prompt.contains("hang") { #{ hang: true } } else { #{ answer: "fine", usage: #{ input_tokens: 10, output_tokens: 5 } } } }"#;

const STAGED: &str = r#"
let first = ctx.stage("first", #{ result: #{ type: "string" } }, || { let a = ctx.agents.open(#{ key: "a" }); a.ask("one") });
let second = ctx.stage("second", #{ result: #{ type: "string" } }, || { let b = ctx.agents.open(#{ key: "b" }); b.ask("hang here") });
`${first} then ${second}`
"#;

/// Starts `awf script run wf.rhai` on a script whose second stage hangs, and waits until its
/// control socket is open; the run's folder.
fn start_hanging(env: &Env) -> (Running, PathBuf) {
    env.with_responder(HANG);
    env.write("wf.rhai", STAGED);
    let running = Running::start(env.path(), &["script", "run", "wf.rhai"]);
    let dir = wait_for_run_dir(env);
    wait_for_file(&dir.join("control.sock"));
    // Wait until the hanging op has started, so the stop meets a turn in flight.
    wait_until("the hanging turn started", || {
        std::fs::read_to_string(dir.join("events.jsonl")).unwrap_or_default().contains("\"b#1\"")
    });
    (running, dir)
}

#[test]
fn a_run_is_stopped_from_another_terminal_as_ctrl_c_would_and_its_log_is_followed() {
    let env = Env::new();
    let (running, dir) = start_hanging(&env);
    let id = run_id_of(&dir);
    assert_eq!(file_mode(&dir.join("control.sock")), 0o600);
    let follow = command(env.path(), &["runs", "logs", &id, "-f"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn runs logs -f");
    // Two stops at once: both succeed, the run stops once.
    let stops: Vec<_> = (0..2)
        .map(|_| {
            command(env.path(), &["runs", "stop", &id])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn runs stop")
        })
        .collect();
    for stop in stops {
        let out = wait_with_timeout(stop);
        out.expect_code(0);
        assert!(
            out.stdout.contains(&format!("run {id}: cancelled")) || out.stderr.contains("already ended (cancelled)"),
            "{out:?}"
        );
    }
    let out = running.finish();
    out.expect_code(4);
    let result = read_json(&dir.join("result.json"));
    assert_eq!(result["status"], "cancelled");
    assert!(result["error"].as_str().is_some_and(|e| e.contains("stopped by awf runs stop")), "{result}");
    let stopping = env.events_of("run-stopping");
    assert_eq!(stopping.len(), 1, "{stopping:?}");
    let turns = env.turns();
    assert!(turns.iter().any(|t| t["op_id"] == "b#1" && t["outcome"] == "cancelled"), "{turns:?}");
    assert!(!dir.join("control.sock").exists(), "the socket closes with the run");

    // The follower ended by itself with the run, and reads as lines a person reads.
    let logs = wait_with_timeout(follow);
    logs.expect_code(0);
    for needle in [
        "run started (attempt 1)",
        "stage first started",
        "[first]  a  a#1 answered · 15 tokens",
        "[second]  b  turn b#1 started",
        "run cancelled: stopped by awf runs stop",
    ] {
        assert!(logs.stdout.contains(needle), "{needle:?} not in\n{}", logs.stdout);
    }
    let raw = env.awf(&["runs", "logs", &id, "--json"]);
    raw.expect_code(0);
    let first: serde_json::Value = serde_json::from_str(raw.stdout.lines().next().expect("a line")).expect("JSON");
    assert_eq!(first["type"], "run-started");

    let list = env.awf(&["runs", "list"]);
    list.expect_code(0).stdout_has(&id).stdout_has("cancelled").stdout_has("wf.rhai");
}

#[test]
fn stop_now_ends_a_run_at_once() {
    let env = Env::new();
    let (running, dir) = start_hanging(&env);
    let id = run_id_of(&dir);
    let out = env.awf(&["runs", "stop", &id, "--now"]);
    out.expect_code(0).stderr_has("at once").stdout_has(&format!("run {id}: cancelled"));
    running.finish().expect_code(4);
    let result = read_json(&dir.join("result.json"));
    assert!(result["error"].as_str().is_some_and(|e| e.contains("killed by awf runs stop --now")), "{result}");
}

#[test]
fn stopping_an_unknown_finished_or_interrupted_run_says_so() {
    let env = Env::new();
    env.awf(&["runs", "stop", "20990101-000000000-ffffff"]).expect_code(2).stderr_has("no run 20990101");
    env.awf(&["runs", "logs", "../x"]).expect_code(2).stderr_has("no run ../x");
    env.run("1 + 1", &[]).expect_code(0);
    let id = run_id_of(&env.run_dir());
    env.awf(&["runs", "stop", &id]).expect_code(0).stderr_has("already ended (succeeded)");

    let env = Env::new();
    let (running, dir) = start_hanging(&env);
    let id = run_id_of(&dir);
    common::signal(running.pid, "-KILL");
    let _ = running.finish();
    env.awf(&["runs", "stop", &id]).expect_code(0).stderr_has(&format!("awf runs resume {id}"));
    let list = env.awf(&["runs", "list"]);
    list.expect_code(0).stdout_has("interrupted").stdout_has(&format!("(resume: awf runs resume {id})"));
    // Spend so far: the first stage's answer, in tokens (a fake model's $0 says nothing).
    list.stdout_has("15 tokens");
    assert!(!list.stdout.contains("$0.0000"), "{}", list.stdout);
}

#[test]
fn a_council_run_resumes_like_a_script() {
    let env = Env::new();
    env.with_responder(HANG);
    env.write(
        "stdlib/council/demo.rhai",
        r#"export const META = #{ kind: "strategy", name: "demo", when: "a test", params: #{}, required: [] };
fn run(input) {
    let first = ctx.stage("first", #{ result: #{ type: "string" } }, || { let a = ctx.agents.open(#{ key: "a" }); a.ask("one") });
    let second = ctx.stage("second", #{ result: #{ type: "string" } }, || { let b = ctx.agents.open(#{ key: "b" }); b.ask(input.task) });
    #{ output: `${first} then ${second}`, ok: true }
}
"#,
    );
    let out = env.awf(&["council", "run", "demo", "--task", "hang here", "--deadline", "1s"]);
    out.expect_code(4);
    let dir = env.run_dir();
    let id = run_id_of(&dir);
    // The strategy no longer hangs on resume: the responder answers every prompt.
    env.write("responder.rhai", r#"fn respond(turn) { #{ answer: "fine" } }"#);
    let out = env.awf(&["runs", "resume", &id]);
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "fine then fine");
    let stages = common::read_jsonl(&dir.join("stages.jsonl"));
    assert!(stages.iter().any(|s| s["name"] == "first" && s["status"] == "reused"), "{stages:?}");

    // An edited strategy is a new version: resuming is refused unless asked for.
    env.write("responder.rhai", HANG);
    let again = env.awf(&["council", "run", "demo", "--task", "hang here", "--deadline", "1s"]);
    again.expect_code(4);
    let second = env.run_dirs().into_iter().map(|d| run_id_of(&d)).find(|d| *d != id).expect("a second run");
    let text = std::fs::read_to_string(env.path().join("stdlib/council/demo.rhai")).expect("read");
    env.write("stdlib/council/demo.rhai", &text.replace("then", "and then"));
    env.write("responder.rhai", r#"fn respond(turn) { #{ answer: "fine" } }"#);
    env.awf(&["runs", "resume", &second]).expect_code(2).stderr_has("council:demo changed since run");
    let out = env.awf(&["runs", "resume", &second, "--allow-changed"]);
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "fine and then fine");
}

#[test]
fn values_supply_a_stage_that_has_no_record() {
    let env = Env::new();
    env.run(r#"let a = ctx.stage("a", #{ result: #{ type: "integer" } }, || { throw "a is not ready" }); a + 1"#, &[])
        .expect_code(1);
    let id = run_id_of(&env.run_dir());
    env.write("a.json", "41");
    env.write("bad.json", "{ not json");
    let bad = |values: &str, needle: &str| {
        env.awf(&["runs", "resume", &id, "--values", values]).expect_code(2).stderr_has(needle);
    };
    bad("a", "write it as STAGE=@FILE");
    bad("a=@missing.json", "cannot read");
    bad("a=@bad.json", "not JSON");
    bad("{ nope", "not a JSON object");
    // A value that does not fit the stage's result schema is said so, and the stage runs.
    let out = env.awf(&["runs", "resume", &id, "--values", r#"a="str""#]);
    out.expect_code(1).stderr_has("stage `a`: the value given with --values does not fit its result schema");
    let out = env.awf(&["runs", "resume", &id, "--values", "a=@a.json", "--values", "zzz=1"]);
    out.expect_code(0).stderr_has("0 stages reused, 2 given with --values");
    out.stderr_has("--values zzz: this attempt reached no stage zzz; its value was not used");
    assert!(!out.stderr.contains("--values a:"), "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "42");

    // A stage on record is reused, not overridden.
    let env = Env::new();
    env.run(
        r#"let a = ctx.stage("a", #{ result: #{ type: "integer" } }, || 1);
let b = ctx.stage("b", #{ result: #{ type: "integer" } }, || { throw "no" });
a + b"#,
        &[],
    )
    .expect_code(1);
    let id = run_id_of(&env.run_dir());
    env.awf(&["runs", "resume", &id, "--values", "a=5"]).expect_code(2).stderr_has("stage a has a record");
    let out = env.awf(&["runs", "resume", &id, "--values", r#"{"b": 2}"#]);
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "3");
}

#[test]
fn a_run_whose_folder_path_is_too_long_for_a_socket_is_still_stopped() {
    let env = Env::new();
    env.with_responder(HANG);
    env.write("wf.rhai", STAGED);
    let runs = env.path().join("r".repeat(90));
    let runs_arg = runs.to_string_lossy().into_owned();
    let running = Running::start(env.path(), &["script", "run", "wf.rhai", "--runs-dir", &runs_arg]);
    let dir = common::poll("a run folder", common::TIMEOUT, || {
        std::fs::read_dir(&runs).into_iter().flatten().flatten().map(|e| e.path()).next()
    });
    wait_for_file(&dir.join("control.target"));
    let socket = PathBuf::from(std::fs::read_to_string(dir.join("control.target")).expect("the target").trim());
    assert!(socket.as_os_str().len() <= 100, "{}", socket.display());
    wait_for_file(&socket);
    assert_eq!(file_mode(&socket), 0o600);
    let id = run_id_of(&dir);
    let out = env.awf(&["runs", "stop", &id, "--runs-dir", &runs_arg]);
    out.expect_code(0).stdout_has(&format!("run {id}: cancelled"));
    running.finish().expect_code(4);
    assert!(!dir.join("control.target").exists() && !socket.exists(), "the socket outlived its run");
    assert!(!socket.parent().expect("its folder").exists(), "the socket's folder outlived its run");
}
