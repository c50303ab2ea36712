//! `awf runs answer ID --json VALUE [--key K]`: answers a run parked on an operator checkpoint,
//! through the run's control socket to its live attempt; the same call serves `POST
//! /runs/{id}/answer` and the MCP tool `run_answer`. A run that is not waiting, or not live, is
//! refused with what to do instead; an answer that fails the schema is refused with the reasons.

use super::listing;
use crate::host::control::{self, ControlError, Request};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

/// Reads `--json`: a JSON value, or `@FILE` holding one (relative to `cwd`).
pub fn parse_value(given: &str, cwd: &Path) -> Result<Value, String> {
    let (text, from) = match given.strip_prefix('@') {
        Some(file) => {
            let path = cwd.join(file);
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("--json @{file}: cannot read {}: {e}", path.display()))?;
            (text, format!("@{file}"))
        }
        None => (given.to_string(), given.to_string()),
    };
    serde_json::from_str(&text)
        .map_err(|e| format!("--json {from}: not JSON ({e}); a string answer is quoted, e.g. --json '\"yes\"'"))
}

/// Answers the run in `dir` (id `id`); the checkpoint answered, or why not.
pub fn answer(dir: &Path, id: &str, key: Option<String>, value: Value) -> Result<String, String> {
    if !dir.join("run.json").exists() || !listing::live(dir) {
        let status = listing::run_status(dir);
        if listing::parked_when_interrupted(dir) {
            return Err(format!(
                "run {id} is not live: its process ended while it waited for the operator; `awf runs resume {id}` parks it again at the same checkpoint, then answer it"
            ));
        }
        return Err(format!("run {id} is not waiting for the operator (status {status})"));
    }
    let req = Request::Answer { key, value };
    // A run that has just started may not have opened its socket yet.
    let until = Instant::now() + Duration::from_secs(2);
    loop {
        match control::request(dir, &req, Duration::from_secs(10)) {
            Ok(reply) => return Ok(reply.key.unwrap_or_default()),
            Err(ControlError::Unreachable { .. }) if Instant::now() < until && listing::live(dir) => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(ControlError::Unreachable { .. }) if !listing::live(dir) => {
                return Err(format!("run {id} ended before it could be answered ({})", listing::run_status(dir)));
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}
