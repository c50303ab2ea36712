//! Every type of `events.jsonl` line, as one enum: its name is the envelope's `type`, its fields
//! the envelope's `data`. `src/lib.rs` lists the names; a test checks the list against `NAMES`.

use crate::record::RecordEvent;
use serde::Serialize;
use serde_json::Value;

/// Defines `Event` with its `type` names, and `NAMES` in declaration order.
macro_rules! events {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal { $($(#[$fattr:meta])* $field:ident : $ty:ty),* $(,)? } ),* $(,)?) => {
        /// One event of a run. Borrowed fields: an event is serialised as it is recorded.
        #[derive(Debug, Serialize)]
        #[serde(untagged)]
        pub enum Event<'a> {
            $( $(#[$doc])* $variant { $($(#[$fattr])* $field: $ty),* } ),*
        }

        impl Event<'_> {
            /// Every event type, as `events.jsonl` writes it.
            pub const NAMES: &'static [&'static str] = &[$($name),*];

            /// This event's `type`.
            pub fn name(&self) -> &'static str {
                match self {
                    $( Event::$variant { .. } => $name ),*
                }
            }
        }
    };
}

events! {
    /// The attempt started: its limits as the run enforces them.
    RunStarted = "run-started" { run_id: &'a str, script: &'a str, attempt: u32, limits: &'a super::Limits },
    /// A stop was asked (the first cause stands).
    RunStopping = "run-stopping" { cause: &'a super::StopCause },
    RunFinished = "run-finished" { status: super::RunStatus, error: Option<&'a str> },
    /// Processes an earlier attempt left were ended before this one started.
    LeftoversKilled = "leftovers-killed" { pids: &'a [i32] },
    AgentOpened = "agent-opened" {
        agent: &'a str, harness: &'a str, model: &'a str, effort: Option<&'a str>, labels: &'a Value,
        forked_from: Option<&'a str>,
    },
    AgentStopped = "agent-stopped" { agent: &'a str, reason: &'a str },
    AgentClosed = "agent-closed" { agent: &'a str, reason: &'a str },
    AgentSet = "agent-set" { agent: &'a str, model: Option<&'a str>, effort: Option<&'a str> },
    AgentCompacted = "agent-compacted" { agent: &'a str, op_id: &'a str, summary_chars: usize },
    /// An HTTP agent's turn started past 80% of its declared context: the history before it was
    /// summarised first (`summary_chars`), or could not be (`error`).
    ContextCompacted = "context-compacted" {
        agent: &'a str, op_id: &'a str, tokens: u64, context: u64, summary_chars: Option<usize>, error: Option<&'a str>,
    },
    /// `prompt`: a turn's prompt as the workflow wrote it (secrets scrubbed; its first 64 KiB).
    OpStarted = "op-started" {
        agent: &'a str, op_id: &'a str, kind: &'a str, stage: Option<&'a str>, label: Option<&'a str>, n: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        prompt: Option<&'a str>,
    },
    OpNudged = "op-nudged" { agent: &'a str, op_id: &'a str, nudge: u32 },
    /// An answered operation of an earlier attempt returned from the journal, not run again.
    OpReplayed = "op-replayed" { agent: &'a str, op_id: &'a str, stage: Option<&'a str> },
    /// An operation an earlier attempt answered runs again: its turn changed.
    OpRerun = "op-rerun" { agent: &'a str, op_id: &'a str, why: &'a str },
    /// A torn last line (a crash mid-write) was cut from a record file before this attempt appended.
    RecordsHealed = "records-healed" { file: &'a str, bytes: u64 },
    /// An answer submitted through the control channel, and whether it was accepted.
    /// `verdict`: accepted, rejected, or closed (the operation was already settled).
    OpSubmission = "op-submission" { agent: &'a str, op_id: &'a str, accepted: bool, verdict: &'a str, bytes: usize },
    /// A submitted answer that did not validate: every error (with its JSON pointer) and what was
    /// submitted (secrets scrubbed; its first 4 KiB), just before its `op-submission`.
    OpRejected = "op-rejected" { agent: &'a str, op_id: &'a str, errors: &'a [String], answer: &'a str, bytes: usize },
    /// A cluster message for one of this run's operations was dropped: it did not open with the
    /// cluster key (`what`: reply, outcome, journal; `why`: the refusal).
    ClusterRefused = "cluster-refused" { agent: &'a str, op_id: &'a str, what: &'a str, why: &'a str },
    OpWaiting = "op-waiting" { agent: &'a str, op_id: &'a str, reason: &'a str, timeout_ms: u64 },
    OpSettled = "op-settled" {
        agent: &'a str, op_id: &'a str, outcome: &'a str, reason: Option<&'a str>, tokens: u64,
        #[serde(serialize_with = "crate::accounting::serialize_usd")]
        cost_usd: f64,
    },
    /// A model with no price spent tokens (counted at $0): once per model per attempt.
    ModelUnpriced = "model-unpriced" { model: &'a str, harness: &'a str },
    /// A control frame refused: another agent's op, an unknown op, a stranger's process.
    ControlRefused = "control-refused" { agent: &'a str, why: &'a str, frame: &'a Value, pid: Option<i32> },
    StageStarted = "stage-started" { name: &'a str },
    StageFinished = "stage-finished" { name: &'a str, status: super::StageStatus, reason: Option<&'a str> },
    ParallelStarted = "parallel-started" {
        label: Option<&'a str>, items: usize, concurrency: usize, stage: Option<&'a str>,
    },
    ParallelFinished = "parallel-finished" { label: Option<&'a str>, items: usize, failed: usize },
    Log = "log" { level: &'a str, text: &'a str, fields: &'a Value },
    BudgetExhausted = "budget-exhausted" { reason: &'a str },
    SandboxOpened = "sandbox-opened" {
        sandbox: &'a str, scope: crate::sandbox::Scope, provider: crate::sandbox::policy::Provider,
        bwrap: Option<&'a std::path::Path>, policy: &'a crate::sandbox::Policy,
    },
    SandboxSeated = "sandbox-seated" {
        sandbox: &'a str, agent: &'a str, harness: &'a str, confined: bool, seat: Option<&'a crate::sandbox::Seat>,
    },
    SandboxClosed = "sandbox-closed" { sandbox: &'a str, agents: &'a [String] },
    SandboxNetDenied = "sandbox-net-denied" {
        sandbox: &'a str, agent: &'a str, op_id: &'a str, host: &'a str, port: u16, why: &'a str,
    },
    RouteGranted = "route-granted" {
        route: u64, from: &'a str, to: &'a str, both: bool, purpose: &'a str, max_messages: Option<u32>,
        stage: Option<&'a str>,
    },
    RouteClosed = "route-closed" { route: u64, stage: Option<&'a str> },
    MessageSent = "message-sent" { n: u64, route: u64, from: &'a str, to: &'a str, bytes: usize, asks: bool },
    MessageDelivered = "message-delivered" { n: u64, route: u64, from: &'a str, to: &'a str, bytes: usize },
    MessageUndelivered = "message-undelivered" {
        n: u64, from: &'a str, to: &'a str, bytes: usize,
        /// Why it was not shown (the stage or the run ended first, the budget ran out, ...).
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<&'a str>,
    },
    MessageReplied = "message-replied" { n: u64, from: &'a str, to: &'a str, bytes: usize },
    MessageAskFailed = "message-ask-failed" { n: u64, to: &'a str, asker: &'a str, why: &'a str },
    /// An agent's operation convened a council: it runs as child run `run_id`.
    /// `background`: `wf council --background` (present only then): the operation may end first.
    ChildRunStarted = "child-run-started" {
        run_id: &'a str, agent: &'a str, op_id: &'a str, strategy: &'a str,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        background: bool,
    },
    /// The child run ended; its spend is billed to the calling operation.
    ChildRunEnded = "child-run-ended" {
        run_id: &'a str, agent: &'a str, op_id: &'a str, status: super::RunStatus, error: Option<&'a str>,
        tokens: u64,
        #[serde(serialize_with = "crate::accounting::serialize_usd")]
        cost_usd: f64,
    },
    /// The run asks its operator `question` (the workflow's `ctx.checkpoint`, or `agent`'s `wf
    /// ask-operator`) and parks `waiting` until it is answered.
    CheckpointAsked = "checkpoint-asked" {
        key: &'a str, question: &'a str, schema: &'a Value, timeout_ms: Option<u64>, agent: Option<&'a str>,
    },
    /// The operator's answer, valid against the question's schema (journalled first).
    CheckpointAnswered = "checkpoint-answered" { key: &'a str, answer: &'a Value },
    /// No answer came within the checkpoint's `timeout_ms`.
    CheckpointTimedOut = "checkpoint-timed-out" { key: &'a str, question: &'a str, timeout_ms: u64 },
    /// An earlier attempt's answer returned from the journal: the question is not asked again.
    CheckpointReplayed = "checkpoint-replayed" { key: &'a str },
    /// A background council settled and its spend is billed to its agent; `delivery`: how its
    /// output reached the agent: `message` (message `message`, which wakes it once), `wait` (a
    /// `wf council --wait` took it) or `none` (the agent was gone or the run was stopping).
    CouncilSettled = "council-settled" {
        run_id: &'a str, agent: &'a str, strategy: &'a str, status: super::RunStatus, delivery: &'a str,
        message: Option<u64>,
    },
    /// A decision settled (`ctx.decisions.decide`): its choice and who made it, the model's
    /// confidence in it and where the distribution came from; `error` when it failed instead
    /// (`choice` and `decided_by` then null).
    DecisionSettled = "decision-settled" {
        key: &'a str, choice: Option<&'a str>, confidence: f64, decided_by: Option<crate::record::status::DecidedBy>,
        source: crate::record::status::DecisionSource, model: &'a str, error: Option<&'a str>, tokens: u64,
        #[serde(serialize_with = "crate::accounting::serialize_usd")]
        cost_usd: f64,
    },
    /// An earlier attempt's decision returned from the journal: the model is not asked again
    /// (`settled` false: only its answer was on record, and the fallback runs again).
    DecisionReplayed = "decision-replayed" { key: &'a str, settled: bool },
    /// A decision an earlier attempt made is asked again: its question or options changed.
    DecisionRerun = "decision-rerun" { key: &'a str, why: &'a str },
    /// An HTTP request that failed in a way worth retrying, and the wait before the next try.
    /// A model request failed and is tried again: try `attempt` of `of`, after `wait_ms`.
    HttpRetry = "http-retry" { agent: &'a str, attempt: u32, of: u32, wait_ms: u64, why: &'a str },
    /// A request has waited `waited_ms` for its first byte (queued on a busy server, or a server
    /// gone quiet); `limit_ms` is how long it may (request_timeout, or the stall timeout if smaller).
    HttpWaiting = "http-waiting" { agent: &'a str, url: &'a str, waited_ms: u64, limit_ms: u64 },
}

impl RecordEvent for Event<'_> {
    fn name(&self) -> &'static str {
        Event::name(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The events list of `src/lib.rs` (the run-folder overview) names exactly the enum's types.
    #[test]
    fn the_events_listed_in_lib_rs_are_the_enum() {
        let lib = include_str!("../lib.rs");
        let start = lib.find("events.jsonl   {").expect("the events line in lib.rs");
        let rest = &lib[start..];
        let list = &rest[rest.find("types:").expect("types:") + 6..rest.find("Readers skip").expect("Readers skip")];
        let mut listed: Vec<String> = list
            .split(|c: char| c == ',' || c == '.' || c.is_whitespace() || c == '/' || c == '!')
            .map(|w| w.trim().to_string())
            .filter(|w| !w.is_empty() && w.contains('-') || ["log"].contains(&w.as_str()))
            .collect();
        listed.sort();
        listed.dedup();
        let mut names: Vec<String> = Event::NAMES.iter().map(|s| s.to_string()).collect();
        names.sort();
        assert_eq!(listed, names, "src/lib.rs lists other event types than run::Event");
    }

    /// The types `record::events` reads typed are types this enum writes.
    #[test]
    fn the_typed_readers_read_written_types() {
        for name in crate::record::events::TYPED {
            assert!(Event::NAMES.contains(name), "record::events reads {name}, which run::Event does not write");
        }
    }

    #[test]
    fn an_event_serialises_as_its_fields_under_its_name() {
        let e = Event::AgentClosed { agent: "a", reason: "why" };
        assert_eq!(e.name(), "agent-closed");
        assert_eq!(serde_json::to_value(&e).expect("json"), serde_json::json!({ "agent": "a", "reason": "why" }));
    }
}
