//! Where `awf serve` listens until Ctrl-C: a loopback TCP address behind the token guard, or a
//! Unix socket of mode 0600 (default `.awf/serve.sock`, its folder made 0700) that serves only
//! processes of serve's own user and pid namespaces (`control::namespace`): a sandboxed agent that
//! can see the socket is answered 403 before a byte of its request is read.

use super::{auth, private};
use anyhow::{anyhow, bail, Context, Result};
use axum::Router;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Ctrl-C, SIGTERM or SIGHUP, listened for from now on: a signal that comes as soon as the port
/// accepts still stops the server cleanly (its token file and socket removed).
fn ctrl_c() -> Result<impl std::future::Future<Output = ()>> {
    let mut signals = crate::cli::ending::Signals::new().context("cannot listen for Ctrl-C")?;
    Ok(async move {
        signals.next().await;
    })
}

/// Serves `app` on the loopback address `addr`; every request needs the token.
pub async fn tcp(app: Router, addr: &str, token_file: Option<&Path>, cwd: &Path) -> Result<()> {
    let addr: std::net::SocketAddr =
        addr.parse().map_err(|e| anyhow!("--listen {addr}: not an address like 127.0.0.1:8700 ({e})"))?;
    if !addr.ip().is_loopback() {
        bail!("--listen {addr}: awf serve listens on loopback addresses only (127.0.0.1 or ::1)");
    }
    let stop = ctrl_c()?;
    // The token is in place before the port accepts anything.
    let (token, written) = match auth::token_from_env()? {
        Some(token) => (token, None),
        None => {
            let path = match token_file {
                Some(p) => cwd.join(p),
                None => {
                    private::folder(&cwd.join(".awf"), true)?;
                    cwd.join(".awf").join("serve.token")
                }
            };
            let token = auth::new_token();
            private::write_secret(&path, &token)?;
            (token, Some(path))
        }
    };
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            if let Some(path) = &written {
                let _ = std::fs::remove_file(path);
            }
            return Err(e).with_context(|| format!("cannot listen on {addr}"));
        }
    };
    let local = listener.local_addr().unwrap_or(addr);
    let guard = Arc::new(auth::Guard::new(local, &token));
    let app = app.layer(axum::middleware::from_fn_with_state(guard, auth::check));
    let from = match &written {
        Some(path) => format!("the token is in {}", path.display()),
        None => format!("the token is {}'s value", auth::TOKEN_VAR),
    };
    eprintln!("awf: serving on http://{local}; {from}, sent as `Authorization: Bearer TOKEN` (Ctrl-C to stop)");
    // The dashboard's sign-in link carries a generated token (the operator can read its file
    // anyway), never one from the environment: stderr may be kept in logs. The token is after
    // the `#`, which a browser keeps to itself (`sign_in.rs`).
    match &written {
        Some(_) => eprintln!("awf: dashboard: {}", super::sign_in::url(local, &token)),
        None => eprintln!("awf: dashboard: {} (with {}'s value)", super::sign_in::placeholder(local), auth::TOKEN_VAR),
    }
    let served = axum::serve(listener, app).with_graceful_shutdown(stop).await;
    if let Some(path) = &written {
        let _ = std::fs::remove_file(path);
    }
    served.context("the server failed")
}

/// Serves `app` on a Unix socket that only this user may open.
pub async fn unix(app: Router, socket: Option<&Path>, cwd: &Path) -> Result<()> {
    let path = match socket {
        Some(p) => cwd.join(p),
        None => {
            private::folder(&cwd.join(".awf"), true)?;
            cwd.join(".awf").join("serve.sock")
        }
    };
    let stop = ctrl_c()?;
    let listener = private::bind_socket(&path)?;
    let listener = Admitting { inner: listener_for_tokio(listener, &path)?, path: path.clone() };
    eprintln!("awf: serving on {} (Ctrl-C to stop)", path.display());
    let served = axum::serve(listener, app).with_graceful_shutdown(stop).await;
    let _ = std::fs::remove_file(&path);
    served.context("the server failed")
}

fn listener_for_tokio(listener: std::os::unix::net::UnixListener, path: &Path) -> Result<tokio::net::UnixListener> {
    listener.set_nonblocking(true).with_context(|| format!("cannot listen on {}", path.display()))?;
    tokio::net::UnixListener::from_std(listener).with_context(|| format!("cannot listen on {}", path.display()))
}

/// The Unix socket's listener as axum takes it: each connection's peer is checked as it is
/// accepted, and one of another user or pid namespace than serve's (a sandbox) is answered 403
/// and closed, its request unread, and logged; axum never sees it.
struct Admitting {
    inner: tokio::net::UnixListener,
    path: PathBuf,
}

impl axum::serve::Listener for Admitting {
    type Io = tokio::net::UnixStream;
    type Addr = tokio::net::unix::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (stream, addr) = axum::serve::Listener::accept(&mut self.inner).await;
            match crate::control::namespace::check(&stream) {
                Ok(_) => return (stream, addr),
                Err(why) => {
                    eprintln!("awf: refused a connection on {}: {why}", self.path.display());
                    refuse(&stream, &why);
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// Answers a refused connection 403 with why, in one write that a fresh socket's empty buffer
/// takes whole (a peer that does not read loses it; the connection closes either way).
fn refuse(stream: &tokio::net::UnixStream, why: &crate::control::namespace::Foreign) {
    let body = serde_json::json!({
        "error": format!("refused: {why}; awf serve's socket serves only processes of its own user and pid namespaces"),
    })
    .to_string();
    let head = format!(
        "HTTP/1.1 403 Forbidden\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.try_write(format!("{head}{body}").as_bytes());
}
