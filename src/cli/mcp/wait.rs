//! Waiting for a run to end, bounded by the caller's `wait_s`, with a progress notification per
//! stage started or finished and per operation settled (read from `events.jsonl`) when the client
//! sent a progress token. Events are read from a cursor (a byte offset in `events.jsonl`, after a
//! whole line) and the cursor reached is returned, so a client waiting in chunks is not sent the
//! same progress twice.

use super::runs::{self, RunDir, Seen};
use crate::record::events::{EventLine, EventRecord};
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use std::io::{Read, Seek, SeekFrom};
use std::time::{Duration, Instant};

/// Where progress goes: the client and its token.
pub struct Progress {
    pub peer: Peer<RoleServer>,
    pub token: ProgressToken,
}

/// Checks a `since` cursor against the run's events: it must fall at the end of a whole line
/// (as a cursor `run_wait` returned does), not past the end or inside a line.
pub fn check_cursor(run: &RunDir, since: u64) -> Result<(), String> {
    if since == 0 {
        return Ok(());
    }
    let path = run.dir.join("events.jsonl");
    let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let mut before = [0u8; 1];
    let at_line_end = std::fs::File::open(&path)
        .and_then(|mut f| f.seek(SeekFrom::Start(since - 1)).and_then(|_| f.read_exact(&mut before)))
        .is_ok_and(|()| before[0] == b'\n');
    if since > len || !at_line_end {
        return Err(format!(
            "error: \"since\" {since} is not a cursor of run {}'s events ({len} bytes so far): pass the cursor a run_wait returned, or 0",
            run.id
        ));
    }
    Ok(())
}

/// Polls the run folder until the run ends, parks `waiting` for the operator, or `wait_s` passes;
/// returns what it saw last and the cursor after the last event read (events from `since` on are
/// reported). Ends early when `cancelled` (the client cancelled the call or went away): the run
/// itself goes on.
pub async fn until_end(
    run: &RunDir,
    wait_s: f64,
    since: u64,
    progress: Option<Progress>,
    cancelled: &tokio_util::sync::CancellationToken,
) -> (Seen, u64) {
    let until = Instant::now() + Duration::from_secs_f64(wait_s);
    let mut events = Events { offset: since, partial: String::new(), count: 0 };
    loop {
        // Looked at before the events are read, so the events of an ended run are all reported.
        let seen = runs::look(run);
        // Read with or without a progress token: the cursor moves past them either way.
        for line in events.new_lines(run) {
            let Some(p) = &progress else { continue };
            events.count += 1;
            let param = ProgressNotificationParam::new(p.token.clone(), events.count as f64).with_message(line);
            if p.peer.notify_progress(param).await.is_err() {
                break;
            }
        }
        // A run parked on a checkpoint waits for an answer, which the caller must give.
        if seen.ended() || seen.status == "waiting" || Instant::now() >= until || cancelled.is_cancelled() {
            return (seen, events.cursor());
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
    /// Where the next read starts: after the last whole line (a torn one is read again).
    fn cursor(&self) -> u64 {
        self.offset - self.partial.len() as u64
    }

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
        complete.lines().filter_map(EventLine::parse_text).filter_map(|e| describe(&e.event)).collect()
    }
}

/// A progress line for the events worth one: stages and settled operations.
fn describe(event: &EventRecord) -> Option<String> {
    match event {
        EventRecord::StageStarted { name } => Some(format!("stage {name} started")),
        EventRecord::StageFinished { name, status, .. } => Some(format!("stage {name} {}", status.as_str())),
        EventRecord::OpSettled { agent, op_id, outcome, .. } => Some(format!("{agent} {op_id} {}", outcome.as_str())),
        EventRecord::RunFinished { status, .. } => Some(format!("run {}", status.as_str())),
        _ => None,
    }
}
