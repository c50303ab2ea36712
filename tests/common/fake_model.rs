//! A fake model server for the harness tests: speaks OpenAI chat-completions SSE (with token
//! log-probabilities when a reply carries them), Anthropic Messages SSE and OpenAI Responses SSE
//! on 127.0.0.1, answering each request with the next scripted reply, and keeps every request
//! body for assertions.
//!
//! In CLI mode (`start_cli`), made for the agent CLIs (Claude Code, Codex, pi), a request whose
//! last message is a tool result is answered with the text "done" without taking from the script:
//! the CLI ran its shell tool and now ends its turn. Any other request takes the next scripted
//! reply, else the command of the prompt's last `FAKE_RUN: <command>` line, else "done".
//! A `Reply::Shell` becomes a call of the client's own shell tool (`Bash` {command}, `bash`
//! {command}, `exec_command` {cmd}), with `{launcher}` and `{op}` taken from the answer
//! instructions of the request's last prompt. `hold` holds every model request until `release`:
//! a test looks at the machine while the client waits for its reply.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// One scripted reply.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A tool call with these arguments (JSON).
    Tool { name: String, args: Value },
    /// Chat completions only: a tool call whose arguments are this text as written (JSON that a
    /// `Value` cannot hold, such as a key given twice).
    ToolText { name: String, args: String },
    /// Plain text, ending the turn.
    Text(String),
    /// Text cut off by the token limit (`finish_reason: length` / `stop_reason: max_tokens`).
    Cut(String),
    /// An HTTP error status, with an optional Retry-After in seconds.
    Status { code: u16, retry_after: Option<u32>, body: String },
    /// An HTTP error status whose JSON body echoes the request's headers (as some gateways do).
    EchoHeaders { code: u16 },
    /// The reply's first bytes, then a pause of this many ms, then the rest.
    Slow { pause_ms: u64, then: Box<Reply> },
    /// The headers and part of the stream, then the connection closes.
    Drop,
    /// A call of the client's own shell tool running this command; `{launcher}` and `{op}` are
    /// replaced from the answer instructions in the request.
    Shell(String),
    /// `then`, reporting this usage instead of 100 prompt and 20 completion tokens.
    Usage { prompt: u64, completion: u64, then: Box<Reply> },
    /// The headers and the first event, then nothing until the client goes away (at most 30 s).
    Hang,
    /// `then`, once `requests` (another server's) holds `n` requests (waited for at most 10 s).
    After { requests: Arc<Mutex<Vec<(String, Value)>>>, n: usize, then: Box<Reply> },
    /// Chat completions only: text ending the turn, each token in its own chunk with its
    /// log-probability and alternatives (`logprobs.content`), as llama-server streams them.
    Logprobs(Vec<Token>),
    /// Chat completions only: `text` as the reply's content, and beside it the log-probabilities
    /// of `tokens`, which spell something else (a server whose tokens are not its text).
    LogprobsOf { text: String, tokens: Vec<Token> },
}

/// One token of a `Reply::Logprobs`: its text, log-probability and the alternatives listed.
#[derive(Clone, Debug)]
pub struct Token {
    pub text: String,
    pub logprob: f64,
    pub top: Vec<(String, f64)>,
}

impl Token {
    /// A token the model was sure of: no alternatives.
    pub fn sure(text: &str) -> Token {
        Token { text: text.into(), logprob: -0.01, top: Vec::new() }
    }

    /// A token sampled with probability `p`, beside `others` (text, probability).
    pub fn among(text: &str, p: f64, others: &[(&str, f64)]) -> Token {
        let mut top = vec![(text.to_string(), p.ln())];
        top.extend(others.iter().map(|(t, q)| (t.to_string(), q.ln())));
        Token { text: text.into(), logprob: p.ln(), top }
    }

    fn json(&self) -> Value {
        let entry = |t: &str, lp: f64| json!({ "token": t, "bytes": t.as_bytes(), "logprob": lp });
        let mut v = entry(&self.text, self.logprob);
        v["top_logprobs"] = Value::Array(self.top.iter().map(|(t, lp)| entry(t, *lp)).collect());
        v
    }
}

impl Reply {
    pub fn tool(name: &str, args: Value) -> Reply {
        Reply::Tool { name: name.into(), args }
    }
    pub fn result(args: Value) -> Reply {
        Reply::tool("wf_result", args)
    }
    pub fn text(t: &str) -> Reply {
        Reply::Text(t.into())
    }
    pub fn with_usage(prompt: u64, completion: u64, then: Reply) -> Reply {
        Reply::Usage { prompt, completion, then: Box::new(then) }
    }
    pub fn shell(cmd: &str) -> Reply {
        Reply::Shell(cmd.into())
    }
    /// A shell call that pipes `answer` into the launcher for the prompt's operation.
    pub fn answer(answer: Value) -> Reply {
        Reply::Shell(answer_command(&answer))
    }
}

/// `printf '%s' '<json>' | {launcher} result {op}`.
pub fn answer_command(answer: &Value) -> String {
    format!("printf '%s' {} | {{launcher}} result {{op}}", shell_quote(&answer.to_string()))
}

pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Which wire format a request speaks, by its path.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Wire {
    Chat,
    Anthropic,
    Responses,
}

#[derive(Clone)]
pub struct FakeModel {
    pub port: u16,
    script: Arc<Mutex<VecDeque<Reply>>>,
    pub requests: Arc<Mutex<Vec<(String, Value)>>>,
    /// JSON documents served by path (`serve_doc`).
    gets: Arc<Mutex<Vec<(String, Value)>>>,
    cli: bool,
    ids: Arc<AtomicU64>,
    /// Counting tokens as llama-server does (`count_tokens`), and the `/tokenize` requests seen.
    counting: Arc<Mutex<Option<Counting>>>,
    pub tokenized: Arc<Mutex<Vec<String>>>,
    gate: Arc<Gate>,
}

/// Model requests held while closed: how many arrived, and whether they may go on.
#[derive(Default)]
struct Gate {
    /// (closed, requests that arrived while closed)
    state: Mutex<(bool, usize)>,
    changed: Condvar,
}

/// How long a held request waits for `release` before it goes on anyway.
const HELD_AT_MOST: Duration = Duration::from_secs(180);

impl Gate {
    /// Waits, while the gate is closed, until it opens (at most `HELD_AT_MOST`).
    fn pass(&self) {
        let mut state = self.state.lock().expect("lock");
        if !state.0 {
            return;
        }
        state.1 += 1;
        self.changed.notify_all();
        let (_state, _) = self.changed.wait_timeout_while(state, HELD_AT_MOST, |s| s.0).expect("lock");
    }
}

/// A server that counts tokens, at `chars_per_token` characters a token of the strings a request
/// holds (its messages and tools): with `tokenize`, `POST /tokenize {content}` answers
/// `{tokens: [...]}` (else 404, as servers without it do); each reply reports the count as
/// `prompt_tokens` and uses `reply_tokens` tokens, cut off at `max_tokens` or where `context` ends
/// (`finish_reason: length`); a prompt past `context` is refused with llama-server's error.
#[derive(Clone, Copy, Debug)]
pub struct Counting {
    pub chars_per_token: u64,
    pub tokenize: bool,
    pub context: u64,
    pub reply_tokens: u64,
}

impl Counting {
    fn tokens(&self, chars: usize) -> u64 {
        (chars as u64).div_ceil(self.chars_per_token)
    }

    /// A chat request's prompt tokens as this server counts them.
    pub fn prompt(&self, body: &Value) -> u64 {
        let mut all = Vec::new();
        strings(&body["messages"], &mut all);
        strings(&body["tools"], &mut all);
        self.tokens(all.iter().map(|s| s.len()).sum())
    }

    /// What a chat request's reply becomes, counted.
    fn reply(&self, body: &Value, scripted: Reply) -> Reply {
        let prompt = self.prompt(body);
        if prompt >= self.context {
            let body = json!({ "error": { "code": 400, "message": format!("request ({prompt} tokens) exceeds the available context size ({} tokens), try increasing it", self.context), "type": "exceed_context_size_error" } });
            return Reply::Status { code: 400, retry_after: None, body: body.to_string() };
        }
        let asked = body["max_tokens"].as_u64().unwrap_or(u64::MAX);
        let out = self.reply_tokens.min(asked).min(self.context - prompt);
        let then = if out < self.reply_tokens { Reply::Cut("{\"partial\": \"".into()) } else { scripted };
        Reply::Usage { prompt, completion: out, then: Box::new(then) }
    }
}

impl FakeModel {
    /// Starts the server with a script; after the script runs out every request gets "done".
    pub fn start(script: Vec<Reply>) -> FakeModel {
        Self::start_with(script, false)
    }

    /// Starts the server in CLI mode (see the module's documentation).
    pub fn start_cli(script: Vec<Reply>) -> FakeModel {
        Self::start_with(script, true)
    }

    fn start_with(script: Vec<Reply>, cli: bool) -> FakeModel {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let port = listener.local_addr().expect("addr").port();
        let server = FakeModel {
            port,
            script: Arc::new(Mutex::new(script.into())),
            requests: Arc::new(Mutex::new(Vec::new())),
            gets: Arc::new(Mutex::new(Vec::new())),
            cli,
            ids: Arc::new(AtomicU64::new(0)),
            counting: Arc::new(Mutex::new(None)),
            tokenized: Arc::new(Mutex::new(Vec::new())),
            gate: Arc::new(Gate::default()),
        };
        let s = server.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let s = s.clone();
                std::thread::spawn(move || s.serve(stream));
            }
        });
        server
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The bodies of the model requests (POSTs) received so far, in order.
    pub fn bodies(&self) -> Vec<Value> {
        self.requests.lock().expect("lock").iter().map(|(_, b)| b.clone()).collect()
    }

    /// Serves `doc` to requests for `path`, GET or POST (llama-server's `/props`, Ollama's
    /// `/api/show`); they are not recorded as model requests.
    pub fn serve_doc(&self, path: &str, doc: Value) {
        self.gets.lock().expect("lock").push((path.to_string(), doc));
    }

    /// Counts tokens from now on (see `Counting`).
    pub fn count_tokens(&self, counting: Counting) {
        *self.counting.lock().expect("lock") = Some(counting);
    }

    /// Holds every model request from now on, until `release`.
    pub fn hold(&self) {
        *self.gate.state.lock().expect("lock") = (true, 0);
    }

    /// Waits (at most `limit`) until a model request is held; whether one was.
    pub fn wait_held(&self, limit: Duration) -> bool {
        let state = self.gate.state.lock().expect("lock");
        let (state, _) = self.gate.changed.wait_timeout_while(state, limit, |s| s.1 == 0).expect("lock");
        state.1 > 0
    }

    /// Lets the held requests, and every one after, go on.
    pub fn release(&self) {
        self.gate.state.lock().expect("lock").0 = false;
        self.gate.changed.notify_all();
    }

    /// Adds replies to the end of the script.
    pub fn push(&self, replies: Vec<Reply>) {
        self.script.lock().expect("lock").extend(replies);
    }

    fn serve(&self, mut stream: TcpStream) {
        stream.set_read_timeout(Some(Duration::from_secs(10))).ok();
        let mut reader = BufReader::new(stream.try_clone().expect("clone"));
        let mut line = String::new();
        if reader.read_line(&mut line).is_err() {
            return;
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or("").to_string();
        let path = parts.next().unwrap_or("/").to_string();
        let mut len = 0usize;
        let mut chunked = false;
        let mut headers = serde_json::Map::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).is_err() || h.trim().is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.insert(k.trim().to_string(), Value::String(v.trim().to_string()));
            }
            let lower = h.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                len = v.trim().parse().unwrap_or(0);
            }
            if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
                chunked = true;
            }
        }
        let served = self.gets.lock().expect("lock").iter().find(|(p, _)| *p == path).map(|(_, d)| d.to_string());
        if let Some(doc) = served {
            // A document asked for by POST (Ollama's `/api/show`): its body is read, not recorded.
            let _ = reader.read_exact(&mut vec![0u8; len]);
            let _ = write!(stream, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{doc}", doc.len());
            return;
        }
        if method != "POST" {
            // Connectivity probes (Claude Code sends `HEAD /`) and anything else: an empty 200.
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            return;
        }
        let body = if chunked {
            let mut body = Vec::new();
            loop {
                let mut size = String::new();
                if reader.read_line(&mut size).is_err() {
                    return;
                }
                let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16).unwrap_or(0);
                let mut chunk = vec![0u8; n + 2];
                if reader.read_exact(&mut chunk).is_err() {
                    return;
                }
                if n == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..n]);
            }
            body
        } else {
            let mut body = vec![0u8; len];
            if reader.read_exact(&mut body).is_err() {
                return;
            }
            body
        };
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let counting = *self.counting.lock().expect("lock");
        if path.ends_with("/tokenize") {
            let content = body["content"].as_str().unwrap_or_default().to_string();
            self.tokenized.lock().expect("lock").push(content.clone());
            let doc = match counting.filter(|c| c.tokenize) {
                Some(c) => json!({ "tokens": vec![1; c.tokens(content.len()) as usize] }).to_string(),
                None => {
                    let _ = stream.write_all(
                        b"HTTP/1.1 404 Not Found\r\ncontent-length: 14\r\nconnection: close\r\n\r\nFile Not Found",
                    );
                    return;
                }
            };
            let _ = write!(stream, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{doc}", doc.len());
            return;
        }
        let wire = if path.contains("/messages") {
            Wire::Anthropic
        } else if path.contains("/responses") {
            Wire::Responses
        } else {
            Wire::Chat
        };
        self.requests.lock().expect("lock").push((path.clone(), body.clone()));
        self.gate.pass();
        let reply = if self.cli && last_is_tool_result(wire, &body) {
            Reply::Text("done".into())
        } else {
            let scripted = self.script.lock().expect("lock").pop_front();
            match scripted {
                Some(r) => r,
                None if self.cli => match fake_run(wire, &body) {
                    Some(cmd) => Reply::Shell(cmd),
                    None => Reply::Text("done".into()),
                },
                None => Reply::Text("done".into()),
            }
        };
        let reply = match counting {
            Some(c) if wire == Wire::Chat => c.reply(&body, reply),
            _ => reply,
        };
        let reply = match reply {
            Reply::EchoHeaders { code } => Reply::Status {
                code,
                retry_after: None,
                body: json!({ "error": "unauthorized", "request_headers": headers }).to_string(),
            },
            other => resolve(other, wire, &body),
        };
        let id = self.ids.fetch_add(1, Ordering::SeqCst) + 1;
        write_reply(&mut stream, &reply, wire, id);
    }
}

/// The conversation items of a request: `messages`, or the Responses `input`.
fn items(wire: Wire, body: &Value) -> Vec<Value> {
    let key = if wire == Wire::Responses { "input" } else { "messages" };
    match &body[key] {
        Value::Array(a) => a.clone(),
        Value::String(s) => vec![json!({ "role": "user", "content": s })],
        _ => Vec::new(),
    }
}

/// How Claude Code 2.x introduces a message the operator typed while it was busy: it folds the
/// line into the tool's result, in a system reminder, and a model answers it (read from its bundle
/// and seen in its requests).
const TYPED_WHILE_BUSY: &str = "The user sent a new message while you were working:";

/// Whether the conversation ends with a tool's result (the client ran a tool and waits for the
/// model's next step). Claude Code may put a `system` message last: it is skipped.
pub fn last_is_tool_result(wire: Wire, body: &Value) -> bool {
    let items = items(wire, body);
    let last = items.iter().rev().find(|m| m["role"] != "system" && m["role"] != "developer");
    let Some(last) = last else { return false };
    let mut said = Vec::new();
    strings(last, &mut said);
    if said.iter().any(|s| s.contains(TYPED_WHILE_BUSY)) {
        return false;
    }
    match wire {
        Wire::Chat => last["role"] == "tool",
        // A tool result, unless a new instruction follows it in the same message (Claude Code's
        // compaction appends its request there); system reminders are not instructions.
        Wire::Anthropic => {
            let blocks = last["content"].as_array().cloned().unwrap_or_default();
            let instruction = |b: &Value| {
                b["type"] == "text" && !b["text"].as_str().unwrap_or("").trim_start().starts_with("<system-reminder>")
            };
            last["role"] == "user"
                && blocks.iter().any(|b| b["type"] == "tool_result")
                && !blocks.iter().any(instruction)
        }
        Wire::Responses => {
            matches!(last["type"].as_str(), Some("function_call_output" | "custom_tool_call_output"))
        }
    }
}

/// Every string in `v`, in order.
fn strings<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(o) => o.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

/// The texts of the conversation, in order.
fn texts(wire: Wire, body: &Value) -> Vec<String> {
    let items = items(wire, body);
    let mut out = Vec::new();
    for item in &items {
        strings(item, &mut out);
    }
    out.into_iter().map(String::from).collect()
}

/// The launcher and op id of the last answer instructions in the conversation.
pub fn instructions(wire: Wire, body: &Value) -> Option<(String, String)> {
    let mut found = None;
    for text in texts(wire, body) {
        for line in text.lines() {
            let Some(rest) = line.trim().strip_suffix("<<'WF_JSON'") else { continue };
            let words: Vec<&str> = rest.split_whitespace().collect();
            if words.len() == 3 && words[1] == "result" {
                found = Some((words[0].to_string(), words[2].to_string()));
            }
        }
    }
    found
}

/// The command of the conversation's last `FAKE_RUN: <command>` line.
fn fake_run(wire: Wire, body: &Value) -> Option<String> {
    let mut found = None;
    for text in texts(wire, body) {
        for line in text.lines() {
            if let Some(cmd) = line.trim().strip_prefix("FAKE_RUN:") {
                found = Some(cmd.trim().to_string());
            }
        }
    }
    found
}

/// The names of the tools a request offers.
fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["name"].as_str().or_else(|| t["function"]["name"].as_str()))
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// Turns a `Shell` reply into a call of the client's own shell tool.
fn resolve(reply: Reply, wire: Wire, body: &Value) -> Reply {
    let Reply::Shell(cmd) = reply else { return reply };
    let cmd = match instructions(wire, body) {
        Some((launcher, op)) => cmd.replace("{launcher}", &launcher).replace("{op}", &op),
        None => cmd,
    };
    let names = tool_names(body);
    let name = ["Bash", "bash", "exec_command", "shell"]
        .iter()
        .find(|n| names.iter().any(|x| x == *n))
        .map(|n| n.to_string())
        .unwrap_or_else(|| if wire == Wire::Responses { "exec_command".into() } else { "bash".into() });
    let args = if name == "exec_command" { json!({ "cmd": cmd }) } else { json!({ "command": cmd }) };
    Reply::Tool { name, args }
}

fn head(stream: &mut TcpStream) {
    let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n");
}

fn sse(event: Option<&str>, data: Value) -> String {
    match event {
        Some(e) => format!("event: {e}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

fn anthropic_events(reply: &Reply, id: u64, (prompt, completion): (u64, u64)) -> Vec<String> {
    let mut out = vec![sse(
        Some("message_start"),
        json!({ "type": "message_start", "message": { "id": format!("msg_{id}"), "type": "message", "role": "assistant", "model": "fake-model", "content": [], "stop_reason": null, "usage": { "input_tokens": prompt, "output_tokens": 1 } } }),
    )];
    out.push(sse(Some("ping"), json!({ "type": "ping" })));
    let stop = match reply {
        Reply::Tool { name, args } => {
            out.push(sse(Some("content_block_start"), json!({ "type": "content_block_start", "index": 0, "content_block": { "type": "tool_use", "id": format!("toolu_{id}"), "name": name, "input": {} } })));
            out.push(sse(Some("content_block_delta"), json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "input_json_delta", "partial_json": args.to_string() } })));
            out.push(sse(Some("content_block_stop"), json!({ "type": "content_block_stop", "index": 0 })));
            "tool_use"
        }
        Reply::Text(t) | Reply::Cut(t) => {
            out.push(sse(
                Some("content_block_start"),
                json!({ "type": "content_block_start", "index": 0, "content_block": { "type": "text", "text": "" } }),
            ));
            out.push(sse(
                Some("content_block_delta"),
                json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "text_delta", "text": t } }),
            ));
            out.push(sse(Some("content_block_stop"), json!({ "type": "content_block_stop", "index": 0 })));
            if matches!(reply, Reply::Cut(_)) {
                "max_tokens"
            } else {
                "end_turn"
            }
        }
        _ => "end_turn",
    };
    out.push(sse(
        Some("message_delta"),
        json!({ "type": "message_delta", "delta": { "stop_reason": stop, "stop_sequence": null }, "usage": { "output_tokens": completion } }),
    ));
    out.push(sse(Some("message_stop"), json!({ "type": "message_stop" })));
    out
}

fn chat_events(reply: &Reply, id: u64, (prompt, completion): (u64, u64)) -> Vec<String> {
    let cid = format!("chatcmpl-{id}");
    let chunk = |delta: Value, finish: Value| {
        sse(
            None,
            json!({ "id": cid, "object": "chat.completion.chunk", "created": 0, "model": "fake-model", "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }] }),
        )
    };
    let mut out = vec![chunk(json!({ "role": "assistant", "content": "" }), Value::Null)];
    match reply {
        Reply::Tool { name, args } => {
            out.push(chunk(json!({ "tool_calls": [{ "index": 0, "id": format!("call_{id}"), "type": "function", "function": { "name": name, "arguments": "" } }] }), Value::Null));
            out.push(chunk(
                json!({ "tool_calls": [{ "index": 0, "function": { "arguments": args.to_string() } }] }),
                Value::Null,
            ));
            out.push(chunk(json!({}), json!("tool_calls")));
        }
        Reply::ToolText { name, args } => {
            out.push(chunk(json!({ "tool_calls": [{ "index": 0, "id": format!("call_{id}"), "type": "function", "function": { "name": name, "arguments": args } }] }), Value::Null));
            out.push(chunk(json!({}), json!("tool_calls")));
        }
        Reply::Text(t) => {
            out.push(chunk(json!({ "content": t }), Value::Null));
            out.push(chunk(json!({}), json!("stop")));
        }
        Reply::Cut(t) => {
            out.push(chunk(json!({ "content": t }), Value::Null));
            out.push(chunk(json!({}), json!("length")));
        }
        Reply::Logprobs(tokens) => {
            for t in tokens {
                out.push(sse(
                    None,
                    json!({ "id": cid, "object": "chat.completion.chunk", "created": 0, "model": "fake-model",
                            "choices": [{ "index": 0, "delta": { "content": t.text }, "finish_reason": null,
                                          "logprobs": { "content": [t.json()] } }] }),
                ));
            }
            out.push(chunk(json!({}), json!("stop")));
        }
        Reply::LogprobsOf { text, tokens } => {
            out.push(chunk(json!({ "content": text }), Value::Null));
            for t in tokens {
                out.push(sse(
                    None,
                    json!({ "id": cid, "object": "chat.completion.chunk", "created": 0, "model": "fake-model",
                            "choices": [{ "index": 0, "delta": { "content": "" }, "finish_reason": null,
                                          "logprobs": { "content": [t.json()] } }] }),
                ));
            }
            out.push(chunk(json!({}), json!("stop")));
        }
        _ => {}
    }
    out.push(sse(
        None,
        json!({ "id": cid, "object": "chat.completion.chunk", "choices": [], "usage": { "prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion } }),
    ));
    out.push("data: [DONE]\n\n".into());
    out
}

fn responses_events(reply: &Reply, id: u64) -> Vec<String> {
    let rid = format!("resp_{id}");
    let mut seq = 0u64;
    let mut ev = |ty: &str, mut data: Value| {
        data["type"] = json!(ty);
        data["sequence_number"] = json!(seq);
        seq += 1;
        sse(Some(ty), data)
    };
    let response = |status: &str, output: Value| json!({ "id": rid, "object": "response", "created_at": 0, "status": status, "model": "fake-model", "output": output });
    let mut out = vec![
        ev("response.created", json!({ "response": response("in_progress", json!([])) })),
        ev("response.in_progress", json!({ "response": response("in_progress", json!([])) })),
    ];
    let mut final_status = "completed";
    let item = match reply {
        Reply::Tool { name, args } => {
            let fid = format!("fc_{id}");
            let call_id = format!("call_{id}");
            let args = args.to_string();
            let added = json!({ "type": "function_call", "id": fid, "call_id": call_id, "name": name, "arguments": "", "status": "in_progress" });
            out.push(ev("response.output_item.added", json!({ "output_index": 0, "item": added })));
            out.push(ev(
                "response.function_call_arguments.delta",
                json!({ "item_id": fid, "output_index": 0, "delta": args }),
            ));
            out.push(ev(
                "response.function_call_arguments.done",
                json!({ "item_id": fid, "output_index": 0, "arguments": args }),
            ));
            let done = json!({ "type": "function_call", "id": fid, "call_id": call_id, "name": name, "arguments": args, "status": "completed" });
            out.push(ev("response.output_item.done", json!({ "output_index": 0, "item": done })));
            done
        }
        Reply::Text(t) | Reply::Cut(t) => {
            if matches!(reply, Reply::Cut(_)) {
                final_status = "incomplete";
            }
            let mid = format!("msg_{id}");
            let added =
                json!({ "type": "message", "id": mid, "role": "assistant", "status": "in_progress", "content": [] });
            out.push(ev("response.output_item.added", json!({ "output_index": 0, "item": added })));
            out.push(ev(
                "response.content_part.added",
                json!({ "item_id": mid, "output_index": 0, "content_index": 0, "part": { "type": "output_text", "text": "", "annotations": [] } }),
            ));
            out.push(ev(
                "response.output_text.delta",
                json!({ "item_id": mid, "output_index": 0, "content_index": 0, "delta": t }),
            ));
            out.push(ev(
                "response.output_text.done",
                json!({ "item_id": mid, "output_index": 0, "content_index": 0, "text": t }),
            ));
            let part = json!({ "type": "output_text", "text": t, "annotations": [] });
            out.push(ev(
                "response.content_part.done",
                json!({ "item_id": mid, "output_index": 0, "content_index": 0, "part": part }),
            ));
            let done =
                json!({ "type": "message", "id": mid, "role": "assistant", "status": "completed", "content": [part] });
            out.push(ev("response.output_item.done", json!({ "output_index": 0, "item": done })));
            done
        }
        _ => Value::Null,
    };
    let output = if item.is_null() { json!([]) } else { json!([item]) };
    let mut done = response(final_status, output);
    done["usage"] = json!({
        "input_tokens": 100, "input_tokens_details": { "cached_tokens": 0 },
        "output_tokens": 20, "output_tokens_details": { "reasoning_tokens": 0 }, "total_tokens": 120
    });
    if final_status == "incomplete" {
        done["incomplete_details"] = json!({ "reason": "max_output_tokens" });
        out.push(ev("response.incomplete", json!({ "response": done })));
    } else {
        out.push(ev("response.completed", json!({ "response": done })));
    }
    out
}

fn events(reply: &Reply, wire: Wire, id: u64) -> Vec<String> {
    let (reply, usage) = match reply {
        Reply::Usage { prompt, completion, then } => (&**then, (*prompt, *completion)),
        other => (other, (100, 20)),
    };
    match wire {
        Wire::Anthropic => anthropic_events(reply, id, usage),
        Wire::Chat => chat_events(reply, id, usage),
        Wire::Responses => responses_events(reply, id),
    }
}

fn write_reply(stream: &mut TcpStream, reply: &Reply, wire: Wire, id: u64) {
    match reply {
        Reply::After { requests, n, then } => {
            let start = std::time::Instant::now();
            while requests.lock().expect("lock").len() < *n && start.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(10));
            }
            return write_reply(stream, then, wire, id);
        }
        Reply::Hang => {
            head(stream);
            let evs = events(&Reply::Text("partial answer".into()), wire, id);
            let _ = stream.write_all(evs[0].as_bytes());
            let _ = stream.write_all(evs[1].as_bytes());
            let _ = stream.flush();
            // Held open until the client closes the connection.
            let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
            let _ = stream.read(&mut [0u8; 1]);
        }
        Reply::Status { code, retry_after, body } => {
            let extra = retry_after.map(|s| format!("retry-after: {s}\r\n")).unwrap_or_default();
            let _ = write!(stream, "HTTP/1.1 {code} Error\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{extra}connection: close\r\n\r\n{body}", body.len());
        }
        Reply::Slow { pause_ms, then } => {
            head(stream);
            let evs = events(then, wire, id);
            let _ = stream.write_all(evs[0].as_bytes());
            let _ = stream.flush();
            std::thread::sleep(Duration::from_millis(*pause_ms));
            for e in &evs[1..] {
                let _ = stream.write_all(e.as_bytes());
            }
        }
        Reply::Drop => {
            head(stream);
            let evs = events(&Reply::Text("partial".into()), wire, id);
            let _ = stream.write_all(evs[0].as_bytes());
            let _ = stream.flush();
        }
        other => {
            head(stream);
            for e in events(other, wire, id) {
                let _ = stream.write_all(e.as_bytes());
            }
        }
    }
    let _ = stream.flush();
}

/// An `awf.toml` whose default runtime `m` is the `api` harness (`openai` or `anthropic`) against
/// `server`, with `extra` lines for the runtime table.
pub fn http_config(api: &str, server: &FakeModel, extra: &str) -> String {
    let (model, base) = match api {
        "openai" => ("gpt-5-mini", format!("{}/v1", server.base())),
        _ => ("claude-sonnet-4-5", server.base()),
    };
    format!("default_runtime = \"m\"\n[runtimes.m]\nharness = \"{api}\"\nmodel = \"{model}\"\nbase_url = \"{base}\"\n{extra}\n")
}

/// A server on 127.0.0.1 that accepts connections (up to 16) and never answers, as a busy or hung
/// model server looks; its port. The connections stay open for the test's life.
pub fn silent_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming().take(16) {
            held.push(conn);
        }
    });
    port
}

/// An `awf.toml` whose default runtime `m` is an `openai` runtime on 127.0.0.1:`port` with
/// `extra` lines (the runtime's, then any other tables).
pub fn openai_on(port: u16, extra: &str) -> String {
    format!("default_runtime = \"m\"\n[runtimes.m]\nharness = \"openai\"\nmodel = \"x\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\n{extra}")
}
