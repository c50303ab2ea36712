//! The control socket of one agent: a Unix socket in a 0700 folder, newline-delimited JSON frames,
//! and the agent's open operations. The socket is the agent's authority: it serves only the
//! processes of the agent's running turns (`peer.rs`) and reaches only its own operations;
//! anything else is refused and logged.

use super::messenger::{MessageError, Messenger};
use super::peer::Turns;
use super::protocol::{exit, parse_request, Command, Response, VERSION};
use super::slot::{ResultSlot, Submission};
use crate::accounting::Usage;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Notify;

/// Records an event for the run: `(type, data)`.
pub type EventSink = Arc<dyn Fn(&str, Value) + Send + Sync>;

/// The longest socket path a `sockaddr_un` takes, less a margin.
const MAX_SOCKET_PATH: usize = 100;
/// The longest frame accepted (an answer's JSON is inside it).
const MAX_FRAME: u64 = 16 << 20;
/// How long `waiting` holds nudges off when no `--timeout` is given.
const DEFAULT_WAIT: Duration = Duration::from_secs(600);

/// One open operation, as the control plane sees it.
pub struct OpControl {
    pub slot: Arc<ResultSlot>,
    pub answered: Notify,
    waiting: Mutex<Option<(Instant, String)>>,
    usage: Mutex<Usage>,
    deadline_text: String,
    deadline: Option<Instant>,
}

impl OpControl {
    /// When the agent's acknowledged wait ends, if it is still running.
    pub fn waiting_until(&self) -> Option<Instant> {
        lock(&self.waiting).as_ref().map(|(at, _)| *at).filter(|at| *at > Instant::now())
    }

    pub fn usage(&self) -> Usage {
        *lock(&self.usage)
    }
}

/// The run an endpoint serves: every agent process gets its id as `AWF_RUN_ID`, and the process
/// groups of its turns are recorded in its folder (`groups.jsonl`) under its attempt.
#[derive(Debug, Clone)]
pub struct RunTag {
    pub id: String,
    pub dir: PathBuf,
    pub attempt: u32,
}

struct State {
    key: String,
    turns: Arc<Turns>,
    ops: Mutex<HashMap<String, Arc<OpControl>>>,
    settled: Mutex<HashMap<String, String>>,
    current: Mutex<Option<String>>,
    activity: Mutex<Instant>,
    events: EventSink,
    messenger: Arc<dyn Messenger>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Values behind these locks are replaced whole; a poisoned lock still holds a valid one.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// An agent's control folder: its socket, its launcher, and the server behind them.
pub struct Endpoint {
    pub dir: PathBuf,
    pub socket: PathBuf,
    pub launcher: PathBuf,
    pub run: RunTag,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
    short_dir: Option<PathBuf>,
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.socket);
        if let Some(d) = &self.short_dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// Creates `dir` with mode 0700 (and its parents as needed).
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

impl Endpoint {
    /// Opens the control folder `dir` (mode 0700) for agent `key`, binds its socket and writes the
    /// launcher. Must be called inside the tokio runtime's context.
    pub fn open(
        dir: &Path,
        key: &str,
        awf: &Path,
        run: RunTag,
        events: EventSink,
        messenger: Arc<dyn Messenger>,
    ) -> std::io::Result<Endpoint> {
        private_dir(dir)?;
        let mut socket = dir.join("wf.sock");
        let mut short_dir = None;
        if socket.as_os_str().len() > MAX_SOCKET_PATH {
            let short = std::env::temp_dir().join(format!("awf-{}", &uuid::Uuid::new_v4().simple().to_string()[..10]));
            private_dir(&short)?;
            socket = short.join("wf.sock");
            short_dir = Some(short);
        }
        let _ = std::fs::remove_file(&socket);
        let listener = UnixListener::bind(&socket)?;
        // A socket takes its mode from the umask; its folder is already 0700, so tightening it here
        // leaves no moment when another user could reach it.
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))?;
        // The launcher is a symlink to the awf binary: run as `wf`, awf acts as `awf wf` with the
        // socket beside it (or the one `wf.target` names, when that path was too long). No shell
        // starts per command, and it needs no environment.
        let launcher = dir.join("wf");
        let _ = std::fs::remove_file(&launcher);
        std::os::unix::fs::symlink(awf, &launcher)?;
        if short_dir.is_some() {
            crate::record::private::write(&dir.join("wf.target"), socket.display().to_string())?;
        }
        let state = Arc::new(State {
            key: key.to_string(),
            turns: Arc::new(Turns::default()),
            ops: Mutex::new(HashMap::new()),
            settled: Mutex::new(HashMap::new()),
            current: Mutex::new(None),
            activity: Mutex::new(Instant::now()),
            events,
            messenger,
        });
        let s = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let s = s.clone();
                tokio::spawn(async move { serve(stream, s).await });
            }
        });
        Ok(Endpoint { dir: dir.to_path_buf(), socket, launcher, run, state, task, short_dir })
    }

    /// The leaders of this agent's running turns: the processes (and their descendants and
    /// groups) this socket serves.
    pub fn turns(&self) -> &Arc<Turns> {
        &self.state.turns
    }

    /// Opens an operation on this socket; it stays reachable until `settle_op`.
    pub fn open_op(
        &self,
        op_id: &str,
        slot: Arc<ResultSlot>,
        deadline_text: String,
        deadline: Option<Instant>,
    ) -> Arc<OpControl> {
        let op = Arc::new(OpControl {
            slot,
            answered: Notify::new(),
            waiting: Mutex::new(None),
            usage: Mutex::new(Usage::default()),
            deadline_text,
            deadline,
        });
        lock(&self.state.ops).insert(op_id.to_string(), op.clone());
        *lock(&self.state.current) = Some(op_id.to_string());
        op
    }

    /// Opens a turn's operation with its deadline (unix ms), which `waiting` answers quote.
    pub fn open_turn(&self, op_id: &str, slot: Arc<ResultSlot>, deadline_unix_ms: Option<i64>) -> Arc<OpControl> {
        let now = crate::record::now_unix_ms();
        let text = match deadline_unix_ms {
            Some(ms) => format!("deadline in {} s", (ms - now).max(0) / 1000),
            None => "no deadline".into(),
        };
        let at = deadline_unix_ms.map(|ms| Instant::now() + Duration::from_millis((ms - now).max(0) as u64));
        self.open_op(op_id, slot, text, at)
    }

    /// Closes an operation; later frames for it are told why.
    pub fn settle_op(&self, op_id: &str, why: &str) {
        lock(&self.state.ops).remove(op_id);
        lock(&self.state.settled).insert(op_id.to_string(), why.to_string());
        let mut current = lock(&self.state.current);
        if current.as_deref() == Some(op_id) {
            *current = None;
        }
    }

    /// When a frame last arrived on this socket.
    pub fn last_activity(&self) -> Instant {
        *lock(&self.state.activity)
    }
}

async fn serve(stream: UnixStream, state: Arc<State>) {
    let pid = stream.peer_cred().ok().and_then(|c| c.pid());
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    let mut reader = BufReader::new(read.take(MAX_FRAME));
    // The frame is read before a refusal so that the caller, which writes first, reads the reason.
    let response = match reader.read_line(&mut line).await {
        Ok(0) => return,
        Ok(_) => match pid {
            Some(pid) if state.turns.admits(pid).await => handle(&state, &line).await,
            pid => stranger(&state, pid),
        },
        Err(e) => Response::new(exit::ERROR, format!("cannot read the frame: {e}")),
    };
    *lock(&state.activity) = Instant::now();
    if let Ok(mut text) = serde_json::to_string(&response) {
        text.push('\n');
        let _ = write.write_all(text.as_bytes()).await;
    }
}

/// Refuses a process that is not one of the agent's own (`pid` unknown when the kernel gave none).
fn stranger(state: &State, pid: Option<i32>) -> Response {
    let who = pid.map(|p| format!("process {p}")).unwrap_or_else(|| "a process awf cannot identify".into());
    let why = format!(
        "refused: {who} is not a process of agent {}'s running turn; an agent answers only for itself, through the launcher its own turn was given",
        state.key
    );
    (state.events)("control-refused", json!({ "agent": state.key, "why": why, "pid": pid }));
    Response::new(exit::REFUSED, why)
}

fn refuse(state: &State, text: String, data: Value) -> Response {
    (state.events)("control-refused", json!({ "agent": state.key, "why": text, "frame": data }));
    Response::new(exit::REFUSED, text)
}

fn op_of(state: &State, op: &str) -> Result<Arc<OpControl>, Response> {
    if let Some(o) = lock(&state.ops).get(op) {
        return Ok(o.clone());
    }
    if let Some(why) = lock(&state.settled).get(op) {
        return Err(Response::new(
            exit::REFUSED,
            format!("op {op} is already settled ({why}); nothing more is accepted for it"),
        ));
    }
    Err(refuse(
        state,
        format!("unknown op {op}: agent {} has no such operation (use the op id from your prompt)", state.key),
        json!({ "op": op }),
    ))
}

async fn handle(state: &State, line: &str) -> Response {
    let req = match parse_request(line) {
        Ok(r) => r,
        Err(e) => return Response::new(exit::ERROR, e),
    };
    match req.cmd {
        Command::Result { op, json } => match op_of(state, &op) {
            Err(r) => r,
            Ok(o) => {
                // Recorded before the agent is told: an accepted answer survives a crash of awf.
                let sub = o.slot.submit_text_recorded(&json).await;
                (state.events)(
                    "op-submission",
                    json!({ "agent": state.key, "op_id": op, "accepted": sub == Submission::Accepted, "bytes": json.len() }),
                );
                if sub == Submission::Accepted {
                    o.answered.notify_waiters();
                    o.answered.notify_one();
                }
                Response::new(sub.exit_code(), sub.text())
            }
        },
        Command::Waiting { op, reason, timeout_ms } => match op_of(state, &op) {
            Err(r) => r,
            Ok(o) => {
                let wait = timeout_ms.map(Duration::from_millis).unwrap_or(DEFAULT_WAIT);
                *lock(&o.waiting) = Some((Instant::now() + wait, reason.clone()));
                (state.events)(
                    "op-waiting",
                    json!({ "agent": state.key, "op_id": op, "reason": reason, "timeout_ms": wait.as_millis() as u64 }),
                );
                Response::new(
                    exit::OK,
                    format!(
                        "waiting acknowledged: no check-in for {}s; this does not extend the deadline ({})",
                        wait.as_secs(),
                        o.deadline_text
                    ),
                )
            }
        },
        Command::Usage { input, output, cost_usd } => {
            let current = lock(&state.current).clone();
            match current.and_then(|op| lock(&state.ops).get(&op).cloned()) {
                None => refuse(
                    state,
                    "usage refused: this agent has no operation running".into(),
                    json!({ "cmd": "usage" }),
                ),
                Some(o) => {
                    let mut u = lock(&o.usage);
                    u.input_tokens += input;
                    u.output_tokens += output;
                    if let Some(c) = cost_usd {
                        u.cost_usd += c;
                    }
                    Response::new(exit::OK, "usage recorded")
                }
            }
        }
        Command::Send { to, text } => match state.messenger.send(&to, &text) {
            Ok(n) => Response::new(exit::OK, format!("sent #{n}")),
            Err(e) => refuse(state, e.to_string(), json!({ "cmd": "send", "to": to })),
        },
        Command::Ask { to, text } => {
            let deadline =
                lock(&state.current).clone().and_then(|op| lock(&state.ops).get(&op).cloned()).and_then(|o| o.deadline);
            match state.messenger.ask(&to, &text, deadline).await {
                Ok(reply) => Response::new(exit::OK, reply),
                Err(MessageError::Refused(why)) => refuse(state, why, json!({ "cmd": "ask", "to": to })),
                Err(MessageError::Failed(why)) => Response::new(exit::REFUSED, format!("ask failed: {why}")),
            }
        }
        Command::Reply { n, text } => match state.messenger.reply(n, &text) {
            Ok(()) => Response::new(exit::OK, format!("replied to #{n}")),
            Err(e) => refuse(state, e.to_string(), json!({ "cmd": "reply", "n": n })),
        },
        Command::Inbox { json } => {
            let held = state.messenger.inbox();
            let text = if json {
                held.iter().filter_map(|m| serde_json::to_string(m).ok()).collect::<Vec<_>>().join("\n")
            } else if held.is_empty() {
                "no messages".to_string()
            } else {
                held.iter()
                    .map(|m| {
                        format!(
                            "#{} from {}{}:\n{}",
                            m.n,
                            m.from,
                            if m.asks { " (asks for a reply)" } else { "" },
                            m.text
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            Response::new(exit::OK, text)
        }
    }
}

/// The frame `awf wf` sends, as a line.
pub fn request_line(cmd: Command) -> String {
    let mut s = serde_json::to_string(&super::protocol::Request { v: VERSION, cmd }).unwrap_or_default();
    s.push('\n');
    s
}
