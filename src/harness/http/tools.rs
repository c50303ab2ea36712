//! The `wf_*` tools offered to the model and their execution, answering with the launcher's texts.

use super::session::HttpSession;
use super::{ToolCall, ToolSpec};
use crate::control::messenger::MessageError;
use crate::harness::TurnInput;
use serde_json::{json, Value};

/// The `wf_result` parameters: the op's schema when it describes an object, else `{value}`.
pub(super) fn result_parameters(schema: &Value) -> (Value, bool) {
    if schema.get("type").and_then(Value::as_str) == Some("object") {
        (schema.clone(), false)
    } else {
        (json!({ "type": "object", "properties": { "value": schema }, "required": ["value"] }), true)
    }
}

pub(super) fn tool_specs(schema: &Value, op_id: &str) -> Vec<ToolSpec> {
    let text = json!({ "type": "object", "properties": { "to": { "type": "string" }, "text": { "type": "string" } }, "required": ["to", "text"] });
    vec![
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
        ToolSpec { name: "wf_inbox", description: "The messages held for you.".into(), parameters: json!({ "type": "object", "properties": {} }) },
    ]
}

impl HttpSession {
    /// Runs one tool call, answering with the launcher's texts.
    pub(super) async fn call_tool(&self, call: &ToolCall, input: &TurnInput) -> String {
        let args: Result<Value, _> =
            serde_json::from_str(if call.arguments.trim().is_empty() { "{}" } else { &call.arguments });
        let field = |k: &str| args.as_ref().ok().and_then(|a| a.get(k)).and_then(Value::as_str).map(String::from);
        match call.name.as_str() {
            "wf_result" => {
                let (_, wrapped) = result_parameters(&input.slot.schema().value);
                // Recorded before the model is told: an accepted answer survives a crash of awf.
                let sub = match args {
                    Ok(v) if wrapped => match v.get("value") {
                        Some(inner) => input.slot.submit_recorded(inner.clone()).await,
                        None => input.slot.submit_text("{\"value\" is missing}"),
                    },
                    Ok(v) => input.slot.submit_recorded(v).await,
                    Err(_) => input.slot.submit_text_recorded(&call.arguments).await,
                };
                sub.text()
            }
            name @ ("wf_send" | "wf_ask" | "wf_reply" | "wf_inbox") => {
                let Some(m) = &input.messenger else { return "refused: this turn cannot message other agents".into() };
                match name {
                    "wf_send" => match (field("to"), field("text")) {
                        (Some(to), Some(text)) => {
                            m.send(&to, &text).map(|n| format!("sent #{n}")).unwrap_or_else(|e| e.to_string())
                        }
                        _ => "refused: wf_send needs `to` and `text`".into(),
                    },
                    "wf_ask" => match (field("to"), field("text")) {
                        (Some(to), Some(text)) => {
                            let deadline = input.deadline_unix_ms.map(crate::agent::op::instant_of);
                            m.ask(&to, &text, deadline).await.unwrap_or_else(|e| match e {
                                MessageError::Refused(why) => why,
                                MessageError::Failed(why) => format!("ask failed: {why}"),
                            })
                        }
                        _ => "refused: wf_ask needs `to` and `text`".into(),
                    },
                    "wf_reply" => {
                        let n = args.as_ref().ok().and_then(|a| a.get("n")).and_then(Value::as_u64);
                        match (n, field("text")) {
                            (Some(n), Some(text)) => {
                                m.reply(n, &text).map(|_| format!("replied to #{n}")).unwrap_or_else(|e| e.to_string())
                            }
                            _ => "refused: wf_reply needs `n` and `text`".into(),
                        }
                    }
                    _ => {
                        let held = m.inbox();
                        if held.is_empty() {
                            "no messages".into()
                        } else {
                            held.iter()
                                .map(|h| {
                                    format!(
                                        "#{} from {}{}:\n{}",
                                        h.n,
                                        h.from,
                                        if h.asks { " (asks for a reply)" } else { "" },
                                        h.text
                                    )
                                })
                                .collect::<Vec<_>>()
                                .join("\n")
                        }
                    }
                }
            }
            other => format!("unknown tool {other}: the tools are wf_result, wf_send, wf_ask, wf_reply and wf_inbox"),
        }
    }
}
