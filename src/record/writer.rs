//! The writer thread behind `Recorder`: appends go into per-file buffers behind one mutex, and the
//! thread writes them in batches (group commit). An append wakes the thread only when it finds it
//! idle; the thread then gathers lines for a short window, so a busy run makes one write per file
//! per window and no wake per line, while a quiet one still writes each line within the window.
//! A flush, a durable line or close cuts the window short. A durable line whose appender finds no
//! batch being written is written by the appender itself, with everything queued before it
//! (write-through): an answer's journal line is then on file without waiting for the writer
//! thread to be scheduled. Whoever writes holds the files, so batches go out in order.

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
    /// The files, held by whoever writes a batch (the writer thread, or a durable line's appender
    /// writing through): taken before `state`, so that batches are written in the order taken.
    /// `None` until the writer starts and once it has stopped.
    files: Mutex<Option<Files>>,
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
        Queue { state: Mutex::new(state), work: Condvar::new(), progress: Condvar::new(), files: Mutex::new(None) }
    }

    /// Times an append or a flush woke the writer: at most one per window while lines keep coming.
    pub fn wakes(&self) -> u64 {
        self.lock().wakes
    }

    /// The files, for writing a batch; taken before `lock` whenever both are held.
    fn files(&self) -> MutexGuard<'_, Option<Files>> {
        // Holds only the open files: a panic while writing leaves them usable.
        self.files.lock().unwrap_or_else(|p| p.into_inner())
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
        // Write-through when nobody is writing a batch: never waits behind the writer's write or sync.
        let Ok(mut files) = self.files.try_lock() else { return self.queue_acked(stream, json, ack) };
        let Some(out) = files.as_mut() else {
            drop(files);
            return self.queue_acked(stream, json, ack);
        };
        let mut st = self.lock();
        if st.closing {
            return;
        }
        st.push(stream, json);
        let mut batch = std::mem::take(&mut st.pending);
        let upto = st.appended;
        let acks = std::mem::take(&mut st.acks);
        st.queued = 0;
        drop(st);
        out.write(&mut batch);
        let mut st = self.lock();
        st.written = st.written.max(upto);
        // The buffers go back where nothing was queued meanwhile, keeping their capacity.
        for (mine, pending) in batch.iter_mut().zip(st.pending.iter_mut()) {
            if pending.is_empty() {
                std::mem::swap(mine, pending);
            }
        }
        let waiting = st.flushers > 0;
        drop(st);
        drop(files);
        if waiting {
            self.progress.notify_all();
        }
        let _ = ack.send(());
        for ack in acks {
            let _ = ack.send(());
        }
    }

    /// Queues a durable line for the writer thread, which is woken to write it at once.
    fn queue_acked(&self, stream: Stream, json: &[u8], ack: tokio::sync::oneshot::Sender<()>) {
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
pub fn run(files: Files, queue: &Queue) {
    let _stopped = Stopped(queue);
    *queue.files() = Some(files);
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
        // The files first, then the queue again: a durable line written through meanwhile took
        // what was queued before it, and what is left goes out after it.
        drop(st);
        let mut files = queue.files();
        let mut st = queue.lock();
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

        if let Some(out) = files.as_mut() {
            out.write(&mut batch);
            if sync {
                out.sync();
            }
        }
        if closing {
            // The files close here, once everything is written and synced.
            *files = None;
        }
        let mut st = queue.lock();
        st.written = st.written.max(upto);
        if sync {
            st.synced = upto;
        }
        let waiting = st.flushers > 0;
        drop(st);
        drop(files);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn read(dir: &Path, name: &str) -> String {
        std::fs::read_to_string(dir.join(name)).unwrap_or_default()
    }

    /// A queue whose files are open but whose writer thread never runs: only a write-through writes.
    fn idle_queue(dir: &Path) -> Queue {
        let queue = Queue::new();
        *queue.files() = Some(Files::open(dir).expect("files"));
        queue
    }

    #[test]
    fn a_durable_line_writes_itself_and_what_was_queued_before_it_when_nobody_is_writing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let queue = idle_queue(dir.path());
        queue.append(Stream::Events, br#"{"i":1}"#);
        queue.append(Stream::Journal, br#"{"op":"a"}"#);
        let (earlier, mut earlier_done) = tokio::sync::oneshot::channel();
        queue.queue_acked(Stream::Journal, br#"{"op":"b"}"#, earlier);
        let (ack, mut done) = tokio::sync::oneshot::channel();
        queue.append_acked(Stream::Journal, br#"{"op":"c"}"#, ack);
        assert_eq!(done.try_recv(), Ok(()), "acknowledged before append_acked returns, with no writer thread");
        assert_eq!(earlier_done.try_recv(), Ok(()), "a durable line queued before it is acknowledged too");
        assert_eq!(read(dir.path(), "journal.jsonl"), "{\"op\":\"a\"}\n{\"op\":\"b\"}\n{\"op\":\"c\"}\n", "in order");
        assert_eq!(read(dir.path(), "events.jsonl"), "{\"i\":1}\n");
        let st = queue.lock();
        assert_eq!((st.written, st.queued), (4, 0));
        assert!(st.pending.iter().all(Vec::is_empty));
    }

    #[test]
    fn a_durable_line_never_waits_behind_a_batch_being_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let queue = std::sync::Arc::new(idle_queue(dir.path()));
        let writing = queue.files(); // as the writer holds them while it writes or syncs
        let (ack, mut done) = tokio::sync::oneshot::channel();
        let q = queue.clone();
        let appender = std::thread::spawn(move || q.append_acked(Stream::Journal, br#"{"op":"a"}"#, ack));
        appender.join().expect("append_acked returned while the files were held");
        drop(writing);
        assert!(done.try_recv().is_err(), "queued for the writer, not written through");
        assert_eq!(queue.lock().pending[Stream::Journal as usize], b"{\"op\":\"a\"}\n");
        assert!(read(dir.path(), "journal.jsonl").is_empty());
    }

    #[test]
    fn after_close_a_durable_line_is_dropped_not_written_through() {
        let dir = tempfile::tempdir().expect("tempdir");
        let queue = idle_queue(dir.path());
        queue.close();
        let (ack, done) = tokio::sync::oneshot::channel();
        queue.append_acked(Stream::Journal, br#"{"op":"a"}"#, ack);
        assert!(done.blocking_recv().is_err());
        assert!(read(dir.path(), "journal.jsonl").is_empty());
    }
}
