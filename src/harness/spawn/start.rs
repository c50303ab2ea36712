//! Starting a process the way `posix_spawn` does (the child shares awf's memory and awf's thread
//! waits until the child has exec'd: `clone(CLONE_VM | CLONE_VFORK)`), with the two steps
//! `posix_spawn` cannot take: dying with awf (`PR_SET_PDEATHSIG`) and checking that awf is still
//! its parent. `fork` from a large, many-threaded awf copied its page tables and flushed every
//! core's TLB on each turn, and the exec right after threw the copy away; this costs neither.
//!
//! The child runs on a stack of its own and makes only system calls on data prepared before the
//! clone (nothing allocated, locked or looked up), as glibc's own `posix_spawn` does; awf's signals
//! are blocked around the clone, and the child sets every handled signal to its default before it
//! unblocks them, so no handler of awf's ever runs in the child.

use super::program::Prepared;
use nix::libc::{self, c_char, c_int, c_void};
use std::io;
use std::os::fd::RawFd;
use std::ptr;
use std::sync::atomic::{AtomicI32, Ordering};

/// The child's stack: it makes a few system calls, then execs.
const STACK: usize = 64 * 1024;
/// Signals 1 to 64 (Linux's `_NSIG` is 65).
const SIGNALS: c_int = 65;

/// What every turn process gets from awf, settled once, at the first turn.
#[derive(Clone, Copy)]
pub(super) struct Heritage {
    /// The child takes a copy of only the descriptors below this one, where the kernel can
    /// (`close_range` with `CLOSE_RANGE_UNSHARE`, Linux 5.9); `None`: of all of them.
    copy_below: Option<RawFd>,
    /// The open-file limit the child gets back, when awf raised its own.
    open_files: Option<libc::rlimit>,
}

impl Heritage {
    /// Descriptors from `listeners_from` up stay out of the child where the kernel allows; the
    /// child gets `open_files` (soft, hard) when given.
    pub(super) fn settle(listeners_from: RawFd, open_files: Option<(u64, u64)>) -> Heritage {
        Heritage {
            copy_below: can_copy_part().then_some(listeners_from),
            open_files: open_files.map(|(soft, hard)| libc::rlimit { rlim_cur: soft, rlim_max: hard }),
        }
    }
}

/// Everything the child reads: pointers into `Prepared`, which outlives the clone.
struct Plan {
    path: *const c_char,
    argv: Vec<*const c_char>,
    envp: Vec<*const c_char>,
    /// `sh path args...`, for a file exec refuses as not a program (`ENOEXEC`), as `execvp` does.
    sh_argv: Vec<*const c_char>,
    cwd: *const c_char,
    /// The child's stdin, stdout and stderr.
    stdio: [RawFd; 3],
    /// Descriptors the child gets from `FIRST_FD` up, in order; each numbered above all of those
    /// places, so that placing one never closes another.
    extra: Vec<RawFd>,
    /// awf's pid: the child's parent must still be awf once it asked to die with it.
    awf: libc::pid_t,
    /// When not 0, the child shares awf's descriptor table from the clone and first takes a copy
    /// of the descriptors below this one only (`close_range` with `CLOSE_RANGE_UNSHARE`), leaving
    /// the agents' listeners above it uncopied; 0: the clone copies the whole table.
    copy_below: libc::c_uint,
    /// The open-file limit the child gets back, when awf raised its own.
    open_files: Option<libc::rlimit>,
    empty_mask: libc::sigset_t,
    /// The errno of the step that failed in the child; 0 when it exec'd.
    error: AtomicI32,
}

/// Starts `program` in a session of its own with `stdio` as its fds 0 to 2, dying (SIGKILL) when
/// the calling thread does; its pid. The fds stay open here (the caller closes its copies).
///
/// The child gets a copy of only the descriptors below `heritage.copy_below` when `stdio` lies
/// below it: exec would otherwise copy, then close one by one, every descriptor awf holds (one per
/// open agent), on every turn.
#[allow(unsafe_code)]
pub(super) fn start(program: &Prepared, stdio: [RawFd; 3], heritage: Heritage) -> io::Result<libc::pid_t> {
    use std::os::fd::AsRawFd;
    let first = crate::sandbox::bwrap::FIRST_FD;
    // Copies of the pinned descriptors above the places they go to (close-on-exec: only the
    // child's `dup2` copies survive its exec); closed here when this returns.
    let above = first + program.fds.len() as RawFd;
    let extra = program
        .fds
        .iter()
        .map(|fd| nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(above)).map_err(io::Error::from))
        .map(|fd| fd.map(unsafe_owned))
        .collect::<io::Result<Vec<_>>>()?;
    let copy_below = match heritage.copy_below {
        Some(below) if stdio.iter().copied().chain(extra.iter().map(|f| f.as_raw_fd())).all(|fd| fd < below) => {
            below as libc::c_uint
        }
        _ => 0,
    };
    let nul_ended = |strings: &[std::ffi::CString]| -> Vec<*const c_char> {
        strings.iter().map(|s| s.as_ptr()).chain(std::iter::once(ptr::null())).collect()
    };
    let sh_argv: Vec<*const c_char> = [c"/bin/sh".as_ptr(), program.path.as_ptr()]
        .into_iter()
        .chain(program.argv.iter().skip(1).map(|s| s.as_ptr()))
        .chain(std::iter::once(ptr::null()))
        .collect();
    // SAFETY: sigset_t is plain data; sigemptyset initialises it.
    let mut empty_mask: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe { libc::sigemptyset(&mut empty_mask) };
    let plan = Plan {
        path: program.path.as_ptr(),
        argv: nul_ended(&program.argv),
        envp: nul_ended(&program.envp),
        sh_argv,
        cwd: program.cwd.as_ref().map_or(ptr::null(), |c| c.as_ptr()),
        stdio,
        extra: extra.iter().map(|f| f.as_raw_fd()).collect(),
        awf: nix::unistd::getpid().as_raw(),
        copy_below,
        open_files: heritage.open_files,
        empty_mask,
        error: AtomicI32::new(0),
    };
    let mut stack = vec![0u8; STACK];
    // SAFETY: the top of the stack, 16-byte aligned as the ABI asks (the stack grows down).
    let top = unsafe { stack.as_mut_ptr().add(STACK) };
    let top = (top as usize & !15) as *mut c_void;
    // SAFETY: all signals are blocked on this thread for the clone (restored just after), so no
    // handler runs in the child before it resets them. With CLONE_VFORK this thread resumes only
    // once the child has exec'd or exited, so `plan` and `stack` outlive its use of them; the
    // child touches nothing else of awf's memory.
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let share = if copy_below > 0 { libc::CLONE_FILES } else { 0 };
        let pid = libc::clone(
            child,
            top,
            libc::CLONE_VM | libc::CLONE_VFORK | share | libc::SIGCHLD,
            &plan as *const Plan as *mut c_void,
        );
        let clone_error = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, ptr::null_mut());
        if pid < 0 {
            return Err(clone_error);
        }
        pid
    };
    drop(stack);
    match plan.error.load(Ordering::Acquire) {
        0 => Ok(pid),
        errno => {
            // It exited without exec'ing: reap it, and say why.
            let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
            Err(io::Error::from_raw_os_error(errno))
        }
    }
}

/// The child, from the clone to its exec. Only system calls on `Plan`'s prepared data.
#[allow(unsafe_code)]
extern "C" fn child(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `Plan` the parent keeps alive until this child has exec'd or exited
    // (CLONE_VFORK), and the calls below are system calls on that data, as posix_spawn makes.
    unsafe {
        let plan = &*(arg as *const Plan);
        let fail = |plan: &Plan| -> ! {
            plan.error.store(*libc::__errno_location(), Ordering::Release);
            libc::_exit(127)
        };
        // Sharing awf's descriptors: a table of its own first, before any descriptor is touched.
        if plan.copy_below > 0
            && libc::syscall(libc::SYS_close_range, plan.copy_below, libc::c_uint::MAX, libc::CLOSE_RANGE_UNSHARE) != 0
        {
            fail(plan);
        }
        // No handler of awf's may run here: every handled signal goes back to its default, and
        // SIGPIPE (which Rust ignores) too, as std does for the processes it starts.
        for sig in 1..SIGNALS {
            let mut old: libc::sigaction = std::mem::zeroed();
            if sig == libc::SIGKILL || sig == libc::SIGSTOP || libc::sigaction(sig, ptr::null(), &mut old) != 0 {
                continue;
            }
            if old.sa_sigaction != libc::SIG_DFL && (old.sa_sigaction != libc::SIG_IGN || sig == libc::SIGPIPE) {
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &default, ptr::null_mut());
            }
        }
        // A session of its own: its pid is its group and its session, and no other turn can join.
        if libc::setsid() < 0 {
            fail(plan);
        }
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
            fail(plan);
        }
        // awf died before the prctl: nothing would kill this process with it.
        if libc::getppid() != plan.awf {
            *libc::__errno_location() = libc::ESRCH;
            fail(plan);
        }
        for (target, &fd) in plan.stdio.iter().enumerate() {
            let target = target as c_int;
            let done = if fd == target {
                // Already in place: it must only survive the exec.
                libc::fcntl(fd, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, target)
            };
            if done < 0 {
                fail(plan);
            }
        }
        for (i, &fd) in plan.extra.iter().enumerate() {
            if libc::dup2(fd, crate::sandbox::bwrap::FIRST_FD + i as c_int) < 0 {
                fail(plan);
            }
        }
        if !plan.cwd.is_null() && libc::chdir(plan.cwd) != 0 {
            fail(plan);
        }
        if let Some(limit) = &plan.open_files {
            libc::setrlimit(libc::RLIMIT_NOFILE, limit);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &plan.empty_mask, ptr::null_mut());
        libc::execve(plan.path, plan.argv.as_ptr(), plan.envp.as_ptr());
        if *libc::__errno_location() == libc::ENOEXEC {
            libc::execve(c"/bin/sh".as_ptr(), plan.sh_argv.as_ptr(), plan.envp.as_ptr());
        }
        fail(plan)
    }
}

/// Owns a descriptor `fcntl` just made.
#[allow(unsafe_code)]
fn unsafe_owned(fd: RawFd) -> std::os::fd::OwnedFd {
    use std::os::fd::FromRawFd;
    // SAFETY: F_DUPFD_CLOEXEC returned a new descriptor that nothing else owns.
    unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) }
}

/// Whether the kernel has `close_range` (Linux 5.9, with `CLOSE_RANGE_UNSHARE`): closing a range
/// past every descriptor succeeds and closes nothing.
#[allow(unsafe_code)]
fn can_copy_part() -> bool {
    // SAFETY: close_range(2) on the one descriptor number no process can hold.
    unsafe { libc::syscall(libc::SYS_close_range, libc::c_uint::MAX, libc::c_uint::MAX, 0) == 0 }
}
