//! One attempt of a run at a time, and what a killed attempt leaves: the run's lock (a live run
//! is not resumed, racing resumes leave one attempt, a dead attempt shows `interrupted`), agent
//! leaders that die with awf, leftovers ended on resume, and answers durable once accepted.

use crate::common;

use common::{agent_fixture, process_alive, read_jsonl, signal, wait_until, Env, Running};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// One `command` agent running `program`, one turn, its verdict.
fn one_turn(program: &str) -> String {
    format!(
        r#"
let a = ctx.agents.open(#{{ key: "agent", runtime: #{{ harness: "command", command: ["sh", "{}"] }} }});
let o = a.run(#{{ prompt: "Give a verdict.", schema: #{{ type: "object", properties: #{{ verdict: #{{ type: "string" }} }}, required: ["verdict"] }} }});
#{{ kind: o.kind, verdict: o.value.verdict, attempt: ctx.attempt }}
"#,
        agent_fixture(program)
    )
}

fn state(env: &Env) -> PathBuf {
    env.run_dir().join("agents/agent/state")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
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
    wait_until("the agent's leader ends with awf", || !process_alive(&leader));
    assert!(process_alive(&grandchild), "the grandchild outlives awf until the run is resumed");
    let out = env.awf(&["runs", "resume", &env.run_id()]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["verdict"], "gone", "the leftover was ended before the resumed turn began: {v}");
    assert!(!process_alive(&grandchild));
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
    let out = env.awf(&["runs", "resume", &env.run_id()]);
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

#[test]
fn a_live_run_is_not_resumed_and_shows_running_then_interrupted_once_killed() {
    let env = Env::new();
    let running = start(&env, "gate.sh", "turn-1");
    let id = env.run_id();
    let out = env.awf(&["runs", "resume", &id]);
    out.expect_code(2);
    out.stderr_has(&format!("process {}", running.pid)).stderr_has(&format!("awf runs stop {id}"));
    env.awf(&["runs", "list"]).expect_code(0).stdout_has("running");
    env.awf(&["runs", "show", &id]).expect_code(0).stdout_has("attempt 1: running");
    assert!(!state(&env).join("turn-2").exists(), "the refused resume ran nothing");
    kill9(running);
    let list = env.awf(&["runs", "list"]);
    list.expect_code(0).stdout_has("interrupted");
    assert!(!list.stdout.contains("running"), "{}", list.stdout);
    let show = env.awf(&["runs", "show", &id]);
    show.expect_code(0).stdout_has(&format!("run {id}: interrupted")).stdout_has("attempt 1: interrupted");
}

#[test]
fn of_two_racing_resumes_one_runs_and_the_other_is_refused() {
    let env = Env::new();
    kill9(start(&env, "gate.sh", "turn-1"));
    let id = env.run_id();
    let mut a = Running::start(env.path(), &["runs", "resume", &id]);
    let mut b = Running::start(env.path(), &["runs", "resume", &id]);
    let mut codes: Vec<Option<i32>> = vec![None, None];
    wait_until("one resume is refused", || {
        for (i, r) in [&mut a, &mut b].into_iter().enumerate() {
            if let Some(status) = r.child.as_mut().and_then(|c| c.try_wait().expect("try_wait")) {
                codes[i] = status.code();
            }
        }
        codes.iter().any(Option::is_some)
    });
    assert_eq!(codes.iter().flatten().collect::<Vec<_>>(), vec![&2], "one refused, the other still running: {codes:?}");
    let (loser, winner) = if codes[0].is_some() { (a, b) } else { (b, a) };
    let refused = loser.finish();
    assert!(refused.stderr.contains("is live") && refused.stderr.contains("awf runs stop"), "{}", refused.stderr);
    wait_until("the winner's turn", || state(&env).join("turn-2").exists());
    std::fs::write(state(&env).join("release"), "").expect("release");
    let out = winner.finish();
    out.expect_code(0);
    assert!(!state(&env).join("turn-3").exists(), "one turn in the resumed attempts");
    let run: Value = env.run_json();
    let statuses: Vec<&str> =
        run["attempts"].as_array().expect("attempts").iter().filter_map(|a| a["status"].as_str()).collect();
    assert_eq!(statuses, vec!["interrupted", "succeeded"], "{run}");
    // The turn was paid once: one line in turns.jsonl, in the accounts of the attempt that ran it.
    let turns = env.turns();
    assert_eq!(turns.len(), 1, "{turns:#?}");
    let acc = env.result()["accounting"].clone();
    assert_eq!(
        (acc["totals"]["operations"].clone(), acc["by_attempt"]["2"]["operations"].clone()),
        (1.into(), 1.into())
    );
}
