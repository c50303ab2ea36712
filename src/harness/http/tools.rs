//! The `wf_*` tools offered to the model, and each call as the control command it stands for,
//! carried out by the one dispatcher (`control::dispatch`): the launcher's texts, the same events.

use super::{ToolCall, ToolSpec};
use crate::control::dispatch::{dispatch, Control};
use crate::control::protocol::Command;
use crate::harness::TurnInput;
use serde_json::{json, Value};

/// The `wf_result` parameters: the op's schema when it describes an object, else `{value}`.
pub(super) fn result_parameters(schema: &Value) -> (Value, bool) {
    if crate::control::prompt::tool_wraps(schema) {
        (json!({ "type": "object", "properties": { "value": schema }, "required": ["value"] }), true)
    } else {
        (schema.clone(), false)
    }
}

/// The tools for one turn; `councils`: the agent was granted councils, so `wf_council` is offered;
/// `operator`: it may ask the operator, so `wf_ask_operator` is.
pub(super) fn tool_specs(schema: &Value, op_id: &str, councils: bool, operator: bool) -> Vec<ToolSpec> {
    let text = json!({ "type": "object", "properties": { "to": { "type": "string" }, "text": { "type": "string" } }, "required": ["to", "text"] });
    let mut specs = vec![
        ToolSpec {
            name: "wf_result",
            description: format!("Submit the answer to operation {op_id}. The arguments are the answer; they must match the schema. A rejection lists each error: fix them and call again."),
            parameters: result_parameters(schema).0,
        },
        ToolSpec { name: "wf_send", description: "Send a message to another agent over a granted route.".into(), parameters: text.clone() },
        ToolSpec { name: "wf_ask", description: "Ask another agent over a granted route and wait for its reply.".into(), parameters: text },
        ToolSpec {
            name: "wf_reply",
            description: "Reply to message number n, which asked you.".into(),
            parameters: json!({ "type": "object", "properties": { "n": { "type": "integer" }, "text": { "type": "string" } }, "required": ["n", "text"] }),
        },
        ToolSpec {
            name: "wf_inbox",
            description: "Your new messages and the questions you owe a reply.".into(),
            parameters: json!({ "type": "object", "properties": { "all": { "type": "boolean" } } }),
        },
    ];
    if councils {
        specs.push(ToolSpec {
            name: "wf_council",
            description: "Convene a council you were granted and wait for its output. `params`: `task` (required), optionally `team` or `roster`, and the strategy's params. `background: true` answers at once with its run id; you are woken once with its output.".into(),
            parameters: json!({ "type": "object", "properties": { "name": { "type": "string" }, "params": { "type": "object" }, "background": { "type": "boolean" } }, "required": ["name", "params"] }),
        });
        specs.push(ToolSpec {
            name: "wf_councils",
            description: "The background councils you started: run_id, strategy, status, spent so far.".into(),
            parameters: json!({ "type": "object", "properties": {} }),
        });
        specs.push(ToolSpec {
            name: "wf_council_cancel",
            description: "Stop a background council you started (its run_id); you are woken with what it had.".into(),
            parameters: json!({ "type": "object", "properties": { "run_id": { "type": "string" } }, "required": ["run_id"] }),
        });
    }
    if operator {
        specs.push(ToolSpec {
            name: "wf_ask_operator",
            description: "Ask the operator (the person running this workflow) a question and wait for the answer, returned as JSON. `schema`: the answer's JSON Schema (default: a string).".into(),
            parameters: json!({ "type": "object", "properties": { "question": { "type": "string" }, "schema": { "type": "object" } }, "required": ["question"] }),
        });
    }
    specs
}

/// A tool call that stands for no command; its text is what the model is told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum NoCommand {
    /// A `wf_*` tool called without what it needs (`needs`: its fields).
    #[error("refused: {tool} needs {needs}")]
    Needs { tool: String, needs: &'static str },
    #[error("unknown tool {0}: the tools are wf_result, wf_send, wf_ask, wf_reply, wf_inbox (and wf_council, wf_councils, wf_council_cancel, wf_ask_operator when granted)")]
    Unknown(String),
}

/// Runs one tool call through the control dispatcher, answering with the launcher's texts.
pub(super) async fn call_tool(control: &Control, call: &ToolCall, input: &TurnInput) -> String {
    match command_of(call, input) {
        Ok(cmd) => dispatch(control, cmd).await.text,
        Err(refused) => refused.to_string(),
    }
}

/// The command a tool call stands for, or what the model is told when it stands for none.
fn command_of(call: &ToolCall, input: &TurnInput) -> Result<Command, NoCommand> {
    let needs = |tool: &str, needs: &'static str| NoCommand::Needs { tool: tool.to_string(), needs };
    let args: Result<Value, _> =
        serde_json::from_str(if call.arguments.trim().is_empty() { "{}" } else { &call.arguments });
    let field = |k: &str| args.as_ref().ok().and_then(|a| a.get(k)).and_then(Value::as_str).map(String::from);
    let op = input.op_id.clone();
    match call.name.as_str() {
        "wf_result" => {
            let (_, wrapped) = result_parameters(&input.slot.schema().value);
            // Read strictly: arguments giving a key twice go to the slot as they came, which
            // rejects them saying so (read leniently, the last of the two would pass unseen).
            let args =
                crate::control::strict::parse(if call.arguments.trim().is_empty() { "{}" } else { &call.arguments });
            let json = match &args {
                Ok(v) if wrapped => match v.get("value") {
                    Some(inner) => inner.to_string(),
                    // Not JSON: rejected as such, with the missing field named in the error.
                    None => "{\"value\" is missing}".to_string(),
                },
                Ok(v) => v.to_string(),
                Err(_) => call.arguments.clone(),
            };
            Ok(Command::Result { op, json })
        }
        name @ ("wf_send" | "wf_ask") => match (field("to"), field("text")) {
            (Some(to), Some(text)) if name == "wf_send" => Ok(Command::Send { to, text }),
            (Some(to), Some(text)) => Ok(Command::Ask { to, text }),
            _ => Err(needs(name, "`to` and `text`")),
        },
        "wf_reply" => {
            let n = args.as_ref().ok().and_then(|a| a.get("n")).and_then(Value::as_u64);
            match (n, field("text")) {
                (Some(n), Some(text)) => Ok(Command::Reply { n, text }),
                _ => Err(needs("wf_reply", "`n` and `text`")),
            }
        }
        "wf_inbox" => {
            let all = args.as_ref().ok().and_then(|a| a.get("all")).and_then(Value::as_bool).unwrap_or(false);
            Ok(Command::Inbox { json: false, all })
        }
        "wf_council" => {
            let params = args.as_ref().ok().and_then(|a| a.get("params")).map(Value::to_string).unwrap_or_default();
            match field("name") {
                Some(name) => {
                    let background =
                        args.as_ref().ok().and_then(|a| a.get("background")).and_then(Value::as_bool).unwrap_or(false);
                    Ok(Command::Council { name, params, json: false, background })
                }
                None => Err(needs("wf_council", "`name` and `params`")),
            }
        }
        "wf_councils" => Ok(Command::CouncilList),
        "wf_council_cancel" => match field("run_id") {
            Some(id) => Ok(Command::CouncilCancel { id }),
            None => Err(needs("wf_council_cancel", "`run_id`")),
        },
        "wf_ask_operator" => {
            let schema = args.as_ref().ok().and_then(|a| a.get("schema")).filter(|s| !s.is_null());
            // A schema given as JSON text is taken as that text; the dispatcher parses it.
            let schema = schema.map(|s| s.as_str().map(String::from).unwrap_or_else(|| s.to_string()));
            match field("question") {
                Some(question) => Ok(Command::AskOperator { question, schema }),
                None => Err(needs("wf_ask_operator", "`question`")),
            }
        }
        other => Err(NoCommand::Unknown(other.to_string())),
    }
}
