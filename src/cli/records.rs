//! A run folder's records read back as types, for `awf runs show` and `awf runs logs`: the
//! `turns.jsonl` lines, the operation events of `events.jsonl` (started with its prompt, nudged,
//! rejected with its errors, submitted, replayed), the answers of `journal.jsonl`, and an HTTP
//! agent's `history.json`. Lines of another type, or that this version cannot read, are skipped.

use crate::accounting::CostSource;
use crate::harness::http::Msg;
use crate::run::{Outcome, OutcomeKind};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;
use std::path::Path;

fn first() -> u32 {
    1
}

/// One `turns.jsonl` line (the fields these commands show).
#[derive(Debug, Clone, Deserialize)]
pub struct TurnLine {
    /// Lines written before attempts were recorded belong to the first.
    #[serde(default = "first")]
    pub attempt: u32,
    pub agent: String,
    pub op_id: String,
    #[serde(default)]
    pub kind: String,
    pub outcome: OutcomeKind,
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
    #[serde(default)]
    pub tokens: u64,
    #[serde(default)]
    pub cost_usd: f64,
    #[serde(default)]
    pub cost_source: Option<CostSource>,
    #[serde(default)]
    pub simulated: bool,
    #[serde(default)]
    pub rejections: u32,
}

impl TurnLine {
    /// Whether its cost is a price (a model's or the harness's), not a $0 that says nothing.
    pub fn priced(&self) -> bool {
        !self.simulated && matches!(self.cost_source, Some(CostSource::Priced | CostSource::Harness))
    }
}

/// The lines of a JSONL record that read as `T`, in order.
fn typed<T: DeserializeOwned>(path: &Path) -> std::io::Result<Vec<T>> {
    let lines = crate::record::read_jsonl(path)?;
    Ok(lines.into_iter().filter_map(|l| serde_json::from_value(l).ok()).collect())
}

pub fn turns(dir: &Path) -> std::io::Result<Vec<TurnLine>> {
    typed(&dir.join("turns.jsonl"))
}

/// One `events.jsonl` envelope: its type and attempt, its data as recorded.
#[derive(Debug, Clone, Deserialize)]
pub struct Envelope {
    #[serde(rename = "type")]
    pub ty: String,
    #[serde(default = "first")]
    pub attempt: u32,
    #[serde(default)]
    pub data: Value,
}

#[derive(Debug, Clone, Deserialize, serde::Serialize)]
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

/// An operation's event, as `runs show --agent` and `runs logs` read it.
#[derive(Debug, Clone)]
pub enum OpEvent {
    Started { agent: String, op_id: String, kind: String, stage: Option<String>, prompt: Option<String> },
    Nudged { agent: String, op_id: String, nudge: u32 },
    Rejected(Rejected),
    Replayed { agent: String, op_id: String },
}

#[derive(Deserialize)]
struct Started {
    agent: String,
    op_id: String,
    kind: String,
    #[serde(default)]
    stage: Option<String>,
    #[serde(default)]
    prompt: Option<String>,
}

#[derive(Deserialize)]
struct Nudged {
    agent: String,
    op_id: String,
    nudge: u32,
}

#[derive(Deserialize)]
struct Replayed {
    agent: String,
    op_id: String,
}

impl OpEvent {
    /// The operation event an envelope holds, if it holds one this version reads.
    pub fn of(e: &Envelope) -> Option<OpEvent> {
        let data = e.data.clone();
        match e.ty.as_str() {
            "op-started" => serde_json::from_value::<Started>(data).ok().map(|s| OpEvent::Started {
                agent: s.agent,
                op_id: s.op_id,
                kind: s.kind,
                stage: s.stage,
                prompt: s.prompt,
            }),
            "op-nudged" => serde_json::from_value::<Nudged>(data).ok().map(|n| OpEvent::Nudged {
                agent: n.agent,
                op_id: n.op_id,
                nudge: n.nudge,
            }),
            "op-rejected" => serde_json::from_value(data).ok().map(OpEvent::Rejected),
            "op-replayed" => serde_json::from_value::<Replayed>(data)
                .ok()
                .map(|r| OpEvent::Replayed { agent: r.agent, op_id: r.op_id }),
            _ => None,
        }
    }

    pub fn agent(&self) -> &str {
        match self {
            OpEvent::Started { agent, .. } | OpEvent::Nudged { agent, .. } | OpEvent::Replayed { agent, .. } => agent,
            OpEvent::Rejected(r) => &r.agent,
        }
    }
}

pub fn events(dir: &Path) -> std::io::Result<Vec<Envelope>> {
    typed(&dir.join("events.jsonl"))
}

/// One answered operation of `journal.jsonl` (checkpoint answers are other lines).
#[derive(Debug, Clone, Deserialize)]
pub struct Answered {
    #[serde(default = "first")]
    pub attempt: u32,
    pub agent: String,
    pub op_id: String,
    pub outcome: Outcome,
}

pub fn answers(dir: &Path) -> std::io::Result<Vec<Answered>> {
    typed(&dir.join("journal.jsonl"))
}

#[derive(Deserialize)]
struct History {
    #[serde(default)]
    messages: Vec<Msg>,
}

/// An HTTP agent's conversation (`agents/<slug>/history.json`), empty for other harnesses.
pub fn history(dir: &Path, agent: &str) -> Vec<Msg> {
    let slug = crate::record::agent_files::slug(agent);
    let path = crate::record::agent_files::agent_dir(dir, &slug).join("history.json");
    let Ok(text) = std::fs::read_to_string(path) else { return Vec::new() };
    serde_json::from_str::<History>(&text).map(|h| h.messages).unwrap_or_default()
}

/// `N tokens`, and the cost beside it only when it is a price (a local or fake model's $0 says
/// nothing).
pub fn spend(tokens: u64, cost_usd: f64, priced: bool) -> String {
    if priced || cost_usd > 0.0 {
        format!("{tokens} tokens, ${cost_usd:.4}")
    } else {
        format!("{tokens} tokens")
    }
}
