//! Requests sized to the model's context: how many tokens a request's conversation holds (the
//! server's own count at the last reply, plus an estimate of what came since), the `max_tokens` that
//! still fits a runtime's declared `context_tokens`, and a server's "too long" error said plainly.

use super::{HttpConfig, Msg, ToolSpec};

/// The fewest tokens worth asking a reply for: with less room left the turn fails instead.
const MIN_REPLY_TOKENS: u64 = 32;
/// The share of the context past which a turn starts by summarising the history (auto-compaction):
/// the summary request itself still has a fifth of the context to fit in.
pub(super) const COMPACT_AT: f64 = 0.8;

/// Characters per token in the estimate: low on purpose (JSON and code tokenize densely), so that a
/// request estimated to fit does fit.
const CHARS_PER_TOKEN: u64 = 3;
/// Tokens a chat template spends around each message.
const PER_MESSAGE: u64 = 8;

fn chars(m: &Msg) -> u64 {
    let n = match m {
        Msg::User { text } => text.len(),
        Msg::Assistant { text, calls } => {
            text.len() + calls.iter().map(|c| c.name.len() + c.arguments.len()).sum::<usize>()
        }
        Msg::Tool { text, .. } => text.len(),
    };
    n as u64
}

/// The tokens a request holds before its reply: `measured` (the history's length and the server's
/// count at the last reply) plus the messages since, or, with nothing measured yet, everything
/// estimated from its text.
pub(super) fn estimate(
    measured: Option<(usize, u64)>,
    system: Option<&str>,
    history: &[Msg],
    tools: &[ToolSpec],
) -> u64 {
    let tail =
        |from: usize| -> u64 { history[from..].iter().map(|m| chars(m) / CHARS_PER_TOKEN + PER_MESSAGE).sum::<u64>() };
    match measured {
        Some((n, tokens)) if n <= history.len() => tokens + tail(n),
        _ => {
            let fixed: usize = system.map_or(0, str::len)
                + tools
                    .iter()
                    .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
                    .sum::<usize>();
            fixed as u64 / CHARS_PER_TOKEN + PER_MESSAGE + tail(0)
        }
    }
}

/// The `max_tokens` to ask for: the runtime's, clipped to the room its declared context leaves; or
/// why the conversation cannot be sent at all.
pub(super) fn reply_room(cfg: &HttpConfig, estimate: u64) -> Result<u64, String> {
    let Some(context) = cfg.context_tokens else { return Ok(cfg.max_tokens) };
    let room = context.saturating_sub(estimate);
    if room < MIN_REPLY_TOKENS.min(cfg.max_tokens) {
        return Err(no_longer_fits(estimate, context));
    }
    Ok(cfg.max_tokens.min(room))
}

/// Whether a turn about to send `estimate` tokens should summarise the history first.
pub(super) fn wants_compacting(cfg: &HttpConfig, estimate: u64) -> bool {
    cfg.auto_compact && cfg.context_tokens.is_some_and(|c| estimate as f64 > c as f64 * COMPACT_AT)
}

pub(super) fn no_longer_fits(tokens: u64, context: u64) -> String {
    format!("the conversation no longer fits the model's context ({tokens} of {context} tokens)")
}

/// A server's error for a request longer than its context, said as the context limit it is:
/// llama.cpp's "request (N tokens) exceeds the available context size (M tokens)", vLLM's
/// "maximum context length is M tokens. However, you requested N tokens", OpenAI's
/// `context_length_exceeded`.
pub(super) fn context_error(body: &str) -> Option<String> {
    let number_before = |marker: &str| -> Option<u64> {
        let at = body.find(marker)?;
        body[..at].split(|c: char| !c.is_ascii_digit()).rfind(|w| !w.is_empty())?.parse().ok()
    };
    let number_after = |marker: &str| -> Option<u64> {
        let at = body.find(marker)? + marker.len();
        body[at..].split(|c: char| !c.is_ascii_digit()).find(|w| !w.is_empty())?.parse().ok()
    };
    if body.contains("exceeds the available context size") {
        let asked = number_before(" tokens) exceeds")?;
        let context = number_after("available context size")?;
        return Some(no_longer_fits(asked, context));
    }
    if body.contains("maximum context length") {
        if let (Some(context), Some(asked)) = (number_after("maximum context length"), number_after("you requested")) {
            return Some(no_longer_fits(asked, context));
        }
    }
    (body.contains("context_length_exceeded") || body.contains("exceed_context_size_error"))
        .then(|| format!("the conversation no longer fits the model's context: {body}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_context_errors_read_as_the_context_limit() {
        let llama = r#"{"error":{"code":400,"message":"request (2256 tokens) exceeds the available context size (2048 tokens), try increasing it","type":"exceed_context_size_error"}}"#;
        assert_eq!(
            context_error(llama).as_deref(),
            Some("the conversation no longer fits the model's context (2256 of 2048 tokens)")
        );
        let vllm = "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion).";
        assert_eq!(
            context_error(vllm).as_deref(),
            Some("the conversation no longer fits the model's context (5000 of 4096 tokens)")
        );
        assert!(context_error(r#"{"error":{"code":"context_length_exceeded"}}"#).is_some());
        assert_eq!(context_error(r#"{"error":"boom inside"}"#), None);
    }

    #[test]
    fn the_estimate_starts_from_the_servers_count() {
        let history = vec![
            Msg::User { text: "x".repeat(300) },
            Msg::Assistant { text: "y".repeat(30), calls: Vec::new() },
            Msg::User { text: "z".repeat(90) },
        ];
        assert_eq!(estimate(Some((2, 500)), None, &history, &[]), 500 + 30 + PER_MESSAGE);
        assert_eq!(estimate(None, Some("sss"), &history, &[]), 1 + PER_MESSAGE + (100 + 10 + 30) + 3 * PER_MESSAGE);
    }
}
