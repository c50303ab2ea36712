//! The `/runs` routes: `POST /runs` (checked, kept on disk, then queued: 202 with the run id, or
//! 429 when the queue is full), `GET /runs`, `GET /runs/{id}` and `POST /runs/{id}/stop`, for
//! this server's runs first-hand and any other process's from the runs folder.

use super::queue::{self, Pending, Work};
use super::{error, folder_of, job, Entry, Shared};
use crate::cli::listing;
use crate::host::control::{self, Request};
use crate::record::accepted::{self, Accepted, Admission};
use crate::run::{RunStatus, StopCause};
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use std::time::Duration;

pub(super) async fn start_run(State(server): State<Shared>, body: Option<Json<Value>>) -> Response {
    let Some(Json(body)) = body else {
        return error(StatusCode::BAD_REQUEST, "the body must be a JSON object");
    };
    let (job, spec) = match job::checked(&server, &body) {
        Ok(checked) => checked,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    if let Some(refused) = confirm(&server, &body, spec.config.limits.confirm_usd).await {
        return refused;
    }
    if let Err(full) = server.queue().reserve() {
        return error(StatusCode::TOO_MANY_REQUESTS, full);
    }
    let id = crate::record::new_run_id();
    let dir = spec.runs_dir.join(&id);
    // Accepted means kept: the run's folder and its record are on disk before the 202.
    let record = Accepted::new(&id, body);
    let folder = dir.clone();
    let kept = tokio::task::spawn_blocking(move || accepted::keep(&folder, &record)).await;
    let hold = match kept {
        Ok(Ok(hold)) => hold,
        Ok(Err(e)) => return unkept(&server, &dir, e),
        Err(e) => return unkept(&server, &dir, e),
    };
    let script = job.program.display.clone();
    server.entries().push(Entry {
        id: id.clone(),
        script,
        status: RunStatus::Queued,
        dir,
        run: None,
        hold: Some(hold),
        stop_asked: false,
    });
    queue::push(&server, Pending { id: id.clone(), work: Work::Fresh { job, spec: Box::new(spec) } }, true);
    (StatusCode::ACCEPTED, Json(json!({ "run_id": id, "status": RunStatus::Queued }))).into_response()
}

/// With `[limits] confirm_usd`, a run is planned before it is accepted, and refused (409, with its
/// plan) when the plan's high end passes the threshold, unless the body says `"yes": true`, as
/// `--yes` does on a command line with no terminal.
async fn confirm(server: &Shared, body: &Value, limit: Option<f64>) -> Option<Response> {
    let limit = limit?;
    if body.get("yes") == Some(&Value::Bool(true)) {
        return None;
    }
    // The spec is taken by the plan: check the body again for one of its own.
    let (job, spec) = match job::checked(server, body) {
        Ok(checked) => checked,
        Err(e) => return Some(error(StatusCode::BAD_REQUEST, e)),
    };
    match crate::plan::make(spec, &*job.program, job.input, job.output, crate::plan::DEFAULT_BOUND).await {
        Ok(plan) if plan.usd[1] > limit => {
            let why = format!(
                "refused: the plan's high end ${:.4} passes the confirm threshold ${limit:.4} ([limits] confirm_usd); send \"yes\": true to go ahead",
                plan.usd[1]
            );
            Some((StatusCode::CONFLICT, Json(json!({ "error": why, "plan": plan }))).into_response())
        }
        Ok(_) => None,
        Err(crate::plan::PlanError::Refused { rendered, .. }) => Some(error(StatusCode::BAD_REQUEST, rendered)),
        Err(e) => Some(error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())),
    }
}

/// A run whose record could not be written is refused: nothing was accepted.
fn unkept(server: &Shared, dir: &std::path::Path, e: impl std::fmt::Display) -> Response {
    server.queue().unreserve();
    let _ = std::fs::remove_dir_all(dir);
    error(StatusCode::INTERNAL_SERVER_ERROR, format!("cannot keep the run in {}: {e}", dir.display()))
}

fn row(e: &Entry) -> Value {
    let mut row = json!({ "run_id": e.id, "status": e.status, "script": e.script });
    // A run in flight parked on a checkpoint: what it asks the operator.
    let waiting = e.run.as_ref().map(|r| r.waiting()).unwrap_or_default();
    if !waiting.is_empty() && e.status == RunStatus::Running {
        row["status"] = json!(RunStatus::Waiting);
        row["waiting"] = json!(waiting);
    }
    row
}

/// Every run of the runs folder (any process's), with this server's queue first-hand.
pub(super) async fn list_runs(State(server): State<Shared>) -> Response {
    let own: Vec<Value> = server.entries().iter().map(row).collect();
    let root = server.runs_dir();
    let cwd = server.cwd.clone();
    let folder = tokio::task::spawn_blocking(move || {
        listing::ids(&root).into_iter().map(|id| listing::summary(&root, &id, &cwd)).collect::<Vec<_>>()
    })
    .await
    .unwrap_or_default();
    let mut rows: Vec<Value> = folder
        .iter()
        .map(|s| {
            let mut v = s.json();
            // This server knows its own runs' state first-hand.
            if let Some(o) = own.iter().find(|o| o["run_id"] == s.id.as_str()) {
                v["status"] = o["status"].clone();
            }
            v
        })
        .collect();
    rows.extend(own.iter().filter(|o| !folder.iter().any(|s| o["run_id"] == s.id.as_str())).cloned());
    Json(json!({ "runs": rows })).into_response()
}

/// `result.json` as written, which `GET /runs/{id}` returns whole.
fn read_json(path: &std::path::Path) -> Option<Value> {
    crate::record::docs::read(path).ok().flatten()
}

pub(super) async fn show_run(State(server): State<Shared>, UrlPath(id): UrlPath<String>) -> Response {
    let found = server.entries().iter().find(|e| e.id == id).map(|e| (row(e), e.dir.clone(), e.status));
    match found {
        Some((row, dir, status)) if status.is_final() => match read_json(&dir.join("result.json")) {
            Some(result) => Json(result).into_response(),
            None => Json(row).into_response(),
        },
        Some((row, _, _)) => Json(row).into_response(),
        None => match folder_of(&server, &id) {
            Some(dir) => match read_json(&dir.join("result.json")) {
                Some(result) if crate::record::lock::held(&dir) != Some(true) => Json(result).into_response(),
                _ => Json(listing::summary(&server.runs_dir(), &id, &server.cwd).json()).into_response(),
            },
            None => error(StatusCode::NOT_FOUND, format!("no run {id} in {}", server.runs_dir().display())),
        },
    }
}

pub(super) async fn stop_run(State(server): State<Shared>, UrlPath(id): UrlPath<String>) -> Response {
    let own = {
        let mut entries = server.entries();
        entries.iter_mut().find(|e| e.id == id).map(|e| match (e.status, &e.run) {
            (RunStatus::Queued, _) => {
                e.status = RunStatus::Cancelled;
                Ok(Some((e.dir.clone(), e.hold.take())))
            }
            (RunStatus::Running, Some(run)) => {
                run.stop_with(StopCause::Cancelled("stopped over the API".into()));
                Ok(None)
            }
            (RunStatus::Running, None) => {
                e.stop_asked = true;
                Ok(None)
            }
            (status, _) => Err(format!("run {id} is not in flight (status {status})")),
        })
    };
    match own {
        Some(Ok(Some((dir, hold)))) => {
            server.queue().remove(&id);
            // On disk too: a serve that starts again does not run it.
            let _ = accepted::mark(&dir, Admission::Cancelled, "stopped over the API while queued");
            drop(hold);
            return (StatusCode::ACCEPTED, Json(json!({ "run_id": id, "status": RunStatus::Cancelled })))
                .into_response();
        }
        Some(Ok(None)) => {
            return (StatusCode::ACCEPTED, Json(json!({ "run_id": id, "status": "stopping" }))).into_response()
        }
        Some(Err(why)) => return error(StatusCode::CONFLICT, why),
        None => {}
    }
    // A run of another process: through its control socket.
    let Some(dir) = folder_of(&server, &id) else {
        return error(StatusCode::NOT_FOUND, format!("no run {id} in {}", server.runs_dir().display()));
    };
    if crate::record::lock::held(&dir) != Some(true) {
        let status = listing::run_status(&dir);
        return error(StatusCode::CONFLICT, format!("run {id} is not in flight (status {status})"));
    }
    let req = Request::Stop { by: "the API".into() };
    match tokio::task::spawn_blocking(move || control::request(&dir, &req, Duration::from_secs(5))).await {
        Ok(Ok(reply)) => (StatusCode::ACCEPTED, Json(json!({ "run_id": id, "status": "stopping", "pid": reply.pid })))
            .into_response(),
        Ok(Err(e)) => error(StatusCode::CONFLICT, format!("run {id} cannot be reached: {e}")),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, format!("run {id}: {e}")),
    }
}
