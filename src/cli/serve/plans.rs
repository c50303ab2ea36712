//! `POST /plans`: the plan of what a `POST /runs` body would run (`crate::plan`), made on the fake
//! harness in a throwaway runs folder; 200 with the plan, or 400 with what the run would be
//! refused with.

use super::{error, job, Shared};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::Value;

pub(super) async fn plan(State(server): State<Shared>, body: Option<Json<Value>>) -> Response {
    let Some(Json(body)) = body else {
        return error(StatusCode::BAD_REQUEST, "the body must be a JSON object");
    };
    let (job, spec) = match job::checked(&server, &body) {
        Ok(checked) => checked,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    match crate::plan::make(spec, &*job.program, job.input, job.output, crate::plan::DEFAULT_BOUND).await {
        Ok(mut plan) => {
            plan.script = job.program.display.clone();
            (StatusCode::OK, Json(plan)).into_response()
        }
        Err(crate::plan::PlanError::Refused { rendered, .. }) => error(StatusCode::BAD_REQUEST, rendered),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}
