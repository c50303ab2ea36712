//! `groups.jsonl`: the process group of every turn process an attempt started, written when the
//! process starts, so that a later attempt can find what a killed one left running.

use serde_json::json;
use std::io::Write;
use std::path::Path;

/// The file's name in the run folder.
pub const FILE: &str = "groups.jsonl";

/// Appends one group, synchronously and as one whole line: it is in the file before the turn goes
/// on, so a kill of awf a moment later cannot lose it.
pub fn append(run_dir: &Path, attempt: u32, pgid: i32, agent: &str, op_id: &str) {
    let mut line =
        json!({ "attempt": attempt, "pgid": pgid, "agent": agent, "op_id": op_id, "at": super::now_iso() }).to_string();
    line.push('\n');
    let written = super::private::append(&run_dir.join(FILE)).and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        tracing::error!("cannot record process group {pgid} in {}: {e}", run_dir.join(FILE).display());
    }
}

/// One line of `groups.jsonl`, as far as a reader needs it.
#[derive(serde::Deserialize)]
struct Group {
    #[serde(default)]
    pgid: Option<i64>,
}

/// Every process group on record, oldest first (a torn last line is skipped).
pub fn read(run_dir: &Path) -> Vec<i32> {
    let lines: Vec<serde_json::Value> = super::read_jsonl(&run_dir.join(FILE)).unwrap_or_else(|e| {
        tracing::error!("cannot read {FILE}: {e}");
        Vec::new()
    });
    let pgid = |l: &serde_json::Value| serde_json::from_value::<Group>(l.clone()).ok().and_then(|g| g.pgid);
    lines.iter().filter_map(pgid).filter_map(|p| i32::try_from(p).ok()).filter(|p| *p > 1).collect()
}
