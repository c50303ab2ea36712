//! A CLI's session file, read as it grows: each whole line folded into what was seen (`Seen`) by
//! the CLI's own reader. The file is found again on every read (it appears with the first turn,
//! and a CLI may start another); a file that shrank or changed is read from its start.

use super::{Interactive, Seen};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// The most read at once: a session file grows by a few KB a turn.
const CHUNK: u64 = 4 << 20;

/// Where reading a session file has come to.
#[derive(Debug, Default)]
pub struct Transcript {
    path: Option<PathBuf>,
    offset: u64,
    partial: Vec<u8>,
}

impl Transcript {
    /// Reads what the session file gained since the last read into `seen`; true when it grew.
    pub fn read(&mut self, cli: &dyn Interactive, home: &Path, seen: &mut Seen) -> bool {
        let Some(path) = cli.transcript(home) else { return false };
        if self.path.as_ref() != Some(&path) {
            *self = Transcript { path: Some(path.clone()), ..Default::default() };
        }
        let Ok(mut file) = std::fs::File::open(&path) else { return false };
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        if len < self.offset {
            self.offset = 0;
            self.partial.clear();
        }
        if len == self.offset || file.seek(SeekFrom::Start(self.offset)).is_err() {
            return false;
        }
        let mut buf = Vec::new();
        let Ok(n) = file.take(CHUNK).read_to_end(&mut buf) else { return false };
        self.offset += n as u64;
        self.partial.extend_from_slice(&buf);
        while let Some(end) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&line) {
                cli.line(&v, seen);
            }
        }
        n > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::cli::{CliConfig, CliEnv};
    use crate::harness::AgentInfo;
    use serde_json::Value;

    /// A reader of lines `{"start":true}` and `{"end":true}`.
    struct Lines(PathBuf);

    impl Interactive for Lines {
        fn settle(&self, _: &Path, _: &Path, _: &CliConfig, _: &CliEnv) -> Result<(), super::super::PaneError> {
            Ok(())
        }
        fn start(&self, _: &Path, _: &CliConfig, _: &AgentInfo) -> Vec<String> {
            Vec::new()
        }
        fn transcript(&self, _: &Path) -> Option<PathBuf> {
            self.0.exists().then(|| self.0.clone())
        }
        fn line(&self, v: &Value, seen: &mut Seen) {
            if v["start"] == true {
                seen.start();
            }
            if v["end"] == true {
                seen.end(None);
            }
        }
        fn left(&self, _: &Path) -> Option<String> {
            None
        }
    }

    #[test]
    fn lines_are_folded_once_and_only_whole() {
        use std::io::Write;
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("s.jsonl");
        let cli = Lines(file.clone());
        let (mut t, mut seen) = (Transcript::default(), Seen::default());
        assert!(!t.read(&cli, dir.path(), &mut seen), "no file yet");
        let mut f = std::fs::File::create(&file).expect("create");
        write!(f, "{{\"start\":true}}\n{{\"end\"").expect("write");
        assert!(t.read(&cli, dir.path(), &mut seen));
        assert!(seen.busy && seen.started && !seen.ended, "the torn line waits: {seen:?}");
        writeln!(f, ":true}}").expect("write");
        assert!(t.read(&cli, dir.path(), &mut seen));
        assert!(!seen.busy && seen.ended);
        assert!(!t.read(&cli, dir.path(), &mut seen), "nothing new");
        seen.delivered();
        assert!(!seen.started && !seen.ended);
    }
}
