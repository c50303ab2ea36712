//! File watching for hot reload: notify events filtered to changes of `.rhai` files (run folders
//! and other writes ignored), delivered on a channel; callers debounce.

use notify::{EventKind, RecursiveMode, Watcher};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

/// How long to wait after a change for the rest of the same save (editors write several times).
pub const DEBOUNCE: Duration = Duration::from_millis(150);

/// Watches `dirs` (missing ones are skipped); each changed `.rhai` file is sent on `tx`. Keep the
/// returned watcher alive for as long as changes should arrive.
pub fn watch(dirs: &[(PathBuf, bool)], tx: Sender<PathBuf>) -> notify::Result<notify::RecommendedWatcher> {
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        let Ok(event) = res else { return };
        if !matches!(event.kind, EventKind::Modify(_) | EventKind::Create(_) | EventKind::Remove(_)) {
            return;
        }
        for p in event.paths {
            let rhai = p.extension().is_some_and(|e| e == "rhai");
            let in_runs = p.components().any(|c| c.as_os_str() == ".awf");
            if rhai && !in_runs {
                let _ = tx.send(p);
            }
        }
    })?;
    for (dir, recursive) in dirs {
        if dir.is_dir() {
            let mode = if *recursive { RecursiveMode::Recursive } else { RecursiveMode::NonRecursive };
            watcher.watch(dir, mode)?;
        }
    }
    Ok(watcher)
}

/// For each of `dirs` that does not exist yet, watches the nearest folder above it that does (not
/// recursively) and sends each folder created on the way to it: the caller then watches again, so
/// that a folder made after the start is watched from then on. `None` when every folder exists.
pub fn watch_missing(
    dirs: &[(PathBuf, bool)],
    tx: Sender<PathBuf>,
) -> notify::Result<Option<notify::RecommendedWatcher>> {
    let missing: Vec<PathBuf> = dirs.iter().filter(|(d, _)| !d.is_dir()).map(|(d, _)| d.clone()).collect();
    if missing.is_empty() {
        return Ok(None);
    }
    let wanted = missing.clone();
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        let Ok(event) = res else { return };
        if !matches!(event.kind, EventKind::Create(_)) {
            return;
        }
        for p in event.paths {
            if wanted.iter().any(|w| w.starts_with(&p)) {
                let _ = tx.send(p);
            }
        }
    })?;
    let mut above: Vec<&Path> = missing.iter().filter_map(|d| d.ancestors().find(|a| a.is_dir())).collect();
    above.dedup();
    for dir in above {
        watcher.watch(dir, RecursiveMode::NonRecursive)?;
    }
    Ok(Some(watcher))
}

/// Waits for the first change, then gathers the rest for `DEBOUNCE`; `None` when the channel closed.
pub fn next_change(rx: &Receiver<PathBuf>) -> Option<Vec<PathBuf>> {
    let first = rx.recv().ok()?;
    Some(gather(rx, first))
}

/// Gathers further changes arriving within `DEBOUNCE` of the last one.
pub fn gather(rx: &Receiver<PathBuf>, first: PathBuf) -> Vec<PathBuf> {
    let mut changed = vec![first];
    let mut until = Instant::now() + DEBOUNCE;
    while let Ok(p) = rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
        if !changed.contains(&p) {
            changed.push(p);
        }
        until = Instant::now() + DEBOUNCE;
    }
    changed
}

/// The folders a script's imports can come from, with whether to watch them recursively.
pub fn script_dirs(script: &Path, cwd: &Path) -> Vec<(PathBuf, bool)> {
    let mut dirs = vec![
        (script.parent().map(Path::to_path_buf).unwrap_or_else(|| cwd.to_path_buf()), false),
        (cwd.join("scripts"), true),
        (cwd.join("stdlib"), true),
    ];
    if let Some(d) = crate::config::xdg_config_home() {
        dirs.push((d.join("awf").join("strategies"), true));
    }
    dirs
}
