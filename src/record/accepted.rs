//! What `awf serve` keeps of a run it accepted, in the run's folder before it answers 202:
//! `serve.json` (the request, when it was accepted, and whether it never started) and
//! `serve.lock`, `flock`ed by the serve that holds the run (queued or running) for as long as it
//! does. A run whose `serve.json` says `queued` and whose lock nobody holds was left by a serve
//! that died: the next serve runs it, or resumes it when it had started (`run.json` exists).

use super::lock::held_at;
use nix::fcntl::Flock;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fs::File;
use std::io;
use std::path::Path;

/// The acceptance record's name in the run folder.
pub const FILE: &str = "serve.json";
/// The lock the holding serve keeps.
pub const LOCK: &str = "serve.lock";

/// Where an accepted run stands before its first attempt (after it, `run.json` says).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Admission {
    /// Accepted: it runs (or has run) when a slot frees up.
    Queued,
    /// Stopped before it started.
    Cancelled,
    /// It could not start (its script or config no longer loads, its folder cannot be written).
    Failed,
}

/// `serve.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Accepted {
    pub v: u32,
    pub id: String,
    /// When the serve accepted it: runs are recovered in this order.
    pub accepted_at: String,
    pub status: Admission,
    /// The `POST /runs` body, as it came: a serve that recovers the run checks it again.
    pub request: Value,
    /// Why it was cancelled or failed before it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Accepted {
    pub fn new(id: &str, request: Value) -> Accepted {
        Accepted {
            v: super::FORMAT_VERSION,
            id: id.to_string(),
            accepted_at: super::now_iso(),
            status: Admission::Queued,
            request,
            error: None,
        }
    }
}

/// The lock of a serve that holds an accepted run; released when dropped.
#[derive(Debug)]
pub struct Hold {
    _file: Flock<File>,
}

impl Hold {
    /// Takes the lock of the run in `dir`: `None` when another process holds it.
    pub fn take(dir: &Path) -> io::Result<Option<Hold>> {
        match super::lock::take(&dir.join(LOCK)).map_err(io::Error::other)? {
            Ok(file) => Ok(Some(Hold { _file: file })),
            Err(_held) => Ok(None),
        }
    }
}

/// Makes the run's folder, takes its lock and writes its acceptance record (synced): the run is
/// kept from here on, whatever happens to this process.
pub fn keep(dir: &Path, accepted: &Accepted) -> io::Result<Hold> {
    super::private::create_dir(dir)?;
    let hold = Hold::take(dir)?.ok_or_else(|| io::Error::other(format!("{} is locked already", dir.display())))?;
    super::write_document(&dir.join(FILE), accepted)?;
    Ok(hold)
}

/// The acceptance record of the run in `dir`, if a serve accepted it.
pub fn read(dir: &Path) -> Option<Accepted> {
    let text = std::fs::read_to_string(dir.join(FILE)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Records that the run in `dir` never started: cancelled or failed, with why.
pub fn mark(dir: &Path, status: Admission, why: &str) -> io::Result<()> {
    let Some(mut accepted) = read(dir) else { return Ok(()) };
    accepted.status = status;
    accepted.error = Some(why.to_string());
    super::write_document(&dir.join(FILE), &accepted)
}

/// Whether a live serve holds the run in `dir` (`None`: it cannot be known).
pub fn held(dir: &Path) -> Option<bool> {
    held_at(&dir.join(LOCK))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_kept_run_is_held_until_its_hold_drops_and_marks_are_read_back() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("r1");
        let hold = keep(&dir, &Accepted::new("r1", json!({ "script": "wf.rhai" }))).expect("kept");
        assert_eq!(held(&dir), Some(true));
        assert!(Hold::take(&dir).expect("lockable").is_none(), "a second taker is refused");
        assert!(keep(&dir, &Accepted::new("r1", json!({}))).is_err(), "a held run is not kept twice");
        let read_back = read(&dir).expect("read back");
        assert_eq!((read_back.id.as_str(), read_back.status), ("r1", Admission::Queued));
        assert_eq!(read_back.request["script"], "wf.rhai");
        drop(hold);
        assert_eq!(held(&dir), Some(false));
        mark(&dir, Admission::Cancelled, "stopped while queued").expect("marked");
        let marked = read(&dir).expect("read back");
        assert_eq!(marked.status, Admission::Cancelled);
        assert_eq!(marked.error.as_deref(), Some("stopped while queued"));
        assert!(Hold::take(&dir).expect("lockable").is_some(), "free again");
    }

    #[test]
    fn a_folder_without_a_record_is_no_serve_run() {
        let root = tempfile::tempdir().expect("tempdir");
        assert!(read(root.path()).is_none());
        mark(root.path(), Admission::Failed, "x").expect("nothing to mark");
        assert!(!root.path().join(FILE).exists());
    }
}
