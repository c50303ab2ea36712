//! A raw MCP client on `awf mcp`'s stdio (JSON-RPC lines, no SDK): each call's result and the
//! progress notifications sent for it before its reply.
#![allow(dead_code)]

use super::Env;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::sync::mpsc;

pub struct RawMcp {
    pub child: std::process::Child,
    pub stdin: std::process::ChildStdin,
    lines: mpsc::Receiver<String>,
    next: u64,
}

/// Writes one JSON-RPC message.
pub fn send(stdin: &mut std::process::ChildStdin, message: Value) {
    writeln!(stdin, "{message}").expect("write to awf mcp");
}

impl RawMcp {
    /// `awf mcp` in the folder, initialized.
    pub fn start(env: &Env) -> RawMcp {
        let mut child =
            super::command(env.path(), &["mcp"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("spawn");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut raw = RawMcp { child, stdin, lines, next: 0 };
        let client = json!({ "name": "raw", "version": "0" });
        raw.rpc("initialize", json!({ "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client }));
        send(&mut raw.stdin, json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
        raw
    }

    /// The call's result and the progress messages sent for it.
    pub fn rpc(&mut self, method: &str, params: Value) -> (Value, Vec<String>) {
        self.next += 1;
        let id = self.next;
        send(&mut self.stdin, json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        let mut progress = Vec::new();
        loop {
            let line = self.lines.recv_timeout(super::TIMEOUT).expect("a reply within the timeout");
            let v: Value = serde_json::from_str(&line).expect("JSON-RPC line");
            if v["method"] == "notifications/progress" && v["params"]["progressToken"] == format!("p{id}") {
                progress.push(v["params"]["message"].as_str().unwrap_or_default().to_string());
            }
            if v["id"] == id {
                return (v["result"].clone(), progress);
            }
        }
    }

    /// A tool call with a progress token: its result and its progress.
    pub fn call(&mut self, tool: &str, arguments: Value) -> (Value, Vec<String>) {
        let token = format!("p{}", self.next + 1);
        self.rpc("tools/call", json!({ "name": tool, "arguments": arguments, "_meta": { "progressToken": token } }))
    }
}
