//! Starting a turn's process (`command` and CLI harnesses): a session of its own (`setsid`, so its
//! pid is its process group and its session, and no other turn can join its group), whose leader
//! dies with awf (`PR_SET_PDEATHSIG`), with `AWF_RUN_ID` in its environment, its group recorded in
//! the run folder (`groups.jsonl`) and its session admitted to the agent's control socket until
//! the group is killed.

use crate::control::peer::Admission;
use crate::control::server::Endpoint;
use std::io;
use std::sync::{mpsc, OnceLock};
use tokio::process::{Child, Command};
use tokio::sync::oneshot;

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

struct Job {
    cmd: Command,
    rt: tokio::runtime::Handle,
    reply: oneshot::Sender<io::Result<Child>>,
}

/// The thread every turn process is forked from. `PR_SET_PDEATHSIG` fires when the *thread* that
/// forked the child exits, not only the process: a runtime worker or a script branch thread may
/// end while the turn runs, this one never does (its sender lives in a static, so its loop only
/// ends with the process).
fn spawner() -> io::Result<&'static mpsc::Sender<Job>> {
    static SPAWNER: OnceLock<Option<mpsc::Sender<Job>>> = OnceLock::new();
    SPAWNER
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Job>();
            let thread = std::thread::Builder::new().name("awf-spawner".into()).spawn(move || {
                for mut job in rx {
                    let _rt = job.rt.enter();
                    if let Err(Ok(child)) = job.reply.send(job.cmd.spawn()) {
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

/// Makes the process the leader of a session of its own (hence of a process group of its own),
/// dying (SIGKILL) when awf does, even by `kill -9`.
#[allow(unsafe_code)]
fn own_session_dying_with_awf(cmd: &mut Command) {
    let awf = nix::unistd::getpid();
    // SAFETY: the hook runs in the forked child before exec, where only async-signal-safe calls
    // are allowed: it makes three system calls (setsid(2), prctl(2), getppid(2)) and allocates
    // nothing (its errors are raw errnos). setsid fails only in a group leader, which the fresh
    // child is not as long as nothing (`process_group`) makes it one before the hook. The parent
    // check closes the race where awf died before the prctl.
    unsafe {
        cmd.pre_exec(move || {
            nix::unistd::setsid()?;
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)?;
            if nix::unistd::getppid() != awf {
                return Err(io::Error::from_raw_os_error(nix::libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// Starts a turn's process for `agent`'s operation `op_id`.
pub(crate) async fn spawn(
    mut cmd: Command,
    endpoint: &Endpoint,
    agent: &str,
    op_id: &str,
) -> io::Result<(Child, Group)> {
    cmd.env("AWF_RUN_ID", &endpoint.run.id).kill_on_drop(true);
    own_session_dying_with_awf(&mut cmd);
    let rt = tokio::runtime::Handle::try_current().map_err(io::Error::other)?;
    let stopped = || io::Error::other("the thread that starts agent processes has stopped");
    // Until the new leader is admitted, a call on the socket from an unknown process waits for it.
    let spawning = endpoint.turns().spawning();
    let (reply, started) = oneshot::channel();
    spawner()?.send(Job { cmd, rt, reply }).map_err(|_| stopped())?;
    let child = started.await.map_err(|_| stopped())??;
    let pgid = child.id().map(|p| p as i32);
    let admission = pgid.map(|p| {
        crate::record::groups::append(&endpoint.run.dir, endpoint.run.attempt, p, agent, op_id);
        spawning.admit(p)
    });
    Ok((child, Group { pgid, admission }))
}
