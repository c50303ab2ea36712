//! `run.json` and `result.json` read back as types, for the readers of run folders (`awf runs`,
//! MCP, serve, resume). Fields an older awf did not write read as their defaults; a status this
//! version does not know is kept as written (`Recorded::Other`).

use super::status::{Recorded, RunStatus, StageStatus};
use crate::accounting::Tally;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// A run's `run.json`, as readers need it (the run core rewrites it as written, unknown fields kept).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RunDoc {
    pub id: String,
    pub script: Option<String>,
    /// The script's hash when the run started (each attempt also keeps its own).
    pub script_sha256: Option<String>,
    pub cwd: Option<String>,
    pub args: Value,
    pub attempts: Vec<AttemptDoc>,
    /// The checkpoints it waits on while `waiting`.
    pub waiting: Vec<Waiting>,
    /// Its agents' git worktrees (`isolation: "worktree"`).
    pub worktrees: Option<crate::worktree::recorded::Recorded>,
}

/// One attempt of `run.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct AttemptDoc {
    #[serde(default)]
    pub n: Value,
    #[serde(default)]
    pub status: Option<Recorded<RunStatus>>,
    #[serde(default)]
    pub started_at: Option<String>,
    #[serde(default)]
    pub finished_at: Option<String>,
    /// Written by attempts since per-attempt hashes; older runs keep only the run's.
    #[serde(default)]
    pub script_sha256: Option<String>,
}

/// A checkpoint a run waits on (`run.json` `waiting`), as status readers show it.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Waiting {
    pub key: String,
    pub question: String,
    #[serde(default)]
    pub schema: Value,
    #[serde(default)]
    pub asked_at: Option<String>,
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    #[serde(default)]
    pub agent: Option<String>,
}

impl Waiting {
    /// As status readers print it: every field, keys sorted.
    pub fn json(&self) -> Value {
        // A struct of strings, numbers and values always serialises.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// A run's `result.json`, as readers need it.
#[derive(Debug, Clone, Deserialize)]
pub struct ResultRecord {
    #[serde(default)]
    pub run_id: String,
    pub status: Recorded<RunStatus>,
    #[serde(default)]
    pub value: Value,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub stages: Vec<StageEntry>,
    #[serde(default)]
    pub accounting: Accounting,
    #[serde(default)]
    pub finished_at: Option<String>,
}

/// One stage of `result.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct StageEntry {
    pub name: String,
    pub status: Recorded<StageStatus>,
}

/// The accounting of `result.json`, as far as readers print it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Accounting {
    pub totals: Tally,
    pub by_attempt: BTreeMap<u32, Tally>,
}

/// Why a document could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DocError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path} is not a document this awf reads: {source}")]
    Parse { path: String, source: serde_json::Error },
}

/// Reads the JSON document at `path` as `T`; `Ok(None)` when there is none.
pub fn read<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, DocError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(DocError::Read { path: path.display().to_string(), source }),
    };
    serde_json::from_str(&text).map(Some).map_err(|source| DocError::Parse { path: path.display().to_string(), source })
}

/// The run's `run.json`, or `None` when it is missing or unreadable (a status reader shows what
/// it can).
pub fn run(dir: &Path) -> Option<RunDoc> {
    read(&dir.join("run.json")).ok().flatten()
}

/// The run's `result.json`, or `None` when it is missing or unreadable.
pub fn result(dir: &Path) -> Option<ResultRecord> {
    read(&dir.join("result.json")).ok().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_older_run_json_reads_with_defaults_and_an_unknown_status_as_written() {
        let doc: RunDoc = serde_json::from_value(json!({
            "v": 1, "id": "r1", "script": "/w/a.rhai", "script_sha256": "abc",
            "attempts": [{ "n": 1, "started_at": "2026-01-01T00:00:00.000Z", "status": "succeeded" },
                         { "n": 2, "status": "paused-by-a-newer-awf" }],
        }))
        .expect("run.json");
        assert_eq!(doc.attempts[0].status.as_ref().and_then(Recorded::known), Some(RunStatus::Succeeded));
        assert_eq!(doc.attempts[0].script_sha256, None, "older attempts keep no hash of their own");
        assert_eq!(doc.attempts[1].status, Some(Recorded::Other("paused-by-a-newer-awf".into())));
        assert!(doc.waiting.is_empty());
    }

    #[test]
    fn a_document_that_is_not_json_is_an_error_naming_its_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("result.json");
        assert!(read::<ResultRecord>(&path).expect("missing is no error").is_none());
        std::fs::write(&path, "{ not json").expect("write");
        let e = read::<ResultRecord>(&path).expect_err("not json");
        assert!(e.to_string().contains("result.json is not a document"), "{e}");
        assert!(result(dir.path()).is_none());
    }

    #[test]
    fn waiting_prints_every_field_sorted() {
        let w: Waiting = serde_json::from_value(json!({ "key": "k", "question": "q?" })).expect("waiting");
        assert_eq!(
            serde_json::to_string(&w.json()).expect("json"),
            r#"{"agent":null,"asked_at":null,"key":"k","question":"q?","schema":null,"timeout_ms":null}"#
        );
    }
}
