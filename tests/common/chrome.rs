//! Headless Chromium (Debian's `chromium`; `.ci/setup` installs it) with one page, driven over the
//! DevTools protocol (a websocket, `tungstenite`): navigate, evaluate, poll, screenshot.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

/// Headless Chromium with one page, spoken to over its DevTools websocket; killed on drop.
pub struct Chrome {
    child: Child,
    ws: tungstenite::WebSocket<TcpStream>,
    next: u64,
    _profile: tempfile::TempDir,
}

impl Drop for Chrome {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A plain HTTP GET to 127.0.0.1:`port`, the body (DevTools keeps the connection open: the body
/// is read by its length).
fn http_get(port: u16, path: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to chromium");
    s.set_read_timeout(Some(super::TIMEOUT)).expect("a read timeout");
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n").expect("send");
    let mut reader = BufReader::new(s);
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("a response line");
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().expect("a length");
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).expect("the body");
    String::from_utf8_lossy(&body).into_owned()
}

impl Chrome {
    pub fn launch() -> Chrome {
        let profile = tempfile::tempdir().expect("a profile folder");
        let mut cmd = Command::new("chromium");
        cmd.args(["--headless=new", "--remote-debugging-port=0", "--no-first-run", "--disable-gpu"])
            .arg("--no-default-browser-check")
            .arg("--window-size=1200,1800")
            .arg(format!("--user-data-dir={}", profile.path().display()));
        // Chromium's own sandbox refuses to start as root: only then is it turned off.
        if euid() == 0 {
            cmd.arg("--no-sandbox");
        }
        cmd.arg("about:blank").stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start chromium (Debian package `chromium`; .ci/setup installs it)");
        let stderr = child.stderr.take().expect("chromium's stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("DevTools listening on ") {
                    let _ = tx.send(url.trim().to_string());
                }
            }
        });
        let browser = rx.recv_timeout(super::TIMEOUT).expect("chromium's `DevTools listening on ws://...` line");
        let port: u16 = browser
            .trim_start_matches("ws://")
            .split(['/', ':'])
            .nth(1)
            .and_then(|p| p.parse().ok())
            .expect("a DevTools port");
        // The page's own websocket, from the list of targets.
        let page = super::poll("chromium's page target", super::TIMEOUT, || {
            let list: Value = serde_json::from_str(&http_get(port, "/json/list")).ok()?;
            let page = list.as_array()?.iter().find(|t| t["type"] == "page")?;
            page["webSocketDebuggerUrl"].as_str().map(String::from)
        });
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to DevTools");
        stream.set_read_timeout(Some(super::TIMEOUT)).expect("a read timeout");
        let (ws, _) = tungstenite::client(page.as_str(), stream).expect("the DevTools websocket");
        Chrome { child, ws, next: 0, _profile: profile }
    }

    /// Sends one DevTools command and returns its result (events in between are skipped).
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let msg = json!({ "id": id, "method": method, "params": params }).to_string();
        self.ws.send(tungstenite::Message::text(msg)).expect("send a DevTools command");
        loop {
            let reply = self.ws.read().expect("a DevTools message");
            let Ok(text) = reply.to_text() else { continue };
            let v: Value = serde_json::from_str(text).expect("DevTools JSON");
            if v["id"] == id {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
        }
    }

    /// Evaluates `js` in the page (promises awaited), its value.
    pub fn eval(&mut self, js: &str) -> Value {
        let r = self.call("Runtime.evaluate", json!({ "expression": js, "returnByValue": true, "awaitPromise": true }));
        assert!(r.get("exceptionDetails").is_none(), "{js}: {r}");
        r["result"]["value"].clone()
    }

    /// Polls (bounded) until `js` evaluates to true.
    pub fn until(&mut self, what: &str, js: &str) {
        super::poll(what, super::TIMEOUT, || (self.eval(js) == json!(true)).then_some(()));
    }
}

fn euid() -> u32 {
    // The owner of /proc/self is this process's effective user: no libc call needed.
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(1)
}
