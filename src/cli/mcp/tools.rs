//! The tools `awf mcp` offers: their names, descriptions and input schemas, and the reading of a
//! call's arguments (a bad argument is a tool error naming it).

use rmcp::model::{JsonObject, Tool};
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// How long a call waits for a run to end when it names no `wait_s`.
pub const DEFAULT_WAIT_S: f64 = 30.0;
/// The longest `wait_s` accepted: a client that wants longer calls `run_wait` again.
pub const MAX_WAIT_S: f64 = 3600.0;

fn tool(name: &'static str, description: &'static str, properties: Value, required: &[&str]) -> Tool {
    let schema = json!({ "type": "object", "properties": properties, "required": required });
    let object: JsonObject = schema.as_object().cloned().unwrap_or_default();
    Tool::new(name, description, Arc::new(object))
}

fn wait_s() -> Value {
    json!({ "type": "number", "minimum": 0, "maximum": MAX_WAIT_S,
            "description": "Seconds to wait for the run to end (default 30); 0 returns at once" })
}

fn yes() -> Value {
    json!({ "type": "boolean",
            "description": "Start the run even when its plan passes [limits] confirm_usd (without it such a run is refused, as on a command line with no terminal)" })
}

fn run_id() -> Value {
    json!({ "type": "string", "description": "The run's id, as run_council or run_workflow returned it" })
}

/// A run tool's arguments also take `wait_s` and `yes`.
fn with_wait(mut properties: Value, waits: bool) -> Value {
    if let (true, Some(m)) = (waits, properties.as_object_mut()) {
        m.insert("wait_s".into(), wait_s());
        m.insert("yes".into(), yes());
    }
    properties
}

/// The arguments of `run_council` (with `wait_s`) and `plan_council`.
fn council_call(waits: bool) -> Value {
    let p = json!({
        "name": { "type": "string", "description": "The strategy, e.g. magi, pair, map (see list_strategies)" },
        "task": { "type": "string", "description": "The task, question or goal" },
        "params": { "type": "object", "description": "The strategy's params, checked against its META" },
        "team": { "type": "string", "description": "A named team (default: the strategy's own)" },
        "roster": { "type": "array", "items": { "type": "string" }, "description": "Members by name" },
    });
    with_wait(p, waits)
}

/// The arguments of `run_workflow` (with `wait_s`) and `plan_workflow`.
fn workflow_call(waits: bool) -> Value {
    let p = json!({
        "script": { "type": "string", "description": "The script, relative to the project folder" },
        "args": { "type": "object", "description": "The script's arguments (checked against META.args)" },
    });
    with_wait(p, waits)
}

/// Every tool, in the order `tools/list` gives them.
pub fn all() -> Vec<Tool> {
    vec![
        tool(
            "list_strategies",
            "The council strategies installed here (stdlib, the user's and the project's), each with its META: description, params and their types, roster, default team.",
            json!({}),
            &[],
        ),
        tool(
            "run_council",
            "Run a council strategy on a task, as `awf council run` does. Returns the council's output when the run ends within wait_s, else the run id to pass to run_wait.",
            council_call(true),
            &["name", "task"],
        ),
        tool(
            "run_workflow",
            "Run a workflow script (a .rhai file inside the project folder, relative to it) with arguments, as `awf script run` does. Returns the run's value when it ends within wait_s, else the run id to pass to run_wait.",
            workflow_call(true),
            &["script"],
        ),
        tool(
            "plan_council",
            "Plan a council strategy on a task without spending: it runs on the fake harness (no model is called) and returns its agents, operations, widest step and the spend range by model, as `awf council plan --json` does.",
            council_call(false),
            &["name", "task"],
        ),
        tool(
            "plan_workflow",
            "Plan a workflow script (relative to the project folder) without spending: it runs on the fake harness (no program or model is started) and returns its stages, agents, operations, widest step and the spend range by model, as `awf script plan --json` does.",
            workflow_call(false),
            &["script"],
        ),
        tool("run_status", "A run's status: running, waiting (for the operator: `waiting` lists the questions), succeeded, failed, cancelled, interrupted...", json!({ "run_id": run_id() }), &["run_id"]),
        tool(
            "run_wait",
            "Wait up to wait_s for a run to end; returns its output or value when it ended, else says it is still running. Every answer carries `cursor`: pass it as `since` to the next run_wait, and progress covers only what happened after it.",
            json!({
                "run_id": run_id(),
                "wait_s": wait_s(),
                "since": { "type": "integer", "minimum": 0,
                           "description": "The cursor an earlier run_wait returned: progress is sent only for the run's events after it (default 0: from the start)" },
            }),
            &["run_id"],
        ),
        tool("run_result", "A finished run's result.json: status, value, error, stages, spend.", json!({ "run_id": run_id() }), &["run_id"]),
        tool(
            "run_stop",
            "Stop a live run as Ctrl-C does (SIGTERM to its process): its script gets a grace to unwind, then it is recorded cancelled.",
            json!({ "run_id": run_id() }),
            &["run_id"],
        ),
        tool(
            "run_answer",
            "Answer a run waiting for the operator (run_status shows its question and schema), as `awf runs answer` does: the value must match the checkpoint's schema, and the run goes on.",
            json!({
                "run_id": run_id(),
                "value": { "description": "The answer: any JSON value matching the checkpoint's schema" },
                "key": { "type": "string", "description": "Which checkpoint, when several are open" },
            }),
            &["run_id", "value"],
        ),
    ]
}

/// A call's arguments, read with errors that name the argument.
pub struct Args<'a>(pub &'a Map<String, Value>);

impl Args<'_> {
    pub fn string(&self, key: &str) -> Result<String, String> {
        match self.0.get(key) {
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
            Some(Value::String(_)) => Err(format!("error: \"{key}\" is empty")),
            Some(other) => Err(format!("error: \"{key}\" must be a string, not {other}")),
            None => Err(format!("error: \"{key}\" is required")),
        }
    }

    pub fn opt_string(&self, key: &str) -> Result<Option<String>, String> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(_) => self.string(key).map(Some),
        }
    }

    pub fn object(&self, key: &str) -> Result<Map<String, Value>, String> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(Map::new()),
            Some(Value::Object(o)) => Ok(o.clone()),
            Some(other) => Err(format!("error: \"{key}\" must be an object, not {other}")),
        }
    }

    pub fn strings(&self, key: &str) -> Result<Vec<String>, String> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| {
                    v.as_str().map(String::from).ok_or_else(|| format!("error: \"{key}\" must list strings, not {v}"))
                })
                .collect(),
            Some(other) => Err(format!("error: \"{key}\" must be an array of strings, not {other}")),
        }
    }

    /// `since`: a cursor (a whole number) from an earlier `run_wait`; 0 when absent.
    pub fn since(&self) -> Result<u64, String> {
        match self.0.get("since") {
            None | Some(Value::Null) => Ok(0),
            Some(v) => v.as_u64().ok_or_else(|| {
                format!("error: \"since\" must be the cursor (a whole number) a run_wait returned, not {v}")
            }),
        }
    }

    /// `wait_s`: seconds, 0 to `MAX_WAIT_S`; 30 when absent.
    pub fn wait_s(&self) -> Result<f64, String> {
        match self.0.get("wait_s") {
            None | Some(Value::Null) => Ok(DEFAULT_WAIT_S),
            Some(v) => match v.as_f64() {
                Some(s) if (0.0..=MAX_WAIT_S).contains(&s) => Ok(s),
                _ => Err(format!("error: \"wait_s\" must be a number of seconds from 0 to {MAX_WAIT_S}, not {v}")),
            },
        }
    }
}
