//! The Anthropic Messages wire format: the request body and the streamed reply.

use super::sse::SseEvent;
use super::{HttpConfig, Msg, Reply, StreamState, ToolCall, ToolSpec};
use serde_json::{json, Value};

pub fn endpoint(cfg: &HttpConfig) -> (String, Vec<(&'static str, String)>) {
    let base = cfg.base_url.trim_end_matches('/');
    let base = base.strip_suffix("/v1").unwrap_or(base);
    let mut headers = vec![("anthropic-version", "2023-06-01".to_string())];
    if let Some(key) = &cfg.api_key {
        headers.push(("x-api-key", key.clone()));
    }
    (format!("{base}/v1/messages"), headers)
}

/// The history as Messages: tool results and the next user text share one user message, since
/// the API wants roles to alternate.
pub fn body(cfg: &HttpConfig, system: Option<&str>, history: &[Msg], tools: &[ToolSpec], max_tokens: u64) -> Value {
    let mut messages: Vec<Value> = Vec::new();
    let push_user = |messages: &mut Vec<Value>, block: Value| {
        if let Some(last) = messages.last_mut().filter(|m| m["role"] == "user") {
            if let Some(c) = last["content"].as_array_mut() {
                c.push(block);
                return;
            }
        }
        messages.push(json!({ "role": "user", "content": [block] }));
    };
    for m in history {
        match m {
            Msg::User { text } => push_user(&mut messages, json!({ "type": "text", "text": text })),
            Msg::Tool { id, text, .. } => {
                push_user(&mut messages, json!({ "type": "tool_result", "tool_use_id": id, "content": text }))
            }
            Msg::Assistant { text, calls } => {
                let mut content = Vec::new();
                if !text.is_empty() {
                    content.push(json!({ "type": "text", "text": text }));
                }
                for c in calls {
                    let input: Value = serde_json::from_str(&c.arguments).unwrap_or_else(|_| json!({}));
                    content.push(json!({ "type": "tool_use", "id": c.id, "name": c.name, "input": input }));
                }
                if content.is_empty() {
                    content.push(json!({ "type": "text", "text": "(no reply)" }));
                }
                messages.push(json!({ "role": "assistant", "content": content }));
            }
        }
    }
    let mut body = json!({ "model": cfg.model, "max_tokens": max_tokens, "stream": true, "messages": messages });
    if let Some(s) = system {
        body["system"] = json!(s);
    }
    if !tools.is_empty() {
        body["tools"] = Value::Array(
            tools
                .iter()
                .map(|t| json!({ "name": t.name, "description": t.description, "input_schema": t.parameters }))
                .collect(),
        );
    }
    body
}

/// Folds one streamed event into the reply.
pub fn on_event(reply: &mut Reply, state: &mut StreamState, ev: &SseEvent) -> Result<(), super::StreamError> {
    let v: Value = match serde_json::from_str(&ev.data) {
        Ok(v) => v,
        Err(_) if ev.data.trim().is_empty() => return Ok(()),
        Err(source) => return Err(super::StreamError::Malformed { what: "event", data: ev.data.clone(), source }),
    };
    let ty = ev.event.clone().or_else(|| v.get("type").and_then(Value::as_str).map(String::from)).unwrap_or_default();
    let n = |u: &Value, k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    match ty.as_str() {
        "message_start" => {
            if let Some(u) = v.pointer("/message/usage") {
                reply.usage.input_tokens += n(u, "input_tokens");
                reply.usage.cache_read_tokens += n(u, "cache_read_input_tokens");
                reply.usage.cache_write_tokens += n(u, "cache_creation_input_tokens");
                reply.usage.output_tokens = n(u, "output_tokens");
            }
        }
        "content_block_start" => {
            let block = &v["content_block"];
            if block["type"] == "tool_use" {
                let index = v.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
                state.calls.push(ToolCall {
                    id: block["id"].as_str().unwrap_or_default().to_string(),
                    name: block["name"].as_str().unwrap_or_default().to_string(),
                    arguments: String::new(),
                });
                state.tool_index.push(index);
            }
        }
        "content_block_delta" => {
            let d = &v["delta"];
            match d["type"].as_str() {
                Some("text_delta") => reply.text.push_str(d["text"].as_str().unwrap_or_default()),
                Some("input_json_delta") => {
                    let index = v.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
                    if let Some(k) = state.tool_index.iter().position(|i| *i == index) {
                        state.calls[k].arguments.push_str(d["partial_json"].as_str().unwrap_or_default());
                    }
                }
                _ => {}
            }
        }
        "message_delta" => {
            if let Some(r) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                reply.finish = Some(r.to_string());
            }
            if let Some(u) = v.get("usage") {
                reply.usage.output_tokens = n(u, "output_tokens").max(reply.usage.output_tokens);
            }
        }
        "message_stop" => state.done = true,
        "error" => {
            let kind = v.pointer("/error/type").and_then(Value::as_str).unwrap_or("error");
            let msg = v.pointer("/error/message").and_then(Value::as_str).unwrap_or("");
            return Err(super::StreamError::reported(format!("{kind}: {msg}")));
        }
        _ => {}
    }
    Ok(())
}
