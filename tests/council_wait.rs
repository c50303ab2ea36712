//! The edges of `wf council --wait`: a wait whose operation's deadline comes first gives up in time
//! for the agent to answer, and the councils still running wake it later as usual; a council that
//! settled (or whose message the wait took back) while the wait then gave up is delivered as the
//! normal wake; a run stopped while an agent waits stops its councils and records them. The agent
//! is `msg_agent.py`; the council is `gated`, whose one member answers once a gate file exists.

use crate::common;

use common::council::{parent_and_children, GATED, MEMBER};
use common::{agent_fixture, events_so_far_of, read_json, read_jsonl, Env, Running};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// A folder with `gated`, and a workflow whose agent `boss` follows `plan` (`@DIR` standing for
/// the folder) in a turn `turn` (Rhai: the turn's map).
fn setup(plan: Value, turn: &str) -> Env {
    let env = Env::new();
    let member = env.write("member.sh", MEMBER);
    env.write("stdlib/council/gated.rhai", &GATED.replace("MEMBER", &member.display().to_string()));
    env.write(
        "awf.toml",
        "default_runtime = \"scripted\"\n[runtimes.scripted]\nharness = \"fake\"\nmodel = \"fake\"\n",
    );
    let plan = env.write("plan.json", &plan.to_string().replace("@DIR", &env.path().display().to_string()));
    let agent = agent_fixture("msg_agent.py");
    env.write(
        "wf.rhai",
        &format!(
            "let boss = ctx.agents.open(#{{ key: \"boss\", councils: [\"gated\"], runtime: #{{ harness: \"command\", command: [\"python3\", \"{agent}\", \"{}\"] }} }});\nboss.turn({turn}).kind",
            plan.display()
        ),
    );
    env
}

/// The boss's logged step named `name`.
fn step(parent: &Path, name: &str) -> Value {
    let log = read_jsonl(&parent.join("agents/boss/state/log.jsonl"));
    log.into_iter().find(|s| s["step"][0] == name).unwrap_or_else(|| panic!("no {name} step"))
}

/// Every prompt the boss was shown in a message operation (`boss#m<n>`), together.
fn woken_with(parent: &Path) -> String {
    let state = parent.join("agents/boss/state");
    let mut shown = String::new();
    for entry in std::fs::read_dir(&state).expect("state").flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.contains("#m") && name.ends_with(".stdin") {
            shown.push_str(&std::fs::read_to_string(entry.path()).expect("prompt"));
        }
    }
    shown
}

fn id(dir: &Path) -> String {
    dir.file_name().and_then(|n| n.to_str()).expect("id").to_string()
}

/// The child whose `run.json` says it was asked `task`.
fn child_for(children: &[PathBuf], task: &str) -> PathBuf {
    children.iter().find(|c| read_json(&c.join("run.json"))["args"]["task"] == task).expect("the council").clone()
}

#[test]
fn a_wait_gives_up_before_its_operations_deadline_and_the_council_wakes_the_agent_later() {
    // The council waits for a gate the boss opens only after its wait gave up.
    let env = setup(
        json!({ "turn": [
            ["council_bg", "gated", { "task": "Late?", "gate": "@DIR/late" }],
            ["council_wait"], ["touch", "@DIR/late"], ["answer_last"]] }),
        r#"#{ prompt: "Convene and wait.", timeout_ms: 3000 }"#,
    );
    let out = env.awf(&["script", "run", "wf.rhai", "--json"]);
    out.expect_code(0);
    assert_eq!(out.json()["value"], "answered", "the turn answered after the wait: {}", out.stderr);
    let (parent, children) = parent_and_children(&env);
    let wait = step(&parent, "council_wait");
    assert_eq!(wait["code"], 3, "{wait}");
    let said = wait["out"].as_str().expect("out");
    assert!(said.contains("settled before your operation's deadline; those still running will wake you"), "{wait}");
    let settled = events_so_far_of(&parent, "council-settled");
    assert_eq!(settled.len(), 1, "{settled:?}");
    assert_eq!(settled[0]["data"]["delivery"], "message", "{settled:?}");
    let shown = woken_with(&parent);
    assert!(shown.contains("ruled: yes") && shown.contains(&id(&children[0])), "{shown}");
}

#[test]
fn a_council_that_settled_while_a_wait_gave_up_is_delivered_as_the_normal_wake() {
    // The first council settles at once; the wait for both gives up on the second.
    let env = setup(
        json!({ "turn": [
            ["council_bg", "gated", { "task": "Quick?", "gate": "@DIR" }],
            ["council_bg", "gated", { "task": "Late?", "gate": "@DIR/late" }],
            ["council_wait"], ["touch", "@DIR/late"], ["answer_last"]] }),
        r#"#{ prompt: "Convene two and wait.", timeout_ms: 4000 }"#,
    );
    env.awf(&["script", "run", "wf.rhai"]).expect_code(0);
    let (parent, children) = parent_and_children(&env);
    assert_eq!(step(&parent, "council_wait")["code"], 3);
    let quick = id(&child_for(&children, "Quick?"));
    let settled = events_so_far_of(&parent, "council-settled");
    let of_quick: Vec<&Value> = settled.iter().filter(|e| e["data"]["run_id"] == quick.as_str()).collect();
    assert_eq!(of_quick.len(), 1, "recorded once: {settled:?}");
    assert_eq!(of_quick[0]["data"]["delivery"], "message", "{settled:?}");
    let shown = woken_with(&parent);
    assert!(shown.contains(&quick), "the quick council's output reached the boss: {shown}");
    assert_eq!(shown.matches(&quick).count(), 1, "once: {shown}");
}

#[test]
fn a_run_stopped_while_its_agent_waits_stops_the_councils_and_records_them() {
    let env = setup(
        json!({ "turn": [
            ["council_bg", "gated", { "task": "Hang?", "gate": "@DIR/never" }],
            ["touch", "@DIR/waiting"], ["council_wait"], ["answer_last"]] }),
        r#""Convene and wait.""#,
    );
    let run = Running::start(env.path(), &["script", "run", "wf.rhai"]);
    common::wait_for_file(&env.path().join("waiting"));
    let (parent, _) = parent_and_children(&env);
    let stopped = env.awf(&["runs", "stop", &id(&parent)]);
    stopped.expect_code(0);
    let out = run.finish();
    out.expect_code(4);
    let (_, children) = parent_and_children(&env);
    assert_eq!(children.len(), 1);
    let child = read_json(&children[0].join("result.json"));
    assert_eq!(child["status"], "cancelled", "{child}");
    assert!(child["error"].as_str().expect("error").contains("run cancelled"), "{child}");
    // The parent recorded the council's end, its (empty) bill and that its output went nowhere.
    let ended = events_so_far_of(&parent, "child-run-ended");
    assert_eq!(ended.len(), 1, "{ended:?}");
    assert_eq!(ended[0]["data"]["status"], "cancelled");
    assert_eq!(events_so_far_of(&parent, "council-settled")[0]["data"]["delivery"], "none");
    let turns = read_jsonl(&parent.join("turns.jsonl"));
    assert!(turns.iter().any(|t| t["op_id"] == format!("council:{}", id(&children[0]))), "{turns:?}");
    // The wait ends with the turn, which the stop cuts short (its process with it): the turn's
    // record says why.
    let turn = turns.iter().find(|t| t["op_id"] == "boss#1").expect("boss#1");
    assert_eq!(turn["outcome"], "cancelled", "{turn}");
    assert!(turn["reason"].as_str().expect("reason").contains("run cancelled"), "{turn}");
}
