//! What a serve that starts takes over from one that died: every run of the runs folder that a
//! serve accepted (`serve.json` says `queued`) and nobody holds (`serve.lock` is free) and that has
//! not ended: one that never started runs fresh, one that was running is resumed (a new attempt,
//! as `awf runs resume` makes it), in the order they were accepted. A run another live serve holds
//! is left to it, so two serves on one runs folder never run one run twice.

use super::queue::{self, Pending, Work};
use super::{job, Entry, Shared};
use crate::cli::listing;
use crate::record::accepted::{self, Accepted, Admission, Hold};
use crate::run::RunStatus;
use std::path::{Path, PathBuf};

/// A run left by a serve that is gone, now held by this one.
pub(super) struct Found {
    dir: PathBuf,
    accepted: Accepted,
    hold: Hold,
    /// It had started (it has a `run.json`): it is resumed rather than started.
    started: bool,
}

/// Whether the run in `dir` is one to take over: not started, or started and interrupted.
fn left(dir: &Path) -> Option<bool> {
    let started = dir.join("run.json").exists();
    (!started || listing::run_status(dir) == RunStatus::Interrupted.as_str()).then_some(started)
}

/// The runs under `root` left by a serve that is gone, each held by this process now, first
/// accepted first.
pub(super) fn find(root: &Path) -> Vec<Found> {
    let mut found = Vec::new();
    for id in listing::ids(root) {
        let dir = root.join(&id);
        let Some(accepted) = accepted::read(&dir).filter(|a| a.status == Admission::Queued) else { continue };
        if left(&dir).is_none() {
            continue;
        }
        let hold = match Hold::take(&dir) {
            Ok(Some(hold)) => hold,
            // Another serve holds it, queued or running there.
            Ok(None) => continue,
            Err(e) => {
                eprintln!("awf: run {id} cannot be taken over (it stays for a later serve): {e}");
                continue;
            }
        };
        // Held now, it is looked at again: it may have started or ended meanwhile.
        let Some(started) = left(&dir) else { continue };
        found.push(Found { dir, accepted, hold, started });
    }
    found.sort_by(|a, b| (&a.accepted.accepted_at, &a.accepted.id).cmp(&(&b.accepted.accepted_at, &b.accepted.id)));
    found
}

/// Says what was found on stderr and queues it (or, with `--no-recover`, lets it go for another
/// serve to take).
pub(super) fn take_over(server: &Shared, found: Vec<Found>, recover: bool) {
    if found.is_empty() {
        return;
    }
    let resumed = found.iter().filter(|f| f.started).count();
    let counts = format!("{} queued, {resumed} interrupted", found.len() - resumed);
    if !recover {
        let ids: Vec<&str> = found.iter().map(|f| f.accepted.id.as_str()).collect();
        eprintln!(
            "awf: --no-recover: {} runs an earlier serve accepted are left as they are ({counts}): {}",
            found.len(),
            ids.join(", ")
        );
        return;
    }
    eprintln!(
        "awf: recovering {} runs an earlier serve accepted ({counts}), in the order they were accepted: queued ones run, interrupted ones are resumed",
        found.len()
    );
    for f in found {
        let id = f.accepted.id.clone();
        let script = listing::requested_script(&f.accepted.request);
        let work = if f.started {
            Work::Resume { request: f.accepted.request.clone() }
        } else {
            match job::checked(server, &f.accepted.request) {
                Ok((job, spec)) => Work::Fresh { job, spec: Box::new(spec) },
                Err(why) => {
                    eprintln!("awf: run {id} (accepted {}) cannot start: {why}", f.accepted.accepted_at);
                    let _ = accepted::mark(&f.dir, Admission::Failed, &why);
                    continue;
                }
            }
        };
        server.entries().push(Entry {
            id: id.clone(),
            script,
            status: RunStatus::Queued,
            dir: f.dir,
            run: None,
            hold: Some(f.hold),
            stop_asked: false,
        });
        queue::push(server, Pending { id, work }, false);
    }
}
