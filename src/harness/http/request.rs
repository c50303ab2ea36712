//! One model request: its body (its `max_tokens` sized to the model's context), sending it with
//! retries on rate limits, overload and failed connections (honouring Retry-After), and reading the
//! streamed reply, whose spend goes on the operation's meter even when the reply never ends.

use super::session::HttpSession;
use super::{anthropic, openai, sse, Api, HttpError, Reply, ToolCall, ToolSpec};
use super::{context, count, size};
use crate::accounting::{Meter, Usage};
use futures_util::StreamExt;
use serde_json::Value;
use std::time::Duration;

/// Retries of one request on rate limits, overload and failed connections.
const MAX_RETRIES: u32 = 4;
/// The longest wait between retries, whatever Retry-After says.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// How long a request may wait for its first byte before it is said to be waiting (and again
/// after each such stretch), at most: a request queued on a busy server is shown, not waited on in
/// silence. A shorter first-byte bound is said at each quarter of it (never under 250 ms).
const WAITING_NOTICE: Duration = Duration::from_secs(10);

/// Why a request failed, and whether trying again may help.
struct RequestError {
    message: String,
    retry: bool,
    after: Option<Duration>,
    /// No first byte came within the wait it was given.
    unanswered: bool,
    /// The server refused the request as longer than its context.
    limit: Option<context::Limit>,
}

impl RequestError {
    fn new(message: String, retry: bool) -> RequestError {
        RequestError { message, retry, after: None, unanswered: false, limit: None }
    }
}

/// A request's size: as awf counted it, its `max_tokens`, and its text's length and messages (what
/// the server's count calibrates).
struct RequestSize {
    prompt: size::PromptSize,
    max_tokens: u64,
    chars: u64,
    messages: u64,
}

impl HttpSession {
    fn body(&self, tools: &[ToolSpec], structured: Option<&Value>, max_tokens: u64) -> Value {
        let system = self.info.instructions.as_deref();
        match self.cfg.api {
            Api::OpenAi => openai::body(&self.cfg, system, &self.history, tools, structured, max_tokens),
            Api::Anthropic => anthropic::body(&self.cfg, system, &self.history, tools, max_tokens),
        }
    }

    /// Sends one request, retrying rate limits, overload and failed connections. What the server
    /// spends is added to `meter` as it is known, however the request ends. Its waits for a first
    /// byte add up, over its tries, to the stall timeout at most.
    pub(super) async fn request(
        &self,
        tools: &[ToolSpec],
        structured: Option<&Value>,
        meter: &Meter,
    ) -> Result<Reply, HttpError> {
        let prompt = self.prompt_size(tools).await;
        let max_tokens = context::reply_room(&self.cfg, &prompt)?;
        let whole = context::pending(None, self.info.instructions.as_deref(), &self.history, tools);
        let sized = RequestSize { prompt, max_tokens, chars: whole.text.len() as u64, messages: whole.messages };
        let body = self.body(tools, structured, max_tokens);
        let mut attempt = 0;
        let mut tries: Vec<String> = Vec::new();
        let mut waited = Duration::ZERO;
        loop {
            attempt += 1;
            let first_byte = self.cfg.first_byte.min(self.cfg.stall.saturating_sub(waited));
            let spend = Spend { meter, estimate: prompt.tokens, started: false, chars: 0, usage: None };
            match self.request_once(&body, first_byte, &sized, spend).await {
                Ok(mut r) => {
                    r.asked = max_tokens;
                    r.prompt = prompt;
                    let counted = r.usage.tokens() - r.usage.output_tokens;
                    if prompt.by != size::Counted::Tokenize {
                        count::calibrate(&self.cfg, sized.chars, sized.messages, counted);
                    }
                    return Ok(r);
                }
                Err(e) => {
                    if let Some(context::Limit::Counted { counted, prompt_only: true, .. }) = e.limit {
                        count::calibrate(&self.cfg, sized.chars, sized.messages, counted);
                    }
                    if e.unanswered {
                        waited += first_byte;
                    }
                    let stalled = e.unanswered && waited >= self.cfg.stall;
                    let why = self.cfg.redactor.scrub(&e.message);
                    if e.retry && attempt <= MAX_RETRIES && !stalled {
                        let wait =
                            e.after.unwrap_or(Duration::from_millis(500 * 2u64.pow(attempt - 1))).min(MAX_BACKOFF);
                        (self.events)(&crate::run::Event::HttpRetry {
                            agent: &self.info.key,
                            attempt,
                            of: MAX_RETRIES + 1,
                            wait_ms: wait.as_millis() as u64,
                            why: &why,
                        });
                        tries.push(why);
                        tokio::time::sleep(wait).await;
                        continue;
                    }
                    let last = if stalled {
                        format!(
                            "{why}; its waits for a first byte reached the stall timeout ({}): a request queued on a busy server is waiting, not progress",
                            humantime::format_duration(self.cfg.stall)
                        )
                    } else {
                        why
                    };
                    if !tries.is_empty() {
                        tries.push(last.clone());
                    }
                    return Err(HttpError::Failed { last, tries });
                }
            }
        }
    }

    /// Awaits `sent` (a request until its first byte), recording an `http-waiting` event each
    /// notice period it goes on (`WAITING_NOTICE`): a request queued on a busy server is shown
    /// waiting, not silent.
    async fn waiting_said<T>(&self, url: &str, sent: impl std::future::Future<Output = T>) -> T {
        tokio::pin!(sent);
        let started = tokio::time::Instant::now();
        let notice = (self.cfg.first_byte.min(self.cfg.stall) / 4).clamp(Duration::from_millis(250), WAITING_NOTICE);
        let mut every = tokio::time::interval_at(started + notice, notice);
        loop {
            tokio::select! {
                out = &mut sent => return out,
                _ = every.tick() => {
                    let url = self.cfg.redactor.scrub(url);
                    (self.events)(&crate::run::Event::HttpWaiting {
                        agent: &self.info.key,
                        url: &url,
                        waited_ms: started.elapsed().as_millis() as u64,
                        limit_ms: self.cfg.first_byte.min(self.cfg.stall).as_millis() as u64,
                    });
                }
            }
        }
    }

    async fn request_once(
        &self,
        body: &Value,
        first_byte: Duration,
        sized: &RequestSize,
        mut spend: Spend<'_>,
    ) -> Result<Reply, RequestError> {
        let (url, headers) = match self.cfg.api {
            Api::OpenAi => openai::endpoint(&self.cfg),
            Api::Anthropic => anthropic::endpoint(&self.cfg),
        };
        let mut req = self.client.post(&url).json(body);
        for (k, v) in headers {
            req = req.header(k, v);
        }
        let resp = self
            .waiting_said(&url, tokio::time::timeout(first_byte, req.send()))
            .await
            .map_err(|_| RequestError {
                unanswered: true,
                ..RequestError::new(
                    format!(
                        "no response from {url} within {} (request_timeout, or what is left of the stall timeout if smaller)",
                        humantime::format_duration(first_byte)
                    ),
                    true,
                )
            })?
            // A refused connection means no server listens there: waiting will not start one.
            .map_err(|e| {
                let retry = (e.is_connect() && !refused(&e)) || e.is_timeout();
                RequestError::new(format!("request to {url} failed: {}", causes(&e)), retry)
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
            let limit = context::server_limit(&excerpt);
            let message = match &limit {
                Some(l) => {
                    let why = context::refused(&self.cfg, l, &sized.prompt, sized.max_tokens, &excerpt);
                    format!("{why} (HTTP {status} from {url})")
                }
                None => format!("HTTP {status} from {url}: {excerpt}"),
            };
            return Err(RequestError { after, limit, ..RequestError::new(message, retry) });
        }
        // From here on the server is working for us: a reply that never ends is billed too.
        spend.started = true;
        let mut stream = resp.bytes_stream();
        let mut parser = sse::SseParser::default();
        let mut reply = Reply::default();
        let mut state = StreamState::default();
        loop {
            let next = tokio::time::timeout(self.cfg.idle, stream.next()).await.map_err(|_| {
                let idle = humantime::format_duration(self.cfg.idle);
                RequestError::new(
                    format!("stalled: no data from {url} for {idle} (idle_timeout, or the stall timeout if smaller)"),
                    false,
                )
            })?;
            let Some(chunk) = next else {
                if state.done {
                    break;
                }
                return Err(RequestError::new(format!("the connection to {url} closed before the reply ended"), false));
            };
            let chunk = chunk
                .map_err(|e| RequestError::new(format!("the connection to {url} dropped mid-reply: {e}"), false))?;
            for ev in parser.push(&chunk) {
                let r = match self.cfg.api {
                    Api::OpenAi => openai::on_event(&mut reply, &mut state, &ev),
                    Api::Anthropic => anthropic::on_event(&mut reply, &mut state, &ev),
                };
                spend.usage = Some(reply.usage);
                spend.chars = (reply.text.len() + state.calls.iter().map(|c| c.arguments.len()).sum::<usize>()) as u64;
                r.map_err(|e| {
                    let overloaded = matches!(e, super::StreamError::Reported { overloaded: true, .. });
                    let retry = overloaded && reply.text.is_empty() && reply.calls.is_empty();
                    RequestError::new(e.to_string(), retry)
                })?;
            }
            if state.done {
                break;
            }
        }
        reply.calls = state.calls.into_iter().filter(|c| !c.name.is_empty()).collect();
        spend.settle(&reply.usage);
        Ok(reply)
    }
}

/// What one request spends, put on the operation's meter when it ends, whichever way: the usage
/// the server reported when the reply ended; else (a stream cancelled, stalled or dropped) what it
/// had reported so far, with the tokens it had not yet counted estimated from the request's size
/// and the text received (4 characters a token).
struct Spend<'m> {
    meter: &'m Meter,
    /// The request's estimated size in tokens.
    estimate: u64,
    /// Whether the server accepted the request (and so works on it); false again once settled.
    started: bool,
    /// Characters of reply text and tool arguments received.
    chars: u64,
    /// The usage the stream reported so far.
    usage: Option<Usage>,
}

impl Spend<'_> {
    fn settle(&mut self, usage: &Usage) {
        self.meter.add(usage);
        self.started = false;
    }
}

impl Drop for Spend<'_> {
    fn drop(&mut self) {
        if !self.started {
            return;
        }
        let mut u = self.usage.unwrap_or_default();
        if u.input_tokens + u.cache_read_tokens + u.cache_write_tokens == 0 {
            u.input_tokens = self.estimate;
        }
        u.output_tokens = u.output_tokens.max(self.chars / 4);
        self.meter.add(&u);
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

/// An error with every cause under it (`error sending request: ... : Connection refused (os error
/// 111)`): reqwest's own text drops the operating system's reason.
fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        source = cause.source();
    }
    text
}

/// Whether the connection was refused (nothing listens at the address).
fn refused(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(cause) = source {
        if cause.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused) {
            return true;
        }
        source = cause.source();
    }
    false
}
