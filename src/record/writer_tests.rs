//! Tests of the records writer through `Recorder`: whole lines in order under concurrency, flush,
//! durable lines, close and drop, and that appends do not wake the writer line by line.

use super::*;
use serde_json::json;
use std::time::{Duration, Instant};

#[derive(Serialize)]
struct Tick {
    i: usize,
}

impl RecordEvent for Tick {
    fn name(&self) -> &'static str {
        "tick"
    }
}

fn lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("a torn line {l:?}: {e}"))).collect()
}

/// Polls until `path` holds `n` lines or ten seconds pass.
fn wait_for_lines(path: &Path, n: usize) -> Vec<Value> {
    let start = Instant::now();
    loop {
        let got = lines(path);
        if got.len() >= n || start.elapsed() > Duration::from_secs(10) {
            return got;
        }
        std::thread::yield_now();
    }
}

#[test]
fn many_threads_write_whole_lines_in_each_threads_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = Arc::new(Recorder::create(dir.path(), 1).expect("recorder"));
    let (threads, each) = (8, 1_000);
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let rec = rec.clone();
            std::thread::spawn(move || {
                for i in 0..each {
                    // Lines of varied length, some past a page, to catch a write cut mid-line.
                    let pad = "x".repeat((i * 37 + t * 11) % 5_000);
                    rec.line(Stream::Turns, &json!({ "t": t, "i": i, "pad": pad }));
                    if i % 250 == 0 {
                        rec.flush(i % 500 == 0);
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("appender");
    }
    rec.flush(false);
    let got = lines(&dir.path().join("turns.jsonl"));
    assert_eq!(got.len(), threads * each);
    let mut next = vec![0u64; threads];
    for v in got {
        let (t, i) = (v["t"].as_u64().expect("t") as usize, v["i"].as_u64().expect("i"));
        assert_eq!(i, next[t], "thread {t}'s lines out of order");
        next[t] += 1;
    }
}

#[test]
fn appends_wake_the_writer_once_per_window_not_once_per_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = Recorder::create(dir.path(), 1).expect("recorder");
    let n = 20_000;
    for i in 0..n {
        rec.event(&Tick { i });
    }
    let wakes = rec.writer_wakes();
    rec.flush(false);
    assert_eq!(lines(&dir.path().join("events.jsonl")).len(), n);
    assert!(wakes < (n / 20) as u64, "{wakes} wakes for {n} lines");
}

#[test]
fn a_line_is_written_without_a_flush() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = Recorder::create(dir.path(), 1).expect("recorder");
    rec.line(Stream::Stages, &json!({ "name": "a" }));
    assert_eq!(wait_for_lines(&dir.path().join("stages.jsonl"), 1).len(), 1, "the idle writer woke");
    rec.line(Stream::Stages, &json!({ "name": "b" }));
    assert_eq!(wait_for_lines(&dir.path().join("stages.jsonl"), 2).len(), 2, "and woke again");
}

#[test]
fn a_durable_line_is_on_file_when_acknowledged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = Recorder::create(dir.path(), 1).expect("recorder");
    for i in 0..100 {
        rec.event(&Tick { i });
    }
    let done = rec.durable_line(Stream::Journal, r#"{"op_id":"o1"}"#);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(done.blocking_recv().is_ok()));
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(true), "acknowledged");
    assert_eq!(lines(&dir.path().join("journal.jsonl")), vec![json!({ "op_id": "o1" })]);
    assert_eq!(lines(&dir.path().join("events.jsonl")).len(), 100, "lines queued before it are written too");
}

#[test]
fn close_writes_what_is_queued_and_drops_later_lines() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = Recorder::create(dir.path(), 1).expect("recorder");
    for i in 0..1_000 {
        rec.event(&Tick { i });
    }
    rec.close();
    assert_eq!(lines(&dir.path().join("events.jsonl")).len(), 1_000);
    rec.event(&Tick { i: 0 });
    rec.flush(true); // returns: the writer has stopped
    let late = rec.durable_line(Stream::Journal, "{}");
    assert!(late.blocking_recv().is_err(), "a durable line after close is never acknowledged");
    assert_eq!(lines(&dir.path().join("events.jsonl")).len(), 1_000);
    assert!(lines(&dir.path().join("journal.jsonl")).is_empty());
}

#[test]
fn dropping_the_recorder_writes_what_is_queued() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = Recorder::create(dir.path(), 1).expect("recorder");
    for i in 0..1_000 {
        rec.line(Stream::Turns, &json!({ "i": i }));
    }
    drop(rec);
    assert_eq!(lines(&dir.path().join("turns.jsonl")).len(), 1_000);
}
