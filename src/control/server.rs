//! The control socket of one agent: a Unix socket in a 0700 folder, newline-delimited JSON frames,
//! each carried out by the one dispatcher (`dispatch.rs`) against the agent's control state. The
//! socket is the agent's authority: it serves only the processes of the agent's running turns
//! (`peer.rs`) and reaches only its own operations; anything else is refused and logged.
//!
//! The agent may be the attacker, so what a connection costs is bounded before anything is read:
//! the peer is checked first (a stranger is answered and closed, its frame unread), at most
//! `MAX_CONNECTIONS` are open at once (those past it are closed at once), at most `MAX_READING`
//! read a frame at once, each frame within `FRAME_TIME` and `MAX_FRAME` bytes. A flood of frames
//! then holds at most `MAX_READING` frames in memory, from whichever process. A connection whose
//! frame was read may wait as long as its command does (`ask`, an operator's answer).

use super::dispatch::{dispatch, Control};
use super::messenger::Messenger;
use super::peer::Turns;
use super::protocol::{exit, parse_request, Command, Response, VERSION};
use super::slot::ResultSlot;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Semaphore;

pub use super::dispatch::{EventSink, OpControl};

/// Agents' listening sockets are moved to descriptors from this one up (when the open-file limit
/// allows), away from the low ones a turn's pipes take: a turn's process then starts with a copy of
/// the descriptors below it only (`harness/spawn`), not one per open agent.
pub const LISTENER_FDS_FROM: i32 = 1024;

/// The longest socket path a `sockaddr_un` takes, less a margin.
const MAX_SOCKET_PATH: usize = 100;
/// The longest frame accepted (an answer's JSON is inside it).
const MAX_FRAME: u64 = 16 << 20;
/// Most connections open at once on one agent's socket: a turn's own parallel commands (asks
/// and councils waiting for their answers) stay far below it.
const MAX_CONNECTIONS: usize = 32;
/// Most connections reading a frame at once: what a flood holds is at most this many frames.
const MAX_READING: usize = 2;
/// The longest a frame may take to arrive once its reading began (`awf wf` writes it at once).
const FRAME_TIME: Duration = Duration::from_secs(5);

/// The run an endpoint serves: every agent process gets its id as `AWF_RUN_ID`, and the process
/// groups of its turns are recorded in its folder (`groups.jsonl`) under its attempt.
#[derive(Debug, Clone)]
pub struct RunTag {
    pub id: String,
    pub dir: PathBuf,
    pub attempt: u32,
    /// The run's secrets: scrubbed from what its agents' processes print before it is recorded.
    pub secrets: Arc<crate::redact::Redactor>,
}

struct State {
    turns: Arc<Turns>,
    control: Control,
    activity: Mutex<Instant>,
    /// Asks of the operator in flight: a turn waiting on the operator is not stalled.
    asking: std::sync::atomic::AtomicUsize,
    /// A place for each open connection (`MAX_CONNECTIONS`).
    connections: Arc<Semaphore>,
    /// A place for each connection reading its frame (`MAX_READING`).
    reading: Semaphore,
    /// `FRAME_TIME` (shorter in tests).
    frame_time: Duration,
}

impl State {
    fn new(control: Control) -> State {
        State {
            turns: Arc::new(Turns::default()),
            control,
            activity: Mutex::new(Instant::now()),
            asking: Default::default(),
            connections: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
            reading: Semaphore::new(MAX_READING),
            frame_time: FRAME_TIME,
        }
    }
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
        crate::record::private::ensure_dir(dir)?;
        let mut socket = dir.join("wf.sock");
        let mut short_dir = None;
        if socket.as_os_str().len() > MAX_SOCKET_PATH {
            let short = std::env::temp_dir().join(format!("awf-{}", &uuid::Uuid::new_v4().simple().to_string()[..10]));
            crate::record::private::ensure_dir(&short)?;
            socket = short.join("wf.sock");
            short_dir = Some(short);
        }
        let listener =
            UnixListener::from_std(high_fd(replacing(&socket, |at| std::os::unix::net::UnixListener::bind(at))?)?)?;
        // A socket takes its mode from the umask; its folder is already 0700, so tightening it here
        // leaves no moment when another user could reach it.
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))?;
        // The launcher is a symlink to the awf binary: run as `wf`, awf acts as `awf wf` with the
        // socket beside it (or the one `wf.target` names, when that path was too long). No shell
        // starts per command, and it needs no environment.
        let launcher = dir.join("wf");
        replacing(&launcher, |at| std::os::unix::fs::symlink(awf, at))?;
        if short_dir.is_some() {
            crate::record::private::write(&dir.join("wf.target"), socket.display().to_string())?;
        }
        let state = Arc::new(State::new(Control::new(key, events, Some(messenger))));
        let task = tokio::spawn(accept(listener, state.clone()));
        Ok(Endpoint { dir: dir.to_path_buf(), socket, launcher, run, state, task, short_dir })
    }

    /// The leaders of this agent's running turns: the processes (and their descendants and
    /// groups) this socket serves.
    pub fn turns(&self) -> &Arc<Turns> {
        &self.state.turns
    }

    /// Records `event` where this agent's events go (the run's records).
    pub fn event(&self, event: &crate::run::Event<'_>) {
        self.state.control.event(event)
    }

    /// Opens a turn's operation with its deadline, which `waiting` answers quote; it stays
    /// reachable until `settle_op`.
    pub fn open_turn(
        &self,
        op_id: &str,
        slot: Arc<ResultSlot>,
        deadline: Option<crate::run::deadline::Deadline>,
        meter: Arc<crate::accounting::Meter>,
    ) -> Arc<OpControl> {
        self.state.control.open_turn(op_id, slot, deadline, meter)
    }

    /// Closes an operation; later frames for it are told why.
    pub fn settle_op(&self, op_id: &str, why: &str) {
        self.state.control.settle_op(op_id, why)
    }

    /// When a frame last arrived on this socket; now while the agent waits on the operator.
    pub fn last_activity(&self) -> Instant {
        if self.state.asking.load(std::sync::atomic::Ordering::SeqCst) > 0 {
            return Instant::now();
        }
        *lock(&self.state.activity)
    }
}

/// Makes the file at `path` with `make`; when something is already there (the socket or launcher of
/// an earlier opening of the same agent folder), removes it and makes the file again. A new
/// folder, the usual case, costs no removal.
fn replacing<T>(path: &Path, make: impl Fn(&Path) -> std::io::Result<T>) -> std::io::Result<T> {
    match make(path) {
        Err(e) if matches!(e.kind(), std::io::ErrorKind::AddrInUse | std::io::ErrorKind::AlreadyExists) => {
            std::fs::remove_file(path)?;
            make(path)
        }
        made => made,
    }
}

/// Accepts connections until the endpoint drops, each served on a task of its own while it has a
/// place; one past `MAX_CONNECTIONS` is closed at once.
async fn accept(listener: UnixListener, state: Arc<State>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            // Out of descriptors, or a connection that went before it was taken: the socket
            // stays open, and tries again a moment later rather than spinning.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(place) = state.connections.clone().try_acquire_owned() else {
            drop(stream);
            continue;
        };
        let s = state.clone();
        tokio::spawn(async move {
            serve(stream, s).await;
            drop(place);
        });
    }
}

async fn serve(stream: UnixStream, state: Arc<State>) {
    let pid = stream.peer_cred().ok().and_then(|c| c.pid());
    let (read, mut write) = stream.into_split();
    // The peer is checked before a byte is read: a stranger's frame costs nothing. It is told why
    // and the connection closes unread (`awf wf` reads the answer even when its write failed).
    let admitted = match pid {
        Some(pid) => state.turns.admits(pid).await,
        None => false,
    };
    if !admitted {
        answer(&mut write, &stranger(&state.control, pid)).await;
        return;
    }
    let request = match read_frame(read, &state.reading, state.frame_time).await {
        Ok(Some(line)) => parse_request(&line).map_err(|e| e.to_string()),
        Ok(None) => return,
        Err(e) => Err(e.to_string()),
    };
    let response = match request {
        Ok(req) if matches!(req.cmd, Command::AskOperator { .. }) => {
            use std::sync::atomic::Ordering::SeqCst;
            state.asking.fetch_add(1, SeqCst);
            let response = dispatch(&state.control, req.cmd).await;
            state.asking.fetch_sub(1, SeqCst);
            response
        }
        Ok(req) => dispatch(&state.control, req.cmd).await,
        Err(why) => Response::new(exit::ERROR, why),
    };
    *lock(&state.activity) = Instant::now();
    answer(&mut write, &response).await;
}

/// Why a frame was not read whole.
#[derive(Debug, thiserror::Error)]
enum FrameError {
    #[error("cut off: no whole frame within {} ms", .0.as_millis())]
    CutOff(Duration),
    #[error("a frame is at most {} MiB", MAX_FRAME >> 20)]
    TooLong,
    #[error("cannot read the frame: {0}")]
    Read(#[source] std::io::Error),
}

/// Reads one frame holding a place of `reading`, within `time`: its line, or `None` when the
/// peer sent nothing.
async fn read_frame(read: OwnedReadHalf, reading: &Semaphore, time: Duration) -> Result<Option<String>, FrameError> {
    // The semaphore is never closed; were it, the connection would end unanswered.
    let Ok(_place) = reading.acquire().await else { return Ok(None) };
    let mut line = String::new();
    let mut reader = BufReader::new(read.take(MAX_FRAME));
    match tokio::time::timeout(time, reader.read_line(&mut line)).await {
        Err(_) => Err(FrameError::CutOff(time)),
        Ok(Err(e)) => Err(FrameError::Read(e)),
        Ok(Ok(0)) => Ok(None),
        Ok(Ok(_)) if !line.ends_with('\n') && line.len() as u64 >= MAX_FRAME => Err(FrameError::TooLong),
        Ok(Ok(_)) => Ok(Some(line)),
    }
}

/// Writes `response` as one line; a peer gone already is nothing to tell.
async fn answer(write: &mut OwnedWriteHalf, response: &Response) {
    if let Ok(mut text) = serde_json::to_string(response) {
        text.push('\n');
        let _ = tokio::time::timeout(FRAME_TIME, write.write_all(text.as_bytes())).await;
    }
}

/// Refuses a process that is not one of the agent's own (`pid` unknown when the kernel gave none).
fn stranger(control: &Control, pid: Option<i32>) -> Response {
    let who = pid.map(|p| format!("process {p}")).unwrap_or_else(|| "a process awf cannot identify".into());
    let why = format!(
        "refused: {who} is not a process of agent {}'s running turn; an agent answers only for itself, through the launcher its own turn was given",
        control.key()
    );
    control.refuse_from(why, serde_json::Value::Null, pid)
}

/// The frame `awf wf` sends, as a line.
pub fn request_line(cmd: Command) -> String {
    let mut s = serde_json::to_string(&super::protocol::Request { v: VERSION, cmd }).unwrap_or_default();
    s.push('\n');
    s
}

/// The listener on a descriptor from `LISTENER_FDS_FROM` up (close-on-exec, non-blocking, as tokio
/// takes it), or on its own descriptor where the open-file limit stops short of that.
#[allow(unsafe_code)]
fn high_fd(listener: std::os::unix::net::UnixListener) -> std::io::Result<std::os::unix::net::UnixListener> {
    use nix::fcntl::{fcntl, FcntlArg};
    use std::os::fd::{FromRawFd, OwnedFd};
    let listener = match fcntl(&listener, FcntlArg::F_DUPFD_CLOEXEC(LISTENER_FDS_FROM)) {
        // SAFETY: F_DUPFD_CLOEXEC returned a new descriptor that nothing else owns; the old one
        // closes when `listener` drops.
        Ok(fd) => std::os::unix::net::UnixListener::from(unsafe { OwnedFd::from_raw_fd(fd) }),
        Err(_) => listener,
    };
    listener.set_nonblocking(true)?;
    Ok(listener)
}

#[cfg(test)]
#[path = "server_tests.rs"]
mod limits_tests;

#[cfg(test)]
mod tests {
    use super::replacing;
    use std::os::unix::net::{UnixListener, UnixStream};

    /// An agent folder opened again (a resumed run, a reopened agent) still holds the last
    /// opening's socket and launcher: both are replaced, and a fresh folder gets them at once.
    #[test]
    fn a_socket_or_launcher_left_by_an_earlier_opening_is_replaced() {
        let dir = tempfile::tempdir().expect("a folder");
        let socket = dir.path().join("wf.sock");
        drop(replacing(&socket, |at| UnixListener::bind(at)).expect("bound in a fresh folder"));
        assert!(socket.exists(), "a dropped listener leaves its socket file");
        let listener = replacing(&socket, |at| UnixListener::bind(at)).expect("bound over the stale socket");
        UnixStream::connect(&socket).expect("the new socket accepts");
        drop(listener);

        let launcher = dir.path().join("wf");
        replacing(&launcher, |at| std::os::unix::fs::symlink("/old/awf", at)).expect("linked");
        replacing(&launcher, |at| std::os::unix::fs::symlink("/new/awf", at)).expect("linked again");
        assert_eq!(std::fs::read_link(&launcher).expect("a link"), std::path::Path::new("/new/awf"));

        let tries = std::cell::Cell::new(0);
        let refused = replacing(&dir.path().join("x"), |_| -> std::io::Result<()> {
            tries.set(tries.get() + 1);
            Err(std::io::ErrorKind::PermissionDenied.into())
        });
        assert_eq!(refused.map_err(|e| e.kind()), Err(std::io::ErrorKind::PermissionDenied));
        assert_eq!(tries.get(), 1, "other errors are not retried");
    }
}
