//! The HTTP harnesses: `openai` (chat completions, OpenAI and compatible servers) and `anthropic`
//! (the Messages API). One session per agent keeps the message history (in memory and in the run
//! folder); a turn streams replies and runs the `wf_*` tools the model calls, answering with the
//! same texts as the launcher; `openai` can instead answer in structured mode, where the reply
//! itself is the submission. Rate limits are retried with backoff honouring Retry-After.

mod anthropic;
mod openai;
mod sse;

use super::{AgentInfo, BoxFuture, Session, TurnEnd, TurnInput, TurnReport};
use crate::accounting::{CostSource, Usage};
use crate::control::server::EventSink;
use crate::control::slot::Submission;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

/// Model requests one turn may make before it ends (tool calls chain requests).
const MAX_STEPS: usize = 24;
/// Retries of one request on rate limits, overload and failed connections.
const MAX_RETRIES: u32 = 4;
/// The longest wait between retries, whatever Retry-After says.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

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
        let (api, url_var, key_var, default_url, default_model) = match runtime.harness.as_str() {
            "anthropic" => (
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

/// Why a request failed, and whether trying again may help.
struct RequestError {
    message: String,
    retry: bool,
    after: Option<Duration>,
}

pub struct HttpSession {
    info: AgentInfo,
    cfg: HttpConfig,
    client: reqwest::Client,
    history: Vec<Msg>,
    history_file: PathBuf,
    events: EventSink,
}

/// The `wf_result` parameters: the op's schema when it describes an object, else `{value}`.
fn result_parameters(schema: &Value) -> (Value, bool) {
    if schema.get("type").and_then(Value::as_str) == Some("object") {
        (schema.clone(), false)
    } else {
        (json!({ "type": "object", "properties": { "value": schema }, "required": ["value"] }), true)
    }
}

fn tool_specs(schema: &Value, op_id: &str) -> Vec<ToolSpec> {
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

/// A model's JSON answer without a surrounding code fence.
fn unfence(text: &str) -> &str {
    let t = text.trim();
    let Some(rest) = t.strip_prefix("```") else { return t };
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_alphanumeric());
    rest.strip_suffix("```").unwrap_or(rest).trim()
}

impl HttpSession {
    pub fn new(info: AgentInfo, cfg: HttpConfig, history_file: PathBuf, events: EventSink) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(HttpSession { info, cfg, client, history: Vec::new(), history_file, events })
    }

    fn save(&self) {
        let doc = json!({ "model": self.cfg.model, "messages": self.history });
        if let Some(dir) = self.history_file.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        if let Err(e) = crate::record::write_document(&self.history_file, &doc) {
            tracing::error!("cannot write {}: {e}", self.history_file.display());
        }
    }

    fn body(&self, tools: &[ToolSpec], structured: Option<&Value>) -> Value {
        match self.cfg.api {
            Api::OpenAi => openai::body(&self.cfg, self.info.instructions.as_deref(), &self.history, tools, structured),
            Api::Anthropic => anthropic::body(&self.cfg, self.info.instructions.as_deref(), &self.history, tools),
        }
    }

    /// Sends one request, retrying rate limits, overload and failed connections.
    async fn request(&self, tools: &[ToolSpec], structured: Option<&Value>) -> Result<Reply, String> {
        let body = self.body(tools, structured);
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.request_once(&body).await {
                Ok(r) => return Ok(r),
                Err(e) if e.retry && attempt <= MAX_RETRIES => {
                    let wait = e.after.unwrap_or(Duration::from_millis(500 * 2u64.pow(attempt - 1))).min(MAX_BACKOFF);
                    (self.events)(
                        "http-retry",
                        json!({ "agent": self.info.key, "attempt": attempt, "wait_ms": wait.as_millis() as u64, "why": e.message }),
                    );
                    tokio::time::sleep(wait).await;
                }
                Err(e) => return Err(e.message),
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
            let excerpt: String = text.chars().take(400).collect();
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

    /// Runs one tool call, answering with the launcher's texts.
    async fn call_tool(&self, call: &ToolCall, input: &TurnInput) -> String {
        let args: Result<Value, _> =
            serde_json::from_str(if call.arguments.trim().is_empty() { "{}" } else { &call.arguments });
        let field = |k: &str| args.as_ref().ok().and_then(|a| a.get(k)).and_then(Value::as_str).map(String::from);
        match call.name.as_str() {
            "wf_result" => {
                let (_, wrapped) = result_parameters(&input.slot.schema().value);
                let sub = match args {
                    Ok(v) if wrapped => match v.get("value") {
                        Some(inner) => input.slot.submit(inner.clone()),
                        None => input.slot.submit_text("{\"value\" is missing}"),
                    },
                    Ok(v) => input.slot.submit(v),
                    Err(_) => input.slot.submit_text(&call.arguments),
                };
                sub.text()
            }
            name @ ("wf_send" | "wf_ask" | "wf_reply" | "wf_inbox") => {
                let Some(m) = &input.messenger else { return "refused: this turn cannot message other agents".into() };
                match name {
                    "wf_send" => match (field("to"), field("text")) {
                        (Some(to), Some(text)) => {
                            m.send(&to, &text).map(|n| format!("sent #{n}")).unwrap_or_else(|e| e)
                        }
                        _ => "refused: wf_send needs `to` and `text`".into(),
                    },
                    "wf_ask" => match (field("to"), field("text")) {
                        (Some(to), Some(text)) => {
                            let deadline = input.deadline_unix_ms.map(crate::agent::op::instant_of);
                            m.ask(&to, &text, deadline).await.unwrap_or_else(|e| {
                                if e.starts_with("refused") {
                                    e
                                } else {
                                    format!("ask failed: {e}")
                                }
                            })
                        }
                        _ => "refused: wf_ask needs `to` and `text`".into(),
                    },
                    "wf_reply" => {
                        let n = args.as_ref().ok().and_then(|a| a.get("n")).and_then(Value::as_u64);
                        match (n, field("text")) {
                            (Some(n), Some(text)) => {
                                m.reply(n, &text).map(|_| format!("replied to #{n}")).unwrap_or_else(|e| e)
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

    async fn run_turn(&mut self, input: TurnInput) -> TurnReport {
        let mut usage = Usage::default();
        let report = |end, usage| TurnReport { end, usage, cost_source: CostSource::Priced, simulated: false };
        self.history.push(Msg::User { text: input.shown.clone() });
        let schema = input.slot.schema().value.clone();
        let structured = self.cfg.structured && input.kind == super::TurnKind::Turn;
        let tools = if structured { Vec::new() } else { tool_specs(&schema, &input.op_id) };
        let wrapped_schema = result_parameters(&schema).0;
        for _ in 0..MAX_STEPS {
            let reply = match self.request(&tools, structured.then_some(&wrapped_schema)).await {
                Ok(r) => r,
                Err(e) => {
                    self.save();
                    return report(TurnEnd::Failed(e), usage);
                }
            };
            usage.add(&reply.usage);
            self.history.push(Msg::Assistant { text: reply.text.clone(), calls: reply.calls.clone() });
            if structured {
                if reply.finish.as_deref() == Some("length") {
                    self.save();
                    return report(TurnEnd::Failed("the reply was cut off at max_tokens (finish_reason: length): a partial answer is not a result".into()), usage);
                }
                let (_, wrapped) = result_parameters(&schema);
                let sub = match serde_json::from_str::<Value>(unfence(&reply.text)) {
                    Ok(v) if wrapped => input.slot.submit(v.get("value").cloned().unwrap_or(v)),
                    Ok(v) => input.slot.submit(v),
                    Err(_) => input.slot.submit_text(unfence(&reply.text)),
                };
                if let Submission::Rejected(_) = sub {
                    self.history.push(Msg::User { text: sub.text() });
                    continue;
                }
                self.save();
                return report(TurnEnd::Ended, usage);
            }
            if reply.calls.is_empty() {
                self.save();
                return report(TurnEnd::Ended, usage);
            }
            for call in &reply.calls {
                let text = self.call_tool(call, &input).await;
                self.history.push(Msg::Tool { id: call.id.clone(), name: call.name.clone(), text });
            }
            if input.slot.answer().is_some() {
                self.save();
                return report(TurnEnd::Ended, usage);
            }
        }
        self.save();
        report(TurnEnd::Ended, usage)
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

impl Session for HttpSession {
    fn turn(&mut self, input: TurnInput) -> BoxFuture<'_, TurnReport> {
        Box::pin(self.run_turn(input))
    }

    fn fork(&self, info: AgentInfo) -> Result<Box<dyn Session>, String> {
        let file =
            self.history_file.with_file_name(format!("history-{}.json", crate::record::agent_files::slug(&info.key)));
        let mut s = HttpSession::new(info, self.cfg.clone(), file, self.events.clone())?;
        s.history = self.history.clone();
        s.save();
        Ok(Box::new(s))
    }

    fn compact(&mut self, prompt: &str) -> BoxFuture<'_, Result<String, String>> {
        let prompt = prompt.to_string();
        Box::pin(async move {
            self.history.push(Msg::User { text: prompt });
            let reply = self.request(&[], None).await?;
            let summary = reply.text.trim().to_string();
            self.history = vec![
                Msg::User { text: format!("A summary of our conversation so far:\n\n{summary}") },
                Msg::Assistant { text: "Understood.".into(), calls: Vec::new() },
            ];
            self.save();
            Ok(summary)
        })
    }

    fn set(&mut self, model: Option<&str>, effort: Option<&str>) -> Result<(), String> {
        if let Some(m) = model {
            self.cfg.model = m.to_string();
            self.info.model = m.to_string();
        }
        if let Some(e) = effort {
            self.cfg.effort = Some(e.to_string());
        }
        Ok(())
    }
}
