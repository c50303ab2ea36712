//! A run's control socket: `control.sock` in its run folder (mode 0600, in a 0700 folder), open
//! while the run lives, through which `awf runs stop` and `awf serve` reach a run of any process.
//! One JSON request line, one JSON answer line. `stop` stops the run as Ctrl-C would (its script
//! gets the grace to unwind); `kill` ends it at once (no grace); `status` says who holds it and
//! what it is waiting for; `answer` answers an open operator checkpoint (`awf runs answer`).
//!
//! Its clients are the operator's own processes: a peer of another user or pid namespace (a
//! sandboxed agent that can see the socket) is refused before its request is read
//! (`control::namespace`) and the refusal logged in the run's events. At most `MAX_CONNECTIONS`
//! are open at once (those past it are closed at once), each with `READ_TIME` and `MAX_REQUEST`
//! for its request.

use super::Host;
use crate::run::StopCause;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

/// The socket's name in the run folder.
pub const SOCKET: &str = "control.sock";
/// When the run folder's path is too long for a Unix socket, the socket is made in a short 0700
/// folder of the temp dir instead, and this file in the run folder names it.
pub const TARGET: &str = "control.target";
/// The longest socket path a `sockaddr_un` takes, less a margin.
const MAX_SOCKET_PATH: usize = 100;

/// The longest request line accepted (an operator's answer is a JSON value).
const MAX_REQUEST: u64 = 1 << 20;
/// Most connections open at once: what requests hold in memory is at most this many times
/// `MAX_REQUEST`.
const MAX_CONNECTIONS: usize = 16;
/// The longest a request line may take to arrive.
const READ_TIME: Duration = Duration::from_secs(5);

/// What a client asks of a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "cmd", rename_all = "kebab-case")]
pub enum Request {
    Status,
    /// Stop as Ctrl-C does; `by` says who asked (recorded as the reason).
    Stop {
        by: String,
    },
    /// Stop without the grace: the run is settled `cancelled` at once.
    Kill {
        by: String,
    },
    /// Answers an open checkpoint: `key`, or the only one open.
    Answer {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<String>,
        value: Value,
    },
}

/// The run side: the socket's task, and the signal a `kill` gives `drive`.
pub struct Control {
    path: PathBuf,
    /// The short folder holding the socket and the run folder's `control.target`, when the run
    /// folder's path was too long.
    moved: Option<(PathBuf, PathBuf)>,
    /// Cancelled by `kill`: `drive` stops waiting for the script.
    pub killed: CancellationToken,
    /// Cancelled when the run finishes: the socket closes.
    closed: CancellationToken,
}

impl Control {
    /// Binds `control.sock` in `dir`. A socket that cannot be made (a path too long for a Unix
    /// socket) leaves the run unreachable, not failed: `None`, with the reason logged.
    pub fn bind(dir: &Path) -> (Control, Option<std::os::unix::net::UnixListener>) {
        let mut path = dir.join(SOCKET);
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(dir.join(TARGET));
        let mut moved = None;
        if path.as_os_str().len() > MAX_SOCKET_PATH {
            let short = std::env::temp_dir().join(format!("awf-{}", &uuid::Uuid::new_v4().simple().to_string()[..10]));
            let made = crate::record::private::ensure_dir(&short).and_then(|_| {
                crate::record::private::write_whole(&dir.join(TARGET), short.join(SOCKET).display().to_string())
            });
            if let Err(e) = made {
                tracing::warn!("cannot open the run's control socket in {}: {e}", short.display());
            }
            path = short.join(SOCKET);
            moved = Some((short, dir.join(TARGET)));
        }
        let control =
            Control { path: path.clone(), moved, killed: CancellationToken::new(), closed: CancellationToken::new() };
        let listener = std::os::unix::net::UnixListener::bind(&path).and_then(|l| {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
            l.set_nonblocking(true)?;
            Ok(l)
        });
        match listener {
            Ok(l) => (control, Some(l)),
            Err(e) => {
                tracing::warn!("cannot open the run's control socket {}: {e}", path.display());
                (control, None)
            }
        }
    }

    /// Serves the socket on the run's runtime until the run finishes.
    pub fn serve(host: &Arc<Host>, listener: std::os::unix::net::UnixListener) {
        let weak = Arc::downgrade(host);
        let closed = host.control.closed.clone();
        host.run.rt.spawn(async move {
            let Ok(listener) = tokio::net::UnixListener::from_std(listener) else { return };
            let places = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
            loop {
                let stream = tokio::select! {
                    s = listener.accept() => s,
                    _ = closed.cancelled() => return,
                };
                let stream = match stream {
                    Ok((stream, _)) => stream,
                    // Out of descriptors, or a connection gone before it was taken: try again a
                    // moment later rather than spinning.
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Ok(place) = places.clone().try_acquire_owned() else { continue };
                let host = weak.clone();
                tokio::spawn(async move {
                    answer(host, stream).await;
                    drop(place);
                });
            }
        });
    }

    /// Closes the socket (the run finished).
    pub fn close(&self) {
        self.closed.cancel();
        let _ = std::fs::remove_file(&self.path);
        if let Some((short, target)) = &self.moved {
            let _ = std::fs::remove_file(target);
            let _ = std::fs::remove_dir_all(short);
        }
    }
}

async fn answer(host: Weak<Host>, stream: tokio::net::UnixStream) {
    let reply = match crate::control::namespace::check(&stream) {
        Ok(_) => None,
        Err(why) => {
            let why = format!(
                "refused: {why}; a run's control socket serves only processes of its own user and pid namespaces"
            );
            if let Some(host) = host.upgrade() {
                host.run.log("warn", &format!("control socket: {why}"), &Value::Null);
            }
            Some(Reply::refused(why))
        }
    };
    let (read, mut write) = stream.into_split();
    let reply = match reply {
        // Refused: answered without reading the request.
        Some(refused) => refused,
        None => {
            let mut line = String::new();
            let mut reader = tokio::io::BufReader::new(tokio::io::AsyncReadExt::take(read, MAX_REQUEST));
            let read = tokio::time::timeout(READ_TIME, reader.read_line(&mut line)).await;
            match (read, host.upgrade()) {
                (_, None) => Reply::refused("the run has finished"),
                (Ok(Ok(_)), Some(host)) => match serde_json::from_str::<Request>(line.trim()) {
                    Ok(req) => handle(&host, req).await,
                    Err(e) => Reply::refused(format!("bad request {:?}: {e}", line.trim())),
                },
                (_, Some(_)) => Reply::refused(format!("no request line within {} s", READ_TIME.as_secs())),
            }
        }
    };
    // A struct of strings, numbers and checkpoints always serialises.
    let line = serde_json::to_string(&reply).unwrap_or_default();
    let _ = tokio::time::timeout(READ_TIME, write.write_all(format!("{line}\n").as_bytes())).await;
}

/// Where a run stands, as its answer says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    Running,
    Waiting,
    Stopping,
    AlreadyStopping,
    Killed,
    Answered,
}

/// A run's answer, one JSON line: `ok`, and what the request asked for; `error` when it refused.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The process the run lives in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<State>,
    /// `status`: the checkpoints it waits on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<Vec<crate::record::docs::Waiting>>,
    /// `answer`: the checkpoint answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Reply {
    fn refused(why: impl Into<String>) -> Reply {
        Reply { error: Some(why.into()), ..Reply::default() }
    }
}

/// Carries out a request against the run.
pub async fn handle(host: &Host, req: Request) -> Reply {
    let run = &host.run;
    let base = |state: State| Reply {
        ok: true,
        run_id: Some(run.id.clone()),
        pid: Some(std::process::id()),
        state: Some(state),
        ..Reply::default()
    };
    match req {
        Request::Status => {
            let waiting = run.waiting();
            let state = match (run.stop_cause(), waiting.is_empty()) {
                (Some(_), _) => State::Stopping,
                (None, true) => State::Running,
                (None, false) => State::Waiting,
            };
            Reply { waiting: Some(waiting), ..base(state) }
        }
        Request::Answer { key, value } => match run.answer_checkpoint(key.as_deref(), value).await {
            Ok(key) => Reply { key: Some(key), pid: None, ..base(State::Answered) },
            Err(e) => Reply::refused(e.to_string()),
        },
        Request::Stop { by } => {
            if run.stop_cause().is_some() {
                return base(State::AlreadyStopping);
            }
            run.stop_with(StopCause::Cancelled(format!("stopped by {by}")));
            base(State::Stopping)
        }
        Request::Kill { by } => {
            run.stop_with(StopCause::Cancelled(format!("killed by {by}")));
            host.control.killed.cancel();
            base(State::Killed)
        }
    }
}

/// The control socket of the run in `dir`: `control.sock` there, or the one `control.target` names.
pub fn socket(dir: &Path) -> PathBuf {
    match std::fs::read_to_string(dir.join(TARGET)) {
        Ok(target) if !target.trim().is_empty() => PathBuf::from(target.trim()),
        _ => dir.join(SOCKET),
    }
}

/// Why a request to a run's control socket failed, as its callers tell them apart: a socket no
/// process listens on (the run has not opened it yet, or has ended) or a run that answered no.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("cannot reach the run's control socket {}: {source}", path.display())]
    Unreachable { path: PathBuf, source: std::io::Error },
    #[error("{what} {}: {source}", path.display())]
    Io { what: &'static str, path: PathBuf, source: std::io::Error },
    #[error("a bad answer on {}: {source}", path.display())]
    BadAnswer { path: PathBuf, source: serde_json::Error },
    /// The run answered, refusing: its reason.
    #[error("{0}")]
    Refused(String),
}

/// Asks the run in `dir` over its control socket (blocking; bounded by `timeout`).
pub fn request(dir: &Path, req: &Request, timeout: Duration) -> Result<Reply, ControlError> {
    let path = socket(dir);
    let io = |what: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| ControlError::Io { what, path, source }
    };
    let mut stream = std::os::unix::net::UnixStream::connect(&path)
        .map_err(|source| ControlError::Unreachable { path: path.clone(), source })?;
    stream.set_read_timeout(Some(timeout)).map_err(io("cannot set a timeout on", &path))?;
    stream.set_write_timeout(Some(timeout)).map_err(io("cannot set a timeout on", &path))?;
    // A request is a tagged enum of strings and JSON values: it always serialises.
    let text = serde_json::to_string(req).unwrap_or_default();
    // A refused caller is answered before its request is read and the connection closed: the
    // write may then fail, but the answer is there to read.
    let sent = stream.write_all(format!("{text}\n").as_bytes());
    let mut line = String::new();
    match (sent, BufReader::new(stream).read_line(&mut line)) {
        (_, Ok(n)) if n > 0 => {}
        (Err(e), _) => return Err(io("cannot write to", &path)(e)),
        (Ok(()), Err(e)) => return Err(io("no answer on", &path)(e)),
        (Ok(()), Ok(_)) => return Err(io("no answer on", &path)(std::io::ErrorKind::UnexpectedEof.into())),
    }
    let reply: Reply =
        serde_json::from_str(line.trim()).map_err(|source| ControlError::BadAnswer { path: path.clone(), source })?;
    match reply.ok {
        true => Ok(reply),
        false => Err(ControlError::Refused(reply.error.unwrap_or_else(|| "the run refused the request".into()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn requests_are_one_tagged_json_line() {
        let stop = Request::Stop { by: "awf runs stop".into() };
        assert_eq!(serde_json::to_value(&stop).expect("json"), json!({ "cmd": "stop", "by": "awf runs stop" }));
        assert_eq!(serde_json::from_str::<Request>(r#"{"cmd":"status"}"#).expect("parse"), Request::Status);
        assert!(serde_json::from_str::<Request>(r#"{"cmd":"explode"}"#).is_err());
        let answer = Request::Answer { key: None, value: json!({ "ok": true }) };
        assert_eq!(serde_json::to_value(&answer).expect("json"), json!({ "cmd": "answer", "value": { "ok": true } }));
        let keyed: Request = serde_json::from_str(r#"{"cmd":"answer","key":"k","value":1}"#).expect("parse");
        assert_eq!(keyed, Request::Answer { key: Some("k".into()), value: json!(1) });
        assert!(serde_json::from_str::<Request>(r#"{"cmd":"answer","key":"k"}"#).is_err(), "an answer needs a value");
    }

    #[test]
    fn replies_are_one_json_line_that_reads_back_as_written() {
        let stopping = Reply {
            ok: true,
            run_id: Some("r".into()),
            pid: Some(7),
            state: Some(State::AlreadyStopping),
            ..Reply::default()
        };
        let line = serde_json::to_string(&stopping).expect("json");
        assert_eq!(line, r#"{"ok":true,"run_id":"r","pid":7,"state":"already-stopping"}"#);
        assert_eq!(serde_json::from_str::<Reply>(&line).expect("reads back"), stopping);
        let refused: Reply = serde_json::from_str(r#"{"ok":false,"error":"no"}"#).expect("a refusal");
        assert_eq!((refused.ok, refused.error.as_deref(), refused.state), (false, Some("no"), None));
    }
}
