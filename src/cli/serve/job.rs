//! What a `POST /runs` body asks for, checked before it is accepted (and again when a restarted
//! serve starts a run an earlier one accepted): a script in the script folder with its `args`,
//! or a strategy with its `task`, `params` and team or roster.

use super::Server;
use crate::cli::script::check_script_args;
use crate::council;
use crate::host::Output;
use crate::script::{self, Program};
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// What a POST /runs body asks for, checked: the program, its input, how its end is read.
pub(super) struct Job {
    pub program: Arc<Program>,
    pub input: Value,
    pub output: Output,
}

pub(super) fn job(server: &Server, body: &Value) -> Result<Job, String> {
    let cwd = &server.cwd;
    if let Some(file) = body.get("script") {
        let file = file.as_str().ok_or("\"script\" must be a path, e.g. \"scripts/x.rhai\"")?;
        let named = crate::cli::scripts::resolve(&server.scripts, cwd, file, "the server's script folder")?;
        let source = std::fs::read_to_string(&named.path)
            .map_err(|e| format!("error: cannot read script {}: {e}", named.display))?;
        let program = script::load_source(named.path, named.display, source, cwd).map_err(|e| e.to_string())?;
        let input = body.get("args").cloned().unwrap_or_else(|| Value::Object(Map::new()));
        check_script_args(&program, &input)?;
        return Ok(Job { program: Arc::new(program), input, output: Output::Value });
    }
    let Some(name) = body.get("strategy") else {
        return Err("the body needs \"script\" (with \"args\") or \"strategy\" (with \"task\" and \"params\")".into());
    };
    let name = name.as_str().ok_or("\"strategy\" must be a strategy's name")?;
    // The registry's last good version: a file broken since still serves the version before.
    let entry = server.registry.entry(name).ok_or_else(|| {
        let names: Vec<String> = server.registry.entries().into_iter().map(|e| e.strategy.name).collect();
        format!("error: unknown strategy \"{name}\" (installed: {})", names.join(", "))
    })?;
    let Some(program) = entry.program.clone() else {
        return Err(entry.error.unwrap_or_else(|| format!("error: strategy {name} did not compile")));
    };
    let task = body.get("task").and_then(Value::as_str).ok_or("a strategy run needs \"task\" (text)")?;
    let params = match body.get("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err("\"params\" must be an object".into()),
    };
    let params = council::check_call(&entry.strategy, &params).map_err(|e| format!("error: {e}"))?;
    if let Some(roster) = body.get("roster") {
        council::check_roster(roster).map_err(|e| format!("error: {e}"))?;
    }
    let mut input = json!({ "task": task, "params": params, "limits": { "budget_tokens": 0, "max_children": 0 } });
    for key in ["team", "roster"] {
        if let Some(v) = body.get(key) {
            input[key] = v.clone();
        }
    }
    Ok(Job { program, input, output: Output::Strategy })
}

/// The body checked whole: its job, and the run's spec from the server's flags, the body's limits
/// and the config. The error is what the client reads (400).
pub(super) fn checked(server: &Server, body: &Value) -> Result<(Job, crate::run::RunSpec), String> {
    let job = job(server, body)?;
    let flags = super::options::flags(&server.flags, body).map_err(|e| format!("error: {e}"))?;
    match crate::cli::script::prepare(&job.program, job.input.clone(), &flags, None) {
        Ok(spec) => Ok((job, spec)),
        Err(e) => {
            // The first line only: a config file's parse error goes on with the file's offending
            // line, which may hold a key (the operator reads it whole from `awf script run`).
            let text = format!("error: {}", crate::cli::shown(&e));
            Err(text.lines().next().unwrap_or_default().to_string())
        }
    }
}
