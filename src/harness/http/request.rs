//! One model request: its body, sending it with retries on rate limits, overload and failed
//! connections (honouring Retry-After), and reading the streamed reply.

use super::session::HttpSession;
use super::{anthropic, openai, sse, Api, Reply, ToolCall, ToolSpec};
use futures_util::StreamExt;
use serde_json::Value;
use std::time::Duration;

/// Retries of one request on rate limits, overload and failed connections.
const MAX_RETRIES: u32 = 4;
/// The longest wait between retries, whatever Retry-After says.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Why a request failed, and whether trying again may help.
struct RequestError {
    message: String,
    retry: bool,
    after: Option<Duration>,
}

impl HttpSession {
    fn body(&self, tools: &[ToolSpec], structured: Option<&Value>) -> Value {
        match self.cfg.api {
            Api::OpenAi => openai::body(&self.cfg, self.info.instructions.as_deref(), &self.history, tools, structured),
            Api::Anthropic => anthropic::body(&self.cfg, self.info.instructions.as_deref(), &self.history, tools),
        }
    }

    /// Sends one request, retrying rate limits, overload and failed connections.
    pub(super) async fn request(&self, tools: &[ToolSpec], structured: Option<&Value>) -> Result<Reply, String> {
        let body = self.body(tools, structured);
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.request_once(&body).await {
                Ok(r) => return Ok(r),
                Err(e) if e.retry && attempt <= MAX_RETRIES => {
                    let wait = e.after.unwrap_or(Duration::from_millis(500 * 2u64.pow(attempt - 1))).min(MAX_BACKOFF);
                    (self.events)(&crate::run::Event::HttpRetry {
                        agent: &self.info.key,
                        attempt,
                        wait_ms: wait.as_millis() as u64,
                        why: &self.cfg.redactor.scrub(&e.message),
                    });
                    tokio::time::sleep(wait).await;
                }
                Err(e) => return Err(self.cfg.redactor.scrub(&e.message)),
            }
        }
    }

    async fn request_once(&self, body: &Value) -> Result<Reply, RequestError> {
        let (url, headers) = match self.cfg.api {
            Api::OpenAi => openai::endpoint(&self.cfg),
            Api::Anthropic => anthropic::endpoint(&self.cfg),
        };
        let mut req = self.client.post(&url).json(body);
        for (k, v) in headers {
            req = req.header(k, v);
        }
        let resp = tokio::time::timeout(self.cfg.stall, req.send())
            .await
            .map_err(|_| RequestError {
                message: format!("no response from {url} within {} s", self.cfg.stall.as_secs()),
                retry: true,
                after: None,
            })?
            .map_err(|e| RequestError {
                message: format!("request to {url} failed: {e}"),
                retry: e.is_connect() || e.is_timeout(),
                after: None,
            })?;
        let status = resp.status();
        if !status.is_success() {
            let after = resp
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<f64>().ok())
                .map(Duration::from_secs_f64);
            let text = resp.text().await.unwrap_or_default();
            // The body may echo the request's headers (its key): scrubbed before anything keeps it.
            let excerpt: String = self.cfg.redactor.scrub(&text).chars().take(400).collect();
            let retry = matches!(status.as_u16(), 429 | 503 | 529) || text.contains("overloaded");
            return Err(RequestError { message: format!("HTTP {status} from {url}: {excerpt}"), retry, after });
        }
        let mut stream = resp.bytes_stream();
        let mut parser = sse::SseParser::default();
        let mut reply = Reply::default();
        let mut state = StreamState::default();
        loop {
            let next = tokio::time::timeout(self.cfg.stall, stream.next()).await.map_err(|_| RequestError {
                message: format!("stalled: no data from {url} for {} s", self.cfg.stall.as_secs()),
                retry: false,
                after: None,
            })?;
            let Some(chunk) = next else {
                if state.done {
                    break;
                }
                return Err(RequestError {
                    message: format!("the connection to {url} closed before the reply ended"),
                    retry: false,
                    after: None,
                });
            };
            let chunk = chunk.map_err(|e| RequestError {
                message: format!("the connection to {url} dropped mid-reply: {e}"),
                retry: false,
                after: None,
            })?;
            for ev in parser.push(&chunk) {
                let r = match self.cfg.api {
                    Api::OpenAi => openai::on_event(&mut reply, &mut state, &ev),
                    Api::Anthropic => anthropic::on_event(&mut reply, &mut state, &ev),
                };
                r.map_err(|message| {
                    let retry = message.contains("overloaded") && reply.text.is_empty() && reply.calls.is_empty();
                    RequestError { message, retry, after: None }
                })?;
            }
            if state.done {
                break;
            }
        }
        reply.calls = state.calls.into_iter().filter(|c| !c.name.is_empty()).collect();
        Ok(reply)
    }
}

/// Parser state across a stream's events.
#[derive(Default)]
pub struct StreamState {
    pub calls: Vec<ToolCall>,
    /// Anthropic: the content-block index of each tool call in `calls`.
    pub tool_index: Vec<usize>,
    pub done: bool,
}
