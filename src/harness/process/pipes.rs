//! A turn process's pipes: what of stdin's text the pipe did not take when the process started,
//! written in the background (a program that never reads it must not block the turn); stdout and
//! stderr copied into their captures (stdout also line by line, for a harness that reads its
//! events there), noting when output last came.

use super::DRAIN;
use crate::harness::spawn::{Child, StdinLeft};
use crate::record::agent_files::{Capture, Scrub};
use futures_util::future::{Either, OptionFuture};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::task::JoinHandle;

/// A task aborted when its handle is dropped (with the turn, however it ends).
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The pipes of one process, taken from its `Child`.
pub(super) struct Pipes {
    /// stdout's lines, when it is read line by line; `None` once it closed.
    pub(super) lines: Option<UnboundedReceiver<String>>,
    /// When output last arrived on stdout or stderr.
    pub(super) activity: Arc<Mutex<Instant>>,
    /// Reads stdout and stderr to their ends.
    readers: Option<JoinHandle<()>>,
    /// Writes what of stdin's text the pipe could not take when the process started.
    writer: Option<AbortOnDrop>,
    /// Stdin held open, all its text written.
    held: Option<tokio::net::unix::pipe::Sender>,
    stderr: Arc<Mutex<Capture>>,
}

impl Pipes {
    /// Takes the child's pipes: its captures go under `agent_dir` as `<capture>.stdout|.stderr`.
    pub(super) fn open(child: &mut Child, agent_dir: &Path, capture: &str, scrub: Scrub, by_line: bool) -> Pipes {
        let activity = Arc::new(Mutex::new(Instant::now()));
        let stdout = Arc::new(Mutex::new(Capture::open(agent_dir, capture, "stdout", scrub.clone())));
        let stderr = Arc::new(Mutex::new(Capture::open(agent_dir, capture, "stderr", scrub)));
        // One task reads both: each task a script thread starts wakes a runtime worker.
        let mut lines = None;
        let out = child.stdout.take().map(|out| {
            if by_line {
                let (tx, rx) = unbounded_channel();
                lines = Some(rx);
                Either::Left(read_lines(out, stdout, activity.clone(), tx))
            } else {
                Either::Right(pump(out, stdout, activity.clone()))
            }
        });
        let err = child.stderr.take().map(|err| pump(err, stderr.clone(), activity.clone()));
        let readers = (out.is_some() || err.is_some()).then(|| {
            tokio::spawn(async move {
                tokio::join!(OptionFuture::from(out), OptionFuture::from(err));
            })
        });
        let (writer, held) = match child.stdin.take() {
            Some(StdinLeft { pipe, rest, keep_open: true }) if rest.is_empty() => (None, Some(pipe)),
            Some(StdinLeft { mut pipe, rest, keep_open }) => {
                let writer = AbortOnDrop(tokio::spawn(async move {
                    let _ = pipe.write_all(&rest).await;
                    let _ = pipe.flush().await;
                    if keep_open {
                        std::future::pending::<()>().await;
                    }
                }));
                (Some(writer), None)
            }
            None => (None, None),
        };
        Pipes { lines, activity, readers, writer, held, stderr }
    }

    /// Closes stdin and lets the output still in the pipes arrive (`DRAIN` at most); the tail of
    /// stderr.
    pub(super) async fn close(self) -> String {
        let Pipes { lines, readers, writer, held, stderr, .. } = self;
        drop((writer, held, lines));
        if let Some(r) = readers {
            let _ = tokio::time::timeout(DRAIN, r).await;
        }
        let mut stderr = stderr.lock().unwrap_or_else(|p| p.into_inner());
        stderr.finish();
        stderr.tail()
    }
}

fn note(capture: &Mutex<Capture>, activity: &Mutex<Instant>, bytes: &[u8]) {
    capture.lock().unwrap_or_else(|p| p.into_inner()).push(bytes);
    *activity.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
}

/// Copies a child's stream into a bounded capture, noting when output last arrived.
async fn pump(mut from: impl AsyncRead + Unpin, to: Arc<Mutex<Capture>>, activity: Arc<Mutex<Instant>>) {
    let mut buf = vec![0u8; 16 * 1024];
    while let Ok(n) = from.read(&mut buf).await {
        if n == 0 {
            break;
        }
        note(&to, &activity, &buf[..n]);
    }
    to.lock().unwrap_or_else(|p| p.into_inner()).finish();
}

/// As `pump`, a line at a time, each line also sent on `lines`.
async fn read_lines(
    from: impl AsyncRead + Unpin,
    to: Arc<Mutex<Capture>>,
    activity: Arc<Mutex<Instant>>,
    lines: UnboundedSender<String>,
) {
    let mut reader = tokio::io::BufReader::new(from);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                note(&to, &activity, &buf);
                if lines.send(String::from_utf8_lossy(&buf).into_owned()).is_err() {
                    break;
                }
            }
        }
    }
    to.lock().unwrap_or_else(|p| p.into_inner()).finish();
}
