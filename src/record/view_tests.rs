//! The fold of events into a run's view, and following a growing file.

use super::*;
use serde_json::{json, Value};

fn line(ty: &str, at: &str, data: Value) -> EventLine {
    EventLine::parse(&json!({ "v": 1, "type": ty, "at": at, "attempt": 1, "data": data })).expect("envelope")
}

fn fold(lines: &[EventLine]) -> RunView {
    let mut v = RunView::default();
    for l in lines {
        v.apply(l);
    }
    v
}

const T0: &str = "2026-12-02T10:00:00Z";
const T1: &str = "2026-12-02T10:00:05Z";

#[test]
fn an_agent_goes_from_working_to_waiting_on_a_reply_to_answered_with_its_spend() {
    let v = fold(&[
        line(
            "run-started",
            T0,
            json!({ "run_id": "r", "script": "s.rhai", "attempt": 1,
            "limits": { "budget_usd": 2.0, "stall_timeout_ms": 60000 } }),
        ),
        line("agent-opened", T0, json!({ "agent": "a", "harness": "fake", "model": "m" })),
        line("agent-opened", T0, json!({ "agent": "b", "harness": "fake", "model": "m" })),
        line("op-started", T0, json!({ "agent": "a", "op_id": "a#1", "kind": "turn", "label": "review" })),
        line("message-sent", T1, json!({ "n": 1, "route": 1, "from": "a", "to": "b", "bytes": 3, "asks": true })),
    ]);
    assert_eq!(v.budget_usd, Some(2.0));
    assert_eq!(v.stall_ms, Some(60000));
    let a = &v.agents["a"];
    assert_eq!(a.state, AgentState::AwaitingReply { to: "b".into() });
    assert_eq!(a.current.as_ref().map(|c| c.label.clone()), Some(Some("review".into())));
    assert_eq!(a.last, humantime::parse_rfc3339_weak(T1).ok(), "its last activity is the send");
    assert_eq!(v.agents["b"].state, AgentState::Idle, "b has no operation: a message does not make it busy");
    let v = fold(&[
        line("agent-opened", T0, json!({ "agent": "a", "harness": "fake", "model": "m" })),
        line("op-started", T0, json!({ "agent": "a", "op_id": "a#1", "kind": "turn" })),
        line("message-sent", T1, json!({ "n": 1, "route": 1, "from": "a", "to": "b", "bytes": 3, "asks": true })),
        line("message-replied", T1, json!({ "n": 1, "from": "b", "to": "a", "bytes": 2 })),
        line(
            "op-settled",
            T1,
            json!({ "agent": "a", "op_id": "a#1", "outcome": "answered", "tokens": 120, "cost_usd": 0.5 }),
        ),
    ]);
    let a = &v.agents["a"];
    assert_eq!((a.state.clone(), a.operations, a.tokens, a.usd), (AgentState::Answered, 1, 120, 0.5));
    assert!(a.current.is_none());
    assert_eq!((v.tokens, v.usd, v.messages), (120, 0.5, 1));
}

#[test]
fn waiting_nudged_asking_failed_and_closed_are_told_apart() {
    let open = |k: &str| line("agent-opened", T0, json!({ "agent": k, "harness": "fake", "model": "m" }));
    let start = |k: &str| line("op-started", T0, json!({ "agent": k, "op_id": format!("{k}#1"), "kind": "turn" }));
    let v = fold(&[
        open("w"),
        start("w"),
        line("op-waiting", T1, json!({ "agent": "w", "op_id": "w#1", "reason": "build", "timeout_ms": 1000 })),
        open("n"),
        start("n"),
        line("op-nudged", T1, json!({ "agent": "n", "op_id": "n#1", "nudge": 2 })),
        open("q"),
        start("q"),
        line("checkpoint-asked", T1, json!({ "key": "ok?", "question": "go on?", "agent": "q" })),
        open("f"),
        start("f"),
        line("op-settled", T1, json!({ "agent": "f", "op_id": "f#1", "outcome": "stalled" })),
        open("c"),
        line("agent-closed", T1, json!({ "agent": "c", "reason": "done" })),
        open("i"),
        line("op-nudged", T1, json!({ "agent": "i", "op_id": "i#0", "nudge": 1 })),
    ]);
    assert_eq!(v.agents["w"].state, AgentState::Waiting("build".into()));
    assert_eq!(v.agents["n"].state, AgentState::Nudged(2));
    assert_eq!(v.agents["q"].state, AgentState::AskingOperator { key: "ok?".into() });
    assert_eq!(v.asked, [Asked { key: "ok?".into(), question: "go on?".into() }]);
    assert_eq!(v.agents["f"].state, AgentState::Failed("stalled".into()));
    assert!(v.agents["f"].state.troubled() && !v.agents["f"].state.busy());
    assert_eq!(v.agents["c"].state, AgentState::Closed("done".into()));
    assert_eq!(v.agents["i"].state, AgentState::Idle, "an agent with no operation is not made busy");
    let mut v = v;
    v.apply(&line("checkpoint-answered", T1, json!({ "key": "ok?", "answer": true })));
    assert_eq!(v.agents["q"].state, AgentState::Working);
    assert!(v.asked.is_empty());
}

#[test]
fn stages_groups_and_the_end_are_folded_in_order() {
    let v = fold(&[
        line("stage-started", T0, json!({ "name": "plan" })),
        line("parallel-started", T0, json!({ "label": "reviews", "items": 3, "stage": "plan" })),
        line("parallel-finished", T1, json!({ "label": "reviews", "items": 3, "failed": 1 })),
        line("stage-finished", T1, json!({ "name": "plan", "status": "succeeded", "reason": null })),
        line("stage-started", T1, json!({ "name": "fix" })),
        line("run-finished", T1, json!({ "status": "failed", "error": "boom" })),
    ]);
    assert_eq!(v.groups, [Group { label: "reviews".into(), total: 3, failed: 1, done: true }]);
    assert_eq!(v.stages.len(), 2);
    assert_eq!(v.stages[0].status.as_ref().map(|s| s.as_str().to_string()), Some("succeeded".into()));
    assert!(v.stages[1].status.is_none());
    assert!(v.ended());
    assert_eq!(v.error.as_deref(), Some("boom"));
}

#[test]
fn follow_reads_whole_lines_only_and_goes_on_where_it_stopped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut view = RunView::default();
    let mut follow = Follow::new(dir.path());
    assert_eq!(follow.poll(&mut view).expect("no file yet"), 0);
    let opened = r#"{"v":1,"type":"agent-opened","at":"2026-12-02T10:00:00Z","data":{"agent":"a","harness":"fake","model":"m"}}"#;
    let started =
        r#"{"v":1,"type":"op-started","at":"2026-12-02T10:00:01Z","data":{"agent":"a","op_id":"a#1","kind":"turn"}}"#;
    let path = dir.path().join("events.jsonl");
    std::fs::write(&path, format!("{opened}\n{}", &started[..20])).expect("write");
    assert_eq!(follow.poll(&mut view).expect("poll"), 1);
    assert_eq!(view.agents["a"].state, AgentState::Idle);
    std::fs::write(&path, format!("{opened}\n{started}\n")).expect("write");
    assert_eq!(follow.poll(&mut view).expect("poll"), 1, "the torn line, once whole, is read once");
    assert_eq!(view.agents["a"].state, AgentState::Working);
    assert_eq!(follow.poll(&mut view).expect("poll"), 0);
}
