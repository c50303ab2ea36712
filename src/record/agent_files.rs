//! An agent's part of the run folder: `agents/<slug>/`, each operation's liveness log
//! (`ops/<op-id>.jsonl`) and its captured output (`ops/<op-id>.stdout`, `.stderr`), bounded.

use serde_json::{json, Value};
use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Output kept per stream and operation; the rest is counted, not kept.
pub const CAPTURE_LIMIT: u64 = 1 << 20;
/// Bytes of stderr kept in memory for failure reasons.
const TAIL: usize = 2048;

/// The folder name for an agent key: letters, digits, `.`, `_`, `-`; anything else becomes `-`.
pub fn slug(key: &str) -> String {
    let s: String =
        key.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '-' }).collect();
    let s = s.trim_start_matches('.').to_string();
    if s.is_empty() {
        "agent".into()
    } else {
        s
    }
}

/// `agents/<slug>` under a run folder.
pub fn agent_dir(run_dir: &Path, slug: &str) -> PathBuf {
    run_dir.join("agents").join(slug)
}

/// Appends liveness events for one operation, one whole line per write.
pub struct OpLog {
    file: Option<File>,
}

impl OpLog {
    pub fn open(agent_dir: &Path, op_id: &str) -> OpLog {
        let dir = agent_dir.join("ops");
        let file = super::private::create_dir(&dir)
            .and_then(|_| super::private::append(&dir.join(format!("{}.jsonl", slug(op_id)))))
            .map_err(|e| tracing::error!("cannot open the op log for {op_id}: {e}"))
            .ok();
        OpLog { file }
    }

    pub fn event(&mut self, ty: &str, data: Value) {
        if let Some(f) = &mut self.file {
            let mut line = json!({ "type": ty, "at": super::now_iso(), "data": data }).to_string();
            line.push('\n');
            let _ = f.write_all(line.as_bytes());
        }
    }
}

/// One captured output stream: the first `CAPTURE_LIMIT` bytes on disk, a tail in memory.
pub struct Capture {
    path: PathBuf,
    file: Option<File>,
    written: u64,
    pub total: u64,
    tail: VecDeque<u8>,
}

impl Capture {
    /// A capture for `ops/<op-id>.<stream>`; the file is created with the first output, so that a
    /// quiet program costs no file.
    pub fn open(agent_dir: &Path, op_id: &str, stream: &str) -> Capture {
        let path = agent_dir.join("ops").join(format!("{}.{stream}", slug(op_id)));
        Capture { path, file: None, written: 0, total: 0, tail: VecDeque::new() }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        if self.file.is_none() && self.written == 0 && !bytes.is_empty() {
            self.file = self
                .path
                .parent()
                .map(super::private::create_dir)
                .unwrap_or(Ok(()))
                .and_then(|_| super::private::append(&self.path))
                .ok();
        }
        self.total += bytes.len() as u64;
        let room = CAPTURE_LIMIT.saturating_sub(self.written) as usize;
        if room > 0 {
            if let Some(f) = &mut self.file {
                let n = room.min(bytes.len());
                if f.write_all(&bytes[..n]).is_ok() {
                    self.written += n as u64;
                }
            }
        }
        self.tail.extend(bytes);
        while self.tail.len() > TAIL {
            self.tail.pop_front();
        }
    }

    /// The last bytes written, as text.
    pub fn tail(&self) -> String {
        let (a, b) = self.tail.as_slices();
        let mut v = a.to_vec();
        v.extend_from_slice(b);
        String::from_utf8_lossy(&v).trim().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_plain_file_names() {
        assert_eq!(slug("reviewer-1"), "reviewer-1");
        assert_eq!(slug("a/b c#1"), "a-b-c-1");
        assert_eq!(slug("../x"), "-x");
        assert_eq!(slug(""), "agent");
    }

    #[test]
    fn capture_is_bounded_and_keeps_a_tail() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut c = Capture::open(dir.path(), "a#1", "stderr");
        let chunk = vec![b'x'; 64 * 1024];
        for _ in 0..20 {
            c.push(&chunk);
        }
        c.push(b"the end");
        let on_disk = std::fs::metadata(dir.path().join("ops/a-1.stderr")).expect("file").len();
        assert_eq!(on_disk, CAPTURE_LIMIT);
        assert!(c.tail().ends_with("the end"));
        assert_eq!(c.total, 20 * 64 * 1024 + 7);
    }
}
