//! awf's limit on open files: raised for awf itself, and the limit it started with given back to
//! every process it starts (turns, tmux, git, a detached awf, a bridged program).
//!
//! Every open agent holds a socket and every running turn its pipes, so a run of a thousand
//! agents needs more than the common soft limit of 1024: `raise` lifts the soft limit to the hard
//! one. A program using `select(2)` must not see descriptors past 1024, so the processes awf
//! starts get back what the operator's shell gave awf. Without that, a detached run (an awf that
//! awf started) would take the raised limit as the one it started with and pass it to its turns.

use std::sync::OnceLock;

/// The limit awf started with (soft, hard), once `raise` raised it.
static STARTED: OnceLock<(u64, u64)> = OnceLock::new();

/// Raises the soft limit to the hard one. Call it first, before any process starts: what it
/// records is what they get back.
pub fn raise() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else { return };
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        let _ = STARTED.set((soft, hard));
    }
}

/// The limit awf started with, when `raise` raised it; `None` when awf runs with the limit it was
/// given.
pub fn at_start() -> Option<(u64, u64)> {
    STARTED.get().copied()
}

/// A command for `program` whose process starts with the limit awf started with: the one way awf
/// starts a process outside a turn (`tests/tidy` fails on a `Command::new` elsewhere; tokio's
/// `Command` is made `From` it). Where awf did not raise the limit there is nothing to give back,
/// and std may start it with `posix_spawn`; else the `pre_exec` makes std `fork`.
pub fn command(program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
    let mut cmd = std::process::Command::new(program);
    give_back(&mut cmd);
    cmd
}

/// Makes `cmd`'s process start with the limit awf started with (nothing to do when awf did not
/// raise it).
fn give_back(cmd: &mut std::process::Command) {
    if let Some((soft, hard)) = at_start() {
        let limit = nix::libc::rlimit { rlim_cur: soft, rlim_max: hard };
        // SAFETY: the closure runs in the child between fork and exec and makes one system call,
        // which is async-signal-safe; it touches no lock and allocates nothing. A failure leaves
        // the raised limit, which the program could have had anyway.
        #[allow(unsafe_code)]
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(cmd, move || {
                nix::libc::setrlimit(nix::libc::RLIMIT_NOFILE, &limit);
                Ok(())
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn soft_limit_of(cmd: &mut std::process::Command) -> String {
        let out = cmd.output().expect("sh ran");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Each test runs in a process of its own (nextest), so raising the limit here touches no
    /// other test.
    #[test]
    fn a_command_gets_the_limit_awf_started_with() {
        use nix::sys::resource::{getrlimit, setrlimit, Resource};
        let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("the limit");
        assert!(hard > 256, "this test needs a hard open-file limit above 256, it is {hard}");
        setrlimit(Resource::RLIMIT_NOFILE, 256, hard).expect("the soft limit lowered");
        raise();
        assert_eq!(at_start(), Some((256, hard)));
        assert_eq!(getrlimit(Resource::RLIMIT_NOFILE).expect("the limit"), (hard, hard), "awf's own is raised");
        let probe = ["-c", "ulimit -S -n"];
        assert_eq!(soft_limit_of(command("sh").args(probe)), "256");
        let plain = soft_limit_of(std::process::Command::new("sh").args(probe));
        assert_eq!(plain, hard.to_string(), "a plain Command inherits the raised limit");
    }
}
