//! What a sandbox's root is built from on this host, as an allow-list: the system folders
//! (read-only, or a symlink where the host has one, as merged-/usr systems do) and, by the seat,
//! the agent's own paths. Nothing else of the host is in the sandbox: no `/run`, `/var`, `/home`,
//! `/root`, `/mnt`, `/media`, `/srv`, `/sys`, so no host socket (a session bus, docker's, another
//! user's) and no operator's file that was not named. Inside what is bound, the places awf keeps
//! for itself are masked by an empty tmpfs (`masks`).

use serde::Serialize;
use std::path::{Path, PathBuf};

/// The system folders a sandbox's root takes from the host, read-only, where they exist.
pub const SYSTEM: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"];

/// One system folder as the host has it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct System {
    pub path: PathBuf,
    /// Where the host's symlink at `path` points (e.g. `usr/bin` for `/bin`): the sandbox gets the
    /// same symlink, not a second bind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<PathBuf>,
}

/// The system folders of this host (`SYSTEM`, those that exist).
pub fn system() -> Vec<System> {
    SYSTEM
        .iter()
        .filter_map(|p| {
            let path = PathBuf::from(p);
            let meta = std::fs::symlink_metadata(&path).ok()?;
            if meta.file_type().is_symlink() {
                let link = std::fs::read_link(&path).ok()?;
                return Some(System { path, link: Some(link) });
            }
            meta.is_dir().then_some(System { path, link: None })
        })
        .collect()
}

/// The real folders the system entries show (a symlink's target resolved), for telling whether a
/// path is already visible in the sandbox.
pub fn system_real(system: &[System]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for s in system {
        out.push(s.path.clone());
        if s.link.is_some() {
            if let Ok(real) = std::fs::canonicalize(&s.path) {
                out.push(real);
            }
        }
    }
    out
}

/// The places to mask: each candidate (made real where it exists) that lies strictly inside one of
/// the `bound` folders (each its real path and where the sandbox shows it), at its place in the
/// sandbox; one that is not inside any is not in the sandbox at all.
pub fn masks(candidates: &[PathBuf], bound: &[(&Path, &Path)]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    // One that does not exist is not masked: bwrap would make its mount point in the host's folder.
    for real in candidates.iter().filter_map(|c| std::fs::canonicalize(c).ok()) {
        let inside = bound
            .iter()
            .filter(|(b, _)| real != *b && real.starts_with(b))
            .max_by_key(|(b, _)| b.as_os_str().len())
            .and_then(|(b, shown)| Some(shown.join(real.strip_prefix(b).ok()?)));
        if let Some(at) = inside.filter(|at| !out.contains(at)) {
            out.push(at);
        }
    }
    // A place inside another mask is hidden already.
    let all = out.clone();
    out.retain(|m| !all.iter().any(|other| other != m && m.starts_with(other)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mask_applies_only_inside_what_is_bound_to_what_exists() {
        let dir = tempfile::tempdir().expect("tempdir");
        let proj = std::fs::canonicalize(dir.path()).expect("real").join("proj");
        std::fs::create_dir_all(proj.join(".awf/runs")).expect("mkdir");
        let candidates =
            vec![proj.join(".awf"), proj.join(".awf/runs"), proj.join("gone"), "/proc".into(), proj.clone()];
        let bound = [(proj.as_path(), Path::new("/link/proj")), (Path::new("/usr"), Path::new("/usr"))];
        let got = masks(&candidates, &bound);
        assert_eq!(got, vec![PathBuf::from("/link/proj/.awf")], "not the workspace, nothing missing, nothing twice");
    }

    #[test]
    fn this_hosts_system_folders_are_folders_or_symlinks() {
        let s = system();
        assert!(s.iter().any(|e| e.path == Path::new("/usr") && e.link.is_none()), "{s:?}");
        assert!(s.iter().all(|e| SYSTEM.contains(&e.path.to_str().unwrap_or(""))));
        assert!(system_real(&s).contains(&PathBuf::from("/usr")));
    }
}
