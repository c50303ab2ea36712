//! A running `awf serve` and a small hand-written HTTP/1.1 client for it, over the loopback port
//! (with the token) or the Unix socket.

use super::{free_port, wait_until, Env};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// Where the server listens.
pub enum Addr {
    Tcp(u16),
    Unix(PathBuf),
}

/// A running `awf serve`, killed on drop.
pub struct Serve {
    pub child: Child,
    pub addr: Addr,
    /// The token requests carry (TCP only).
    pub token: String,
    /// Where the server's stderr goes.
    pub stderr: PathBuf,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `awf serve --listen 127.0.0.1:PORT EXTRA`; the token is read from `.awf/serve.token`.
pub fn serve(env: &Env, extra: &[&str]) -> Serve {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut args = vec!["serve", "--listen", &listen];
    args.extend_from_slice(extra);
    let mut cmd = super::command(env.path(), &args);
    cmd.env_remove("AWF_SERVE_TOKEN");
    let token_file = env.path().join(".awf/serve.token");
    start(env, cmd, Addr::Tcp(port), |_| std::fs::read_to_string(&token_file).ok())
}

/// Starts `cmd` (an `awf serve`), waits until `addr` accepts connections, and takes the token
/// from `token` (called once the server listens).
pub fn start(env: &Env, mut cmd: Command, addr: Addr, token: impl Fn(&Env) -> Option<String>) -> Serve {
    let stderr = env.path().join(format!("serve-{}.err", free_port()));
    let file = std::fs::File::create(&stderr).expect("create the stderr file");
    let child = cmd.stdout(Stdio::null()).stderr(file).spawn().expect("spawn awf serve");
    let mut server = Serve { child, addr, token: String::new(), stderr };
    wait_until("awf serve listening", || server.connect().is_some());
    server.token = token(env).unwrap_or_default();
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

trait Stream: Read + Write {}
impl<T: Read + Write> Stream for T {}

impl Serve {
    fn connect(&self) -> Option<Box<dyn Stream>> {
        match &self.addr {
            Addr::Tcp(port) => {
                let s = TcpStream::connect(("127.0.0.1", *port)).ok()?;
                s.set_read_timeout(Some(super::TIMEOUT)).expect("set a read timeout");
                Some(Box::new(s))
            }
            Addr::Unix(path) => {
                let s = UnixStream::connect(path).ok()?;
                s.set_read_timeout(Some(super::TIMEOUT)).expect("set a read timeout");
                Some(Box::new(s))
            }
        }
    }

    /// The `Host` value naming this server.
    pub fn host(&self) -> String {
        match &self.addr {
            Addr::Tcp(port) => format!("localhost:{port}"),
            Addr::Unix(_) => "localhost".into(),
        }
    }

    /// What the server wrote on stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Sends one request with exactly `headers` (besides the body's) and returns the status code
    /// and the body text.
    pub fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], body: Option<&Value>) -> (u16, String) {
        let mut stream = self.connect().expect("connect to awf serve");
        let body = body.map(Value::to_string).unwrap_or_default();
        let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
        for (name, value) in headers {
            req.push_str(&format!("{name}: {value}\r\n"));
        }
        req.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len()));
        stream.write_all(req.as_bytes()).expect("send");
        let mut raw = String::new();
        stream.read_to_string(&mut raw).expect("read the response");
        let (head, body) = raw.split_once("\r\n\r\n").expect("a response head");
        let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("a status code");
        let chunked = head.to_ascii_lowercase().contains("transfer-encoding: chunked");
        (status, if chunked { dechunk(body) } else { body.to_string() })
    }

    /// Sends one request as a legitimate client: this server's Host and, on TCP, the token.
    pub fn request(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, String) {
        let host = self.host();
        let auth = format!("Bearer {}", self.token);
        let mut headers = vec![("Host", host.as_str())];
        if matches!(self.addr, Addr::Tcp(_)) {
            headers.push(("Authorization", auth.as_str()));
        }
        self.send(method, path, &headers, body)
    }

    pub fn json(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let (status, text) = self.request(method, path, body);
        (status, serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}")))
    }

    /// POST /runs, which must be accepted; the run's id.
    pub fn start(&self, body: Value) -> String {
        let (status, v) = self.json("POST", "/runs", Some(&body));
        assert_eq!(status, 202, "{v}");
        v["run_id"].as_str().expect("a run id").to_string()
    }

    /// Polls GET /runs/{id} until its status is `want` (bounded).
    #[track_caller]
    pub fn until(&self, id: &str, want: &str) -> Value {
        super::poll_seeing(&format!("run {id} becoming {want}"), super::TIMEOUT, || {
            let (status, v) = self.json("GET", &format!("/runs/{id}"), None);
            assert_eq!(status, 200, "{v}");
            if v["status"] == want {
                Ok(v)
            } else {
                Err(v.to_string())
            }
        })
    }

    pub fn listed_status(&self, id: &str) -> Value {
        let (_, v) = self.json("GET", "/runs", None);
        v["runs"].as_array().expect("runs").iter().find(|r| r["run_id"] == id).expect("listed")["status"].clone()
    }
}
