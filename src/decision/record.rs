//! A decision as records keep it: the `DecisionRecord` that `result.json` `decisions` lists, the
//! `decision-settled` event says and `journal.jsonl` keeps (a line when the model answered, before
//! any fallback, and one when the decision settled), and the map a script gets back.

use crate::record::lines::DecisionPhase;
use crate::record::status::{DecidedBy, DecisionSource};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// What a decision spent: its model turn's tokens and cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spend {
    pub tokens: u64,
    #[serde(serialize_with = "crate::accounting::serialize_usd")]
    pub cost_usd: f64,
}

/// What the decision model made of a question, before the floor and the fallback.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelAnswer {
    /// The model's pick: the option it put most probability on (`None`: no valid answer).
    pub choice: Option<String>,
    /// Each option's probability (empty without a valid answer).
    pub distribution: BTreeMap<String, f64>,
    pub source: DecisionSource,
    pub reason: Option<String>,
    /// The model's name.
    pub model: String,
    /// The option the model wrote, when the log-probabilities put more on another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled: Option<String>,
    /// Some of the distribution was split among options whose ids share a prefix.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approximate: bool,
    /// Why the model gave no valid answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why_none: Option<String>,
    pub spend: Spend,
}

impl ModelAnswer {
    /// The model's probability of `option` (0 when it gave it none, or no answer).
    pub fn probability(&self, option: &str) -> f64 {
        self.distribution.get(option).copied().unwrap_or(0.0)
    }
}

/// One decision, settled (or failed: `error`), as `result.json` `decisions` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    pub key: String,
    pub question: String,
    pub options: Vec<String>,
    /// The decision (`None` when it failed).
    pub choice: Option<String>,
    /// The model's probability of `choice`.
    pub confidence: f64,
    pub distribution: BTreeMap<String, f64>,
    pub decided_by: Option<DecidedBy>,
    pub model: String,
    pub source: DecisionSource,
    pub reason: Option<String>,
    /// What the model picked (it differs from `choice` when a fallback decided otherwise).
    pub model_choice: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approximate: bool,
    /// Why the model gave no valid answer (it gave none: the fallback decided).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_answer: Option<String>,
    pub min_confidence: f64,
    pub fallback: String,
    pub spend: Spend,
    pub attempt: u32,
    pub at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Returned from the journal of an earlier attempt, not asked again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replayed: bool,
}

impl DecisionRecord {
    /// The map a script gets back: `#{ key, choice, confidence, distribution, decided_by, model,
    /// reason, source, model_choice, replayed }` (and `sampled`, `approximate`, `no_answer` when
    /// they apply).
    pub fn script_value(&self) -> Value {
        let mut v = json!({
            "key": self.key, "choice": self.choice, "confidence": self.confidence,
            "distribution": self.distribution, "decided_by": self.decided_by, "model": self.model,
            "reason": self.reason, "source": self.source, "model_choice": self.model_choice,
            "replayed": self.replayed,
        });
        if let Some(s) = &self.sampled {
            v["sampled"] = json!(s);
        }
        if self.approximate {
            v["approximate"] = json!(true);
        }
        if let Some(why) = &self.no_answer {
            v["no_answer"] = json!(why);
        }
        v
    }
}

/// One decision line of `journal.jsonl` (read back as `record::lines::DecisionLine`).
#[derive(Serialize)]
pub struct JournalLine<'a, T: Serialize> {
    pub attempt: u32,
    pub decision: &'a str,
    pub decision_hash: &'a str,
    pub phase: DecisionPhase,
    /// A `ModelAnswer` (phase `model`) or a `DecisionRecord` (phase `settled`).
    pub record: &'a T,
}
