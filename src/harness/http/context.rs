//! Requests sized to the model's context: the text of a request the server has not counted yet,
//! the `max_tokens` that still fits a runtime's declared `context_tokens`, and the errors about the
//! context (awf's own, a server's "too long", a reply cut off by it), each with the numbers (prompt,
//! max_tokens, context) and a fix that is not the one already applied. The count itself
//! (`/tokenize`, calibration) is `count.rs`'s.

use super::size::PromptSize;
use super::{HttpConfig, Msg, ToolSpec};

/// The fewest tokens worth asking a reply for: with less room left the turn fails instead.
const MIN_REPLY_TOKENS: u64 = 32;
/// The share of the context past which a turn starts by summarising the history (auto-compaction):
/// the summary request itself still has a fifth of the context to fit in.
pub(super) const COMPACT_AT: f64 = 0.8;
/// Tokens a chat template spends around each message.
pub(super) const PER_MESSAGE: u64 = 8;

/// What a request holds that the server has not counted: everything, or the messages since its
/// count at the last reply (`measured`, in tokens).
pub(super) struct Pending {
    pub measured: Option<u64>,
    pub text: String,
    pub messages: u64,
}

fn push_msg(text: &mut String, m: &Msg) {
    match m {
        Msg::User { text: t } | Msg::Tool { text: t, .. } => text.push_str(t),
        Msg::Assistant { text: t, calls } => {
            text.push_str(t);
            for c in calls {
                text.push_str(&c.name);
                text.push_str(&c.arguments);
            }
        }
    }
}

/// The request's text not yet counted: with `measured` (the history's length and the server's
/// count at the last reply) only the messages since; else the system prompt, the tools and every
/// message.
pub(super) fn pending(
    measured: Option<(usize, u64)>,
    system: Option<&str>,
    history: &[Msg],
    tools: &[ToolSpec],
) -> Pending {
    let mut text = String::new();
    let (measured, from) = match measured {
        Some((n, tokens)) if n <= history.len() => (Some(tokens), n),
        _ => {
            text.push_str(system.unwrap_or_default());
            for t in tools {
                text.push_str(t.name);
                text.push_str(&t.description);
                text.push_str(&t.parameters.to_string());
            }
            (None, 0)
        }
    };
    for m in &history[from..] {
        push_msg(&mut text, m);
    }
    let messages = (history.len() - from) as u64 + u64::from(measured.is_none());
    Pending { measured, text, messages }
}

impl Pending {
    /// The request's tokens, its uncounted text being `tokens` long.
    pub fn with(&self, tokens: u64) -> u64 {
        self.measured.unwrap_or(0) + tokens + PER_MESSAGE * self.messages
    }
}

/// The `max_tokens` to ask for: the runtime's, clipped to the room its declared context leaves; or
/// why the conversation cannot be sent at all.
pub(super) fn reply_room(cfg: &HttpConfig, size: &PromptSize) -> Result<u64, super::HttpError> {
    let Some(context) = cfg.context_tokens else { return Ok(cfg.max_tokens) };
    let room = context.saturating_sub(size.tokens);
    let least = MIN_REPLY_TOKENS.min(cfg.max_tokens);
    if room < least {
        let (prompt, max_tokens) = (size.to_string(), cfg.max_tokens);
        return Err(super::HttpError::TooLong { prompt, context, room, max_tokens, least });
    }
    Ok(cfg.max_tokens.min(room))
}

/// Whether a turn about to send `tokens` should summarise the history first.
pub(super) fn wants_compacting(cfg: &HttpConfig, tokens: u64) -> bool {
    cfg.auto_compact && cfg.context_tokens.is_some_and(|c| tokens as f64 > c as f64 * COMPACT_AT)
}

/// A server's refusal of a request longer than its context.
#[derive(Debug, PartialEq)]
pub(super) enum Limit {
    /// The server's numbers: the tokens it counted (the prompt's alone, or with the reply's
    /// `max_tokens`) against its context.
    Counted { counted: u64, prompt_only: bool, context: u64 },
    /// It says so without numbers (OpenAI's `context_length_exceeded`).
    Unsaid,
}

/// A server's error for a request longer than its context: llama.cpp's "request (N tokens)
/// exceeds the available context size (M tokens)", vLLM's "maximum context length is M tokens.
/// However, you requested N tokens (X in the messages, Y in the completion)", OpenAI's
/// `context_length_exceeded`.
pub(super) fn server_limit(body: &str) -> Option<Limit> {
    let number_before = |marker: &str| -> Option<u64> {
        let at = body.find(marker)?;
        body[..at].split(|c: char| !c.is_ascii_digit()).rfind(|w| !w.is_empty())?.parse().ok()
    };
    let number_after = |marker: &str| -> Option<u64> {
        let at = body.find(marker)? + marker.len();
        body[at..].split(|c: char| !c.is_ascii_digit()).find(|w| !w.is_empty())?.parse().ok()
    };
    if body.contains("exceeds the available context size") {
        let counted = number_before(" tokens) exceeds")?;
        let context = number_after("available context size")?;
        return Some(Limit::Counted { counted, prompt_only: true, context });
    }
    if let (Some(context), Some(asked)) = (number_after("maximum context length"), number_after("you requested")) {
        return Some(match number_before(" in the messages") {
            Some(counted) => Limit::Counted { counted, prompt_only: true, context },
            None => Limit::Counted { counted: asked, prompt_only: false, context },
        });
    }
    (body.contains("context_length_exceeded") || body.contains("exceed_context_size_error")).then_some(Limit::Unsaid)
}

/// A server's refusal said with the numbers on both sides, and the fix that is left.
pub(super) fn refused(cfg: &HttpConfig, limit: &Limit, size: &PromptSize, max_tokens: u64, body: &str) -> String {
    let ours = format!("awf had counted {size}, with max_tokens {max_tokens}");
    let Limit::Counted { counted, prompt_only, context } = *limit else {
        let declared = cfg.context_tokens.map(|c| format!(", context_tokens = {c}")).unwrap_or_default();
        return format!("the conversation no longer fits the model's context: {body}; {ours}{declared}");
    };
    let what = if prompt_only { "for the prompt" } else { "for the prompt and max_tokens" };
    let fix = match cfg.context_tokens {
        _ if prompt_only && counted >= context => {
            let declare = match cfg.context_tokens {
                None => format!("; declare context_tokens = {context} so such a request fails before it is sent"),
                Some(c) if c != context => format!("; context_tokens = {c} is not the server's: set it to {context}"),
                Some(_) => String::new(),
            };
            format!("the prompt alone is past the context: shorten it, or give the server a larger context{declare}")
        }
        None => format!("declare context_tokens = {context} so max_tokens is cut to the room left"),
        Some(c) if c != context => format!("context_tokens = {c} is not the server's context: set it to {context}"),
        Some(_) => "lower max_tokens or shorten the prompt (later requests are sized from the server's count)".into(),
    };
    format!(
        "the conversation no longer fits the model's context: the server counted {counted} tokens {what} against its context of {context}, {ours}; {fix}"
    )
}

/// Why a reply cut off below the `max_tokens` it asked for (the model's context ran out), with the
/// numbers and the fix that is left.
pub(super) fn cut_by_context(cfg: &HttpConfig, reply: &super::Reply, finish: &str) -> String {
    let out = reply.usage.output_tokens;
    let (asked, size) = (reply.asked, reply.prompt);
    let (prompt, whose) = match reply.usage.tokens() - out {
        0 => (size.tokens, "as awf counted them (the server reported no usage)".to_string()),
        n => (n, format!("as the server counted them, {size} as awf did")),
    };
    let (declared, fix) = match cfg.context_tokens {
        None => (
            "not declared".to_string(),
            format!("declare the runtime's context_tokens (the server ran out at about {} tokens; awf doctor reads it from servers that say it) so max_tokens is cut to the room left", prompt + out),
        ),
        Some(c) if prompt + asked > c => (
            format!("{c} (context_tokens)"),
            format!("awf's count of the prompt was low, so max_tokens was not cut to the {} tokens left; later requests to this server are sized from its count; for more room, shorten the prompt or give the server a larger context (llama-server -c) and raise context_tokens", c.saturating_sub(prompt)),
        ),
        Some(c) => (
            format!("{c} (context_tokens)"),
            format!("the server's context is smaller than context_tokens (it ran out at about {} tokens): set context_tokens to the server's (awf doctor reads it; llama-server gives each slot -c divided by -np)", prompt + out),
        ),
    };
    format!(
        "the reply was cut off by the model's context after {out} tokens (finish_reason: {finish}, below max_tokens {asked}): the prompt held {prompt} tokens {whose}, max_tokens asked {asked}, context {declared}; {fix}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_context_errors_are_read_with_their_numbers() {
        let llama = r#"{"error":{"code":400,"message":"request (2256 tokens) exceeds the available context size (2048 tokens), try increasing it","type":"exceed_context_size_error"}}"#;
        assert_eq!(server_limit(llama), Some(Limit::Counted { counted: 2256, prompt_only: true, context: 2048 }));
        let vllm = "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion).";
        assert_eq!(server_limit(vllm), Some(Limit::Counted { counted: 4000, prompt_only: true, context: 4096 }));
        let vllm_short = "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.";
        assert_eq!(server_limit(vllm_short), Some(Limit::Counted { counted: 5000, prompt_only: false, context: 4096 }));
        assert_eq!(server_limit(r#"{"error":{"code":"context_length_exceeded"}}"#), Some(Limit::Unsaid));
        assert_eq!(server_limit(r#"{"error":"boom inside"}"#), None);
    }

    #[test]
    fn the_pending_text_starts_after_the_servers_count() {
        let history = vec![
            Msg::User { text: "x".repeat(300) },
            Msg::Assistant { text: "y".repeat(30), calls: Vec::new() },
            Msg::User { text: "z".repeat(90) },
        ];
        let p = pending(Some((2, 500)), None, &history, &[]);
        assert_eq!((p.measured, p.text.len(), p.messages), (Some(500), 90, 1));
        assert_eq!(p.with(30), 500 + 30 + PER_MESSAGE);
        let p = pending(None, Some("sss"), &history, &[]);
        assert_eq!((p.measured, p.text.len(), p.messages), (None, 3 + 420, 4));
        let past = pending(Some((9, 500)), None, &history, &[]);
        assert_eq!(past.measured, None, "a count from a longer history (before a compaction) is not used");
    }
}
