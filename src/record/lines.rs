//! The `turns.jsonl`, `journal.jsonl` and `stages.jsonl` lines read back as types. Lines an older
//! awf wrote lack fields (`attempt`, `stage`, `kind`, ...): they read as their defaults. A line
//! that is not of the stream's type (a newer awf's, or one edited by hand) is skipped.

use super::status::{OutcomeKind, Recorded, StageStatus};
use crate::accounting::{CostSource, Tally, Usage};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// Lines written before attempts were recorded belong to the first.
fn first() -> u32 {
    1
}

/// A field that may be absent (`None`) or present and null (`Some(None)`).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// One `turns.jsonl` line: a settled operation.
#[derive(Debug, Clone, Deserialize)]
pub struct TurnRecord {
    #[serde(default = "first")]
    pub attempt: u32,
    pub agent: String,
    pub op_id: String,
    /// `turn`, `message`, or `council` for a line that bills a council on its own.
    #[serde(default)]
    pub kind: String,
    pub outcome: Recorded<OutcomeKind>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub stage: Option<String>,
    #[serde(default)]
    pub label: Option<String>,
    #[serde(default)]
    pub harness: String,
    #[serde(default)]
    pub model: String,
    /// Input, output and cache tokens, and the cost.
    #[serde(flatten)]
    pub usage: Usage,
    #[serde(default)]
    pub tokens: u64,
    #[serde(default)]
    pub cost_source: Option<CostSource>,
    #[serde(default)]
    pub simulated: bool,
    #[serde(default)]
    pub rejections: u32,
    #[serde(default)]
    pub delivered_at: Option<String>,
    #[serde(default)]
    pub settled_at: Option<String>,
    /// What councils it convened spent, by model.
    #[serde(default)]
    pub councils_by_model: Option<BTreeMap<String, Tally>>,
}

impl TurnRecord {
    /// Whether its cost is a price (a model's or the harness's), not a $0 that says nothing.
    pub fn priced(&self) -> bool {
        !self.simulated && matches!(self.cost_source, Some(CostSource::Priced | CostSource::Harness))
    }

    pub fn cost_usd(&self) -> f64 {
        self.usage.cost_usd
    }
}

/// One `journal.jsonl` line: an answered operation, a checkpoint's answer, or a decision.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum JournalRecord {
    Checkpoint(CheckpointAnswer),
    Op(JournalOp),
    Decision(DecisionLine),
}

/// How far a journalled decision had come: the model answered (written before any fallback), or
/// it settled (the fallback, if any, done).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DecisionPhase {
    Model,
    Settled,
}

/// A decision on record (`ctx.decisions.decide`); readers keep a key's last line.
#[derive(Debug, Clone, Deserialize)]
pub struct DecisionLine {
    #[serde(default = "first")]
    pub attempt: u32,
    /// The decision's key.
    pub decision: String,
    /// What it asked (its key, question and options), for matching a later attempt's.
    pub decision_hash: String,
    pub phase: DecisionPhase,
    /// The decision as recorded (`decision::record::DecisionRecord`).
    pub record: Value,
}

/// An answered operation on record (its last line counts: one is written on acceptance, one as
/// it settles).
#[derive(Debug, Clone, Deserialize)]
pub struct JournalOp {
    #[serde(default = "first")]
    pub attempt: u32,
    pub agent: String,
    pub op_id: String,
    pub turn_hash: String,
    /// The hashes of its prompt, schema and nudge (`p:… s:… n:…`); older lines have none.
    #[serde(default)]
    pub turn_parts: Option<String>,
    /// The stage it was asked in; `None` on lines written before stages were journalled (any).
    #[serde(default, deserialize_with = "present")]
    pub stage: Option<Option<String>>,
    /// The outcome as recorded, replayed as it is.
    pub outcome: Value,
}

/// The recorded outcome's value, as far as readers show it.
#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    value: Option<Value>,
}

impl JournalOp {
    /// The value it answered with.
    pub fn value(&self) -> Option<Value> {
        serde_json::from_value::<Answer>(self.outcome.clone()).ok().and_then(|a| a.value)
    }
}

/// The operator's answer to a checkpoint.
#[derive(Debug, Clone, Deserialize)]
pub struct CheckpointAnswer {
    #[serde(default = "first")]
    pub attempt: u32,
    pub checkpoint: String,
    pub question_hash: String,
    pub answer: Value,
}

/// One `stages.jsonl` line: a stage's end.
#[derive(Debug, Clone, Deserialize)]
pub struct StageRecord {
    pub name: String,
    #[serde(default = "first")]
    pub attempt: u32,
    pub status: Recorded<StageStatus>,
    #[serde(default)]
    pub value: Value,
    #[serde(default)]
    pub summary: Option<String>,
    /// The turns (default ids) each agent started in it.
    #[serde(default)]
    pub runs: BTreeMap<String, u64>,
}

/// The lines of a JSONL record that read as `T`, in order (a torn last line is skipped).
pub fn typed<T: DeserializeOwned>(path: &Path) -> std::io::Result<Vec<T>> {
    let lines = super::read_jsonl(path)?;
    Ok(lines.into_iter().filter_map(|l| serde_json::from_value(l).ok()).collect())
}

pub fn turns(dir: &Path) -> std::io::Result<Vec<TurnRecord>> {
    typed(&dir.join("turns.jsonl"))
}

pub fn journal(dir: &Path) -> std::io::Result<Vec<JournalRecord>> {
    typed(&dir.join("journal.jsonl"))
}

pub fn stages(dir: &Path) -> std::io::Result<Vec<StageRecord>> {
    typed(&dir.join("stages.jsonl"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn older_lines_read_with_defaults() {
        let t: TurnRecord = serde_json::from_value(json!({ "agent": "a", "op_id": "a#1", "outcome": "answered",
            "input_tokens": 3, "output_tokens": 4, "tokens": 7, "cost_usd": 0.5 }))
        .expect("turn");
        assert_eq!((t.attempt, t.usage.input_tokens, t.cost_usd()), (1, 3, 0.5));
        assert!(!t.priced());
        let j: JournalRecord = serde_json::from_value(json!({ "agent": "a", "op_id": "a#1", "turn_hash": "h",
            "outcome": { "value": 42 } }))
        .expect("journal");
        let JournalRecord::Op(op) = j else { panic!("an op line") };
        assert_eq!((op.attempt, op.stage.clone(), op.value()), (1, None, Some(json!(42))));
        let j: JournalOp = serde_json::from_value(json!({ "agent": "a", "op_id": "a#1", "turn_hash": "h",
            "stage": null, "outcome": {} }))
        .expect("journal");
        assert_eq!(j.stage, Some(None), "null: asked outside any stage");
    }

    #[test]
    fn a_checkpoint_line_is_not_an_op_and_a_stranger_line_is_skipped() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("journal.jsonl"),
            "{\"attempt\":2,\"checkpoint\":\"k\",\"question_hash\":\"q\",\"answer\":true}\n{\"what\":\"else\"}\n",
        )
        .expect("write");
        let lines = journal(dir.path()).expect("journal");
        assert_eq!(lines.len(), 1);
        assert!(matches!(&lines[0], JournalRecord::Checkpoint(c) if c.checkpoint == "k" && c.attempt == 2));
    }
}
