//! Bind sources pinned by identity. A folder or file an agent could replace (its workspace, the
//! policy's paths, what its program needs, a repository's git folder) is resolved once when the
//! agent is seated (its real path, every symlink followed once, and its device and inode kept) and
//! opened again before every turn, component by component from `/`, following no symlink; a path
//! whose identity changed is refused, naming it. The turn's bwrap mounts the opened descriptor
//! (`--bind-fd`, `--ro-bind-fd`), so what it mounts is what was checked, whatever happens to the
//! path in between; bwrap closes each descriptor before the program starts.

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use serde::{Deserialize, Serialize};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

/// What a pinned path is to the agent, for the reasons given when it cannot be bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Its workspace, writable.
    Workspace,
    /// A policy `writable` path.
    Writable,
    /// A policy `read_only` path.
    ReadOnly,
    /// What its program needs from outside the system folders, read-only.
    Exposed,
    /// A repository's git folder (or `.git` file), read-only.
    Git,
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Role::Workspace => "the workspace",
            Role::Writable => "writable path",
            Role::ReadOnly => "read-only path",
            Role::Exposed => "the program's path",
            Role::Git => "the git folder",
        })
    }
}

/// A path resolved when the agent was seated, with the identity it had then.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pinned {
    pub role: Role,
    /// Absolute, with no symlink in it (as it was when seated): what is opened before each turn.
    pub path: PathBuf,
    /// Where the sandbox shows it (`seat.rs` decides: the path as named, or inside the workspace
    /// the real path, so that no symlink the agent made can move the mount).
    pub dest: PathBuf,
    pub dev: u64,
    pub ino: u64,
}

/// Why a path cannot be pinned, or is no longer what was pinned.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    #[error("{role} {} does not exist; create it or take it out of the policy", path.display())]
    Missing { role: Role, path: PathBuf },
    #[error("cannot resolve {role} {}: {source}", path.display())]
    Resolve { role: Role, path: PathBuf, source: std::io::Error },
    #[error(
        "{role} {} resolves to {}, outside {}: a path inside the workspace may not lead out of it",
        path.display(), real.display(), root.display()
    )]
    LeadsOut { role: Role, path: PathBuf, real: PathBuf, root: PathBuf },
    #[error("{role} {} is not a UTF-8 path, which the sandbox cannot bind", path.display())]
    NotUtf8 { role: Role, path: PathBuf },
    #[error(
        "{role} {} changed since the agent was seated ({why}); the turn was not started: awf binds \
         only what it checked when the agent opened",
        path.display()
    )]
    Changed { role: Role, path: PathBuf, why: String },
}

/// Resolves `path` (absolute) and records its identity, to be shown at `path` (see `at` to move
/// it). When `inside` is given and `path` lies in it lexically, its real path must lie in it too: a
/// symlink planted in the workspace cannot lead a bind out of it.
pub fn pin(role: Role, path: &Path, inside: Option<&Path>) -> Result<Pinned, PinError> {
    let real = match std::fs::canonicalize(path) {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(PinError::Missing { role, path: path.to_path_buf() })
        }
        Err(source) => return Err(PinError::Resolve { role, path: path.to_path_buf(), source }),
    };
    if let Some(root) = inside.filter(|root| path.starts_with(root)) {
        let real_root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
        if !real.starts_with(&real_root) {
            return Err(PinError::LeadsOut { role, path: path.to_path_buf(), real, root: real_root });
        }
    }
    if real.to_str().is_none() {
        return Err(PinError::NotUtf8 { role, path: real });
    }
    let meta = std::fs::metadata(&real).map_err(|source| PinError::Resolve { role, path: real.clone(), source })?;
    use std::os::unix::fs::MetadataExt;
    let dest = super::policy::normalize(path);
    Ok(Pinned { role, path: real, dest, dev: meta.dev(), ino: meta.ino() })
}

impl Pinned {
    /// The same, shown at `dest`.
    pub fn at(self, dest: PathBuf) -> Pinned {
        Pinned { dest, ..self }
    }
}

/// Opens `p` again, from `/`, one component at a time, following no symlink (`O_PATH |
/// O_NOFOLLOW`), and checks that it is still the file it was when pinned. The descriptor is
/// close-on-exec: the spawn gives bwrap its own copy.
pub fn open(p: &Pinned) -> Result<OwnedFd, PinError> {
    let changed = |why: String| PinError::Changed { role: p.role, path: p.path.clone(), why };
    let path_only = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut at = nix::fcntl::open("/", path_only | OFlag::O_DIRECTORY, Mode::empty())
        .map_err(|e| changed(format!("cannot open /: {e}")))?;
    let mut walked = PathBuf::from("/");
    for c in p.path.components() {
        let name = match c {
            Component::RootDir => continue,
            Component::Normal(n) => n,
            other => return Err(changed(format!("it holds `{}`", other.as_os_str().to_string_lossy()))),
        };
        walked.push(name);
        let next = nix::fcntl::openat(at.as_fd(), name, path_only, Mode::empty())
            .map_err(|e| changed(format!("{} cannot be opened: {e}", walked.display())))?;
        let st = nix::sys::stat::fstat(next.as_fd()).map_err(|e| changed(format!("{}: {e}", walked.display())))?;
        if st.st_mode & nix::libc::S_IFMT == nix::libc::S_IFLNK {
            return Err(changed(format!("{} is now a symlink", walked.display())));
        }
        at = next;
    }
    let st = nix::sys::stat::fstat(at.as_fd()).map_err(|e| changed(e.to_string()))?;
    if st.st_dev != p.dev || st.st_ino != p.ino {
        return Err(changed("another file or folder is there now".into()));
    }
    Ok(at)
}

/// Opens every pinned path in order (`open`), or the first refusal.
pub fn open_all(pins: &[Pinned]) -> Result<Vec<OwnedFd>, PinError> {
    pins.iter().map(open).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_folder_opens_until_it_is_swapped_for_a_symlink_or_another_folder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("out");
        std::fs::create_dir_all(out.join("build")).expect("mkdir");
        let build = pin(Role::Writable, &out.join("build"), Some(dir.path())).expect("pinned");
        assert_eq!(build.path, std::fs::canonicalize(out.join("build")).expect("real"));
        open(&build).expect("unchanged: opens");
        // The attack of issue 46 row 2: the parent renamed, a symlink where the path was.
        std::fs::rename(&out, dir.path().join("out.old")).expect("rename");
        std::fs::create_dir(&out).expect("mkdir");
        std::os::unix::fs::symlink("/etc", out.join("build")).expect("symlink");
        let e = open(&build).expect_err("a symlink is refused");
        assert!(matches!(e, PinError::Changed { role: Role::Writable, .. }), "{e}");
        assert!(e.to_string().contains("is now a symlink"), "{e}");
        std::fs::remove_file(out.join("build")).expect("rm");
        std::fs::create_dir(out.join("build")).expect("mkdir");
        let e = open(&build).expect_err("another folder is refused").to_string();
        assert!(e.contains("another file or folder is there now") && e.contains("writable path"), "{e}");
    }

    #[test]
    fn a_symlink_that_leads_out_of_the_workspace_is_refused_when_seated() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).expect("mkdir");
        std::os::unix::fs::symlink("/etc", ws.join("out")).expect("symlink");
        let e = pin(Role::Writable, &ws.join("out"), Some(&ws)).expect_err("leads out");
        assert!(matches!(e, PinError::LeadsOut { .. }), "{e}");
        // Outside the workspace an operator's own symlink is followed, once, when seated.
        let p = pin(Role::ReadOnly, &ws.join("out"), Some(&dir.path().join("elsewhere"))).expect("followed");
        assert_eq!(p.path, Path::new("/etc"));
        let missing = pin(Role::Writable, &ws.join("nope"), None).expect_err("missing").to_string();
        assert_eq!(
            missing,
            format!(
                "writable path {} does not exist; create it or take it out of the policy",
                ws.join("nope").display()
            )
        );
    }
}
