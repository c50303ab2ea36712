//! What a CLI turn's JSONL events said (`Turn`) and the small helpers for reading them.

use crate::accounting::Usage;
use serde_json::Value;

/// What a turn's events said.
#[derive(Debug, Default)]
pub struct Turn {
    pub usage: Usage,
    /// The CLI reported its own cost.
    pub cost_reported: bool,
    /// A failure judged from the events.
    pub failure: Option<String>,
    /// An error event that fails the turn only when the turn does not complete.
    pub error: Option<String>,
    /// The CLI's final event arrived (the turn is over, whatever the process does next).
    pub done: bool,
    pub session_id: Option<String>,
    /// Compaction: whether it happened, and the summary.
    pub compacted: bool,
    pub text: String,
    pub lines: u64,
}

/// A number from an event, 0 when absent.
pub fn num(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// `text` cut to its last `max` characters, for failure reasons.
pub(super) fn tail_chars(text: &str, max: usize) -> String {
    let n = text.chars().count();
    text.chars().skip(n.saturating_sub(max)).collect::<String>().trim().to_string()
}
