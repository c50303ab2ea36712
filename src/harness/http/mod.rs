//! The HTTP harnesses: `openai` (chat completions, OpenAI and compatible servers) and `anthropic`
//! (the Messages API). One session per agent keeps the message history (in memory and in the run
//! folder); a turn streams replies and runs the `wf_*` tools the model calls, answering with the
//! same texts as the launcher; `openai` can instead answer in structured mode, where the reply
//! itself is the submission. Rate limits are retried with backoff honouring Retry-After.
//! `session.rs` (the session, its history and turns), `tools.rs` (the `wf_*` tools and their
//! execution), `request.rs` (one request: retries, the streamed reply) and `sse.rs` (the event
//! stream parser) are shared; `openai.rs` and `anthropic.rs` hold what differs.

mod anthropic;
mod openai;
mod request;
mod session;
mod sse;
mod tools;

pub use request::StreamState;
pub use session::HttpSession;

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
        let rest = self.base_url.split("://").nth(1)?;
        let host = rest.split('/').next()?;
        let default_port = if self.base_url.starts_with("https") { 443 } else { 80 };
        Some(if host.rsplit(':').next().is_some_and(|p| p.parse::<u16>().is_ok()) && !host.ends_with(']') {
            host.to_string()
        } else {
            format!("{host}:{default_port}")
        })
    }
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
    pub max_tokens: u64,
    /// No byte of a reply for this long fails the request.
    pub stall: Duration,
    /// Scrubs error bodies (which may echo the request's headers) before they are recorded.
    pub redactor: std::sync::Arc<crate::redact::Redactor>,
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
}
