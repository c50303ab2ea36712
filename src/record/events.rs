//! `events.jsonl` lines read back as types (the writers' enum is `run::Event`, borrowed and
//! write-only). The types readers show are typed; any other type, or a line this version cannot
//! read as its type, is kept as `Other { ty, data }`. Fields an older awf did not write read as
//! their defaults.

use super::status::{DecidedBy, DecisionSource, OutcomeKind, Recorded, RunStatus, StageStatus};
use serde::Deserialize;
use serde_json::Value;
use std::path::Path;

fn first() -> u32 {
    1
}

/// The event types read typed (the rest are `Other`); each is a `run::Event` type (a test there
/// checks).
pub const TYPED: &[&str] = &[
    "run-started",
    "run-stopping",
    "run-finished",
    "stage-started",
    "stage-finished",
    "agent-opened",
    "agent-stopped",
    "agent-closed",
    "pane-opened",
    "pane-closed",
    "op-started",
    "op-settled",
    "op-rejected",
    "op-submission",
    "op-nudged",
    "op-replayed",
    "checkpoint-asked",
    "checkpoint-answered",
    "checkpoint-timed-out",
    "checkpoint-replayed",
    "parallel-started",
    "parallel-finished",
    "log",
    "budget-exhausted",
    "message-sent",
    "message-delivered",
    "message-undelivered",
    "message-replied",
    "message-ask-failed",
    "decision-settled",
    "decision-replayed",
    "decision-rerun",
];

/// One `events.jsonl` line: its envelope and its event.
#[derive(Debug, Clone)]
pub struct EventLine {
    pub at: Option<String>,
    /// Lines written before attempts were recorded belong to the first.
    pub attempt: u32,
    /// The agent it is about, when its data names one.
    pub agent: Option<String>,
    /// The stage it happened in, when its data names one.
    pub stage: Option<String>,
    pub event: EventRecord,
}

/// Why a run is stopping, as far as readers show it (`None`: its deadline passed).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Cause {
    pub reason: Option<String>,
}

/// An event read back. Field names are the envelope `data`'s.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", content = "data", rename_all = "kebab-case")]
pub enum EventRecord {
    RunStarted {
        run_id: String,
        script: String,
        attempt: u32,
        /// The run's limits as recorded (`run::Limits`: budgets, `stall_timeout_ms`).
        #[serde(default)]
        limits: Value,
    },
    RunStopping {
        #[serde(default)]
        cause: Cause,
    },
    RunFinished {
        status: Recorded<RunStatus>,
        error: Option<String>,
    },
    StageStarted {
        name: String,
    },
    StageFinished {
        name: String,
        status: Recorded<StageStatus>,
        reason: Option<String>,
    },
    AgentOpened {
        agent: String,
        harness: String,
        model: String,
    },
    AgentStopped {
        agent: String,
        reason: String,
    },
    AgentClosed {
        agent: String,
        reason: String,
    },
    OpStarted {
        agent: String,
        op_id: String,
        kind: String,
        stage: Option<String>,
        label: Option<String>,
        prompt: Option<String>,
    },
    /// An agent's operation waits (on a question it asked, the operator, a council).
    OpWaiting {
        agent: String,
        op_id: String,
        #[serde(default)]
        reason: String,
    },
    OpSettled {
        agent: String,
        op_id: String,
        outcome: Recorded<OutcomeKind>,
        reason: Option<String>,
        #[serde(default)]
        tokens: u64,
        #[serde(default)]
        cost_usd: f64,
    },
    OpRejected(Rejected),
    OpSubmission {
        agent: String,
        op_id: String,
        verdict: String,
        #[serde(default)]
        bytes: usize,
    },
    OpNudged {
        agent: String,
        op_id: String,
        nudge: u32,
    },
    OpReplayed {
        agent: String,
        op_id: String,
        stage: Option<String>,
    },
    CheckpointAsked {
        key: String,
        question: String,
    },
    CheckpointAnswered {
        key: String,
        answer: Value,
    },
    CheckpointTimedOut {
        key: String,
        question: String,
        timeout_ms: u64,
    },
    CheckpointReplayed {
        key: String,
    },
    ParallelStarted {
        label: Option<String>,
        items: usize,
        /// 0 when the group set none (older records too).
        #[serde(default)]
        concurrency: usize,
        stage: Option<String>,
    },
    ParallelFinished {
        label: Option<String>,
        items: usize,
        failed: usize,
    },
    Log {
        level: String,
        text: String,
    },
    BudgetExhausted {
        reason: String,
    },
    /// An agent's pane (`placement: "pane"`): its tmux target (`%3`) in `session` on the server
    /// at `socket`.
    PaneOpened {
        agent: String,
        target: String,
        session: String,
        #[serde(default)]
        window: String,
        #[serde(default)]
        socket: Option<std::path::PathBuf>,
        #[serde(default)]
        reason: Option<String>,
    },
    /// An agent's pane closed, `kept` (released for the operator) or found `gone`.
    PaneClosed {
        agent: String,
        target: String,
        state: String,
    },
    MessageSent(Message),
    MessageDelivered(Message),
    MessageUndelivered(Message),
    MessageReplied(Message),
    MessageAskFailed(Message),
    DecisionSettled(Decided),
    DecisionReplayed {
        key: String,
        #[serde(default)]
        settled: bool,
    },
    DecisionRerun {
        key: String,
        why: String,
    },
    /// A type this version does not read (or a line it cannot read as its type), as written.
    #[serde(skip)]
    Other {
        ty: String,
        data: Value,
    },
}

/// An answer submitted that did not validate.
#[derive(Debug, Clone, Deserialize)]
pub struct Rejected {
    pub agent: String,
    pub op_id: String,
    pub errors: Vec<String>,
    /// What was submitted (its first 4 KiB).
    #[serde(default)]
    pub answer: String,
    #[serde(default)]
    pub bytes: usize,
}

/// A decision settled, or failed (`error`).
#[derive(Debug, Clone, Deserialize)]
pub struct Decided {
    pub key: String,
    pub choice: Option<String>,
    #[serde(default)]
    pub confidence: f64,
    pub decided_by: Option<Recorded<DecidedBy>>,
    pub source: Recorded<DecisionSource>,
    #[serde(default)]
    pub model: String,
    pub error: Option<String>,
    #[serde(default)]
    pub tokens: u64,
    #[serde(default)]
    pub cost_usd: f64,
}

/// A message between agents (`message-*`); an ask that failed names no sender.
#[derive(Debug, Clone, Deserialize)]
pub struct Message {
    pub n: u64,
    pub from: Option<String>,
    pub to: Option<String>,
    /// A message that asks for a reply (`message-sent`).
    #[serde(default)]
    pub asks: bool,
    /// Who waited for the reply (`message-ask-failed`).
    #[serde(default)]
    pub asker: Option<String>,
}

#[derive(Deserialize)]
struct Head {
    #[serde(rename = "type")]
    ty: String,
    #[serde(default)]
    at: Option<String>,
    #[serde(default = "first")]
    attempt: u32,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct About {
    agent: Option<String>,
    stage: Option<String>,
}

impl EventLine {
    /// A line of `events.jsonl`; `None` when it is not an envelope at all.
    pub fn parse(line: &Value) -> Option<EventLine> {
        let head = Head::deserialize(line).ok()?;
        let data = line.get("data").cloned().unwrap_or(Value::Null);
        let about = About::deserialize(&data).unwrap_or_default();
        let event = EventRecord::deserialize(line).unwrap_or(EventRecord::Other { ty: head.ty, data });
        Some(EventLine { at: head.at, attempt: head.attempt, agent: about.agent, stage: about.stage, event })
    }

    /// Reads one line of text; `None` when it is not a JSON envelope.
    pub fn parse_text(text: &str) -> Option<EventLine> {
        serde_json::from_str::<Value>(text).ok().as_ref().and_then(EventLine::parse)
    }
}

/// The events of the run in `dir`, in order (a torn last line is skipped).
pub fn read(dir: &Path) -> std::io::Result<Vec<EventLine>> {
    let lines = super::read_jsonl(&dir.join("events.jsonl"))?;
    Ok(lines.iter().filter_map(EventLine::parse).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_known_type_reads_typed_and_an_unknown_one_as_written() {
        let e = EventLine::parse(&json!({ "v": 1, "type": "stage-finished", "at": "t", "attempt": 2,
            "data": { "name": "plan", "status": "succeeded", "reason": null } }))
        .expect("envelope");
        assert_eq!(e.attempt, 2);
        assert!(
            matches!(e.event, EventRecord::StageFinished { ref name, status: Recorded::Known(StageStatus::Succeeded), .. } if name == "plan")
        );
        let e = EventLine::parse(&json!({ "v": 1, "type": "brand-new", "at": "t", "data": { "agent": "a", "x": 1 } }))
            .expect("envelope");
        assert_eq!(e.attempt, 1, "older lines have no attempt: the first");
        assert_eq!(e.agent.as_deref(), Some("a"));
        assert!(matches!(e.event, EventRecord::Other { ref ty, ref data } if ty == "brand-new" && data["x"] == 1));
        assert!(EventLine::parse(&json!({ "no": "type" })).is_none());
    }

    #[test]
    fn a_known_type_with_data_it_cannot_read_is_kept_as_written() {
        let e = EventLine::parse(&json!({ "type": "op-nudged", "data": { "agent": "a" } })).expect("envelope");
        assert!(matches!(e.event, EventRecord::Other { ref ty, .. } if ty == "op-nudged"));
    }
}
