//! The writer thread behind `Recorder`: appends go into per-file buffers behind one mutex, and the
//! thread writes them in batches (group commit). An append wakes the thread only when it finds it
//! idle; the thread then gathers lines for a short window, so a busy run makes one write per file
//! per window and no wake per line, while a quiet one still writes each line within the window.
//! A flush, a durable line or close cuts the window short.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The append-only files of a run folder; the value indexes `STREAMS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Events = 0,
    Turns = 1,
    Stages = 2,
    Journal = 3,
}

const STREAMS: [(Stream, &str); 4] = [
    (Stream::Events, "events.jsonl"),
    (Stream::Turns, "turns.jsonl"),
    (Stream::Stages, "stages.jsonl"),
    (Stream::Journal, "journal.jsonl"),
];

/// How long the writer gathers lines after the first one before writing them: a busy run makes
/// one write per file per window instead of one per line; a quiet one waits at most this long.
const WINDOW: Duration = Duration::from_millis(2);

/// Queued bytes past which the writer stops gathering and writes at once.
const BATCH_BYTES: usize = 256 * 1024;

/// What the writer thread is doing, so that an append knows whether it must wake it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Writer {
    /// Waiting for anything at all: the first line wakes it.
    Idle,
    /// Waiting out the window: only a flush, a durable line, close or a full batch wakes it.
    Gathering,
    /// Writing, stopped, or already woken: nobody needs to wake it.
    Busy,
}

impl State {
    fn push(&mut self, stream: Stream, json: &[u8]) {
        let buf = &mut self.pending[stream as usize];
        buf.extend_from_slice(json);
        buf.push(b'\n');
        self.queued += json.len() + 1;
        self.appended += 1;
    }

    /// Asks the writer to write without waiting out its window; true when it waits and must be woken.
    fn hurry(&mut self) -> bool {
        self.urgent = true;
        let wake = self.writer != Writer::Busy;
        self.woken(wake);
        wake
    }

    /// Notes that the writer is being woken: until it runs, later appends need not wake it again.
    fn woken(&mut self, wake: bool) {
        if wake {
            self.writer = Writer::Busy;
            self.wakes += 1;
        }
    }
}

struct State {
    /// Whole lines per stream, not written yet.
    pending: [Vec<u8>; 4],
    queued: usize,
    /// Lines appended so far, and of those, how many are written and how many synced.
    appended: u64,
    written: u64,
    synced: u64,
    /// The line count a `flush(true)` waits to see synced.
    sync_wanted: u64,
    /// A caller waits: write without waiting out the window.
    urgent: bool,
    /// Answered once the lines queued with them are written.
    acks: Vec<tokio::sync::oneshot::Sender<()>>,
    /// Flushes waiting for the writer's progress.
    flushers: usize,
    /// No more appends: the writer writes what is queued, syncs and stops.
    closing: bool,
    stopped: bool,
    writer: Writer,
    /// Times an append or a flush woke the writer.
    wakes: u64,
}

/// What appenders and the writer thread share.
pub struct Queue {
    state: Mutex<State>,
    /// The writer waits here for work.
    work: Condvar,
    /// Flushes wait here for the writer's progress.
    progress: Condvar,
}

impl Queue {
    pub fn new() -> Queue {
        let state = State {
            pending: Default::default(),
            queued: 0,
            appended: 0,
            written: 0,
            synced: 0,
            sync_wanted: 0,
            urgent: false,
            acks: Vec::new(),
            flushers: 0,
            closing: false,
            stopped: false,
            writer: Writer::Busy,
            wakes: 0,
        };
        Queue { state: Mutex::new(state), work: Condvar::new(), progress: Condvar::new() }
    }

    /// Times an append or a flush woke the writer: at most one per window while lines keep coming.
    pub fn wakes(&self) -> u64 {
        self.lock().wakes
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every critical section leaves the state whole (a push, a swap, counters): a poisoned
        // lock still holds consistent data.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues one line: `json` (a whole JSON value, no newline) and a newline. Dropped once the
    /// queue is closing.
    pub fn append(&self, stream: Stream, json: &[u8]) {
        let mut st = self.lock();
        if st.closing {
            return;
        }
        st.push(stream, json);
        let wake = match st.writer {
            Writer::Idle => true,
            Writer::Gathering => st.queued >= BATCH_BYTES,
            Writer::Busy => false,
        };
        st.woken(wake);
        drop(st);
        if wake {
            self.work.notify_one();
        }
    }

    /// Queues one line as `append` does; `ack` is answered once it is written, or dropped if it
    /// never is.
    pub fn append_acked(&self, stream: Stream, json: &[u8], ack: tokio::sync::oneshot::Sender<()>) {
        let mut st = self.lock();
        if st.closing {
            return;
        }
        st.push(stream, json);
        st.acks.push(ack);
        let wake = st.hurry();
        drop(st);
        if wake {
            self.work.notify_one();
        }
    }

    /// Waits until every line queued before the call is written; with `sync`, synced too.
    pub fn flush(&self, sync: bool) {
        let mut st = self.lock();
        let target = st.appended;
        let done = |st: &State| st.stopped || if sync { st.synced >= target } else { st.written >= target };
        if done(&st) {
            return;
        }
        if sync {
            st.sync_wanted = st.sync_wanted.max(target);
        }
        if st.hurry() {
            self.work.notify_one();
        }
        st.flushers += 1;
        while !done(&st) {
            st = self.progress.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        st.flushers -= 1;
    }

    /// Stops taking lines; the writer writes what is queued, syncs and stops.
    pub fn close(&self) {
        let mut st = self.lock();
        st.closing = true;
        let wake = st.hurry();
        drop(st);
        if wake {
            self.work.notify_one();
        }
    }
}

pub struct Files {
    files: Vec<File>,
}

impl Files {
    pub fn open(dir: &Path) -> io::Result<Files> {
        let mut files = Vec::new();
        for (_, name) in STREAMS {
            files.push(super::private::append(&dir.join(name))?);
        }
        Ok(Files { files })
    }

    fn write(&mut self, bufs: &mut [Vec<u8>; 4]) {
        for (i, buf) in bufs.iter_mut().enumerate() {
            if buf.is_empty() {
                continue;
            }
            // Only whole lines are ever in `buf`, so each write ends on a line boundary.
            if let Err(e) = self.files[i].write_all(buf) {
                tracing::error!("cannot write {}: {e}", STREAMS[i].1);
            }
            buf.clear();
            // A burst may have grown the buffer far past a batch: give that memory back.
            if buf.capacity() > 4 * BATCH_BYTES {
                buf.shrink_to(BATCH_BYTES);
            }
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

/// Marks the queue stopped when the writer leaves, even by a panic, so that no flush waits forever.
struct Stopped<'a>(&'a Queue);

impl Drop for Stopped<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.stopped = true;
        st.closing = true;
        st.writer = Writer::Busy;
        st.acks.clear();
        drop(st);
        self.0.progress.notify_all();
    }
}

/// Runs until the queue is closed, writing what is queued in batches.
pub fn run(mut files: Files, queue: &Queue) {
    let _stopped = Stopped(queue);
    let mut batch: [Vec<u8>; 4] = Default::default();
    loop {
        let mut st = queue.lock();
        while st.queued == 0 && !st.urgent && !st.closing {
            st.writer = Writer::Idle;
            st = queue.work.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        let window_ends = Instant::now() + WINDOW;
        while !st.urgent && !st.closing && st.queued < BATCH_BYTES {
            let left = window_ends.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            st.writer = Writer::Gathering;
            st = queue.work.wait_timeout(st, left).map(|(g, _)| g).unwrap_or_else(|p| p.into_inner().0);
        }
        st.writer = Writer::Busy;
        for (taken, spare) in st.pending.iter_mut().zip(batch.iter_mut()) {
            std::mem::swap(taken, spare);
        }
        let upto = st.appended;
        let sync = st.sync_wanted > st.synced || st.closing;
        let closing = st.closing;
        let acks = std::mem::take(&mut st.acks);
        st.queued = 0;
        st.urgent = false;
        drop(st);

        files.write(&mut batch);
        if sync {
            files.sync();
        }
        let mut st = queue.lock();
        st.written = upto;
        if sync {
            st.synced = upto;
        }
        let waiting = st.flushers > 0;
        drop(st);
        if waiting {
            queue.progress.notify_all();
        }
        for ack in acks {
            let _ = ack.send(());
        }
        if closing {
            return;
        }
    }
}
