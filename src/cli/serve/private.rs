//! The files `awf serve` makes that only its user may open, whatever the umask: folders 0700,
//! the token file 0600 from its creation, the Unix socket 0600 (bound in a private folder, then
//! renamed into place, so it is never reachable with a looser mode).

use anyhow::{bail, Context, Result};
use std::fs::{DirBuilder, OpenOptions, Permissions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Creates `dir` (and missing parents) with mode 0700; an existing folder keeps its mode unless
/// `tighten`, which makes it 0700 too.
pub fn folder(dir: &Path, tighten: bool) -> Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;
    if tighten {
        std::fs::set_permissions(dir, Permissions::from_mode(0o700))
            .with_context(|| format!("cannot make {} private (mode 0700)", dir.display()))?;
    }
    Ok(())
}

fn parent(path: &Path) -> &Path {
    path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// A name for a temporary entry beside `path`, unique to this call.
fn beside(path: &Path, what: &str) -> PathBuf {
    let id = uuid::Uuid::new_v4().simple().to_string();
    parent(path).join(format!(".awf-{what}-{}", &id[..12]))
}

/// Writes `text` to `path` through a file created 0600 beside it, then renamed over it: the text
/// is never in a file anyone else may read, even for a moment.
pub fn write_secret(path: &Path, text: &str) -> Result<()> {
    folder(parent(path), false)?;
    let tmp = beside(path, "token");
    let written = (|| -> std::io::Result<()> {
        let mut file = OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("cannot write the token file {}", path.display()));
    }
    Ok(())
}

/// Binds a Unix socket at `path` with mode 0600: bound inside a fresh 0700 folder beside it,
/// chmod 0600, renamed into place. A live server already there is an error; a stale socket is
/// replaced; anything else at `path` is left alone and refused.
pub fn bind_socket(path: &Path) -> Result<std::os::unix::net::UnixListener> {
    folder(parent(path), false)?;
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            bail!("{} exists and is not a socket; choose another --socket", path.display());
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            bail!("another awf serve is listening on {}", path.display());
        }
    }
    let dir = beside(path, "sock");
    DirBuilder::new().mode(0o700).create(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let tmp = dir.join("s");
    let bound = (|| -> std::io::Result<std::os::unix::net::UnixListener> {
        let listener = std::os::unix::net::UnixListener::bind(&tmp)?;
        std::fs::set_permissions(&tmp, Permissions::from_mode(0o600))?;
        std::fs::rename(&tmp, path)?;
        Ok(listener)
    })();
    let _ = std::fs::remove_file(&tmp);
    let _ = std::fs::remove_dir(&dir);
    bound.with_context(|| format!("cannot listen on {}", path.display()))
}
