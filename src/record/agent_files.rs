//! An agent's part of the run folder: `agents/<slug>/`, each operation's liveness log
//! (`ops/<op-id>.jsonl`) and its captured output (`ops/<op-id>.stdout`, `.stderr`), bounded and
//! with the run's secrets scrubbed line by line before anything reaches the disk.

use serde_json::{json, Value};
use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Output kept per stream and operation; the rest is counted, not kept.
pub const CAPTURE_LIMIT: u64 = 1 << 20;
/// Bytes of stderr kept in memory for failure reasons.
const TAIL: usize = 2048;
/// What a captured line goes through before it is written: the run's secret scrubber (passed
/// down: this layer does not name it).
pub type Scrub = Arc<dyn Fn(&str) -> String + Send + Sync>;

/// A line longer than this is scrubbed and written in pieces of this size: a secret that
/// straddles two pieces of such a line is the one that can reach the disk unscrubbed.
const LONG_LINE: usize = 64 * 1024;

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

/// One captured output stream: the first `CAPTURE_LIMIT` bytes on disk (secrets scrubbed), a
/// tail in memory (as it came: whoever shows it scrubs it).
pub struct Capture {
    path: PathBuf,
    file: Option<File>,
    written: u64,
    pub total: u64,
    tail: VecDeque<u8>,
    scrub: Scrub,
    /// The part of a line not yet ended: it is scrubbed whole, once its end arrives.
    pending: Vec<u8>,
}

impl Capture {
    /// A capture for `ops/<op-id>.<stream>`; the file is created with the first output, so that a
    /// quiet program costs no file.
    pub fn open(agent_dir: &Path, op_id: &str, stream: &str, scrub: Scrub) -> Capture {
        let path = agent_dir.join("ops").join(format!("{}.{stream}", slug(op_id)));
        Capture { path, file: None, written: 0, total: 0, tail: VecDeque::new(), scrub, pending: Vec::new() }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        self.tail.extend(bytes);
        while self.tail.len() > TAIL {
            self.tail.pop_front();
        }
        self.pending.extend_from_slice(bytes);
        let mut from = 0;
        while let Some(at) = self.pending[from..].iter().position(|b| *b == b'\n') {
            let end = from + at + 1;
            let line = self.scrubbed(from, end);
            self.write(&line);
            from = end;
        }
        self.pending.drain(..from);
        if self.pending.len() >= LONG_LINE {
            self.finish();
        }
    }

    /// Writes what is left of an unended line (at the end of the stream).
    pub fn finish(&mut self) {
        if !self.pending.is_empty() {
            let rest = self.scrubbed(0, self.pending.len());
            self.write(&rest);
            self.pending.clear();
        }
    }

    fn scrubbed(&self, from: usize, to: usize) -> Vec<u8> {
        let text = String::from_utf8_lossy(&self.pending[from..to]);
        (self.scrub)(&text).into_bytes()
    }

    fn write(&mut self, bytes: &[u8]) {
        if self.file.is_none() && self.written == 0 && !bytes.is_empty() {
            self.file = self
                .path
                .parent()
                .map(super::private::create_dir)
                .unwrap_or(Ok(()))
                .and_then(|_| super::private::append(&self.path))
                .ok();
        }
        let room = CAPTURE_LIMIT.saturating_sub(self.written) as usize;
        if room > 0 {
            if let Some(f) = &mut self.file {
                let n = room.min(bytes.len());
                if f.write_all(&bytes[..n]).is_ok() {
                    self.written += n as u64;
                }
            }
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

impl Drop for Capture {
    fn drop(&mut self) {
        self.finish();
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
        let mut c = Capture::open(dir.path(), "a#1", "stderr", Arc::new(str::to_string));
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

    #[test]
    fn secrets_are_scrubbed_even_when_split_across_reads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let scrub: Scrub = Arc::new(|t: &str| t.replace("sk-live-0123456789", "[redacted]"));
        let mut c = Capture::open(dir.path(), "op-1", "stdout", scrub);
        c.push(b"{\"env\": \"KEY=sk-live-01");
        c.push(b"23456789\"}\nsk-live-\nno newline sk-live-0123456789");
        drop(c);
        let text = std::fs::read_to_string(dir.path().join("ops/op-1.stdout")).expect("file");
        assert_eq!(text, "{\"env\": \"KEY=[redacted]\"}\nsk-live-\nno newline [redacted]");
    }
}
