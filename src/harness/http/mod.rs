//! The HTTP harnesses: `openai` (chat completions, OpenAI and compatible servers) and `anthropic`
//! (the Messages API). One session per agent keeps the message history (in memory and in the run
//! folder); a turn streams replies and runs the `wf_*` tools the model calls, answering with the
//! same texts as the launcher; `openai` can instead answer in structured mode, where the reply
//! itself is the submission. Rate limits are retried with backoff honouring Retry-After.
//! `session.rs` (the session and its history), `turn.rs` (a turn: requests, tool calls, answers),
//! `answer.rs` (answers found in a reply's text, cut-off replies), `context.rs` (requests sized to
//! the model's context, and the errors about it), `count.rs` (a request's size as the server
//! counts it: `/tokenize`, or calibrated from the replies' counts), `tools.rs` (the `wf_*` tools and their execution), `request.rs` (one
//! request: retries, the streamed reply, its spend metered), `sse.rs` (the event stream parser)
//! and `probe.rs` (`awf doctor --deep`: a real request, the server's context) are shared;
//! `openai.rs` and `anthropic.rs` hold what differs.

mod answer;
mod anthropic;
mod context;
mod count;
mod openai;
pub mod probe;
mod request;
mod session;
mod size;
mod sse;
mod tools;
mod turn;

pub use request::StreamState;
pub use session::HttpSession;

/// Why an HTTP agent's session cannot be set up, or a request got no usable reply.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("the {harness} harness needs an API key in ${var} for {url} (set it, or name another variable with api_key_env)")]
    NoKey { harness: crate::config::HarnessKind, var: String, url: String },
    #[error("answer = \"structured\" is for the openai harness; anthropic answers with tools")]
    StructuredAnthropic,
    #[error("answer must be \"tools\" or \"structured\", not \"{0}\"")]
    AnswerMode(String),
    #[error("context_tokens must be more than 0")]
    NoContext,
    /// `request_timeout` or `idle_timeout` that is no duration.
    #[error("{field}: {source}")]
    Timeout { field: &'static str, source: crate::config::BadDuration },
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    /// The prompt (as counted, described) leaves too little of the declared context for a reply.
    #[error("the conversation no longer fits the model's context: the prompt is {prompt}, context_tokens = {context}, which leaves {room} tokens for the reply (max_tokens {max_tokens}, at least {least} needed); shorten the prompt or the history (compact), or give the server a larger context and raise context_tokens to it")]
    TooLong { prompt: String, context: u64, room: u64, max_tokens: u64, least: u64 },
    /// A request with no usable reply: the last try's failure, and every try's when there were
    /// several (scrubbed of the run's secrets).
    #[error("{}", tried(last, tries))]
    Failed { last: String, tries: Vec<String> },
    #[error("the stored session is not an HTTP agent's history")]
    NotHistory,
    #[error("the stored history does not parse: {0}")]
    History(#[source] serde_json::Error),
}

fn tried(last: &str, tries: &[String]) -> String {
    if tries.len() < 2 {
        return last.to_string();
    }
    let list: Vec<String> = tries.iter().enumerate().map(|(i, t)| format!("{}) {t}", i + 1)).collect();
    format!("{last} (tried {} times: {})", tries.len(), list.join("; "))
}

/// Why a streamed reply's event cannot be folded in.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// An event (anthropic) or chunk (openai) that is not JSON.
    #[error("malformed stream {what} ({source}): {data}")]
    Malformed { what: &'static str, data: String, source: serde_json::Error },
    /// The server said the reply failed: what it said (`an error: ...`, `overloaded_error: ...`).
    #[error("the server reported {said}")]
    Reported { said: String, overloaded: bool },
}

impl StreamError {
    fn reported(said: String) -> StreamError {
        StreamError::Reported { overloaded: said.contains("overloaded"), said }
    }
}

use crate::accounting::Usage;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Api {
    OpenAi,
    Anthropic,
}

/// Where an HTTP runtime sends its requests, and with which key: the base URL from the runtime,
/// then its `env`, then the process environment, then the public API; the key from the
/// environment only (`api_key_env`, else the API's usual variable).
pub struct Target {
    pub api: Api,
    pub base_url: String,
    pub key_var: String,
    pub api_key: Option<String>,
    /// A loopback server, which needs no key.
    pub local: bool,
    pub default_model: &'static str,
}

impl Target {
    pub fn of(runtime: &crate::config::RuntimeConfig) -> Target {
        let (api, url_var, key_var, default_url, default_model) = match runtime.harness {
            crate::config::HarnessKind::Anthropic => (
                Api::Anthropic,
                "ANTHROPIC_BASE_URL",
                "ANTHROPIC_API_KEY",
                "https://api.anthropic.com",
                "claude-sonnet-4-5",
            ),
            _ => (Api::OpenAi, "OPENAI_BASE_URL", "OPENAI_API_KEY", "https://api.openai.com/v1", "gpt-5-mini"),
        };
        let from_env = |var: &str| {
            runtime
                .env
                .as_ref()
                .and_then(|e| e.get(var).cloned())
                .or_else(|| std::env::var(var).ok())
                .filter(|v| !v.is_empty())
        };
        let base_url =
            runtime.base_url.clone().or_else(|| from_env(url_var)).unwrap_or_else(|| default_url.to_string());
        let key_var = runtime.api_key_env.clone().unwrap_or_else(|| key_var.to_string());
        let api_key = std::env::var(&key_var).ok().filter(|v| !v.is_empty());
        let local = ["://127.0.0.1", "://localhost", "://[::1]"].iter().any(|h| base_url.contains(h));
        Target { api, base_url, key_var, api_key, local, default_model }
    }

    /// `host:port` of the base URL.
    pub fn authority(&self) -> Option<String> {
        authority(&self.base_url)
    }
}

/// `host:port` of a URL, the scheme's port when it names none.
pub fn authority(url: &str) -> Option<String> {
    let rest = url.split("://").nth(1)?;
    let host = rest.split('/').next()?;
    let default_port = if url.starts_with("https") { 443 } else { 80 };
    Some(if host.rsplit(':').next().is_some_and(|p| p.parse::<u16>().is_ok()) && !host.ends_with(']') {
        host.to_string()
    } else {
        format!("{host}:{default_port}")
    })
}

/// A session's settings, resolved from the runtime when the agent opens.
#[derive(Clone)]
pub struct HttpConfig {
    pub api: Api,
    pub base_url: String,
    pub model: String,
    pub effort: Option<String>,
    /// From the environment only; never recorded.
    pub api_key: Option<String>,
    pub structured: bool,
    /// Structured mode against a server whose `json_schema` takes only an object at the root
    /// (OpenAI's own API): an answer that is not an object travels as `{"value": ...}`.
    pub object_only: bool,
    pub max_tokens: u64,
    /// The model's context as the runtime declares it: requests are sized to fit it.
    pub context_tokens: Option<u64>,
    /// Summarise the history before a turn that starts past `context::COMPACT_AT` of the context.
    pub auto_compact: bool,
    /// No first byte of a reply for this long fails the request (`request_timeout`, at most the
    /// stall timeout); it is retried.
    pub first_byte: Duration,
    /// The agent's stall timeout: a request's waits for a first byte, over all its tries, end
    /// there (a request queued on a busy server is waiting, not progress).
    pub stall: Duration,
    /// No chunk of a streamed reply for this long fails it (`idle_timeout`, at most the stall
    /// timeout).
    pub idle: Duration,
    /// Scrubs error bodies (which may echo the request's headers) before they are recorded.
    pub redactor: std::sync::Arc<crate::redact::Redactor>,
    /// `openai`: ask for each reply token's log-probability and this many alternatives (a
    /// decision model's runtime, `RuntimeConfig::top_logprobs`).
    pub top_logprobs: Option<u32>,
}

/// A request's wait for the first byte of its reply, unless the runtime says.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// A streamed reply's longest silence, unless the runtime says.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

impl HttpConfig {
    /// A runtime's settings for agent `key`: base URL and key as `Target::of` finds them (a remote
    /// API without its key is refused), the answer mode, the sizes.
    pub fn of(
        key: &str,
        runtime: &crate::config::RuntimeConfig,
        stall: Duration,
        redactor: std::sync::Arc<crate::redact::Redactor>,
    ) -> Result<HttpConfig, crate::harness::HarnessError> {
        let refuse = |e: HttpError| crate::harness::HarnessError::from(e).of_agent(key);
        let target = Target::of(runtime);
        if target.api_key.is_none() && !target.local {
            let (var, url) = (target.key_var.to_string(), target.base_url.clone());
            return Err(refuse(HttpError::NoKey { harness: runtime.harness, var, url }));
        }
        let structured = match runtime.answer.as_deref() {
            None | Some("tools") => false,
            Some("structured") if target.api == Api::OpenAi => true,
            Some("structured") => return Err(refuse(HttpError::StructuredAnthropic)),
            Some(other) => return Err(refuse(HttpError::AnswerMode(other.to_string()))),
        };
        if runtime.context_tokens == Some(0) {
            return Err(refuse(HttpError::NoContext));
        }
        let bound = |field: &'static str, text: &Option<String>, default: Duration| {
            let asked = match text {
                Some(t) => {
                    crate::config::parse_duration(t).map_err(|source| refuse(HttpError::Timeout { field, source }))?
                }
                None => default,
            };
            Ok::<_, crate::harness::HarnessError>(asked.min(stall))
        };
        let first_byte = bound("request_timeout", &runtime.request_timeout, REQUEST_TIMEOUT)?;
        let idle = bound("idle_timeout", &runtime.idle_timeout, IDLE_TIMEOUT)?;
        Ok(HttpConfig {
            api: target.api,
            object_only: target.base_url.contains("api.openai.com"),
            base_url: target.base_url,
            model: runtime.model.clone().unwrap_or_else(|| target.default_model.to_string()),
            effort: runtime.effort.clone(),
            api_key: target.api_key,
            structured,
            max_tokens: runtime.max_tokens.unwrap_or(4096),
            context_tokens: runtime.context_tokens,
            auto_compact: runtime.auto_compact.unwrap_or(true),
            first_byte,
            stall,
            idle,
            redactor,
            top_logprobs: runtime.top_logprobs.filter(|_| target.api == Api::OpenAi),
        })
    }
}

/// One message of the history, in a form both APIs map from.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Msg {
    User { text: String },
    Assistant { text: String, calls: Vec<ToolCall> },
    Tool { id: String, name: String, text: String },
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as the model wrote them (JSON text).
    pub arguments: String,
}

/// A tool offered to the model.
pub struct ToolSpec {
    pub name: &'static str,
    pub description: String,
    pub parameters: Value,
}

/// One streamed reply, assembled.
#[derive(Debug, Default)]
pub struct Reply {
    pub text: String,
    pub calls: Vec<ToolCall>,
    pub finish: Option<String>,
    pub usage: Usage,
    /// The `max_tokens` the request asked for (clipped to the room left in the model's context).
    pub asked: u64,
    /// The request's size as awf counted it before sending it.
    prompt: size::PromptSize,
    /// Each token's log-probability and alternatives, as the server sent them (chat completions'
    /// `logprobs.content` entries), when the request asked for them.
    pub logprobs: Vec<Value>,
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// An `openai` runtime's settings against `base_url`, with the defaults.
    pub fn config(base_url: &str) -> HttpConfig {
        HttpConfig {
            api: Api::OpenAi,
            base_url: base_url.into(),
            model: "m".into(),
            effort: None,
            api_key: None,
            structured: false,
            object_only: false,
            max_tokens: 4096,
            context_tokens: None,
            auto_compact: true,
            first_byte: REQUEST_TIMEOUT,
            stall: Duration::from_secs(600),
            idle: IDLE_TIMEOUT,
            redactor: Default::default(),
            top_logprobs: None,
        }
    }
}
