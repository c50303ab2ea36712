//! The run folder: the only module that writes it. Layout, the versioned JSONL envelope,
//! whole-line appends in order (by a writer thread, or by a durable line's appender), atomic JSON
//! documents, and readers that tolerate a torn line: its documents and lines read back as types
//! (`docs`, `lines`, `events`, `status`).

pub mod accepted;
pub mod agent_files;
pub mod docs;
pub mod events;
pub mod groups;
pub mod lines;
pub mod lock;
pub mod private;
pub mod scratch;
pub mod status;
pub mod view;
mod writer;
#[cfg(test)]
mod writer_tests;

use serde::Serialize;
use serde_json::Value;
use std::io::{self, BufRead};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

pub use writer::Stream;

/// The version written into every JSONL envelope and JSON document.
pub const FORMAT_VERSION: u32 = 1;

/// Appends records to one run folder. Lines are queued to a writer thread that writes each one
/// whole (several lines may share one write; a durable line may write the queue itself, see
/// `writer`); `flush` waits until they are on disk. Dropping it closes it.
pub struct Recorder {
    dir: PathBuf,
    attempt: u32,
    queue: Arc<writer::Queue>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

#[derive(Serialize)]
struct Envelope<'a, T: Serialize + ?Sized> {
    v: u32,
    #[serde(rename = "type")]
    ty: &'a str,
    at: String,
    attempt: u32,
    data: &'a T,
}

/// An event a run records: its fields are the envelope's `data`, its name the `type`. The run core
/// defines every event type (`run::Event`).
pub trait RecordEvent: Serialize {
    fn name(&self) -> &'static str;
}

/// True when JSON writes `text` as it is between quotes: no quote, backslash or control character.
fn plain(text: &str) -> bool {
    text.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\')
}

/// Where run folders go: `given` (`--runs-dir`, a request's field), else awf.toml's `runs_dir`,
/// else `.awf/runs`; a relative one is under `cwd`. The one place that knows the default.
pub fn runs_dir(cwd: &Path, given: Option<&Path>, configured: Option<&Path>) -> PathBuf {
    let dir = given.or(configured).unwrap_or(Path::new(".awf/runs"));
    if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        cwd.join(dir)
    }
}

/// Now, as ISO-8601 UTC with milliseconds.
pub fn now_iso() -> String {
    // Records are stamped many times a millisecond in a busy run: each thread formats a
    // millisecond once.
    thread_local! {
        static LAST: std::cell::RefCell<(u128, String)> = const { std::cell::RefCell::new((0, String::new())) };
    }
    let now = SystemTime::now();
    let ms = now.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if last.0 != ms || last.1.is_empty() {
            *last = (ms, humantime::format_rfc3339_millis(now).to_string());
        }
        last.1.clone()
    })
}

/// Now, as unix milliseconds.
pub fn now_unix_ms() -> i64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// A new run id: UTC time to the millisecond, then a random suffix, so ids sort by time.
pub fn new_run_id() -> String {
    let stamp = humantime::format_rfc3339_millis(SystemTime::now()).to_string();
    let digits: String = stamp.chars().filter(|c| c.is_ascii_digit()).collect();
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!("{}-{}-{}", &digits[..8], &digits[8..], &suffix[..6])
}

impl Recorder {
    /// Creates `dir` (and its parents, 0700) and starts the writer.
    pub fn create(dir: &Path, attempt: u32) -> io::Result<Recorder> {
        private::create_dir(dir)?;
        let queue = Arc::new(writer::Queue::new());
        let files = writer::Files::open(dir)?;
        let shared = queue.clone();
        let thread =
            std::thread::Builder::new().name("awf-records".into()).spawn(move || writer::run(files, &shared))?;
        Ok(Recorder { dir: dir.to_path_buf(), attempt, queue, thread: Mutex::new(Some(thread)) })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends an event to `events.jsonl` in the `{"v","type","at","attempt","data"}` envelope.
    /// The envelope's own fields are written as text (its name and time never need escaping; a
    /// test holds the bytes to serde's), only `data` goes through serde: serde's escaping of the
    /// envelope was about 700 of an event's 3,700 instructions.
    pub fn event<E: RecordEvent + ?Sized>(&self, event: &E) {
        let (name, at) = (event.name(), now_iso());
        if !(plain(name) && plain(&at)) {
            let env = Envelope { v: FORMAT_VERSION, ty: name, at, attempt: self.attempt, data: event };
            return self.line(Stream::Events, &env);
        }
        self.serialised(Stream::Events, |buf| {
            let mut numbers = itoa::Buffer::new();
            buf.extend_from_slice(b"{\"v\":");
            buf.extend_from_slice(numbers.format(FORMAT_VERSION).as_bytes());
            buf.extend_from_slice(b",\"type\":\"");
            buf.extend_from_slice(name.as_bytes());
            buf.extend_from_slice(b"\",\"at\":\"");
            buf.extend_from_slice(at.as_bytes());
            buf.extend_from_slice(b"\",\"attempt\":");
            buf.extend_from_slice(numbers.format(self.attempt).as_bytes());
            buf.extend_from_slice(b",\"data\":");
            serde_json::to_writer(&mut *buf, event)?;
            buf.push(b'}');
            Ok(())
        });
    }

    /// Appends one JSON line to a stream.
    pub fn line<T: Serialize + ?Sized>(&self, stream: Stream, value: &T) {
        self.serialised(stream, |buf| serde_json::to_writer(buf, value));
    }

    /// Appends the line `write` puts in a buffer this thread keeps: a record costs no allocation
    /// of its own.
    fn serialised(&self, stream: Stream, write: impl FnOnce(&mut Vec<u8>) -> serde_json::Result<()>) {
        thread_local! {
            static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        BUF.with(|buf| {
            // Only reentrant serialisation could find it borrowed; it gets a buffer of its own.
            let mut own = Vec::new();
            let mut kept = buf.try_borrow_mut().ok();
            let buf = kept.as_deref_mut().unwrap_or(&mut own);
            buf.clear();
            match write(buf) {
                Ok(()) => self.queue.append(stream, buf),
                Err(e) => tracing::error!("cannot serialise a {stream:?} record: {e}"),
            }
            if buf.capacity() > 1 << 20 {
                buf.shrink_to(64 * 1024);
            }
        });
    }

    /// Appends one line already serialised as JSON; the receiver is answered once the line is
    /// written (write(2) done), or dropped when the writer has stopped.
    pub fn durable_line(&self, stream: Stream, line: &str) -> tokio::sync::oneshot::Receiver<()> {
        let (ack, done) = tokio::sync::oneshot::channel();
        self.queue.append_acked(stream, line.as_bytes(), ack);
        done
    }

    /// Waits until every line appended before the call is written; with `sync`, also until it is
    /// on stable storage. Returns at once when the writer has stopped.
    pub fn flush(&self, sync: bool) {
        self.queue.flush(sync);
    }

    /// Writes a whole JSON document atomically (temp file, then rename).
    pub fn write_document<T: Serialize + ?Sized>(&self, name: &str, value: &T) -> io::Result<()> {
        write_document(&self.dir.join(name), value)
    }

    /// Times the writer thread was woken by an append or a flush (see `writer`).
    pub fn writer_wakes(&self) -> u64 {
        self.queue.wakes()
    }

    /// Writes what is queued, syncs and stops the writer. Later appends are dropped.
    pub fn close(&self) {
        self.queue.close();
        if let Some(t) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = t.join();
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.close();
    }
}

/// Writes `value` as pretty JSON to `path` through a temporary file and a rename. The JSON is
/// streamed to the file rather than built whole in memory first (a 30,000-agent run's
/// `result.json` is megabytes).
pub fn write_document<T: Serialize + ?Sized>(path: &Path, value: &T) -> io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("json.tmp");
    let written = (|| {
        let mut out = io::BufWriter::with_capacity(64 * 1024, private::create(&tmp)?);
        serde_json::to_writer_pretty(&mut out, value).map_err(io::Error::other)?;
        out.write_all(b"\n")?;
        out.into_inner().map_err(|e| e.into_error())?.sync_data()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, path)
}

/// Cuts a torn last line (no newline at its end: a write cut short by a crash) from each JSONL file
/// of a run folder, so that the next attempt appends after whole lines. Returns each file healed
/// and the bytes cut.
pub fn heal(dir: &Path) -> io::Result<Vec<(String, u64)>> {
    let mut healed = Vec::new();
    for name in ["events.jsonl", "turns.jsonl", "stages.jsonl", "journal.jsonl"] {
        let path = dir.join(name);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        if bytes.is_empty() || bytes.ends_with(b"\n") {
            continue;
        }
        let keep = bytes.iter().rposition(|b| *b == b'\n').map(|i| i + 1).unwrap_or(0);
        std::fs::OpenOptions::new().write(true).open(&path)?.set_len(keep as u64)?;
        healed.push((name.to_string(), (bytes.len() - keep) as u64));
    }
    Ok(healed)
}

/// Reads a JSONL file, skipping a torn (unparseable) last line; a bad line elsewhere is an error.
pub fn read_jsonl(path: &Path) -> io::Result<Vec<Value>> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let lines: Vec<String> = io::BufReader::new(file).lines().collect::<Result<_, _>>()?;
    let last = lines.len().saturating_sub(1);
    let mut out = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(line) {
            Ok(v) => out.push(v),
            Err(_) if i == last => break,
            Err(e) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{}:{}: not a JSON record ({e}); awf only appends whole lines, so this line was edited or \
                         damaged: repair or delete it",
                        path.display(),
                        i + 1
                    ),
                ))
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Tick {
        i: usize,
    }

    impl RecordEvent for Tick {
        fn name(&self) -> &'static str {
            "tick"
        }
    }

    #[test]
    fn lines_arrive_whole_in_order_and_torn_tail_is_skipped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let rec = Recorder::create(dir.path(), 1).expect("recorder");
        for i in 0..1000 {
            rec.event(&Tick { i });
        }
        rec.flush(false);
        let path = dir.path().join("events.jsonl");
        let events = read_jsonl(&path).expect("read");
        assert_eq!(events.len(), 1000);
        assert_eq!(events[999]["data"]["i"], 999);
        assert_eq!(events[0]["v"], 1);
        assert_eq!(events[0]["attempt"], 1);
        rec.close();
        let mut text = std::fs::read_to_string(&path).expect("read");
        text.push_str("{\"v\":1,\"ty");
        std::fs::write(&path, text).expect("write");
        assert_eq!(read_jsonl(&path).expect("torn tail tolerated").len(), 1000);
    }

    struct Named(&'static str, Tick);

    impl Serialize for Named {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            self.1.serialize(s)
        }
    }

    impl RecordEvent for Named {
        fn name(&self) -> &'static str {
            self.0
        }
    }

    /// Each line of `events.jsonl` is the envelope serde writes, byte for byte, with its `at`.
    #[test]
    fn an_events_envelope_is_the_one_serde_writes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let rec = Recorder::create(dir.path(), 7).expect("recorder");
        let names = ["op-started", "odd \"name\"\\ with\ttab", "ünï"];
        for (i, name) in names.iter().enumerate() {
            rec.event(&Named(name, Tick { i }));
        }
        rec.close();
        let text = std::fs::read_to_string(dir.path().join("events.jsonl")).expect("read");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), names.len());
        for ((line, name), i) in lines.iter().zip(names).zip(0..) {
            let at: serde_json::Value = serde_json::from_str(line).expect("json");
            let at = at["at"].as_str().expect("an at").to_string();
            let env = Envelope { v: FORMAT_VERSION, ty: name, at, attempt: 7, data: &Tick { i } };
            assert_eq!(*line, serde_json::to_string(&env).expect("serde"), "{name}");
        }
        assert!(plain("op-settled") && plain("2026-12-03T11:37:08.521Z") && plain("ünï"));
        assert!(!plain("a\"b") && !plain("a\\b") && !plain("a\nb") && !plain("\u{7}"));
    }

    #[test]
    fn run_ids_sort_by_time() {
        let a = new_run_id();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = new_run_id();
        assert!(a < b, "{a} {b}");
        assert_eq!(a.len(), "20261129-154303123-abcdef".len());
    }
}
