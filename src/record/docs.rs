//! `run.json` and `result.json` read back as types, for the readers of run folders (`awf runs`,
//! MCP, serve, resume). Fields an older awf did not write read as their defaults; a status this
//! version does not know is kept as written (`Recorded::Other`).

use super::status::{Recorded, RunStatus, StageStatus};
use crate::accounting::Accounts;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
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

/// `result.json`: how the run ended, its value or error, its stages and its whole spend. The run
/// core writes it (`run::Run::finish`) and every reader of a run folder reads it back through this
/// type: a field an older awf did not write reads as its default, a status this version does not
/// know as written.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResultDoc {
    #[serde(default)]
    pub v: u32,
    #[serde(default)]
    pub run_id: String,
    pub status: Recorded<RunStatus>,
    #[serde(default)]
    pub value: Option<Value>,
    #[serde(default)]
    pub error: Option<String>,
    /// The stage an error went through first.
    #[serde(default)]
    pub ended_in: Option<String>,
    #[serde(default)]
    pub stages: Vec<StageEntry>,
    #[serde(default)]
    pub accounting: Accounts,
    #[serde(default)]
    pub simulated: bool,
    #[serde(default)]
    pub sandboxes: Value,
    /// Agents with placement "pane": where each pane went and what became of it.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub panes: Value,
    #[serde(default)]
    pub started_at: String,
    #[serde(default)]
    pub finished_at: String,
    #[serde(default)]
    pub duration_ms: u64,
    /// The child runs (councils its agents convened), by run id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<String>,
    /// Every decision the run asked (`ctx.decisions.decide`), in the order asked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<Value>,
}

/// One stage of `result.json`: its name and how it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageEntry {
    pub name: String,
    pub status: Recorded<StageStatus>,
}

/// `background.json`: a `--detach`ed run before its run starts (`host::pool` writes it): `queued`
/// while its process waits in the machine's pool (`pid`, once it waits), else how it ended before
/// starting (`cancelled`, `failed`) and why. Its statuses are `RunStatus`es.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackgroundDoc {
    #[serde(default)]
    pub v: u32,
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub script: Option<String>,
    #[serde(default)]
    pub queued_at: Option<String>,
    pub status: Recorded<RunStatus>,
    #[serde(default)]
    pub pid: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
}

/// The background record's name in a run folder.
pub const BACKGROUND: &str = "background.json";

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

/// The run's `background.json`, or `None` when it is missing or unreadable.
pub fn background(dir: &Path) -> Option<BackgroundDoc> {
    read(&dir.join(BACKGROUND)).ok().flatten()
}

/// The run's `result.json`, or `None` when it is missing or unreadable.
pub fn result(dir: &Path) -> Option<ResultDoc> {
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
        assert!(read::<ResultDoc>(&path).expect("missing is no error").is_none());
        std::fs::write(&path, "{ not json").expect("write");
        let e = read::<ResultDoc>(&path).expect_err("not json");
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
