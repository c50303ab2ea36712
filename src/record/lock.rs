//! One live attempt per run: the attempt holds an exclusive `flock` on `<run>/lock` (its pid
//! written inside) for its life; the kernel drops the lock when the process dies, however it dies.
//! Readers ask `/proc/locks` whether it is held, so they never take it from a starting attempt.

use nix::fcntl::{Flock, FlockArg};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Why the lock of a run was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another attempt of the run holds it: `who` is its process, as its pid file says.
    #[error("run {run} is live: an attempt of it in {who} holds {}; stop it first (awf runs stop {run}) or wait for it to end", path.display())]
    Live { run: String, who: String, path: PathBuf },
    #[error("cannot open {}: {source}", path.display())]
    Open { path: PathBuf, source: std::io::Error },
    #[error("cannot lock {}: {source}", path.display())]
    Lock { path: PathBuf, source: nix::errno::Errno },
    #[error("cannot write {}: {source}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
}

/// The lock file's name in the run folder.
pub const FILE: &str = "lock";

/// The lock of a live attempt; released when dropped.
#[derive(Debug)]
pub struct RunLock {
    _file: Flock<File>,
}

impl RunLock {
    /// Takes the lock of run `run_id` in `dir`. When another attempt holds it, the error names its
    /// process and how to stop it.
    pub fn acquire(dir: &Path, run_id: &str) -> Result<RunLock, LockError> {
        let path = dir.join(FILE);
        match take(&path)? {
            Ok(mut file) => {
                let pid = format!("{}\n", std::process::id());
                let written = file.set_len(0).and_then(|_| file.rewind()).and_then(|_| file.write_all(pid.as_bytes()));
                written.map_err(|source| LockError::Write { path, source })?;
                Ok(RunLock { _file: file })
            }
            Err(mut file) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                let who = match text.trim() {
                    "" => "another process".to_string(),
                    pid => format!("process {pid}"),
                };
                Err(LockError::Live { run: run_id.to_string(), who, path })
            }
        }
    }
}

/// Opens the lock file at `path` (created 0600) and takes its exclusive `flock` if it is free:
/// `Ok(Err(file))` when another holds it.
pub fn take(path: &Path) -> Result<Result<Flock<File>, File>, LockError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(super::private::FILE_MODE)
        .open(path)
        .map_err(|source| LockError::Open { path: path.to_path_buf(), source })?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(file) => Ok(Ok(file)),
        Err((file, nix::errno::Errno::EWOULDBLOCK)) => Ok(Err(file)),
        Err((_, source)) => Err(LockError::Lock { path: path.to_path_buf(), source }),
    }
}

/// Whether a live process holds the lock of the run in `dir`: `None` when that cannot be known
/// (no `/proc/locks`), `Some(false)` when no attempt is alive.
pub fn held(dir: &Path) -> Option<bool> {
    held_at(&dir.join(FILE))
}

/// Whether a live process holds a `flock` on the file at `path` (`held`, for any lock file).
pub fn held_at(path: &Path) -> Option<bool> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        // A run from before locks existed, or one not started yet: nothing says it is alive.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(false),
        Err(_) => return None,
    };
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let id =
        format!("{:02x}:{:02x}:{}", nix::sys::stat::major(meta.dev()), nix::sys::stat::minor(meta.dev()), meta.ino());
    // `1: FLOCK  ADVISORY  WRITE 4308 fe:00:10010725 0 EOF`; `->` marks a waiter, not a holder.
    Some(locks.lines().any(|l| !l.contains("->") && l.contains("FLOCK") && l.split_whitespace().any(|f| f == id)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_taker_is_refused_with_the_holder_and_the_lock_is_seen_until_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(held(dir.path()), Some(false), "no lock file: not held");
        let first = RunLock::acquire(dir.path(), "r1").expect("first");
        assert_eq!(held(dir.path()), Some(true));
        let why = RunLock::acquire(dir.path(), "r1").expect_err("second refused");
        assert!(matches!(why, LockError::Live { .. }), "{why}");
        let why = why.to_string();
        assert!(why.contains(&format!("process {}", std::process::id())), "{why}");
        assert!(why.contains("awf runs stop r1"), "{why}");
        drop(first);
        assert_eq!(held(dir.path()), Some(false));
        RunLock::acquire(dir.path(), "r1").expect("free again");
    }
}
