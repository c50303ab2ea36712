//! The `command` harness and the control plane, driven by small agent programs in
//! `tests/fixtures/agents/`: answers, rejections, nudges, waits, hangs, crashes, intruders and
//! leftover processes.

use crate::common;

use common::{agent_fixture, file_mode, process_alive, read_jsonl, Env};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A script that opens one `command` agent running `program` and returns the outcome of one turn.
fn one_turn(program: &str, turn_extra: &str) -> String {
    let (interp, file) =
        if program.ends_with(".py") { ("python3", agent_fixture(program)) } else { ("sh", agent_fixture(program)) };
    format!(
        r#"
let a = ctx.agents.open(#{{ key: "agent", runtime: #{{ harness: "command", command: ["{interp}", "{file}"] }} }});
let o = a.run(#{{ prompt: "Give a verdict.", schema: #{{ type: "object", properties: #{{ verdict: #{{ type: "string" }} }}, required: ["verdict"] }} {turn_extra} }});
#{{ kind: o.kind, value: o.value, reason: o.reason, input_tokens: o.usage.input_tokens, cost: o.usage.cost_usd }}
"#
    )
}

fn run_dir(env: &Env) -> PathBuf {
    env.run_dir()
}

fn op_log(env: &Env) -> Vec<Value> {
    read_jsonl(&run_dir(env).join("agents/agent/ops/agent-1.jsonl"))
}

fn state(env: &Env, file: &str) -> String {
    let path = run_dir(env).join("agents/agent/state").join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

#[test]
fn an_agent_that_answers_is_answered_with_its_reported_usage() {
    let env = Env::new();
    let out = env.run(&one_turn("answer.sh", ""), &[]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["kind"], "answered");
    assert_eq!(v["value"]["verdict"], "ok");
    assert_eq!(v["input_tokens"], 120);
    assert_eq!(v["cost"], 0.002);
    let turns = read_jsonl(&run_dir(&env).join("turns.jsonl"));
    assert_eq!(turns[0]["cost_source"], "harness");
    assert_eq!(turns[0]["harness"], "command");
}

#[test]
fn an_invalid_answer_is_rejected_with_pointers_and_the_fix_accepted() {
    let env = Env::new();
    let out = env.run(&one_turn("fixer.py", ""), &[]);
    out.expect_code(0);
    assert_eq!(out.json()["value"]["verdict"], "fixed");
    let turns = read_jsonl(&run_dir(&env).join("turns.jsonl"));
    assert_eq!(turns[0]["rejections"], 1, "{turns:?}");
    let subs = env.events_of("op-submission");
    assert_eq!(subs.len(), 2);
    assert_eq!(subs[0]["data"]["accepted"], false);
    assert_eq!(subs[1]["data"]["accepted"], true);
}

#[test]
fn a_silent_turn_is_nudged_and_the_check_in_answers() {
    let env = Env::new();
    let out = env.run(&one_turn("late.sh", ""), &[]);
    out.expect_code(0);
    assert_eq!(out.json()["value"]["verdict"], "late");
    assert_eq!(env.events_of("op-nudged").len(), 1);
    let spawns = op_log(&env).into_iter().filter(|e| e["type"] == "spawned").count();
    assert_eq!(spawns, 2);
}

#[test]
fn an_agent_that_never_answers_is_unanswered_after_the_nudges() {
    let env = Env::new();
    let out = env.run(&one_turn("silent.sh", ""), &[]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["kind"], "unanswered");
    assert!(v["reason"].as_str().unwrap_or("").contains("2 nudges"), "{v}");
    assert_eq!(op_log(&env).iter().filter(|e| e["type"] == "spawned").count(), 3);
    // With nudges off, one turn only.
    let env = Env::new();
    env.run(&one_turn("silent.sh", ", nudge: false"), &[]).expect_code(0);
    assert_eq!(op_log(&env).iter().filter(|e| e["type"] == "spawned").count(), 1);
}

#[test]
fn a_hung_agent_times_out_and_leaves_no_process_behind() {
    let env = Env::new();
    let out = env.run(&one_turn("hang.sh", ", timeout_ms: 700"), &[]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["kind"], "timed-out", "{v}");
    let (me, child) = (state(&env, "self.pid"), state(&env, "child.pid"));
    assert!(!process_alive(&me), "the agent process {me} outlived its deadline");
    assert!(!process_alive(&child), "the agent's child {child} outlived its deadline");
    // A timed-out operation closes its agent.
    let turns = read_jsonl(&run_dir(&env).join("events.jsonl"));
    assert!(turns.iter().any(|e| e["type"] == "agent-closed"));
}

#[test]
fn a_crashed_agent_fails_with_its_stderr_tail() {
    let env = Env::new();
    let out = env.run(&one_turn("crash.sh", ""), &[]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["kind"], "failed");
    let reason = v["reason"].as_str().unwrap_or("");
    assert!(reason.contains("out of cheese") && reason.contains('3'), "{reason}");
}

#[test]
fn submissions_to_other_ops_are_refused_and_logged() {
    let env = Env::new();
    let out = env.run(&one_turn("intruder.sh", ""), &[]);
    out.expect_code(0);
    assert_eq!(out.json()["value"]["verdict"], "mine");
    let other = state(&env, "other.out");
    assert!(other.contains("unknown op other#1") && other.trim_end().ends_with('3'), "{other}");
    let madeup = state(&env, "madeup.out");
    assert!(madeup.contains("unknown op made-up") && madeup.trim_end().ends_with('3'), "{madeup}");
    assert_eq!(env.events_of("control-refused").len(), 2);
}

#[test]
fn waiting_holds_the_nudge_until_its_timeout() {
    let env = Env::new();
    let out = env.run(&one_turn("waiter.sh", ""), &[]);
    out.expect_code(0);
    assert_eq!(out.json()["value"]["verdict"], "after-wait");
    assert!(state(&env, "waiting.out").contains("does not extend the deadline"));
    let log = op_log(&env);
    let at = |ty: &str| -> std::time::SystemTime {
        let e = log.iter().rev().find(|e| e["type"] == ty).unwrap_or_else(|| panic!("no {ty} in {log:?}"));
        humantime::parse_rfc3339(e["at"].as_str().unwrap_or("")).expect("timestamp")
    };
    let first_exit = {
        let e = log.iter().find(|e| e["type"] == "exited").expect("exited");
        humantime::parse_rfc3339(e["at"].as_str().unwrap_or("")).expect("timestamp")
    };
    let gap = at("spawned").duration_since(first_exit).expect("nudge after the first turn");
    assert!(gap >= std::time::Duration::from_millis(900), "nudged {gap:?} after the turn ended, inside the 1 s wait");
}

#[test]
fn a_grandchild_left_after_the_turn_is_killed() {
    let env = Env::new();
    env.run(&one_turn("leaver.sh", ""), &[]).expect_code(0);
    let pid = state(&env, "grandchild.pid");
    assert!(!process_alive(&pid), "grandchild {pid} still running after the turn");
}

#[test]
fn a_silent_process_stalls() {
    let env = Env::new();
    env.write("awf.toml", "[limits]\nstall_timeout = \"700ms\"\n");
    let out = env.run(&one_turn("quiet.sh", ""), &[]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["kind"], "failed");
    assert!(v["reason"].as_str().unwrap_or("").starts_with("stalled"), "{v}");
}

#[test]
fn a_process_that_outlives_its_answer_is_released_after_the_grace() {
    let env = Env::new();
    let out = env.run(&one_turn("answer_and_linger.sh", ""), &[]);
    out.expect_code(0);
    assert_eq!(out.json()["kind"], "answered");
    let ended = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("a clock").as_millis();
    let answered: u128 = state(&env, "answered").trim().parse().expect("the time it answered");
    let kinds: Vec<Value> = op_log(&env).iter().map(|e| e["type"].clone()).collect();
    let at = |ty: &str| kinds.iter().position(|k| k == ty).unwrap_or_else(|| panic!("no {ty} in {kinds:?}"));
    assert!(at("answered") < at("released") && at("released") < at("exited"), "{kinds:?}");
    let released = op_log(&env).into_iter().find(|e| e["type"] == "released").expect("released");
    assert_eq!(released["data"], serde_json::json!({ "after_ms": 10_000, "why": "answered" }));
    // Killed 10 s after its answer was accepted, not after a stall clock or its own end (60 s).
    let lived = ended - answered;
    assert!((9_000..15_000).contains(&lived), "ran {lived} ms after answering");
}

#[test]
fn the_control_folder_is_private_and_the_launcher_absolute() {
    let env = Env::new();
    env.run(&one_turn("answer.sh", ""), &[]).expect_code(0);
    let dir = run_dir(&env).join("agents/agent");
    let mode = file_mode(&dir);
    assert_eq!(mode, 0o700, "agent folder mode {mode:o}");
    let launcher = std::fs::read_link(dir.join("wf")).expect("the launcher is a symlink");
    assert!(launcher.is_absolute(), "{launcher:?}");
    assert!(launcher.ends_with("awf"), "{launcher:?}");
    assert!(Path::new(&dir.join("wf")).is_file());
}

#[test]
fn wf_without_an_engine_fails_plainly() {
    let env = Env::new();
    let out = env.awf(&["wf", "--socket", "/nonexistent/wf.sock", "inbox"]);
    out.expect_code(1);
    out.stderr_has("cannot reach the engine");
}

#[test]
fn a_command_runtime_without_a_command_is_refused() {
    let env = Env::new();
    let out = env.run(r#"ctx.agents.open(#{ key: "x", runtime: #{ harness: "command" } })"#, &[]);
    out.expect_code(2);
    out.stderr_has("needs `command`");
}

#[test]
fn a_sibling_failure_cancels_a_running_command_turn_and_kills_it() {
    let env = Env::new();
    let script = format!(
        r#"
ctx.parallel([0, 1], |k, i| {{
    if k == 0 {{
        let a = ctx.agents.open(#{{ key: "agent", runtime: #{{ harness: "command", command: ["sh", "{hang}"] }} }});
        a.ask("hang")
    }} else {{
        let b = ctx.agents.open(#{{ key: "late", runtime: #{{ harness: "command", command: ["sh", "{late}"] }} }});
        b.ask("go", #{{ type: "object" }});
        throw "sibling failed";
    }}
}})
"#,
        hang = agent_fixture("hang.sh"),
        late = agent_fixture("late.sh")
    );
    let out = env.run(&script, &[]);
    out.expect_code(1);
    out.stderr_has("sibling failed");
    let turns = read_jsonl(&run_dir(&env).join("turns.jsonl"));
    let hung = turns.iter().find(|t| t["agent"] == "agent").expect("the hung turn is recorded");
    assert_eq!(hung["outcome"], "cancelled", "{turns:?}");
    assert!(!process_alive(&state(&env, "self.pid")));
    assert!(!process_alive(&state(&env, "child.pid")));
}

#[test]
fn an_agent_cannot_answer_for_another_through_its_launcher() {
    let env = Env::new();
    let script = format!(
        r#"
let out = ctx.parallel(["victim", "thief"], |k, i| {{
    let a = ctx.agents.open(#{{ key: k, runtime: #{{ harness: "command", command: ["sh", `{dir}/${{k}}.sh`] }} }});
    a.run(#{{ prompt: "Give a verdict.", schema: #{{ type: "object", properties: #{{ verdict: #{{ type: "string" }} }}, required: ["verdict"] }} }}).value
}});
#{{ victim: out[0].verdict, thief: out[1].verdict }}
"#,
        dir = agent_fixture("").trim_end_matches('/')
    );
    let out = env.run(&script, &[]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["victim"], "victim", "the victim's own answer stands: {v}");
    assert_eq!(v["thief"], "thief");
    let told = std::fs::read_to_string(run_dir(&env).join("agents/thief/state/forged.out")).expect("forged.out");
    assert!(told.contains("is not a process of agent victim's running turn"), "{told}");
    assert!(told.trim_end().ends_with("exit 3"), "{told}");
    let refused = env.events_of("control-refused");
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["data"]["agent"], "victim");
    assert!(refused[0]["data"]["pid"].as_i64().is_some_and(|p| p > 1), "{refused:?}");
    let subs = env.events_of("op-submission");
    assert!(subs.iter().all(|s| s["data"]["accepted"] == true), "no forged submission reached a slot: {subs:?}");
}

/// An agent's launcher is a short process: awf started as `wf` uses the system's allocator, not
/// mimalloc, whose arenas (a gigabyte of address space reserved at the first allocation, purged at
/// exit) cost a launcher call more than the rest of its work. Seen in the address space of each,
/// while it waits for its answer on stdin.
#[test]
fn the_launcher_runs_on_the_system_allocator_and_awf_on_mimalloc() {
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().expect("a folder");
    let wf = dir.path().join("wf");
    std::os::unix::fs::symlink(common::bin(), &wf).expect("the launcher's symlink");
    let socket = dir.path().join("none.sock");
    let address_space_kb = |program: &Path, args: &[&str]| -> u64 {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("started");
        let proc_dir = PathBuf::from(format!("/proc/{}", child.id()));
        // Blocked reading its stdin (read(2), fd 0): started, and past its first allocations.
        let until = std::time::Instant::now() + common::TIMEOUT;
        while !std::fs::read_to_string(proc_dir.join("syscall")).unwrap_or_default().starts_with("0 0x0 ") {
            assert!(std::time::Instant::now() < until, "{} never read its stdin", program.display());
            std::thread::yield_now();
        }
        let status = std::fs::read_to_string(proc_dir.join("status")).expect("its status");
        let kb = status
            .lines()
            .find_map(|l| l.strip_prefix("VmSize:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmSize");
        drop(child.stdin.take());
        child.wait().expect("waited");
        kb
    };
    let launcher = address_space_kb(&wf, &["result", "op-1"]);
    let awf =
        address_space_kb(Path::new(common::bin()), &["wf", "--socket", &socket.to_string_lossy(), "result", "op-1"]);
    assert!(awf > launcher + 512 * 1024, "awf {awf} kB, its launcher {launcher} kB");
}
