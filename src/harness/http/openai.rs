//! The OpenAI chat-completions wire format (OpenAI, vLLM, llama.cpp's server, Ollama, ...): the
//! request body and the streamed reply.

use super::sse::SseEvent;
use super::{HttpConfig, Msg, Reply, StreamState, ToolCall, ToolSpec};
use serde_json::{json, Value};

pub fn endpoint(cfg: &HttpConfig) -> (String, Vec<(&'static str, String)>) {
    let url = format!("{}/chat/completions", cfg.base_url.trim_end_matches('/'));
    let mut headers = Vec::new();
    if let Some(key) = &cfg.api_key {
        headers.push(("authorization", format!("Bearer {key}")));
    }
    (url, headers)
}

pub fn body(
    cfg: &HttpConfig,
    system: Option<&str>,
    history: &[Msg],
    tools: &[ToolSpec],
    structured: Option<&Value>,
    max_tokens: u64,
) -> Value {
    let mut messages = Vec::new();
    if let Some(s) = system {
        messages.push(json!({ "role": "system", "content": s }));
    }
    for m in history {
        messages.push(match m {
            Msg::User { text } => json!({ "role": "user", "content": text }),
            Msg::Assistant { text, calls } if calls.is_empty() => json!({ "role": "assistant", "content": text }),
            Msg::Assistant { text, calls } => json!({
                "role": "assistant",
                "content": if text.is_empty() { Value::Null } else { json!(text) },
                "tool_calls": calls.iter().map(|c| json!({ "id": c.id, "type": "function", "function": { "name": c.name, "arguments": c.arguments } })).collect::<Vec<_>>(),
            }),
            Msg::Tool { id, text, .. } => json!({ "role": "tool", "tool_call_id": id, "content": text }),
        });
    }
    let mut body = json!({
        "model": cfg.model,
        "stream": true,
        "stream_options": { "include_usage": true },
        "messages": messages,
    });
    // OpenAI's own API wants max_completion_tokens; compatible servers still read max_tokens.
    let key = if cfg.base_url.contains("api.openai.com") { "max_completion_tokens" } else { "max_tokens" };
    body[key] = json!(max_tokens);
    if !tools.is_empty() {
        body["tools"] = Value::Array(
            tools
                .iter()
                .map(|t| json!({ "type": "function", "function": { "name": t.name, "description": t.description, "parameters": t.parameters } }))
                .collect(),
        );
    }
    if let Some(schema) = structured {
        body["response_format"] =
            json!({ "type": "json_schema", "json_schema": { "name": "answer", "schema": schema } });
    }
    if let Some(e) = &cfg.effort {
        body["reasoning_effort"] = json!(e);
    }
    if let Some(n) = cfg.top_logprobs {
        body["logprobs"] = json!(true);
        body["top_logprobs"] = json!(n);
    }
    body
}

/// Folds one streamed chunk into the reply.
pub fn on_event(reply: &mut Reply, state: &mut StreamState, ev: &SseEvent) -> Result<(), super::StreamError> {
    if ev.data.trim() == "[DONE]" {
        state.done = true;
        return Ok(());
    }
    let v: Value = serde_json::from_str(&ev.data).map_err(|source| super::StreamError::Malformed {
        what: "chunk",
        data: ev.data.clone(),
        source,
    })?;
    if let Some(err) = v.get("error") {
        return Err(super::StreamError::reported(format!("an error: {err}")));
    }
    if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
        let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
        let cached = u.pointer("/prompt_tokens_details/cached_tokens").and_then(Value::as_u64).unwrap_or(0);
        reply.usage.input_tokens = n("prompt_tokens").saturating_sub(cached);
        reply.usage.cache_read_tokens = cached;
        reply.usage.output_tokens = n("completion_tokens");
    }
    let Some(choice) = v.get("choices").and_then(|c| c.get(0)) else { return Ok(()) };
    if let Some(tokens) = choice.pointer("/logprobs/content").and_then(Value::as_array) {
        reply.logprobs.extend(tokens.iter().cloned());
    }
    if let Some(d) = choice.get("delta") {
        if let Some(t) = d.get("content").and_then(Value::as_str) {
            reply.text.push_str(t);
        }
        for tc in d.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
            let i = tc.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
            while state.calls.len() <= i {
                state.calls.push(ToolCall { id: String::new(), name: String::new(), arguments: String::new() });
            }
            let call = &mut state.calls[i];
            if let Some(id) = tc.get("id").and_then(Value::as_str) {
                call.id = id.to_string();
            }
            if let Some(f) = tc.get("function") {
                if let Some(n) = f.get("name").and_then(Value::as_str) {
                    call.name.push_str(n);
                }
                if let Some(a) = f.get("arguments").and_then(Value::as_str) {
                    call.arguments.push_str(a);
                }
            }
        }
    }
    if let Some(f) = choice.get("finish_reason").and_then(Value::as_str) {
        reply.finish = Some(f.to_string());
    }
    Ok(())
}
