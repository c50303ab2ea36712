//! The machine's background pool: the queue `--detach`ed runs and background councils wait in,
//! `$XDG_STATE_HOME/awf/background/` (else `~/.local/state/awf/background/`). A ticket per
//! waiting run (named by run id, so they start in the order they were asked for, flocked by its
//! waiter) and `[limits] background` slot locks, one held by each run in flight.

use crate::record::private;
use nix::fcntl::{Flock, FlockArg};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The background record in a run folder (`record::docs::BackgroundDoc`).
pub use crate::record::docs::BACKGROUND as FILE;
/// Background runs at once on this machine when `[limits] background` is not set.
pub const DEFAULT_SLOTS: usize = 4;

/// Why a run could not take its place in the queue.
#[derive(Debug, thiserror::Error)]
#[error("cannot {what} {}: {source}", path.display())]
pub struct PoolError {
    what: &'static str,
    path: PathBuf,
    source: std::io::Error,
}

fn failed<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> PoolError + 'a {
    move |source| PoolError { what, path: path.to_path_buf(), source }
}

/// Writes the background record of run folder `dir`, atomically, 0600 and synced, as the run's
/// other documents are (`record::write_document`).
pub fn write(dir: &Path, doc: &crate::record::docs::BackgroundDoc) -> std::io::Result<()> {
    crate::record::write_document(&dir.join(FILE), doc)
}

/// Reads, changes and writes the background record of run folder `dir` under an exclusive flock
/// of the folder itself, so the waiting process saying who it is and `awf runs stop` cancelling
/// the run never overwrite each other. The record as written; `None` when there is none.
pub fn update(
    dir: &Path,
    change: impl FnOnce(&mut crate::record::docs::BackgroundDoc),
) -> std::io::Result<Option<crate::record::docs::BackgroundDoc>> {
    let folder = File::open(dir)?;
    let _held = Flock::lock(folder, FlockArg::LockExclusive).map_err(|(_, e)| std::io::Error::from(e))?;
    let Some(mut doc) = crate::record::docs::background(dir) else { return Ok(None) };
    change(&mut doc);
    write(dir, &doc)?;
    Ok(Some(doc))
}

fn state_dir() -> PathBuf {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local").join("state")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("awf").join("background")
}

fn try_lock(path: &Path) -> Option<Flock<File>> {
    let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path).ok()?;
    Flock::lock(file, FlockArg::LockExclusiveNonblock).ok()
}

/// A slot of the machine's background pool, held until dropped (or the process exits).
pub struct Slot {
    _lock: Flock<File>,
}

/// A waiting run's place in the queue; removed when dropped.
struct Ticket {
    path: PathBuf,
    _lock: Flock<File>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The first ticket whose waiter is alive; dead waiters' tickets are removed.
fn first_live(tickets: &Path, mine: &str) -> Option<String> {
    let mut names: Vec<String> = std::fs::read_dir(tickets)
        .ok()?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    for name in names {
        if name == mine {
            return Some(name);
        }
        match try_lock(&tickets.join(&name)) {
            // Nobody holds it: its waiter is gone.
            Some(_stale) => {
                let _ = std::fs::remove_file(tickets.join(&name));
            }
            None => return Some(name),
        }
    }
    None
}

/// Waits until run `id` is first in line and one of `slots` is free. The caller has written its
/// pid in the run's background record first (`update`), so a stop can reach it while it waits.
///
/// # Cancel safety
/// Dropping the future leaves the queue (the ticket is removed).
pub async fn admit(id: &str, slots: usize) -> Result<Slot, PoolError> {
    let state = state_dir();
    let tickets = state.join("tickets");
    let slot_dir = state.join("slots");
    for d in [&tickets, &slot_dir] {
        private::create_dir(d).map_err(failed("create", d))?;
    }
    // The ticket is locked before it is visible, so no one takes it for a dead waiter's.
    let tmp = state.join(format!(".{id}.{}", std::process::id()));
    let lock = try_lock(&tmp).ok_or_else(|| failed("lock", &tmp)(std::io::Error::other("flock refused")))?;
    let path = tickets.join(id);
    std::fs::rename(&tmp, &path).map_err(failed("queue", &path))?;
    let ticket = Ticket { path, _lock: lock };
    loop {
        if first_live(&tickets, id).as_deref() == Some(id) {
            for i in 0..slots.max(1) {
                if let Some(lock) = try_lock(&slot_dir.join(format!("{i}.lock"))) {
                    drop(ticket);
                    return Ok(Slot { _lock: lock });
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
