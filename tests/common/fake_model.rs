//! A fake model server for the HTTP harness tests: speaks OpenAI chat-completions SSE and
//! Anthropic Messages SSE on 127.0.0.1, answering each request with the next scripted reply, and
//! keeps every request body for assertions.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One scripted reply.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A tool call with these arguments (JSON).
    Tool { name: String, args: Value },
    /// Plain text, ending the turn.
    Text(String),
    /// Text cut off by the token limit (`finish_reason: length` / `stop_reason: max_tokens`).
    Cut(String),
    /// An HTTP error status, with an optional Retry-After in seconds.
    Status { code: u16, retry_after: Option<u32>, body: String },
    /// The reply's first bytes, then a pause of this many ms, then the rest.
    Slow { pause_ms: u64, then: Box<Reply> },
    /// The headers and part of the stream, then the connection closes.
    Drop,
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
}

#[derive(Clone)]
pub struct FakeModel {
    pub port: u16,
    script: Arc<Mutex<VecDeque<Reply>>>,
    pub requests: Arc<Mutex<Vec<(String, Value)>>>,
}

impl FakeModel {
    /// Starts the server with a script; after the script runs out every request gets "done".
    pub fn start(script: Vec<Reply>) -> FakeModel {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let port = listener.local_addr().expect("addr").port();
        let server =
            FakeModel { port, script: Arc::new(Mutex::new(script.into())), requests: Arc::new(Mutex::new(Vec::new())) };
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

    pub fn bodies(&self) -> Vec<Value> {
        self.requests.lock().expect("lock").iter().map(|(_, b)| b.clone()).collect()
    }

    fn serve(&self, mut stream: TcpStream) {
        stream.set_read_timeout(Some(Duration::from_secs(10))).ok();
        let mut reader = BufReader::new(stream.try_clone().expect("clone"));
        let mut line = String::new();
        if reader.read_line(&mut line).is_err() {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).is_err() || h.trim().is_empty() {
                break;
            }
            if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0u8; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        self.requests.lock().expect("lock").push((path.clone(), body));
        let reply = self.script.lock().expect("lock").pop_front().unwrap_or(Reply::Text("done".into()));
        let anthropic = path.contains("/v1/messages");
        write_reply(&mut stream, &reply, anthropic);
    }
}

fn head(stream: &mut TcpStream) {
    let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n");
}

fn events(reply: &Reply, anthropic: bool) -> Vec<String> {
    let sse = |event: Option<&str>, data: Value| match event {
        Some(e) => format!("event: {e}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    };
    if anthropic {
        let mut out = vec![sse(
            Some("message_start"),
            json!({ "type": "message_start", "message": { "id": "m1", "role": "assistant", "content": [], "usage": { "input_tokens": 100, "output_tokens": 1 } } }),
        )];
        let stop = match reply {
            Reply::Tool { name, args } => {
                out.push(sse(Some("content_block_start"), json!({ "type": "content_block_start", "index": 0, "content_block": { "type": "tool_use", "id": "toolu_1", "name": name, "input": {} } })));
                out.push(sse(Some("content_block_delta"), json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "input_json_delta", "partial_json": args.to_string() } })));
                out.push(sse(Some("content_block_stop"), json!({ "type": "content_block_stop", "index": 0 })));
                "tool_use"
            }
            Reply::Text(t) | Reply::Cut(t) => {
                out.push(sse(Some("content_block_start"), json!({ "type": "content_block_start", "index": 0, "content_block": { "type": "text", "text": "" } })));
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
            json!({ "type": "message_delta", "delta": { "stop_reason": stop }, "usage": { "output_tokens": 20 } }),
        ));
        out.push(sse(Some("message_stop"), json!({ "type": "message_stop" })));
        out
    } else {
        let chunk = |delta: Value, finish: Value| {
            sse(
                None,
                json!({ "id": "c1", "object": "chat.completion.chunk", "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }] }),
            )
        };
        let mut out = vec![chunk(json!({ "role": "assistant" }), Value::Null)];
        match reply {
            Reply::Tool { name, args } => {
                out.push(chunk(json!({ "tool_calls": [{ "index": 0, "id": "call_1", "type": "function", "function": { "name": name, "arguments": "" } }] }), Value::Null));
                out.push(chunk(
                    json!({ "tool_calls": [{ "index": 0, "function": { "arguments": args.to_string() } }] }),
                    Value::Null,
                ));
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
            _ => {}
        }
        out.push(sse(
            None,
            json!({ "id": "c1", "choices": [], "usage": { "prompt_tokens": 100, "completion_tokens": 20 } }),
        ));
        out.push("data: [DONE]\n\n".into());
        out
    }
}

fn write_reply(stream: &mut TcpStream, reply: &Reply, anthropic: bool) {
    match reply {
        Reply::Status { code, retry_after, body } => {
            let extra = retry_after.map(|s| format!("retry-after: {s}\r\n")).unwrap_or_default();
            let _ = write!(stream, "HTTP/1.1 {code} Error\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{extra}connection: close\r\n\r\n{body}", body.len());
        }
        Reply::Slow { pause_ms, then } => {
            head(stream);
            let evs = events(then, anthropic);
            let _ = stream.write_all(evs[0].as_bytes());
            let _ = stream.flush();
            std::thread::sleep(Duration::from_millis(*pause_ms));
            for e in &evs[1..] {
                let _ = stream.write_all(e.as_bytes());
            }
        }
        Reply::Drop => {
            head(stream);
            let evs = events(&Reply::Text("partial".into()), anthropic);
            let _ = stream.write_all(evs[0].as_bytes());
            let _ = stream.flush();
        }
        other => {
            head(stream);
            for e in events(other, anthropic) {
                let _ = stream.write_all(e.as_bytes());
            }
        }
    }
    let _ = stream.flush();
}
