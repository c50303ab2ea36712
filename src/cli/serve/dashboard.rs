//! The dashboard `awf serve` shows at `/`: one HTML page and its script, embedded in the binary
//! (`dashboard.html`, `dashboard.js`; no build step), and `GET /dashboard/runs`, the runs table it
//! draws (status, script, start, duration, spend). A run's own page reads `GET /runs/{id}/view`
//! (`run_page.rs`) and follows `GET /runs/{id}/events`. The page and its script are the shell:
//! the same bytes for everyone, no data in them, so on TCP they are read without the token (the
//! page needs them to sign in, `sign_in.rs`); every route they read needs it.

use super::Shared;
use crate::cli::listing;
use crate::record::docs;
use crate::run::RunStatus;
use axum::extract::State;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use std::time::SystemTime;

const PAGE: &str = include_str!("dashboard.html");
const SCRIPT: &str = include_str!("dashboard.js");

/// The shell's paths, each served by a route below with embedded bytes only.
const SHELL: [&str; 2] = ["/", "/dashboard.js"];

/// Whether a request reads the page shell, which needs no token: exactly its paths, read only.
pub(super) fn is_shell(method: &Method, path: &str) -> bool {
    matches!(*method, Method::GET | Method::HEAD) && SHELL.contains(&path)
}

/// The page's own script only, talking to this server only, no frames: the page holds the
/// operator's token, so no other site may embed it or run code in it.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

fn embedded(kind: &'static str, body: &'static str) -> Response {
    (
        [
            (CONTENT_TYPE, kind),
            (CONTENT_SECURITY_POLICY, POLICY),
            (X_FRAME_OPTIONS, "DENY"),
            (CACHE_CONTROL, "no-store"),
            (REFERRER_POLICY, "no-referrer"),
            (X_CONTENT_TYPE_OPTIONS, "nosniff"),
            // A page of another origin that opens this one gets no handle on its window.
            (axum::http::HeaderName::from_static("cross-origin-opener-policy"), "same-origin"),
        ],
        body,
    )
        .into_response()
}

pub(super) async fn page() -> Response {
    embedded("text/html; charset=utf-8", PAGE)
}

pub(super) async fn script() -> Response {
    embedded("text/javascript; charset=utf-8", SCRIPT)
}

/// One row of the runs table.
#[derive(Debug, Serialize)]
pub(super) struct RunRow {
    run_id: String,
    status: String,
    script: String,
    started_at: Option<String>,
    /// From its start to its last attempt's end, or to now while it is in flight.
    duration_ms: Option<u64>,
    cost_usd: f64,
    tokens: u64,
    /// Whether any cost is a price (else its $0 says nothing).
    priced: bool,
}

#[derive(Debug, Serialize)]
pub(super) struct RunRows {
    runs: Vec<RunRow>,
}

fn parse(at: Option<&str>) -> Option<SystemTime> {
    at.and_then(|t| humantime::parse_rfc3339_weak(t).ok())
}

/// How long from `started` to `finished` (or now).
pub(super) fn duration_ms(started: Option<SystemTime>, finished: Option<SystemTime>) -> Option<u64> {
    let end = finished.unwrap_or_else(SystemTime::now);
    let ms = end.duration_since(started?).ok()?.as_millis();
    Some(u64::try_from(ms).unwrap_or(u64::MAX))
}

/// A run's status: this server's first-hand for its own runs, but `waiting` (a checkpoint is
/// open) from the record, since this server knows such a run as `running`.
pub(super) fn status(own: Option<RunStatus>, on_disk: String) -> String {
    match own {
        Some(RunStatus::Running) if on_disk == RunStatus::Waiting.as_str() => on_disk,
        Some(own) => own.to_string(),
        None => on_disk,
    }
}

/// Every run of the runs folder, newest first, with this server's runs' status first-hand.
pub(super) async fn runs(State(server): State<Shared>) -> Response {
    let root = server.runs_dir();
    let cwd = server.cwd.clone();
    let own: Vec<(String, RunStatus)> = server.entries().iter().map(|e| (e.id.clone(), e.status)).collect();
    let rows = tokio::task::spawn_blocking(move || {
        let mut rows: Vec<RunRow> = listing::ids(&root)
            .into_iter()
            .map(|id| {
                let s = listing::summary(&root, &id, &cwd);
                let doc = docs::run(&root.join(&id)).unwrap_or_default();
                let finished = doc.attempts.last().and_then(|a| parse(a.finished_at.as_deref()));
                let status = status(own.iter().find(|o| o.0 == id).map(|o| o.1), s.status);
                let in_flight = matches!(status.as_str(), "running" | "waiting" | "queued");
                let started = parse(s.started_at.as_deref());
                RunRow {
                    duration_ms: duration_ms(started, if in_flight { None } else { finished.or(started) }),
                    run_id: s.id,
                    status,
                    script: s.script,
                    started_at: s.started_at,
                    cost_usd: s.cost_usd,
                    tokens: s.tokens,
                    priced: s.priced,
                }
            })
            .collect();
        rows.sort_by(|a, b| b.started_at.cmp(&a.started_at).then_with(|| b.run_id.cmp(&a.run_id)));
        rows
    })
    .await
    .unwrap_or_default();
    Json(RunRows { runs: rows }).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_reading_the_shells_exact_paths_is_the_shell() {
        assert!(is_shell(&Method::GET, "/"));
        assert!(is_shell(&Method::HEAD, "/dashboard.js"));
        for (method, path) in [
            (Method::POST, "/"),
            (Method::GET, "//"),
            (Method::GET, "/dashboard.js/"),
            (Method::GET, "/dashboard/runs"),
            (Method::GET, "/runs"),
            (Method::OPTIONS, "/"),
        ] {
            assert!(!is_shell(&method, path), "{method} {path}");
        }
    }
}
