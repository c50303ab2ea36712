//! What a killed attempt of a run leaves: agent leaders that die with awf, leftovers ended on
//! resume, and answers durable once accepted.

mod common;

use common::{read_jsonl, signal, Env, Running, TIMEOUT};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/agents/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// One `command` agent running `program`, one turn, its verdict.
fn one_turn(program: &str) -> String {
    format!(
        r#"
let a = ctx.agents.open(#{{ key: "agent", runtime: #{{ harness: "command", command: ["sh", "{}"] }} }});
let o = a.run(#{{ prompt: "Give a verdict.", schema: #{{ type: "object", properties: #{{ verdict: #{{ type: "string" }} }}, required: ["verdict"] }} }});
#{{ kind: o.kind, verdict: o.value.verdict, attempt: ctx.attempt }}
"#,
        fixture(program)
    )
}

/// Polls (bounded) until `done` holds.
#[track_caller]
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let until = Instant::now() + TIMEOUT;
    while !done() {
        assert!(Instant::now() < until, "{what}: not within {TIMEOUT:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn alive(pid: &str) -> bool {
    // A zombie is dead for our purpose: it runs nothing.
    match std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())) {
        Ok(stat) => stat.rsplit(')').next().and_then(|r| r.split_whitespace().next()).is_some_and(|s| s != "Z"),
        Err(_) => false,
    }
}

fn state(env: &Env) -> PathBuf {
    env.run_dir().join("agents/agent/state")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn run_id(env: &Env) -> String {
    env.run_dir().file_name().and_then(|n| n.to_str()).expect("run id").to_string()
}

/// Starts `program`'s one-turn run, waits until `ready` exists in the agent's state folder.
fn start(env: &Env, program: &str, ready: &str) -> Running {
    env.write("wf.rhai", &one_turn(program));
    let running = Running::start(env.path(), &["script", "run", "wf.rhai"]);
    wait_until("the run folder", || env.run_dirs().len() == 1);
    let path = state(env).join(ready);
    wait_until(&format!("{}", path.display()), || path.exists());
    running
}

/// Kills awf with SIGKILL and reaps it.
fn kill9(running: Running) {
    signal(running.pid, "-KILL");
    let _ = running.finish();
}

#[test]
fn an_agent_leader_dies_with_awf_and_its_leftovers_end_before_the_resumed_turn() {
    let env = Env::new();
    let running = start(&env, "leftover.sh", "leader.pid");
    let (leader, grandchild) = (read(&state(&env).join("leader.pid")), read(&state(&env).join("grandchild.pid")));
    kill9(running);
    wait_until("the agent's leader ends with awf", || !alive(&leader));
    assert!(alive(&grandchild), "the grandchild outlives awf until the run is resumed");
    let out = env.awf(&["runs", "resume", &run_id(&env)]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["verdict"], "gone", "the leftover was ended before the resumed turn began: {v}");
    assert!(!alive(&grandchild));
    let events = env.events();
    let at = |ty: &str| events.iter().position(|e| e["type"] == ty && e["attempt"] == 2);
    let killed = at("leftovers-killed").unwrap_or_else(|| panic!("no leftovers-killed in {events:#?}"));
    assert!(killed < at("op-started").expect("attempt 2 ran its turn"));
    let pids = &events[killed]["data"]["pids"];
    let grandchild: i64 = grandchild.trim().parse().expect("a pid");
    assert!(pids.as_array().is_some_and(|p| p.contains(&grandchild.into())), "{pids}");
}

#[test]
fn an_accepted_answer_is_journalled_before_the_agent_is_told_and_never_asked_again() {
    let env = Env::new();
    let running = start(&env, "answer_hang.sh", "told");
    // The agent heard `accepted`: the journal already holds its answer.
    let journal = read_jsonl(&env.run_dir().join("journal.jsonl"));
    assert!(
        journal.iter().any(|j| j["op_id"] == "agent#1" && j["outcome"]["value"]["verdict"] == "kept"),
        "{journal:?}"
    );
    kill9(running);
    let out = env.awf(&["runs", "resume", &run_id(&env)]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(
        (v["kind"].as_str(), v["verdict"].as_str(), v["attempt"].as_i64()),
        (Some("answered"), Some("kept"), Some(2))
    );
    let replayed = env.events_of("op-replayed");
    assert_eq!(replayed.len(), 1, "{replayed:?}");
    assert_eq!(replayed[0]["data"]["op_id"], "agent#1");
    assert_eq!(read(&state(&env).join("spawns")).lines().count(), 1, "the program ran once");
}
