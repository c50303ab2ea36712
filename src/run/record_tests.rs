//! What the run core writes reads back through `record`'s read types: `result.json` as the
//! `ResultDoc` it was written from, and each event the readers show as its typed variant.

use super::{Event, ResultDoc, RunStatus, StageStatus};
use crate::record::events::{self, EventRecord};
use crate::record::status::{OutcomeKind, Recorded};
use serde_json::json;

#[test]
fn a_written_result_reads_back() {
    let doc = ResultDoc {
        v: 1,
        run_id: "r1".into(),
        status: RunStatus::Failed.into(),
        value: None,
        error: Some("boom".into()),
        ended_in: Some("plan".into()),
        stages: vec![crate::record::docs::StageEntry { name: "plan".into(), status: StageStatus::Failed.into() }],
        accounting: Default::default(),
        simulated: true,
        sandboxes: json!([]),
        panes: serde_json::Value::Null,
        started_at: "2026-01-01T00:00:00.000Z".into(),
        finished_at: "2026-01-01T00:00:01.000Z".into(),
        duration_ms: 1000,
        children: Vec::new(),
        decisions: Vec::new(),
    };
    let written = serde_json::to_value(&doc).expect("json");
    assert_eq!(written["status"], "failed");
    assert_eq!(written["stages"], json!([{ "name": "plan", "status": "failed" }]));
    let read: ResultDoc = serde_json::from_value(written.clone()).expect("reads back");
    assert_eq!(read.status, Recorded::Known(RunStatus::Failed));
    assert_eq!(read.error.as_deref(), Some("boom"));
    assert_eq!(read.stages[0].status, Recorded::Known(StageStatus::Failed));
    assert_eq!(read.finished_at, "2026-01-01T00:00:01.000Z");
    assert_eq!(serde_json::to_value(&read).expect("json"), written, "read and written again, the same document");
}

#[test]
fn written_events_read_back_typed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = crate::record::Recorder::create(dir.path(), 2).expect("recorder");
    rec.event(&Event::OpSettled {
        agent: "a",
        op_id: "a#1",
        outcome: "answered",
        reason: None,
        tokens: 7,
        cost_usd: 0.25,
    });
    rec.event(&Event::MessageAskFailed { n: 3, to: "b", asker: "a", why: "gone" });
    rec.event(&Event::AgentSet { agent: "a", model: None, effort: None });
    rec.flush(false);
    let read = events::read(dir.path()).expect("events");
    assert_eq!(read.len(), 3);
    assert_eq!(read[0].attempt, 2);
    assert!(matches!(
        &read[0].event,
        EventRecord::OpSettled { outcome: Recorded::Known(OutcomeKind::Answered), tokens: 7, .. }
    ));
    assert!(matches!(&read[1].event, EventRecord::MessageAskFailed(m) if m.n == 3 && m.from.is_none()));
    assert!(matches!(&read[2].event, EventRecord::Other { ty, .. } if ty == "agent-set"), "not read typed: kept");
    assert_eq!(read[2].agent.as_deref(), Some("a"));
}
