//! Waiting for a run to end, bounded by the caller's `wait_s`, with a progress notification per
//! stage started or finished and per operation settled (read from `events.jsonl`) when the client
//! sent a progress token.

use super::runs::{self, RunDir, Seen};
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use serde_json::Value;
use std::io::{Read, Seek, SeekFrom};
use std::time::{Duration, Instant};

/// Where progress goes: the client and its token.
pub struct Progress {
    pub peer: Peer<RoleServer>,
    pub token: ProgressToken,
}

/// Polls the run folder until the run ends, parks `waiting` for the operator, or `wait_s` passes;
/// returns what it saw last. Ends early when `cancelled` (the client cancelled the call or went
/// away): the run itself goes on.
pub async fn until_end(
    run: &RunDir,
    wait_s: f64,
    progress: Option<Progress>,
    cancelled: &tokio_util::sync::CancellationToken,
) -> Seen {
    let until = Instant::now() + Duration::from_secs_f64(wait_s);
    let mut events = Events { offset: 0, partial: String::new(), count: 0 };
    loop {
        // Looked at before the events are read, so the events of an ended run are all reported.
        let seen = runs::look(run);
        if let Some(p) = &progress {
            for line in events.new_lines(run) {
                events.count += 1;
                let param = ProgressNotificationParam::new(p.token.clone(), events.count as f64).with_message(line);
                if p.peer.notify_progress(param).await.is_err() {
                    break;
                }
            }
        }
        // A run parked on a checkpoint waits for an answer, which the caller must give.
        if seen.ended() || seen.status == "waiting" || Instant::now() >= until || cancelled.is_cancelled() {
            return seen;
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = cancelled.cancelled() => {}
        }
    }
}

/// `events.jsonl` read from where the last read stopped; a torn last line waits for its end.
struct Events {
    offset: u64,
    partial: String,
    count: u64,
}

impl Events {
    fn new_lines(&mut self, run: &RunDir) -> Vec<String> {
        let Ok(mut file) = std::fs::File::open(run.dir.join("events.jsonl")) else { return Vec::new() };
        let mut text = String::new();
        if file.seek(SeekFrom::Start(self.offset)).is_err() || file.read_to_string(&mut text).is_err() {
            return Vec::new();
        }
        self.offset += text.len() as u64;
        self.partial.push_str(&text);
        let Some(end) = self.partial.rfind('\n') else { return Vec::new() };
        let complete: String = self.partial.drain(..=end).collect();
        complete.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).filter_map(|e| describe(&e)).collect()
    }
}

/// A progress line for the events worth one: stages and settled operations.
fn describe(event: &Value) -> Option<String> {
    let d = &event["data"];
    let s = |k: &str| d[k].as_str().unwrap_or("?").to_string();
    match event["type"].as_str()? {
        "stage-started" => Some(format!("stage {} started", s("name"))),
        "stage-finished" => Some(format!("stage {} {}", s("name"), s("status"))),
        "op-settled" => Some(format!("{} {} {}", s("agent"), s("op_id"), s("outcome"))),
        "run-finished" => Some(format!("run {}", s("status"))),
        _ => None,
    }
}
