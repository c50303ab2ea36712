//! Answers where models put them, and replies that are no answer: the JSON a structured reply
//! holds, an answer written as text instead of a tool call, a reply cut off (by `max_tokens` or by
//! the model's context), a model that never calls tools.

use super::{HttpConfig, Reply};
use crate::control::strict;
use crate::run::schema::Schema;
use serde_json::Value;

/// Replies in a row without a tool call (nor an answer in their text) after which a turn fails
/// saying the model does not call tools.
pub(super) const NO_TOOL_CALL_LIMIT: u32 = 3;

/// A model's JSON answer without a surrounding code fence.
fn unfence(text: &str) -> &str {
    let t = text.trim();
    let Some(rest) = t.strip_prefix("```") else { return t };
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_alphanumeric());
    rest.strip_suffix("```").unwrap_or(rest).trim()
}

/// `{"value": x}` as `x`, when the answer travelled wrapped.
fn unwrap_value(v: Value, wrapped: bool) -> Value {
    match v {
        Value::Object(mut o) if wrapped && o.len() == 1 && o.contains_key("value") => {
            o.remove("value").unwrap_or(Value::Null)
        }
        v => v,
    }
}

/// A structured reply as the submission's text: its JSON (unfenced, unwrapped), else the text as
/// it came, which the slot rejects as no JSON (or as giving a key twice, which reading it here
/// would hide).
pub(super) fn structured_submission(text: &str, wrapped: bool) -> String {
    match strict::parse(unfence(text)) {
        Ok(v) => unwrap_value(v, wrapped).to_string(),
        Err(_) => unfence(text).to_string(),
    }
}

/// The JSON values a reply's text holds: the whole text, each fenced block, each bare `{...}` or
/// `[...]` block.
fn candidates(text: &str) -> Vec<Value> {
    let mut out = Vec::new();
    if let Ok(v) = strict::parse(unfence(text)) {
        out.push(v);
    }
    let mut parts = text.split("```");
    parts.next();
    // Odd pieces are inside fences.
    for (i, part) in parts.enumerate() {
        if i % 2 == 0 {
            let body = part.trim_start_matches(|c: char| c.is_ascii_alphanumeric());
            if let Ok(v) = strict::parse(body.trim()) {
                out.push(v);
            }
        }
    }
    let mut at = 0;
    while let Some(i) = text[at..].find(['{', '[']) {
        let start = at + i;
        let mut stream = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        match stream.next() {
            Some(Ok(v)) => {
                let end = start + stream.byte_offset();
                // A block giving a key twice is no answer: which of the two was meant is not known.
                if strict::parse(&text[start..end]).is_ok() {
                    out.push(v);
                }
                at = end;
            }
            _ => at = start + 1,
        }
    }
    out
}

/// The answer a reply's text holds when the model wrote it instead of calling `wf_result`: the one
/// value among the text's JSON (the whole text, a fenced or a bare block) that matches the schema.
/// Several different matching values are no answer: which one was meant is not known.
pub(super) fn answer_in_text(text: &str, schema: &Schema, wrapped: bool) -> Option<Value> {
    let mut found: Option<Value> = None;
    for v in candidates(text).into_iter().map(|v| unwrap_value(v, wrapped)) {
        if !schema.violations(&v).is_empty() {
            continue;
        }
        match &found {
            Some(f) if *f != v => return None,
            Some(_) => {}
            None => found = Some(v),
        }
    }
    found
}

/// A reply the token limit cut off: why it is no answer, and whether the model's context (not
/// `max_tokens`) cut it, which no later request of the conversation can get past.
#[derive(Debug, PartialEq)]
pub(super) struct Cut {
    pub why: String,
    pub by_context: bool,
}

/// Whether the token limit cut a reply off, telling `max_tokens` from the model's context: a reply
/// stopped below the `max_tokens` it was given ran out of context.
pub(super) fn cut_off(reply: &Reply, cfg: &HttpConfig) -> Option<Cut> {
    let finish = reply.finish.as_deref()?;
    if !matches!(finish, "length" | "max_tokens" | "model_context_window_exceeded") {
        return None;
    }
    let out = reply.usage.output_tokens;
    if finish == "model_context_window_exceeded" || (out > 0 && out < reply.asked) {
        return Some(Cut { why: super::context::cut_by_context(cfg, reply, finish), by_context: true });
    }
    let (clipped, fix) = match cfg.context_tokens {
        Some(c) if reply.asked < cfg.max_tokens => (
            format!(
                ", clipped from {} to the room the prompt's {} leaves of context_tokens = {c}",
                cfg.max_tokens, reply.prompt
            ),
            "; for a longer reply, shorten the prompt or give the server a larger context and raise context_tokens",
        ),
        _ => (String::new(), ""),
    };
    let why = format!(
        "the reply was cut off at max_tokens ({} tokens{clipped}; finish_reason: {finish}): a partial answer is not a result{fix}",
        reply.asked
    );
    Some(Cut { why, by_context: false })
}

/// The failure of a turn whose model has made no tool call in `replies` replies.
pub(super) fn no_tool_calls(model: &str, replies: u32) -> String {
    format!(
        "model {model} made no tool call in {replies} replies in a row (tools mode answers by calling wf_result): it may not call tools through this server; set answer = \"structured\" in its runtime"
    )
}

#[cfg(test)]
mod tests {
    use super::super::size::{Counted, PromptSize};
    use super::*;
    use crate::run::schema::SchemaCache;
    use serde_json::json;

    fn schema(v: Value) -> Schema {
        SchemaCache::default().compile(&v).expect("schema")
    }

    #[test]
    fn an_answer_is_found_whole_fenced_or_bare() {
        let s = schema(json!({ "type": "object", "properties": { "ok": { "type": "boolean" } }, "required": ["ok"] }));
        assert_eq!(answer_in_text(r#"{"ok": true}"#, &s, false), Some(json!({ "ok": true })));
        assert_eq!(
            answer_in_text("Here:\n```json\n{\"ok\": false}\n```\nDone.", &s, false),
            Some(json!({ "ok": false }))
        );
        assert_eq!(answer_in_text(r#"The answer is {"ok": true}, I think."#, &s, false), Some(json!({ "ok": true })));
        assert_eq!(answer_in_text(r#"Maybe {"ok": true} or {"ok": false}"#, &s, false), None, "ambiguous");
        assert_eq!(answer_in_text(r#"{"ok": "yes"}"#, &s, false), None, "does not match");
        assert_eq!(answer_in_text("The answer to this question is: Yes", &s, false), None);
    }

    #[test]
    fn a_wrapped_answer_is_unwrapped() {
        let s = schema(json!({ "type": "array", "items": { "type": "string" } }));
        assert_eq!(answer_in_text(r#"{"value": ["a"]}"#, &s, true), Some(json!(["a"])));
        assert_eq!(answer_in_text(r#"Items: ["a", "b"]"#, &s, true), Some(json!(["a", "b"])));
        assert_eq!(structured_submission("```json\n{\"value\": [\"a\"]}\n```", true), r#"["a"]"#);
        assert_eq!(structured_submission(r#"{"value": 1}"#, false), r#"{"value":1}"#);
    }

    /// Issue 46, row 7: read leniently, `{"ok": false, "ok": true}` became `{"ok": true}` before
    /// the slot saw it. A structured reply giving a key twice reaches the slot as written (which
    /// rejects it); one written in text is no answer.
    #[test]
    fn an_answer_giving_a_key_twice_is_passed_on_as_written_or_not_taken() {
        let twice = r#"{"ok": false, "ok": true}"#;
        assert_eq!(structured_submission(&format!("```json\n{twice}\n```"), false), twice);
        let s = schema(json!({ "type": "object", "properties": { "ok": { "type": "boolean" } }, "required": ["ok"] }));
        for text in [twice.to_string(), format!("Here:\n```json\n{twice}\n```"), format!("I say {twice}.")] {
            assert_eq!(answer_in_text(&text, &s, false), None, "{text}");
        }
        assert_eq!(
            answer_in_text(&format!("not {twice} but {{\"ok\": true}}"), &s, false),
            Some(json!({ "ok": true }))
        );
    }

    #[test]
    fn a_cut_off_reply_names_max_tokens_or_the_context() {
        let mut cfg = super::super::tests::config("http://127.0.0.1:1/v1");
        let mut r = Reply { finish: Some("length".into()), asked: 200, ..Reply::default() };
        r.usage.output_tokens = 200;
        assert!(
            cut_off(&r, &cfg).is_some_and(|c| !c.by_context && c.why.contains("cut off at max_tokens (200 tokens;"))
        );
        cfg.context_tokens = Some(1000);
        r.prompt.tokens = 800;
        let why = cut_off(&r, &cfg).map(|c| c.why).unwrap_or_default();
        assert!(
            why.contains("cut off at max_tokens (200 tokens, clipped from 4096 to the room the prompt's 800 tokens (estimated at 3.0 characters a token) leaves of context_tokens = 1000;")
                && why.ends_with("shorten the prompt or give the server a larger context and raise context_tokens"),
            "{why}"
        );
        cfg.context_tokens = None;
        r.usage.output_tokens = 57;
        assert!(cut_off(&r, &cfg)
            .is_some_and(|c| c.by_context && c.why.contains("cut off by the model's context after 57")));
        r.finish = Some("stop".into());
        assert_eq!(cut_off(&r, &cfg), None);
    }

    /// Issue 26, row 3: a 1,670-token prompt (as the server counted it) was estimated low, so
    /// `max_tokens` was not cut to the room left, and the error told the user to declare the
    /// `context_tokens` they had declared.
    #[test]
    fn a_reply_cut_by_the_context_gives_the_numbers_and_a_fix_not_yet_applied() {
        let mut cfg = super::super::tests::config("http://127.0.0.1:1/v1");
        let size = PromptSize { tokens: 1150, by: Counted::Estimate(3.0), measured: false };
        let mut r = Reply { finish: Some("length".into()), asked: 898, prompt: size, ..Reply::default() };
        r.usage.input_tokens = 1670;
        r.usage.output_tokens = 379;
        cfg.context_tokens = Some(2048);
        let why = cut_off(&r, &cfg).map(|c| c.why).unwrap_or_default();
        assert_eq!(
            why,
            "the reply was cut off by the model's context after 379 tokens (finish_reason: length, below max_tokens 898): the prompt held 1670 tokens as the server counted them, 1150 tokens (estimated at 3.0 characters a token) as awf did, max_tokens asked 898, context 2048 (context_tokens); awf's count of the prompt was low, so max_tokens was not cut to the 378 tokens left; later requests to this server are sized from its count; for more room, shorten the prompt or give the server a larger context (llama-server -c) and raise context_tokens"
        );
        assert!(!why.contains("declare"), "context_tokens is declared: {why}");
        (r.asked, r.usage.output_tokens) = (378, 200);
        let why = cut_off(&r, &cfg).map(|c| c.why).unwrap_or_default();
        assert!(
            why.contains("the server's context is smaller than context_tokens (it ran out at about 1870 tokens)"),
            "{why}"
        );
        cfg.context_tokens = None;
        let why = cut_off(&r, &cfg).map(|c| c.why).unwrap_or_default();
        assert!(
            why.contains(
                "context not declared; declare the runtime's context_tokens (the server ran out at about 1870 tokens"
            ),
            "{why}"
        );
    }
}
