//! `awf serve`: the HTTP JSON API over a loopback TCP port, driven by a small hand-written
//! HTTP/1.1 client.

mod common;

use common::Env;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A running `awf serve`, killed on drop.
struct Serve {
    child: Child,
    port: u16,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("local addr").port()
}

fn serve(env: &Env, extra: &[&str]) -> Serve {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut args = vec!["serve", "--listen", &listen];
    args.extend_from_slice(extra);
    let child = common::command(env.path(), &args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn awf serve");
    let server = Serve { child, port };
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(started.elapsed() < common::TIMEOUT, "awf serve did not listen on {listen}");
        std::thread::sleep(Duration::from_millis(50));
    }
    server
}

/// Decodes a chunked body.
fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).expect("a chunk size");
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

impl Serve {
    /// Sends one request and returns the status code and the body text.
    fn request(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, String) {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        stream.set_read_timeout(Some(common::TIMEOUT)).expect("set a read timeout");
        let body = body.map(Value::to_string).unwrap_or_default();
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(req.as_bytes()).expect("send");
        let mut raw = String::new();
        stream.read_to_string(&mut raw).expect("read the response");
        let (head, body) = raw.split_once("\r\n\r\n").expect("a response head");
        let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("a status code");
        let chunked = head.to_ascii_lowercase().contains("transfer-encoding: chunked");
        (status, if chunked { dechunk(body) } else { body.to_string() })
    }

    fn json(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let (status, text) = self.request(method, path, body);
        (status, serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}")))
    }

    fn start(&self, body: Value) -> String {
        let (status, v) = self.json("POST", "/runs", Some(&body));
        assert_eq!(status, 202, "{v}");
        v["run_id"].as_str().expect("a run id").to_string()
    }

    /// Polls GET /runs/{id} until its status is `want` (bounded).
    fn until(&self, id: &str, want: &str) -> Value {
        let started = Instant::now();
        loop {
            let (status, v) = self.json("GET", &format!("/runs/{id}"), None);
            assert_eq!(status, 200, "{v}");
            if v["status"] == want {
                return v;
            }
            assert!(started.elapsed() < common::TIMEOUT, "run {id} never became {want}: {v}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn listed_status(&self, id: &str) -> Value {
        let (_, v) = self.json("GET", "/runs", None);
        v["runs"].as_array().expect("runs").iter().find(|r| r["run_id"] == id).expect("listed")["status"].clone()
    }
}

const HANG: &str = r#"fn respond(turn) { #{ hang: true } }"#;
const STUCK: &str = "let a = ctx.agents.open(#{ key: \"stuck\" });\na.ask(\"x\")\n";

#[test]
fn a_workflow_run_succeeds_with_its_value_and_bad_input_is_refused() {
    let env = Env::new();
    env.write(
        "scripts/x.rhai",
        r#"export const META = #{ name: "x", args: #{ type: "object", required: ["n"], properties: #{ n: #{ type: "integer" } } } };
fn run(args) { args.n + 1 }"#,
    );
    env.write("scripts/broken.rhai", "let = ;");
    let s = serve(&env, &[]);
    let id = s.start(json!({ "script": "scripts/x.rhai", "args": { "n": 41 } }));
    let result = s.until(&id, "succeeded");
    assert_eq!(result["value"], 42);
    assert_eq!(result["run_id"], id.as_str());
    assert!(env.runs_root().join(&id).join("result.json").is_file());
    assert_eq!(s.listed_status(&id), "succeeded");

    let (events_status, events) = s.request("GET", &format!("/runs/{id}/events"), None);
    assert_eq!(events_status, 200);
    assert!(events.contains("event: run-started"), "{events}");
    assert!(events.contains("event: run-finished"), "{events}");

    let bad = |body: Value, needle: &str| {
        let (status, v) = s.json("POST", "/runs", Some(&body));
        assert_eq!(status, 400, "{v}");
        let error = v["error"].as_str().expect("an error");
        assert!(error.contains(needle), "{needle:?} not in {error}");
    };
    bad(json!({ "script": "scripts/missing.rhai" }), "cannot read script scripts/missing.rhai");
    bad(json!({ "script": "scripts/broken.rhai" }), "scripts/broken.rhai");
    bad(json!({ "script": "scripts/x.rhai", "args": { "n": "many" } }), "do not match META.args");
    bad(json!({ "strategy": "helper", "task": "x" }), "unknown strategy \"helper\"");
    bad(json!({ "strategy": "magi" }), "needs \"task\"");
    bad(json!({ "nothing": 1 }), "\"script\"");
}

#[test]
fn a_strategy_run_and_the_catalog() {
    let env = Env::new();
    env.with_responder(
        r#"fn respond(turn) {
    #{ answer: #{ choice: "yes", confidence: 0.8, reason: "it holds" }, usage: #{ input_tokens: 10, output_tokens: 5 } }
}"#,
    );
    let s = serve(&env, &[]);
    let (status, catalog) = s.json("GET", "/strategies", None);
    assert_eq!(status, 200);
    let magi = catalog["strategies"].as_array().expect("a list").iter().find(|x| x["name"] == "magi").expect("magi");
    assert!(magi["line"].as_str().expect("a line").starts_with("- magi("), "{magi}");
    assert_eq!(magi["meta"]["name"], "magi");

    let id = s.start(json!({ "strategy": "magi", "task": "Ship on Friday?", "params": {} }));
    let result = s.until(&id, "succeeded");
    assert_eq!(result["value"]["ok"], true, "{result}");
    assert!(result["value"]["output"].as_str().is_some_and(|o| o.contains("yes")), "{result}");
}

#[test]
fn a_run_in_flight_is_stopped_over_the_api() {
    let env = Env::new();
    env.with_responder(HANG);
    env.write("wf.rhai", STUCK);
    let s = serve(&env, &[]);
    let id = s.start(json!({ "script": "wf.rhai" }));
    s.until(&id, "running");
    let (status, v) = s.json("POST", &format!("/runs/{id}/stop"), None);
    assert_eq!(status, 202, "{v}");
    let result = s.until(&id, "cancelled");
    assert_eq!(result["error"], "stopped over the API");
    let (status, _) = s.json("POST", &format!("/runs/{id}/stop"), None);
    assert_eq!(status, 409);
}

#[test]
fn runs_past_max_runs_are_queued_visibly() {
    let env = Env::new();
    env.with_responder(HANG);
    env.write("wf.rhai", STUCK);
    let s = serve(&env, &["--max-runs", "1"]);
    let first = s.start(json!({ "script": "wf.rhai" }));
    s.until(&first, "running");
    let second = s.start(json!({ "script": "wf.rhai" }));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(s.listed_status(&second), "queued");
    assert_eq!(s.listed_status(&first), "running");
    s.json("POST", &format!("/runs/{first}/stop"), None);
    s.until(&first, "cancelled");
    // The freed slot goes to the queued run.
    s.until(&second, "running");
    s.json("POST", &format!("/runs/{second}/stop"), None);
    s.until(&second, "cancelled");
}
