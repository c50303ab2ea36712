//! The server's strategies: one registry for its life, watching the project's `stdlib/` and the
//! user's strategies folder (each reload reported on stderr), and `GET /strategies`, which shows
//! for each the version served (a content hash) and, when the newest file does not compile, why.

use super::Shared;
use crate::council::{self, registry::Registry, registry::Reload};
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;

/// The registry, loaded and watched; a watch that cannot start is reported and the catalog stays
/// as loaded.
pub fn watched(cwd: &Path) -> Arc<Registry> {
    let registry = Registry::load(cwd);
    let watching = registry.watch(|_changed, reloads| {
        for r in reloads {
            match r {
                Reload::Compiled { name, version } => eprintln!("awf: strategy {name} reloaded (version {version})"),
                Reload::Failed { name, error } => {
                    let first = error.lines().next().unwrap_or_default().to_string();
                    eprintln!("awf: strategy {name} does not compile; its last good version is served: {first}");
                }
                Reload::Removed(name) => eprintln!("awf: strategy {name} removed (runs using it finish)"),
            }
        }
    });
    if let Err(e) = watching {
        eprintln!("awf: cannot watch the strategy folders ({e}); strategies stay as loaded");
    }
    registry
}

/// `GET /strategies`.
pub async fn list(State(server): State<Shared>) -> Response {
    let list: Vec<Value> = server
        .registry
        .entries()
        .iter()
        .map(|e| {
            let s = &e.strategy;
            let line = match &e.error {
                Some(error) => council::catalog_line(&council::Strategy { error: Some(error.clone()), ..s.clone() }),
                None => council::catalog_line(s),
            };
            json!({ "name": s.name, "origin": s.origin, "meta": s.meta, "line": line, "error": e.error,
                    "version": e.version, "served": e.program.is_some() })
        })
        .collect();
    Json(json!({ "strategies": list })).into_response()
}
