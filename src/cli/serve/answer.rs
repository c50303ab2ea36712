//! `POST /runs/{id}/answer`: answers a run of this server or of another process that waits for
//! the operator, through the run's control socket, as `awf runs answer` does.

use super::{error, folder_of, Shared};
use crate::run::RunStatus;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

/// Answers a run waiting for the operator: `{"value": ..., "key": "..."}` (`key` when several
/// checkpoints are open), as `awf runs answer` does; any refusal is 409 with the reason.
pub(super) async fn answer_run(
    State(server): State<Shared>,
    UrlPath(id): UrlPath<String>,
    body: Option<Json<Value>>,
) -> Response {
    let Some(Json(body)) = body else {
        return error(StatusCode::BAD_REQUEST, "the body must be a JSON object with \"value\"");
    };
    let Some(value) = body.get("value").cloned() else {
        return error(
            StatusCode::BAD_REQUEST,
            "the body needs \"value\": the answer, matching the checkpoint's schema",
        );
    };
    let key = match body.get("key") {
        None | Some(Value::Null) => None,
        Some(Value::String(k)) => Some(k.clone()),
        Some(_) => return error(StatusCode::BAD_REQUEST, "\"key\" must be a string"),
    };
    let own = server.entries().iter().find(|e| e.id == id).map(|e| (e.dir.clone(), e.status));
    let dir = match own {
        Some((_, RunStatus::Queued)) => {
            return error(StatusCode::CONFLICT, format!("run {id} is not waiting for the operator (status queued)"))
        }
        Some((dir, _)) => dir,
        None => match folder_of(&server, &id) {
            Some(dir) => dir,
            None => return error(StatusCode::NOT_FOUND, format!("no run {id} in {}", server.runs_dir().display())),
        },
    };
    let run_id = id.clone();
    match tokio::task::spawn_blocking(move || crate::cli::answer::answer(&dir, &run_id, key, value)).await {
        Ok(Ok(key)) => Json(json!({ "run_id": id, "key": key, "status": "answered" })).into_response(),
        Ok(Err(e)) => error(StatusCode::CONFLICT, e),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, format!("run {id}: {e}")),
    }
}
