//! `GET /runs/{id}/events`: a run's `events.jsonl` as server-sent events, one per line, named by
//! its type, until the run has ended and every line is sent.

use super::{error, folder_of, Shared};
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::Duration;

/// Tails events.jsonl as server-sent events (one per line, named by its type) until the run has
/// finished and every line is sent.
pub(super) async fn events(State(server): State<Shared>, UrlPath(id): UrlPath<String>) -> Response {
    let own = server.entries().iter().find(|e| e.id == id).map(|e| e.dir.clone());
    let Some(dir) = own.or_else(|| folder_of(&server, &id)) else {
        return error(StatusCode::NOT_FOUND, format!("no run {id} in {}", server.runs_dir().display()));
    };
    let path = dir.join("events.jsonl");
    struct Tail {
        server: Shared,
        id: String,
        path: PathBuf,
        offset: usize,
        lines: VecDeque<String>,
        done: bool,
    }
    let tail = Tail { server, id, path, offset: 0, lines: VecDeque::new(), done: false };
    let stream = futures_util::stream::unfold(tail, |mut t| async move {
        loop {
            if let Some(line) = t.lines.pop_front() {
                let kind = serde_json::from_str::<Value>(&line)
                    .ok()
                    .and_then(|v| v.get("type").and_then(Value::as_str).map(String::from))
                    .unwrap_or_else(|| "event".into());
                let event = Event::default().event(kind).data(line);
                return Some((Ok::<Event, std::convert::Infallible>(event), t));
            }
            if t.done {
                return None;
            }
            // Read the status first: a run that has finished has written its last line.
            let finished = match t.server.status(&t.id) {
                Some(s) => s.is_final(),
                // Another process's run: over once no attempt holds its lock.
                None => t.path.parent().is_none_or(|d| crate::record::lock::held(d) != Some(true)),
            };
            if let Ok(bytes) = tokio::fs::read(&t.path).await {
                let fresh = bytes.get(t.offset..).unwrap_or_default();
                if let Some(end) = fresh.iter().rposition(|b| *b == b'\n') {
                    let text = String::from_utf8_lossy(&fresh[..end]).to_string();
                    t.lines.extend(text.lines().filter(|l| !l.trim().is_empty()).map(String::from));
                    t.offset += end + 1;
                }
            }
            if finished {
                t.done = true;
            } else if t.lines.is_empty() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    });
    Sse::new(stream).into_response()
}
