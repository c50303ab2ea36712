//! The writer thread behind `Recorder`: drains queued lines in batches (group commit) so that a
//! busy run makes few writes, while a quiet one still writes each line as soon as it is queued.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The append-only files of a run folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Events,
    Turns,
    Stages,
    Journal,
}

const STREAMS: [(Stream, &str); 4] = [
    (Stream::Events, "events.jsonl"),
    (Stream::Turns, "turns.jsonl"),
    (Stream::Stages, "stages.jsonl"),
    (Stream::Journal, "journal.jsonl"),
];

pub enum Msg {
    Line(Stream, Vec<u8>),
    Flush {
        sync: bool,
        ack: mpsc::Sender<()>,
    },
    /// Acknowledged once every line queued before it is written (write(2) done, not synced).
    Written(tokio::sync::oneshot::Sender<()>),
    /// Write what is queued and stop.
    Close,
}

pub struct Files {
    files: Vec<File>,
    pending: Vec<Vec<u8>>,
}

impl Files {
    pub fn open(dir: &Path) -> io::Result<Files> {
        let mut files = Vec::new();
        for (_, name) in STREAMS {
            files.push(super::private::append(&dir.join(name))?);
        }
        Ok(Files { files, pending: vec![Vec::new(); STREAMS.len()] })
    }

    fn index(stream: Stream) -> usize {
        STREAMS.iter().position(|(s, _)| *s == stream).unwrap_or(0)
    }

    fn write_pending(&mut self) {
        for (i, buf) in self.pending.iter_mut().enumerate() {
            if buf.is_empty() {
                continue;
            }
            // Only whole lines are ever in `buf`, so each write ends on a line boundary.
            if let Err(e) = self.files[i].write_all(buf) {
                tracing::error!("cannot write {}: {e}", STREAMS[i].1);
            }
            buf.clear();
        }
    }

    fn sync(&mut self) {
        for (i, f) in self.files.iter().enumerate() {
            if let Err(e) = f.sync_data() {
                tracing::error!("cannot sync {}: {e}", STREAMS[i].1);
            }
        }
    }
}

/// How long the writer gathers lines after the first one before writing them: a busy run makes
/// one write per file per window instead of one per line; a quiet one waits at most this long.
const WINDOW: Duration = Duration::from_millis(2);

/// Runs until closed (or every sender is gone), writing what is queued in batches.
pub fn run(mut files: Files, rx: mpsc::Receiver<Msg>) {
    const BATCH_BYTES: usize = 256 * 1024;
    let mut open = true;
    while open {
        let Ok(first) = rx.recv() else { break };
        let window_ends = Instant::now() + WINDOW;
        let mut acks = Vec::new();
        let mut written = Vec::new();
        let mut queued = 0usize;
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            match msg {
                Msg::Line(stream, bytes) => {
                    queued += bytes.len();
                    files.pending[Files::index(stream)].extend_from_slice(&bytes);
                }
                Msg::Flush { sync, ack } => acks.push((sync, ack)),
                Msg::Written(ack) => written.push(ack),
                Msg::Close => open = false,
            }
            if queued >= BATCH_BYTES || !acks.is_empty() || !written.is_empty() || !open {
                break;
            }
            let left = window_ends.saturating_duration_since(Instant::now());
            next = rx.recv_timeout(left).ok();
        }
        files.write_pending();
        if acks.iter().any(|(sync, _)| *sync) {
            files.sync();
        }
        for (_, ack) in acks {
            let _ = ack.send(());
        }
        for ack in written {
            let _ = ack.send(());
        }
    }
    files.write_pending();
    files.sync();
}
