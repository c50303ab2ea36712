//! Fake responder scripts: a Rhai file with `fn respond(turn)` that answers a `fake` agent's turns.
//! Compiled once per run; called concurrently from any branch; sees only the turn map.

use super::{convert, engine, render};
use crate::harness::{Responder, ResponderError};
use rhai::{Engine, Scope, AST};
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

/// Why a responder script gave no answer, or cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ResponderFailed {
    /// `respond` raised an error (its message) or returned no JSON.
    #[error("{name}: {message}")]
    Raised { name: String, message: String },
    #[error("{name}: respond() returned {source}")]
    NotJson { name: String, source: convert::NotJson },
    #[error("cannot read fake responder {name}: {source}")]
    Read { name: String, source: std::io::Error },
    /// The script does not compile: the rendered error.
    #[error("{0}")]
    Compile(String),
    #[error("fake responder {0} must define fn respond(turn)")]
    NoRespond(String),
}

struct RhaiResponder {
    engine: Engine,
    ast: AST,
    name: String,
}

impl Responder for RhaiResponder {
    fn respond(&self, turn: &Value) -> Result<Value, ResponderError> {
        let name = || self.name.clone();
        let v = self
            .engine
            .call_fn::<rhai::Dynamic>(&mut Scope::new(), &self.ast, "respond", (convert::to_dynamic(turn),))
            .map_err(|e| ResponderFailed::Raised { name: name(), message: render::message(&e) })?;
        Ok(convert::to_json(&v).map_err(|source| ResponderFailed::NotJson { name: name(), source })?)
    }
}

/// Compiles a responder script; it must define `fn respond(turn)`.
pub fn load_responder(path: &Path) -> Result<Arc<dyn Responder>, ResponderError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ResponderFailed::Read { name: name.clone(), source })?;
    let engine = engine::build(None, None, None);
    let mut ast = engine.compile(&text).map_err(|e| {
        let mut sources = render::Sources::new(&name, &text, Path::new("/"));
        ResponderFailed::Compile(render::render(&e.into(), &mut sources))
    })?;
    ast.set_source(name.clone());
    if !ast.iter_functions().any(|f| f.name == "respond" && f.params.len() == 1) {
        return Err(ResponderFailed::NoRespond(name).into());
    }
    Ok(Arc::new(RhaiResponder { engine, ast, name }))
}
