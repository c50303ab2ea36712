//! Whether a Unix socket's peer lives in this process's user and pid namespaces. The sockets the
//! operator's own processes use (`awf serve`'s, a run's `control.sock`) refuse any other peer: a
//! sandboxed agent (bubblewrap unshares both namespaces) that sees such a socket reaches it as the
//! same uid, since a network namespace does not cover Unix sockets and a socket's mode cannot
//! tell a sandbox from the operator.
//!
//! The peer is the process that connected: its pid from `SO_PEERCRED`, which the kernel
//! translates into this process's pid namespace (0 when the peer is in one this process cannot
//! see). Its namespaces are `/proc/<pid>/ns/{pid,user}`, compared with `/proc/self/ns` by device
//! and inode. Where the kernel gives a pidfd of the peer (`SO_PEERPIDFD`, Linux 6.5), the peer is
//! checked alive after that read, so the pid read was still its own and not a reused one.

use nix::libc;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;

/// Why a peer is not one of this process's namespaces.
#[derive(Debug, thiserror::Error)]
pub enum Foreign {
    #[error("the connecting process is in a pid namespace this one cannot see (a sandbox)")]
    Unseen,
    #[error("process {pid} is in another pid namespace (a sandbox)")]
    OtherPid { pid: i32 },
    #[error("process {pid} is in another user namespace (a sandbox)")]
    OtherUser { pid: i32 },
    #[error("process {pid} ended before its namespaces could be checked")]
    Gone { pid: i32 },
    #[error("cannot read the namespaces of process {pid}: {source}")]
    Unreadable { pid: i32, source: io::Error },
    #[error("cannot tell which process connected: {source}")]
    NoCredentials { source: io::Error },
}

/// A process's pid and user namespaces, each as the (device, inode) of its `/proc` link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ids {
    pub pid: (u64, u64),
    pub user: (u64, u64),
}

/// The namespaces of process `pid` ("self" for this one).
pub fn of(pid: &str) -> io::Result<Ids> {
    let id = |ns: &str| std::fs::metadata(format!("/proc/{pid}/ns/{ns}")).map(|m| (m.dev(), m.ino()));
    Ok(Ids { pid: id("pid")?, user: id("user")? })
}

/// The pid of the process connected to `socket` when it shares this process's user and pid
/// namespaces; why not otherwise (an unknown peer is refused, never let through).
pub fn check(socket: &impl AsFd) -> Result<i32, Foreign> {
    let fd = socket.as_fd();
    let pid = peer_pid(fd).map_err(|source| Foreign::NoCredentials { source })?;
    if pid <= 0 {
        return Err(Foreign::Unseen);
    }
    let pidfd = match peer_pidfd(fd) {
        Ok(pidfd) => Some(pidfd),
        // A kernel before 6.5 gives no pidfd: the pid is read without the liveness check.
        Err(e) if e.raw_os_error() == Some(libc::ENOPROTOOPT) => None,
        Err(_) => return Err(Foreign::Gone { pid }),
    };
    let own = of("self").map_err(|source| Foreign::Unreadable { pid: std::process::id() as i32, source })?;
    let theirs = of(&pid.to_string());
    if let Some(pidfd) = &pidfd {
        if !alive(pidfd, pid) {
            return Err(Foreign::Gone { pid });
        }
    }
    judge(pid, &own, theirs)
}

/// The verdict on peer `pid`, given this process's namespaces and what was read of the peer's.
fn judge(pid: i32, own: &Ids, theirs: io::Result<Ids>) -> Result<i32, Foreign> {
    let theirs = theirs.map_err(|source| match source.kind() {
        io::ErrorKind::NotFound => Foreign::Gone { pid },
        _ => Foreign::Unreadable { pid, source },
    })?;
    if theirs.pid != own.pid {
        return Err(Foreign::OtherPid { pid });
    }
    if theirs.user != own.user {
        return Err(Foreign::OtherUser { pid });
    }
    Ok(pid)
}

/// Whether the process `pidfd` names still runs as `pid`: its pidfd's `/proc` entry says `Pid:
/// -1` once it has ended (and its pid may be another's).
fn alive(pidfd: &OwnedFd, pid: i32) -> bool {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", pidfd.as_raw_fd())).unwrap_or_default();
    let now = info.lines().find_map(|l| l.strip_prefix("Pid:")).and_then(|n| n.trim().parse::<i32>().ok());
    now == Some(pid)
}

/// `SO_PEERCRED`'s pid: the connecting process, in this process's pid namespace (0: not in it).
#[allow(unsafe_code)]
fn peer_pid(fd: BorrowedFd<'_>) -> io::Result<i32> {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are live, writable and sized for SO_PEERCRED's `struct ucred`;
    // the kernel writes at most `len` bytes into `cred`.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(cred.pid)
}

/// `SO_PEERPIDFD`: a pidfd of the connecting process.
#[allow(unsafe_code)]
fn peer_pidfd(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let mut pidfd: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `pidfd` and `len` are live, writable and sized for the int SO_PEERPIDFD writes.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERPIDFD,
            (&mut pidfd as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 || pidfd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel made `pidfd` a new descriptor of this process, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(pidfd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_of_its_own_namespaces_through_a_socket_pair() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().expect("a socket pair");
        assert_eq!(check(&a).expect("admitted"), std::process::id() as i32);
        assert_eq!(of("self").expect("own"), of(&std::process::id().to_string()).expect("by pid"));
    }

    #[test]
    fn a_peer_is_judged_by_both_namespaces_and_an_unreadable_one_is_refused() {
        let own = Ids { pid: (1, 10), user: (1, 20) };
        assert_eq!(judge(7, &own, Ok(own)).ok(), Some(7));
        let sandbox = Ids { pid: (1, 11), user: (1, 21) };
        assert!(matches!(judge(7, &own, Ok(sandbox)), Err(Foreign::OtherPid { pid: 7 })));
        let user_only = Ids { user: (1, 21), ..own };
        assert!(matches!(judge(7, &own, Ok(user_only)), Err(Foreign::OtherUser { pid: 7 })));
        let pid_only = Ids { pid: (2, 10), ..own };
        assert!(matches!(judge(7, &own, Ok(pid_only)), Err(Foreign::OtherPid { pid: 7 })));
        let gone = io::Error::from(io::ErrorKind::NotFound);
        assert!(matches!(judge(7, &own, Err(gone)), Err(Foreign::Gone { pid: 7 })));
        let denied = io::Error::from(io::ErrorKind::PermissionDenied);
        assert!(matches!(judge(7, &own, Err(denied)), Err(Foreign::Unreadable { pid: 7, .. })));
    }

    #[test]
    fn a_pidfd_of_an_ended_process_is_not_alive() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().expect("spawn");
        let pid = child.id() as i32;
        // A pidfd of the child, through pidfd_open as SO_PEERPIDFD would give one.
        let pidfd = open_pidfd(pid).expect("pidfd_open (Linux 5.3)");
        assert!(alive(&pidfd, pid));
        assert!(!alive(&pidfd, pid + 1), "the pid it names is the child's only");
        let _ = child.kill();
        let _ = child.wait();
        assert!(!alive(&pidfd, pid), "reaped: its pid may be another's");
    }

    #[allow(unsafe_code)]
    fn open_pidfd(pid: i32) -> io::Result<OwnedFd> {
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a non-negative result is a new descriptor nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
    }
}
