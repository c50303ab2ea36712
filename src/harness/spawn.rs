//! Starting a turn's process (`command` and CLI harnesses): a session of its own (`setsid`, so its
//! pid is its process group and its session, and no other turn can join its group), whose leader
//! dies with awf (`PR_SET_PDEATHSIG`), with `AWF_RUN_ID` in its environment, its group recorded in
//! the run folder (`groups.jsonl`) and its session admitted to the agent's control socket until
//! the group is killed. The process is started without copying awf (`spawn/start.rs`), with the
//! open-file limit awf started with (`crate::open_files`), its pipes and exit held by
//! `spawn/child.rs`.

use crate::control::peer::Admission;
use crate::control::server::Endpoint;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::{mpsc, OnceLock};
use tokio::sync::oneshot;

mod child;
mod program;
mod start;

pub(crate) use child::{Child, StdinLeft};
pub use program::Program;

/// A turn's process group (its session leader's pid): killed when dropped, so nothing a turn
/// started outlives it. While it lives, the processes of its session may use the agent's control
/// socket.
pub(crate) struct Group {
    pgid: Option<i32>,
    admission: Option<Admission>,
}

impl Group {
    /// Kills the group and ends its admission; true when there was a group to kill.
    pub(crate) fn kill(&mut self) -> bool {
        self.admission = None;
        match self.pgid.take() {
            Some(pgid) => {
                nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), nix::sys::signal::Signal::SIGKILL).is_ok()
            }
            None => false,
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.kill();
    }
}

/// What goes to a process's stdin: the text, then stdin is closed, or held open until the process
/// ends.
pub(crate) struct Stdin {
    pub text: String,
    pub keep_open: bool,
}

struct Job {
    program: Program,
    stdin: Option<Stdin>,
    rt: tokio::runtime::Handle,
    reply: oneshot::Sender<io::Result<Child>>,
}

/// The thread turn processes polled in a task are started from, and what every turn process gets
/// from awf. `PR_SET_PDEATHSIG` fires when the *thread* that started the child exits, not only the
/// process. A turn polled by `block_on` (a script's host call) starts its process on its own
/// thread, which stays in that call until the turn ends and its group is killed; a turn polled in
/// a task (a message round) may move between runtime workers, so its process is started by this
/// thread, which never exits (its sender lives in the static, so its loop only ends with the
/// process).
struct Spawner {
    /// What every process gets from awf, settled at the first turn.
    heritage: OnceLock<start::Heritage>,
    /// Started at the first turn polled in a task: a command that starts none starts no thread.
    sender: OnceLock<Option<mpsc::Sender<Job>>>,
}

static SPAWNER: Spawner = Spawner { heritage: OnceLock::new(), sender: OnceLock::new() };

fn heritage() -> start::Heritage {
    *SPAWNER.heritage.get_or_init(|| {
        start::Heritage::settle(crate::control::server::LISTENER_FDS_FROM, crate::open_files::at_start())
    })
}

fn spawner() -> io::Result<&'static mpsc::Sender<Job>> {
    SPAWNER
        .sender
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Job>();
            let thread = std::thread::Builder::new().name("awf-spawner".into()).spawn(move || {
                let heritage = heritage();
                for job in rx {
                    let _rt = job.rt.enter();
                    if let Err(Ok(child)) = job.reply.send(start_with_pipes(&job.program, job.stdin, heritage)) {
                        // The turn was dropped while its process started: end the whole group.
                        if let Some(pid) = child.id() {
                            let _ = nix::sys::signal::killpg(
                                nix::unistd::Pid::from_raw(pid as i32),
                                nix::sys::signal::Signal::SIGKILL,
                            );
                        }
                    }
                }
            });
            thread.ok().map(|_| tx)
        })
        .as_ref()
        .ok_or_else(|| io::Error::other("cannot start the thread that starts agent processes"))
}

/// Starts `program` (`start.rs`) with stdin a pipe holding `stdin`'s text or `/dev/null`, stdout
/// and stderr pipes, in a session of its own that dies with awf.
///
/// The text goes into the pipe before the process starts, as much as the pipe holds: a prompt of
/// common size is then waiting for the program when it reads, its end too (the pipe closed),
/// with no task to wake. What the pipe cannot hold is left to the caller (`Child::stdin`).
fn start_with_pipes(program: &Program, stdin: Option<Stdin>, heritage: start::Heritage) -> io::Result<Child> {
    use nix::fcntl::OFlag;
    let prepared = program.prepare()?;
    let pipe = || nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(io::Error::from);
    let (stdin_theirs, stdin_ours) = match stdin {
        Some(Stdin { text, keep_open }) => {
            let (r, w) = pipe()?;
            let left = child::Prefilled::fill(w, text.into_bytes(), keep_open);
            (r, left)
        }
        None => (std::fs::File::open("/dev/null")?.into(), None),
    };
    let (stdout_ours, stdout_theirs) = pipe()?;
    let (stderr_ours, stderr_theirs) = pipe()?;
    let stdio = [stdin_theirs.as_raw_fd(), stdout_theirs.as_raw_fd(), stderr_theirs.as_raw_fd()];
    let pid = start::start(&prepared, stdio, heritage)?;
    drop((stdin_theirs, stdout_theirs, stderr_theirs));
    // From here the process runs: a pipe that cannot be registered leaves it without that stream.
    let child = Child::new(
        pid,
        stdin_ours.and_then(|left| left.registered()),
        tokio::net::unix::pipe::Receiver::from_owned_fd(stdout_ours).ok(),
        tokio::net::unix::pipe::Receiver::from_owned_fd(stderr_ours).ok(),
    );
    Ok(child)
}

/// Starts `program`: on the calling thread when a `block_on` polls the caller there, else (the
/// caller is a runtime task, which may move between workers) on the spawner thread.
async fn start(program: Program, stdin: Option<Stdin>) -> io::Result<Child> {
    let rt = tokio::runtime::Handle::try_current().map_err(io::Error::other)?;
    if tokio::task::try_id().is_none() {
        // `block_on` polls the turn on this thread, which stays in that call until the turn ends
        // and its group is killed: the process may die with this thread. No hand-off to the
        // spawner and back (two wake-ups, each a wait for a core on a busy machine).
        return start_with_pipes(&program, stdin, heritage());
    }
    let stopped = || io::Error::other("the thread that starts agent processes has stopped");
    let (reply, started) = oneshot::channel();
    spawner()?.send(Job { program, stdin, rt, reply }).map_err(|_| stopped())?;
    started.await.map_err(|_| stopped())?
}

/// Starts a turn's process for `agent`'s operation `op_id`.
pub(crate) async fn spawn(
    mut program: Program,
    stdin: Option<Stdin>,
    endpoint: &Endpoint,
    agent: &str,
    op_id: &str,
) -> io::Result<(Child, Group)> {
    program.env("AWF_RUN_ID", &endpoint.run.id);
    // Until the new leader is admitted, a call on the socket from an unknown process waits for it.
    let spawning = endpoint.turns().spawning();
    let child = start(program, stdin).await?;
    let pgid = child.id().map(|p| p as i32);
    let admission = pgid.map(|p| {
        crate::record::groups::append(&endpoint.run.dir, endpoint.run.attempt, p, agent, op_id);
        spawning.admit(p)
    });
    Ok((child, Group { pgid, admission }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn output(child: &mut Child) -> String {
        let mut text = String::new();
        child.stdout.take().expect("stdout").read_to_string(&mut text).await.expect("stdout read");
        text
    }

    #[tokio::test]
    async fn the_process_leads_a_session_of_its_own_in_its_folder_with_its_stdin() {
        let dir = tempfile::tempdir().expect("a folder");
        let mut p = Program::new("sh");
        p.args(["-c", "echo $$ $(ps -o sid= -p $$) $(pwd) $AWF_T; cat"]).env("AWF_T", "set").current_dir(dir.path());
        let stdin = Stdin { text: "from stdin\n".into(), keep_open: false };
        let mut child = start(p, Some(stdin)).await.expect("started");
        let pid = child.id().expect("a pid");
        assert!(child.stdin.is_none(), "a short text is all in the pipe, which is closed");
        let out = output(&mut child).await;
        let cwd = dir.path().canonicalize().expect("canonical");
        assert_eq!(out, format!("{pid} {pid} {} set\nfrom stdin\n", cwd.display()));
        assert!(child.wait().await.expect("waited").success());
        assert_eq!(child.id(), None, "reaped");
    }

    /// Whether `pid` is dead or dying: a zombie, or SIGKILL pending.
    fn killed(pid: i32) -> bool {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name)).map(str::trim).unwrap_or("");
        let kill = 1u64 << (nix::libc::SIGKILL - 1);
        let pending = |name: &str| u64::from_str_radix(field(name), 16).unwrap_or(0) & kill != 0;
        field("State:").starts_with(['Z', 'X']) || pending("SigPnd:") || pending("ShdPnd:")
    }

    /// Starts `sleep 30` from `rt` (in a task when `in_task`) and lets go of it unkilled; its pid
    /// and the thread that polled the start.
    fn sleeper(rt: &tokio::runtime::Runtime, in_task: bool) -> (i32, i32) {
        let go = async {
            let mut p = Program::new("sleep");
            p.args(["30"]);
            let child = start(p, None).await.expect("started");
            let pid = child.id().expect("a pid") as i32;
            std::mem::forget(child);
            (pid, nix::unistd::gettid().as_raw())
        };
        if in_task {
            rt.block_on(rt.spawn(go)).expect("the task")
        } else {
            let handle = rt.handle().clone();
            std::thread::scope(|s| s.spawn(move || handle.block_on(go)).join()).expect("the thread")
        }
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("a runtime")
    }

    #[test]
    fn a_process_started_under_block_on_dies_with_the_thread_that_polled_it() {
        let rt = runtime();
        let (pid, _) = sleeper(&rt, false);
        // The thread has ended: the process got SIGKILL (PR_SET_PDEATHSIG) and is reaped here.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || tx.send(nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None)));
        let status = rx.recv_timeout(std::time::Duration::from_secs(20)).expect("it died with its thread");
        assert!(
            matches!(status, Ok(nix::sys::wait::WaitStatus::Signaled(_, nix::sys::signal::Signal::SIGKILL, _))),
            "{status:?}"
        );
    }

    #[test]
    fn a_process_started_in_a_task_outlives_the_runtime_worker_that_polled_it() {
        let rt = runtime();
        let (pid, worker) = sleeper(&rt, true);
        drop(rt);
        // The worker has exited once its task entry is gone: by then a signal tied to its death
        // would have been sent.
        let gone = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::path::Path::new(&format!("/proc/self/task/{worker}")).exists() {
            assert!(std::time::Instant::now() < gone, "the runtime's worker thread did not exit");
            std::thread::yield_now();
        }
        let alive = !killed(pid);
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
        assert!(alive, "started by the spawner thread, it lives on");
    }

    #[tokio::test]
    async fn a_text_longer_than_the_pipe_is_left_to_write_and_a_kept_stdin_stays_open() {
        // 1 MiB: far more than a pipe holds (64 KiB by default).
        let text: String = (0..1 << 20).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
        let mut child =
            start(Program::new("cat"), Some(Stdin { text: text.clone(), keep_open: false })).await.expect("started");
        let StdinLeft { mut pipe, rest, keep_open } = child.stdin.take().expect("the rest of the text");
        assert!(!keep_open && !rest.is_empty() && rest.len() < text.len(), "{} left", rest.len());
        let writer = tokio::spawn(async move {
            pipe.write_all(&rest).await.expect("the rest written");
        });
        assert_eq!(output(&mut child).await, text, "the text arrives whole and in order");
        writer.await.expect("the writer");
        // Held open: the process sees the text but no end of it.
        let mut p = Program::new("sh");
        p.args(["-c", "read line; echo \"got $line\"; cat; echo ended"]);
        let mut child = start(p, Some(Stdin { text: "one\n".into(), keep_open: true })).await.expect("started");
        let held = child.stdin.take().expect("stdin held open");
        assert!(held.keep_open && held.rest.is_empty());
        let mut out = child.stdout.take().expect("stdout");
        let mut first = [0u8; 8];
        out.read_exact(&mut first).await.expect("the first line");
        assert_eq!(&first, b"got one\n");
        drop(held);
        let mut rest = String::new();
        out.read_to_string(&mut rest).await.expect("the rest");
        assert_eq!(rest, "ended\n", "closing the held stdin ends cat");
        assert!(child.wait().await.expect("waited").success());
    }

    #[tokio::test]
    async fn a_missing_program_or_folder_is_an_error_and_no_process() {
        let missing = start(Program::new("awf-no-such-program"), None).await.err().map(|e| e.kind());
        assert_eq!(missing, Some(io::ErrorKind::NotFound));
        let mut p = Program::new("true");
        p.current_dir("/awf-no-such-folder");
        assert_eq!(start(p, None).await.err().map(|e| e.kind()), Some(io::ErrorKind::NotFound));
    }

    #[tokio::test]
    async fn a_script_without_an_interpreter_line_runs_under_sh_and_signals_are_its_defaults() {
        let dir = tempfile::tempdir().expect("a folder");
        let script = dir.path().join("bare");
        std::fs::write(&script, "grep SigIgn /proc/$$/status; kill -TERM $$\n").expect("written");
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("executable");
        let mut child = start(Program::new(&script), None).await.expect("started");
        // awf ignores SIGPIPE (as every Rust program); its processes start with it at its default.
        let out = output(&mut child).await;
        let ignored = out.trim().strip_prefix("SigIgn:\t").and_then(|hex| u64::from_str_radix(hex, 16).ok());
        let sigpipe = 1u64 << (nix::libc::SIGPIPE - 1);
        assert_eq!(ignored.map(|mask| mask & sigpipe), Some(0), "{out}");
        let status = child.wait().await.expect("waited");
        assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(15));
    }

    #[tokio::test]
    async fn a_child_dropped_unreaped_is_killed_and_reaped() {
        let mut p = Program::new("sleep");
        p.args(["30"]);
        let child = start(p, None).await.expect("started");
        let pid = nix::unistd::Pid::from_raw(child.id().expect("a pid") as i32);
        drop(child);
        let gone = tokio::time::timeout(std::time::Duration::from_secs(10), async {
            // Reaped: the pid is no longer this process's child (ECHILD) nor alive.
            while nix::sys::signal::kill(pid, None).is_ok() {
                tokio::task::yield_now().await;
            }
        });
        gone.await.expect("the dropped child was killed and reaped");
    }

    #[tokio::test]
    async fn the_process_gets_the_descriptors_below_the_listeners_and_none_above() {
        use nix::fcntl::{fcntl, FcntlArg};
        use nix::sys::resource::{getrlimit, setrlimit, Resource};
        let base = crate::control::server::LISTENER_FDS_FROM;
        let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("the open-file limit");
        assert!(hard > base as u64 + 1, "this test needs an open-file limit above {base}, the hard one is {hard}");
        setrlimit(Resource::RLIMIT_NOFILE, soft.max(base as u64 + 64).min(hard), hard).expect("the limit raised");
        // Two descriptors left open across exec (no close-on-exec), one below the listeners' and
        // one among them: the first is the process's, the second is not copied to it.
        let file = std::fs::File::open("/dev/null").expect("a file");
        let low = fcntl(&file, FcntlArg::F_DUPFD(100)).expect("a low descriptor");
        let high = fcntl(&file, FcntlArg::F_DUPFD(base + 10)).expect("a high descriptor");
        let mut p = Program::new("sh");
        p.args([
            "-c",
            &format!("test -e /proc/self/fd/{low} && echo low; test -e /proc/self/fd/{high} && echo high; true"),
        ]);
        let mut child = start(p, None).await.expect("started");
        let out = output(&mut child).await;
        let _ = nix::unistd::close(low);
        let _ = nix::unistd::close(high);
        assert_eq!(out, "low\n");
    }
}
