//! Fake responder scripts: a Rhai file with `fn respond(turn)` that answers a `fake` agent's turns.
//! Compiled once per run; called concurrently from any branch; sees only the turn map.

use super::{convert, engine, render};
use crate::harness::Responder;
use rhai::{Engine, Scope, AST};
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

struct RhaiResponder {
    engine: Engine,
    ast: AST,
    name: String,
}

impl Responder for RhaiResponder {
    fn respond(&self, turn: &Value) -> Result<Value, String> {
        let v = self
            .engine
            .call_fn::<rhai::Dynamic>(&mut Scope::new(), &self.ast, "respond", (convert::to_dynamic(turn),))
            .map_err(|e| format!("{}: {}", self.name, render::message(&e)))?;
        convert::to_json(&v).map_err(|e| format!("{}: respond() returned {e}", self.name))
    }
}

/// Compiles a responder script; it must define `fn respond(turn)`.
pub fn load_responder(path: &Path) -> Result<Arc<dyn Responder>, String> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read fake responder {name}: {e}"))?;
    let engine = engine::build(None, None, None);
    let mut ast = engine.compile(&text).map_err(|e| {
        let mut sources = render::Sources::new(&name, &text, Path::new("/"));
        render::render(&e.into(), &mut sources)
    })?;
    ast.set_source(name.clone());
    if !ast.iter_functions().any(|f| f.name == "respond" && f.params.len() == 1) {
        return Err(format!("fake responder {name} must define fn respond(turn)"));
    }
    Ok(Arc::new(RhaiResponder { engine, ast, name }))
}
