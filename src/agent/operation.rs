//! An operation as data: what a turn asks (`Turn`), what kind of operation it is (`Body`), how
//! its body ended (`Done`), the operation about to run (`Op`) and what it left (`Ran`), and why
//! a call returned no outcome (`OpError`). What each kind does is `kinds.rs`'s, the pipeline that
//! runs them `op.rs`'s, the calls that start them `start.rs`'s.

use super::supervise::Nudge;
use super::Agent;
use crate::accounting::{CostSource, Usage};
use crate::harness::{AgentInfo, Session};
use crate::run::deadline::Deadline;
use crate::run::schema::Schema;
use crate::run::{Outcome, OutcomeKind};
use serde_json::Value;
use std::sync::Arc;
use std::time::Instant;

/// `a.run(turn)`, parsed.
pub struct Turn {
    pub prompt: String,
    pub schema: Schema,
    pub id: Option<String>,
    pub label: Option<String>,
    pub timeout_ms: Option<u64>,
    pub deadline_ms: Option<i64>,
    pub nudge: Nudge,
}

/// What an operation does inside the pipeline.
pub(super) enum Body<'a> {
    Turn(&'a Turn),
    /// A decision model's turn (`agent/decide.rs`): a turn whose reply's log-probabilities are kept.
    Decision(&'a Turn),
    Message,
    Compact(&'a str),
    Fork(AgentInfo),
    Set {
        model: Option<&'a str>,
        effort: Option<&'a str>,
    },
}

/// How an operation's body ended.
pub(super) struct Done {
    pub kind: OutcomeKind,
    pub value: Option<Value>,
    pub reason: Option<String>,
    pub usage: Usage,
    pub cost_source: CostSource,
    pub simulated: bool,
    /// A fork's new session.
    pub forked: Option<Box<dyn Session>>,
    /// The token log-probabilities of the reply that answered (`ResultSlot::logprobs`).
    pub logprobs: Option<Value>,
}

impl Done {
    pub(super) fn answered(value: Option<Value>) -> Done {
        Done::of(OutcomeKind::Answered, value, None)
    }

    pub(super) fn of(kind: OutcomeKind, value: Option<Value>, reason: Option<String>) -> Done {
        Done {
            kind,
            value,
            reason,
            usage: Usage::default(),
            cost_source: CostSource::Simulated,
            simulated: false,
            forked: None,
            logprobs: None,
        }
    }
}

impl Body<'_> {
    /// The `kind` field of the operation's records.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Body::Turn(_) => "turn",
            Body::Decision(_) => "decision",
            Body::Message => "message",
            Body::Compact(_) => "compact",
            Body::Fork(_) => "fork",
            Body::Set { .. } => "set",
        }
    }

    /// A turn's prompt, as the workflow wrote it.
    pub fn prompt(&self) -> Option<&str> {
        match self {
            Body::Turn(t) | Body::Decision(t) => Some(&t.prompt),
            _ => None,
        }
    }

    /// Whether an accepted answer is journalled (what resume replays): turns.
    pub fn journals(&self) -> bool {
        matches!(self, Body::Turn(_))
    }

    /// Whether a failed or timed-out operation closes its agent: a turn's does, a message
    /// operation's too unless the budget stopped it; a compaction, fork or settings change that
    /// failed leaves the agent as it was.
    pub fn closes_on_failure(&self, budget: bool) -> bool {
        match self {
            Body::Turn(_) | Body::Decision(_) => true,
            Body::Message => !budget,
            _ => false,
        }
    }

    /// Whether the operation leaves a `turns.jsonl` line and counts in the accounts: every kind
    /// but a settings change (no harness call, nothing spent; its record is `agent-set`).
    pub fn records_turn(&self) -> bool {
        !matches!(self, Body::Set { .. })
    }

    /// What the operation is called in the reason its agent closed with.
    pub fn noun(&self) -> &'static str {
        match self {
            Body::Message => "message operation",
            _ => "operation",
        }
    }

    /// Whether the asks a failed operation leaves unanswered fail before its agent closes.
    pub fn asks_fail_first(&self) -> bool {
        matches!(self, Body::Message)
    }

    /// Why asks the agent was shown during the operation fail, when it ends without replying.
    pub fn unanswered_asks(&self, agent: &Agent, o: &Outcome) -> Option<String> {
        match self {
            Body::Turn(_) => Some(format!("{} ended its turn without replying", agent.key)),
            Body::Message if o.kind == OutcomeKind::Answered => {
                Some(format!("{} ended its turn without replying", agent.key))
            }
            Body::Message => Some(format!(
                "{}'s message operation {}: {}",
                agent.key,
                o.kind.as_str(),
                o.reason.as_deref().unwrap_or("")
            )),
            _ => None,
        }
    }
}

/// Why an operation call did not return an outcome.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    /// The call itself is wrong (a reused id, a closed agent): a script error.
    #[error("{0}")]
    Invalid(String),
    /// The enclosing scope was cancelled or passed its deadline: the script must unwind.
    #[error("{0}")]
    Terminated(String),
    /// The run's `--max-agents` (a fork is a new agent): a script error.
    #[error(transparent)]
    Limit(#[from] crate::run::scheduler::LimitReached),
}

/// One operation about to run: what the pipeline needs beside its body.
pub(super) struct Op<'a> {
    pub op_id: String,
    /// The agent's n-th operation of this kind.
    pub n: u64,
    pub label: Option<&'a str>,
    /// The turn's hash (turns only; journal and replay match on it).
    pub hash: String,
    /// `turn_parts` of a turn (empty for other operations).
    pub parts: String,
    /// The operation's own deadline (its `timeout_ms`/`deadline`), before the agent's and the scope's.
    pub own_deadline: Option<Deadline>,
    pub started: Instant,
    /// A message operation answering an ask runs on its asker's slot and budget place (see
    /// `kinds::message_round`): it neither takes a permit nor waits for one.
    pub answers_ask: bool,
    /// What the harness reports spending as it goes: billed even when the operation ends before
    /// its turn reports (cancelled, timed out, its agent stopped).
    pub meter: Arc<crate::accounting::Meter>,
}

/// What an operation left: its settled outcome, a fork's new session, and the log-probabilities
/// of a decision's answering reply.
pub(super) struct Ran {
    pub outcome: Outcome,
    pub forked: Option<Box<dyn crate::harness::Session>>,
    pub logprobs: Option<serde_json::Value>,
}
