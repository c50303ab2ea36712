//! Whether bubblewrap can build sandboxes on this machine: found on PATH, then probed by running
//! it once in every namespace. A run asks once, when its first sandboxed program agent opens;
//! `awf doctor` asks too.

use super::bwrap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// How to get bubblewrap, for error messages.
pub const INSTALL: &str =
    "install bubblewrap (apt-get install bubblewrap; dnf install bubblewrap; pacman -S bubblewrap)";

/// Why bubblewrap cannot build sandboxes here.
#[derive(Debug, thiserror::Error)]
pub enum Unavailable {
    #[error("bubblewrap is missing: no `bwrap` on PATH; {INSTALL}")]
    Missing,
    #[error("cannot run {}: {source}", bwrap.display())]
    CannotRun { bwrap: PathBuf, source: std::io::Error },
    /// The probe ran and failed: `why` is its stderr, or its exit status.
    #[error(
        "{} cannot create namespaces here ({why}): user namespaces look unavailable; allow them \
         (sysctl -w kernel.unprivileged_userns_clone=1, and on Ubuntu 24.04 \
         kernel.apparmor_restrict_unprivileged_userns=0), or in a container allow unshare \
         (e.g. docker run --security-opt seccomp=unconfined --cap-add SYS_ADMIN)",
        bwrap.display()
    )]
    NoNamespaces { bwrap: PathBuf, why: String },
    /// Sandboxes mount what the agent could replace by descriptor (`--bind-fd`, bubblewrap 0.5).
    #[error("{} ({version}) cannot mount by descriptor (--bind-fd, bubblewrap 0.5 or later); {INSTALL}", bwrap.display())]
    TooOld { bwrap: PathBuf, version: String },
}

/// `bwrap` on `path` (a PATH value), or why it is not there.
pub fn find(path: Option<&OsStr>) -> Result<PathBuf, Unavailable> {
    path.and_then(|path| super::on_path(OsStr::new("bwrap"), path)).ok_or(Unavailable::Missing)
}

/// Runs the probe (`bwrap --unshare-all ... bwrap --version`); an error says what failed and how
/// to allow it.
pub fn probe(bwrap: &Path) -> Result<(), Unavailable> {
    let argv = bwrap::probe_argv(bwrap);
    let out = crate::open_files::command(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|source| Unavailable::CannotRun { bwrap: bwrap.to_path_buf(), source })?;
    if out.status.success() {
        return Ok(());
    }
    let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
    let why = if why.is_empty() { out.status.to_string() } else { why };
    Err(Unavailable::NoNamespaces { bwrap: bwrap.to_path_buf(), why })
}

/// `bwrap --version`, e.g. `bubblewrap 0.8.0`.
pub fn version(bwrap: &Path) -> Option<String> {
    let out = crate::open_files::command(bwrap).arg("--version").stdin(Stdio::null()).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Whether this bwrap mounts by descriptor (`--ro-bind-fd` in its `--help`).
pub fn binds_by_descriptor(bwrap: &Path) -> Result<(), Unavailable> {
    let out = crate::open_files::command(bwrap).arg("--help").stdin(Stdio::null()).output();
    match out {
        Ok(o) if String::from_utf8_lossy(&o.stdout).contains("--ro-bind-fd") => Ok(()),
        Ok(_) => Err(Unavailable::TooOld {
            bwrap: bwrap.to_path_buf(),
            version: version(bwrap).unwrap_or_else(|| "version unknown".into()),
        }),
        Err(source) => Err(Unavailable::CannotRun { bwrap: bwrap.to_path_buf(), source }),
    }
}

/// bwrap found on this process's PATH and probed: the path to run, or why sandboxes cannot be made.
pub fn ready() -> Result<PathBuf, Unavailable> {
    let bwrap = find(std::env::var_os("PATH").as_deref())?;
    probe(&bwrap)?;
    binds_by_descriptor(&bwrap)?;
    Ok(bwrap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_without_bwrap_says_how_to_install_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = find(Some(dir.path().as_os_str())).expect_err("no bwrap there");
        assert!(matches!(e, Unavailable::Missing));
        assert!(e.to_string().contains("apt-get install bubblewrap"), "{e}");
        assert!(find(None).is_err());
    }
}
