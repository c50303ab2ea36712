//! A started turn process as awf holds it: its pid, its pipes, and its exit awaited through a
//! pidfd (readable once it exits); killed and reaped in the background when dropped unreaped, so
//! it never outlives its turn nor stays a zombie.

use nix::libc;
use nix::sys::wait::{waitid, waitpid, Id, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;

/// How often an exit is looked for on a kernel without pidfds (before Linux 5.3).
const POLL: Duration = Duration::from_millis(20);

pub(crate) struct Child {
    pid: Pid,
    /// Readable once the process has exited; `None` on a kernel without pidfds.
    pidfd: Option<AsyncFd<OwnedFd>>,
    status: Option<ExitStatus>,
    pub(crate) stdin: Option<StdinLeft>,
    pub(crate) stdout: Option<pipe::Receiver>,
    pub(crate) stderr: Option<pipe::Receiver>,
}

impl Child {
    pub(super) fn new(
        pid: i32,
        stdin: Option<StdinLeft>,
        stdout: Option<pipe::Receiver>,
        stderr: Option<pipe::Receiver>,
    ) -> Child {
        Child { pid: Pid::from_raw(pid), pidfd: pidfd(pid), status: None, stdin, stdout, stderr }
    }

    pub(crate) fn id(&self) -> Option<u32> {
        self.status.is_none().then_some(self.pid.as_raw() as u32)
    }

    /// Its exit status, once it exited (reaping it).
    pub(crate) fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if self.status.is_some() {
            return Ok(self.status);
        }
        // Whether it exited, looked at without reaping it: its pidfd leaves the runtime's poller
        // first, since the reap itself wakes the pidfd's waiters, a runtime worker among them.
        if self.pidfd.is_some() {
            let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
            match waitid(Id::Pid(self.pid), flags).map_err(io::Error::from)? {
                WaitStatus::StillAlive => return Ok(None),
                _ => self.pidfd = None,
            }
        }
        let status = match waitpid(self.pid, Some(WaitPidFlag::WNOHANG)).map_err(io::Error::from)? {
            WaitStatus::Exited(_, code) => ExitStatus::from_raw((code & 0xff) << 8),
            WaitStatus::Signaled(_, signal, core) => ExitStatus::from_raw(signal as i32 | if core { 0x80 } else { 0 }),
            _ => return Ok(None),
        };
        self.status = Some(status);
        Ok(self.status)
    }

    /// Waits for it to exit; cancel safe.
    pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
        loop {
            if let Some(status) = self.try_wait()? {
                return Ok(status);
            }
            match &self.pidfd {
                Some(fd) => fd.readable().await?.clear_ready(),
                None => tokio::time::sleep(POLL).await,
            }
        }
    }

    /// Sends it SIGKILL (unless it was already reaped).
    pub(crate) fn start_kill(&mut self) -> io::Result<()> {
        if self.status.is_some() {
            return Ok(());
        }
        nix::sys::signal::kill(self.pid, nix::sys::signal::Signal::SIGKILL).map_err(io::Error::from)
    }
}

/// What of a process's stdin text its pipe could not take before the process started, with the
/// pipe's writing end: the turn writes it, then closes stdin unless it is `keep_open`.
pub(crate) struct StdinLeft {
    pub(crate) pipe: pipe::Sender,
    pub(crate) rest: Vec<u8>,
    pub(crate) keep_open: bool,
}

/// A stdin pipe filled before its process starts, with what it could not take.
pub(super) struct Prefilled {
    fd: OwnedFd,
    rest: Vec<u8>,
    keep_open: bool,
}

impl Prefilled {
    /// Writes as much of `text` into the pipe's writing end `fd` as the pipe takes without
    /// waiting. `None` when all of it went in and stdin is not kept open: the end is closed, and
    /// the process reads the text, then its end. A write that fails loses the text, as a write to
    /// a process that closed its stdin does.
    pub(super) fn fill(fd: OwnedFd, mut text: Vec<u8>, keep_open: bool) -> Option<Prefilled> {
        use nix::errno::Errno;
        use nix::fcntl::{fcntl, FcntlArg, OFlag};
        let mut done = 0;
        if fcntl(&fd, FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).is_ok() {
            while done < text.len() {
                match nix::unistd::write(&fd, &text[done..]) {
                    Ok(n) => done += n,
                    Err(Errno::EINTR) => {}
                    Err(Errno::EAGAIN) => break,
                    Err(_) => {
                        done = text.len();
                        break;
                    }
                }
            }
        }
        text.drain(..done);
        (!text.is_empty() || keep_open).then_some(Prefilled { fd, rest: text, keep_open })
    }

    /// Registered with the runtime (the starting thread is in its context); `None` when it cannot
    /// be, which closes stdin.
    pub(super) fn registered(self) -> Option<StdinLeft> {
        let pipe = pipe::Sender::from_owned_fd(self.fd).ok()?;
        Some(StdinLeft { pipe, rest: self.rest, keep_open: self.keep_open })
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if self.status.is_some() || self.start_kill().is_err() {
            return;
        }
        // Killed: reaped once it is gone, on the runtime when there is one.
        let pid = self.pid;
        let pidfd = self.pidfd.take();
        let reap = move || {
            let _ = waitpid(pid, None);
        };
        match (tokio::runtime::Handle::try_current(), pidfd) {
            (Ok(rt), Some(fd)) => {
                rt.spawn(async move {
                    let _ = fd.readable().await;
                    reap();
                });
            }
            _ => {
                let _ = std::thread::Builder::new().name("awf-reaper".into()).spawn(reap);
            }
        }
    }
}

/// A pidfd for `pid`, registered with the runtime; `None` where the kernel has none.
#[allow(unsafe_code)]
fn pidfd(pid: i32) -> Option<AsyncFd<OwnedFd>> {
    // SAFETY: pidfd_open(2) takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` was just returned by pidfd_open and is owned by nothing else; the `OwnedFd`
    // keeps it open, the same fd, for as long as the `AsyncFd` that owns it lives. Called in the
    // runtime's context (the starting thread is in it).
    unsafe {
        let owned = OwnedFd::from_raw_fd(fd as i32);
        AsyncFd::register_with_interest(owned, tokio::io::Interest::READABLE).ok()
    }
}
