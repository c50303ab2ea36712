//! awf's proxy for a sandbox with a listed network: an HTTP proxy on a Unix socket (the sandbox
//! reaches it through `awf sandbox-bridge`) that takes `CONNECT host:port` and plain-HTTP requests
//! in absolute form, lets through only the listed `host:port`, and answers anything else 403,
//! reporting it. A forwarded plain request is sent with `Connection: close`, so that one client
//! connection carries one request to one listed server.

use crate::sandbox::net::{Net, Target};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixListener, UnixStream};

/// Where refusals go: `(host, port, why)`.
pub type Report = Arc<dyn Fn(&str, u16, &str) + Send + Sync>;

/// The longest request head read.
const MAX_HEAD: usize = 64 << 10;

/// A running proxy; dropping it stops it (and its connections) and removes its socket.
pub struct Proxy {
    task: tokio::task::JoinHandle<()>,
    socket: PathBuf,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.socket);
    }
}

impl Proxy {
    /// Binds `net.socket` (0600, in the agent's 0700 folder) and serves it. Inside the runtime.
    pub fn start(net: Net, report: Report) -> std::io::Result<Proxy> {
        let _ = std::fs::remove_file(&net.socket);
        let listener = UnixListener::bind(&net.socket)?;
        std::fs::set_permissions(&net.socket, std::fs::Permissions::from_mode(0o600))?;
        let socket = net.socket.clone();
        let net = Arc::new(net);
        let task = tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            while let Ok((conn, _)) = listener.accept().await {
                conns.spawn(serve(conn, net.clone(), report.clone()));
                while conns.try_join_next().is_some() {}
            }
        });
        Ok(Proxy { task, socket })
    }
}

/// What a request head asks for.
#[derive(Debug, PartialEq)]
pub enum Asked {
    /// `CONNECT host:port`: a tunnel.
    Connect(Target),
    /// A plain-HTTP request in absolute form, and its head as the server gets it.
    Forward(Target, Vec<u8>),
}

/// Why a request is not one this proxy serves (answered `400 Bad Request` with this text).
#[derive(Debug, thiserror::Error)]
pub enum BadRequest {
    #[error("the request head is too long")]
    TooLong,
    #[error("the connection closed before the request head ended")]
    Closed,
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("the request head is not UTF-8")]
    NotUtf8,
    #[error("`{0}` is not an HTTP request line")]
    NotRequestLine(String),
    #[error(transparent)]
    Target(#[from] crate::sandbox::net::BadTarget),
    #[error("`{0}` is neither CONNECT host:port nor an http:// URL")]
    NotHttp(String),
}

/// Reads a request head (`...\r\n\r\n`) and what followed it in the same reads.
async fn read_head(c: &mut UnixStream) -> Result<(Vec<u8>, Vec<u8>), BadRequest> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Ok((buf, rest));
        }
        if buf.len() > MAX_HEAD {
            return Err(BadRequest::TooLong);
        }
        let n = c.read(&mut chunk).await?;
        if n == 0 {
            return Err(BadRequest::Closed);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The request a head makes, or why it is not one this proxy serves.
pub fn parse_head(head: &[u8]) -> Result<Asked, BadRequest> {
    let text = std::str::from_utf8(head).map_err(|_| BadRequest::NotUtf8)?;
    let mut lines = text.split("\r\n");
    let first = lines.next().unwrap_or_default();
    let mut words = first.split(' ');
    let (method, target, version) = match (words.next(), words.next(), words.next(), words.next()) {
        (Some(m), Some(t), Some(v), None) if v.starts_with("HTTP/") => (m, t, v),
        _ => return Err(BadRequest::NotRequestLine(first.to_string())),
    };
    if method.eq_ignore_ascii_case("CONNECT") {
        return Ok(Asked::Connect(Target::parse(target)?));
    }
    if !target.starts_with("http://") {
        return Err(BadRequest::NotHttp(target.to_string()));
    }
    let server = Target::of_url(target)?;
    let after_scheme = &target["http://".len()..];
    let path = after_scheme.find('/').map_or("/", |i| &after_scheme[i..]);
    let mut out = format!("{method} {path} {version}\r\n");
    for line in lines.filter(|l| !l.is_empty()) {
        let name = line.split(':').next().unwrap_or_default().trim().to_ascii_lowercase();
        if !matches!(name.as_str(), "connection" | "proxy-connection" | "proxy-authorization" | "keep-alive") {
            out.push_str(line);
            out.push_str("\r\n");
        }
    }
    out.push_str("Connection: close\r\n\r\n");
    Ok(Asked::Forward(server, out.into_bytes()))
}

async fn answer(c: &mut UnixStream, status: &str, text: &str) {
    let body = format!("awf: {text}\n");
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = c.write_all(reply.as_bytes()).await;
    let _ = c.shutdown().await;
}

async fn serve(mut c: UnixStream, net: Arc<Net>, report: Report) {
    let (head, rest) = match read_head(&mut c).await {
        Ok(h) => h,
        Err(why) => return answer(&mut c, "400 Bad Request", &why.to_string()).await,
    };
    let asked = match parse_head(&head) {
        Ok(a) => a,
        Err(why) => return answer(&mut c, "400 Bad Request", &why.to_string()).await,
    };
    let target = match &asked {
        Asked::Connect(t) | Asked::Forward(t, _) => t.clone(),
    };
    if !net.allows(&target.host, target.port) {
        let why = "not in the sandbox's network list";
        report(&target.host, target.port, why);
        return answer(&mut c, "403 Forbidden", &format!("{target} is {why}")).await;
    }
    let mut upstream = match TcpStream::connect((target.host.as_str(), target.port)).await {
        Ok(u) => u,
        Err(e) => return answer(&mut c, "502 Bad Gateway", &format!("cannot reach {target}: {e}")).await,
    };
    let first = match asked {
        Asked::Connect(_) => {
            if c.write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n").await.is_err() {
                return;
            }
            rest
        }
        Asked::Forward(_, mut head) => {
            head.extend_from_slice(&rest);
            head
        }
    };
    if upstream.write_all(&first).await.is_ok() {
        let _ = tokio::io::copy_bidirectional(&mut c, &mut upstream).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(host: &str, port: u16) -> Target {
        Target { host: host.into(), port }
    }

    #[test]
    fn a_connect_names_its_target_and_a_plain_request_is_rewritten_for_its_server() {
        assert_eq!(
            parse_head(b"CONNECT api.anthropic.com:443 HTTP/1.1\r\nHost: x\r\n\r\n").expect("a CONNECT"),
            Asked::Connect(t("api.anthropic.com", 443))
        );
        let head = b"POST http://127.0.0.1:8080/v1/messages?beta=true HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n";
        let want = "POST /v1/messages?beta=true HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Length: 2\r\nConnection: close\r\n\r\n";
        assert_eq!(parse_head(head).expect("a POST"), Asked::Forward(t("127.0.0.1", 8080), want.as_bytes().to_vec()));
        let got = parse_head(b"GET http://example.com HTTP/1.1\r\n\r\n").expect("a GET");
        assert_eq!(got, Asked::Forward(t("example.com", 80), b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n".to_vec()));
    }

    /// Sends `request` to the proxy and reads its whole answer.
    async fn ask(socket: &std::path::Path, request: &str) -> String {
        let mut c = UnixStream::connect(socket).await.expect("connect");
        c.write_all(request.as_bytes()).await.expect("write");
        let mut out = String::new();
        c.read_to_string(&mut out).await.expect("read");
        out
    }

    #[tokio::test]
    async fn the_proxy_tunnels_to_what_is_listed_and_refuses_and_reports_the_rest() {
        let dir = tempfile::tempdir().expect("tempdir");
        let server = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = server.local_addr().expect("addr").port();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = server.accept().await {
                let _ = s.write_all(b"hello").await;
            }
        });
        let socket = dir.path().join("net.sock");
        let net = Net { allow: vec![t("127.0.0.1", port)], socket: socket.clone() };
        let refused = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = refused.clone();
        let report: Report = Arc::new(move |h: &str, p: u16, why: &str| {
            seen.lock().expect("lock").push(format!("{h}:{p} {why}"));
        });
        let proxy = Proxy::start(net, report).expect("start");
        let got = ask(&socket, &format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n")).await;
        assert_eq!(got, "HTTP/1.1 200 Connection Established\r\n\r\nhello");
        let got = ask(&socket, "CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n").await;
        assert!(got.starts_with("HTTP/1.1 403 Forbidden") && got.contains("127.0.0.1:1 is not in"), "{got}");
        let got = ask(&socket, "BREW /pot HTCPCP/1.0\r\n\r\n").await;
        assert!(got.starts_with("HTTP/1.1 400 Bad Request"), "{got}");
        assert_eq!(*refused.lock().expect("lock"), ["127.0.0.1:1 not in the sandbox's network list"]);
        drop(proxy);
        assert!(!socket.exists(), "the socket goes with the proxy");
        let nowhere = Net { allow: vec![], socket: dir.path().join("missing/net.sock") };
        assert!(Proxy::start(nowhere, Arc::new(|_: &str, _: u16, _: &str| {})).is_err(), "no folder, no proxy");
    }

    #[test]
    fn heads_this_proxy_does_not_serve_say_why() {
        let refused = |head: &[u8]| parse_head(head).expect_err("refused");
        assert!(matches!(refused(b"GET /local HTTP/1.1\r\n\r\n"), BadRequest::NotHttp(t) if t == "/local"));
        assert!(matches!(refused(b"CONNECT nohost HTTP/1.1\r\n\r\n"), BadRequest::Target(_)));
        assert!(matches!(refused(b"hello\r\n\r\n"), BadRequest::NotRequestLine(l) if l == "hello"));
        let e = refused(b"GET https://h/ HTTP/1.1\r\n\r\n").to_string();
        assert_eq!(e, "`https://h/` is neither CONNECT host:port nor an http:// URL");
    }
}
