//! An operation's outcome as scripts and records see it: how it ended, its value and usage, and the
//! `turns.jsonl` and `journal.jsonl` lines a settled operation leaves.

use crate::accounting::{CostSource, Usage};
use crate::record::now_iso;
use serde::Serialize;
use serde_json::Value;

pub use crate::record::status::OutcomeKind;

/// The settled result of one operation, as scripts and records see it.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Outcome {
    pub kind: OutcomeKind,
    pub value: Option<Value>,
    pub reason: Option<String>,
    pub op_id: String,
    pub usage: Usage,
    pub duration_ms: u64,
    pub cost_source: CostSource,
    pub simulated: bool,
}

/// A settled operation, as the records need it.
pub struct Settled<'a> {
    pub attempt: u32,
    pub agent: &'a str,
    pub harness: &'a str,
    pub outcome: &'a Outcome,
    pub stage: Option<&'a str>,
    pub label: Option<&'a str>,
    pub turn_hash: &'a str,
    /// The hashes of the turn's prompt, schema and nudge (`p:… s:… n:…`), for what changed.
    pub turn_parts: &'a str,
    pub model: &'a str,
    pub started_at: &'a str,
    pub rejections: u32,
    /// `turn` for a `run`, `message` for a message operation.
    pub kind: &'a str,
    /// The harness's own session it ran in (CLI harnesses).
    pub session: Option<&'a SessionRef>,
    /// The part of its spend that councils it convened spent, by model (see `Spent::councils`).
    pub councils: Option<&'a std::collections::BTreeMap<String, crate::accounting::Tally>>,
}

impl Settled<'_> {
    /// The `turns.jsonl` record, to be serialised (borrowed fields: nothing is copied).
    pub fn turn_record(&self) -> impl Serialize + '_ {
        let (o, u) = (self.outcome, &self.outcome.usage);
        let line = TurnLine {
            attempt: self.attempt,
            agent: self.agent,
            op_id: &o.op_id,
            kind: self.kind,
            outcome: o.kind.as_str(),
            reason: o.reason.as_deref(),
            stage: self.stage,
            label: self.label,
            harness: self.harness,
            model: self.model,
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cache_read_tokens: u.cache_read_tokens,
            cache_write_tokens: u.cache_write_tokens,
            tokens: u.tokens(),
            cost_usd: u.cost_usd,
            cost_source: o.cost_source,
            simulated: o.simulated,
            rejections: self.rejections,
            duration_ms: o.duration_ms,
            delivered_at: self.started_at,
            settled_at: now_iso(),
            session: self.session,
            councils_by_model: self.councils.filter(|c| !c.is_empty()),
        };
        line
    }

    /// The `journal.jsonl` record, for answered operations only (borrowed fields, as above).
    pub fn journal_record(&self) -> Option<JournalLine<'_>> {
        (self.outcome.kind == OutcomeKind::Answered).then_some(JournalLine {
            attempt: self.attempt,
            agent: self.agent,
            op_id: &self.outcome.op_id,
            turn_hash: self.turn_hash,
            turn_parts: self.turn_parts,
            stage: self.stage,
            settled: true,
            outcome: self.outcome,
        })
    }
}

/// The harness's own session an operation ran in, for the records: with a CLI harness, the id a
/// user passes to `claude --resume`, `codex resume` or `pi --session`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct SessionRef {
    pub id: String,
    /// The session this one was forked from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<String>,
}

/// One `turns.jsonl` line. Serialised straight from borrowed fields: no JSON tree is built.
#[derive(serde::Serialize)]
struct TurnLine<'a> {
    attempt: u32,
    agent: &'a str,
    op_id: &'a str,
    kind: &'a str,
    outcome: &'a str,
    reason: Option<&'a str>,
    stage: Option<&'a str>,
    label: Option<&'a str>,
    harness: &'a str,
    model: &'a str,
    input_tokens: u64,
    output_tokens: u64,
    cache_read_tokens: u64,
    cache_write_tokens: u64,
    tokens: u64,
    #[serde(serialize_with = "crate::accounting::serialize_usd")]
    cost_usd: f64,
    cost_source: CostSource,
    simulated: bool,
    rejections: u32,
    duration_ms: u64,
    delivered_at: &'a str,
    settled_at: String,
    /// `{ id, forked_from? }`, or null when the harness keeps no session of its own.
    session: Option<&'a SessionRef>,
    /// What councils it convened spent, by model (present when they spent on any).
    #[serde(skip_serializing_if = "Option::is_none")]
    councils_by_model: Option<&'a std::collections::BTreeMap<String, crate::accounting::Tally>>,
}

/// One `journal.jsonl` line: written when an answer is accepted (`settled: false`) and again when
/// the operation settles; readers keep an op's last line.
#[derive(serde::Serialize)]
pub struct JournalLine<'a> {
    pub attempt: u32,
    pub agent: &'a str,
    pub op_id: &'a str,
    pub turn_hash: &'a str,
    pub turn_parts: &'a str,
    /// The stage it was asked in (null: outside any): a resume replays it only there.
    pub stage: Option<&'a str>,
    pub settled: bool,
    pub outcome: &'a Outcome,
}
