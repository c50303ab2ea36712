//! The runs `awf mcp` reports on, read from their folders only, with the statuses `awf runs`
//! shows (`cli::listing`), so a new connection finds a run an earlier one started; and stopped
//! through `awf runs stop`.

use super::super::listing;
use crate::record::docs::{self, ResultDoc};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// A run folder named by a client.
pub struct RunDir {
    pub id: String,
    pub dir: PathBuf,
}

/// Finds run `id` under `runs_dir`, or says why not (`awf runs`' text).
pub fn find(runs_dir: &Path, id: &str) -> Result<RunDir, String> {
    let dir = listing::run_dir(runs_dir, id).map_err(|e| format!("error: {e}"))?;
    Ok(RunDir { id: id.to_string(), dir })
}

/// What a run folder says now.
pub struct Seen {
    /// As `awf runs` shows it: queued, running, then the result's status (or interrupted).
    pub status: String,
    /// `result.json` once the run ended with one: as written (`run_result` returns it whole), and
    /// read as a type.
    pub result: Option<(Value, ResultDoc)>,
}

impl Seen {
    pub fn ended(&self) -> bool {
        !matches!(self.status.as_str(), "running" | "waiting" | "queued")
    }
}

/// Reads the run's state. A new attempt of a finished run is running: its result is from before.
pub fn look(run: &RunDir) -> Seen {
    let status = listing::run_status(&run.dir);
    let seen = Seen { status, result: None };
    if !seen.ended() {
        return seen;
    }
    let raw: Option<Value> = docs::read(&run.dir.join("result.json")).ok().flatten();
    let result = raw.and_then(|raw| Some((raw.clone(), serde_json::from_value(raw).ok()?)));
    Seen { result, ..seen }
}

/// The status report: id, status, script, attempts, and the error of an ended run.
pub fn status(run: &RunDir) -> Value {
    let seen = look(run);
    let doc = docs::run(&run.dir).unwrap_or_default();
    let mut out = json!({
        "run_id": run.id, "status": seen.status, "script": doc.script,
        "attempts": doc.attempts.len(),
        "folder": run.dir.display().to_string(),
    });
    let waiting = listing::waiting(&run.dir, &seen.status);
    if !waiting.is_empty() {
        out["waiting"] = json!(waiting);
    }
    if let Some((_, r)) = &seen.result {
        out["error"] = json!(r.error);
        out["finished_at"] = json!(r.finished_at);
    }
    out
}

/// What an ended run returns to the caller: a strategy's `output`, else the value (a string as it
/// is, anything else as JSON); a run that did not succeed says so with its error.
pub fn answer(run: &RunDir, seen: &Seen) -> (String, bool) {
    let Some((_, result)) = &seen.result else {
        // A background run that never started says why in its background record.
        let why = docs::background(&run.dir).and_then(|b| b.error);
        let why = why.unwrap_or_else(|| "no result.json: its process is gone".into());
        return (format!("run {}: {}: {why}", run.id, seen.status), true);
    };
    let value = result.value.as_ref().unwrap_or(&Value::Null);
    let shown = match value.get("output") {
        Some(Value::String(s)) => s.clone(),
        Some(other) if !other.is_null() => other.to_string(),
        _ => match value {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            other => serde_json::to_string_pretty(other).unwrap_or_default(),
        },
    };
    if seen.status == "succeeded" {
        return (shown, false);
    }
    let error = result.error.as_deref().unwrap_or("");
    let mut text = format!("run {}: {}: {error}", run.id, seen.status);
    if !shown.is_empty() {
        text.push_str(&format!("\n{shown}"));
    }
    (text, true)
}
