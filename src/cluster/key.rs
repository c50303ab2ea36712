//! The cluster key every sealed message is signed with (`seal.rs`): `AWF_CLUSTER_KEY`, else the
//! file `[cluster] key_file` names, else `.awf/cluster.key` in the working folder, generated there
//! (32 random bytes, hex, mode 0600) when missing, so that an owner and a worker started in one
//! folder share it with no setup. A key file readable by group or others is refused, and so is a
//! key shorter than `MIN_LEN`. The key's text is never shown: only where it came from.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The variable holding the key's text.
pub const KEY_VAR: &str = "AWF_CLUSTER_KEY";
/// The file a one-machine cluster's key is generated into, under the working folder.
pub const GENERATED: &str = ".awf/cluster.key";
/// The fewest characters a key may have.
pub const MIN_LEN: usize = 32;

/// Why the cluster key cannot be had: what is wrong with it (too short, a file open to others),
/// or a file that cannot be read or written. Its text never holds the key.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("{0}")]
    Config(String),
    #[error("{doing}: {source}")]
    File { doing: String, source: std::io::Error },
}

/// A cluster key and where it came from (for messages; the key itself is never printed).
#[derive(Clone)]
pub struct ClusterKey {
    bytes: Arc<Vec<u8>>,
    pub source: String,
}

impl std::fmt::Debug for ClusterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ClusterKey(from {})", self.source)
    }
}

impl ClusterKey {
    /// A key from its text (surrounding white space dropped).
    pub fn from_text(text: &str, source: &str) -> Result<ClusterKey, KeyError> {
        let text = text.trim();
        if text.chars().count() < MIN_LEN {
            return Err(KeyError::Config(format!(
                "the cluster key from {source} is too short ({} characters; at least {MIN_LEN}): make one with \
                 `openssl rand -hex 32`",
                text.chars().count()
            )));
        }
        Ok(ClusterKey { bytes: Arc::new(text.as_bytes().to_vec()), source: source.to_string() })
    }

    pub(super) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The key for a process working in `cwd`: `AWF_CLUSTER_KEY`, else `key_file` (relative to
    /// `cwd`), else `.awf/cluster.key` under `cwd`, generated when missing.
    pub fn load(cwd: &Path, key_file: Option<&Path>) -> Result<ClusterKey, KeyError> {
        if let Some(text) = std::env::var(KEY_VAR).ok().filter(|t| !t.trim().is_empty()) {
            return ClusterKey::from_text(&text, KEY_VAR);
        }
        match key_file {
            Some(file) => read_file(&cwd.join(file), "[cluster] key_file"),
            None => {
                let path = cwd.join(GENERATED);
                if !path.exists() {
                    generate(&path)?;
                }
                read_file(&path, "the generated key file")
            }
        }
    }
}

/// Reads a key file, refusing one that does not exist or that others may read.
fn read_file(path: &Path, what: &str) -> Result<ClusterKey, KeyError> {
    let unread = |source| KeyError::File { doing: format!("cannot read the cluster key {}", path.display()), source };
    let meta = std::fs::metadata(path).map_err(unread)?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(KeyError::Config(format!(
            "the cluster key {} may be read by others (mode {mode:o}): `chmod 600 {}`",
            path.display(),
            path.display()
        )));
    }
    let text = std::fs::read_to_string(path).map_err(unread)?;
    ClusterKey::from_text(&text, &format!("{what} {}", path.display()))
}

/// Writes a new random key to `path` (0600 from its creation). Two processes generating at once
/// both end up with the first one's key: the file appears whole (a hard link of a written file),
/// and the one that finds it there already drops its own.
fn generate(path: &Path) -> Result<(), KeyError> {
    let fail = |source| KeyError::File { doing: format!("cannot write the cluster key {}", path.display()), source };
    let dir = path.parent().map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
    crate::record::private::create_dir(&dir).map_err(fail)?;
    let mut random = [0u8; 32];
    getrandom::fill(&mut random).map_err(|e| KeyError::Config(format!("cannot make a cluster key: {e}")))?;
    let text: String = random.iter().map(|b| format!("{b:02x}")).collect();
    let tmp = dir.join(format!(".cluster.key-{}", uuid::Uuid::new_v4().simple()));
    let written = (|| -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        match std::fs::hard_link(&tmp, path) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            other => other,
        }
    })();
    let _ = std::fs::remove_file(&tmp);
    written.map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_generated_once_private_and_read_back() {
        let dir = tempfile::tempdir().expect("tmp");
        let first = ClusterKey::load(dir.path(), None).expect("generated");
        let path = dir.path().join(GENERATED);
        assert_eq!(std::fs::metadata(&path).expect("stat").permissions().mode() & 0o777, 0o600);
        let again = ClusterKey::load(dir.path(), None).expect("read");
        assert_eq!(first.bytes(), again.bytes());
        assert!(!format!("{first:?}").contains(&String::from_utf8_lossy(first.bytes()).to_string()));
    }

    #[test]
    fn a_key_file_others_may_read_or_a_short_key_is_refused() {
        let dir = tempfile::tempdir().expect("tmp");
        let file = dir.path().join("k");
        std::fs::write(&file, "0123456789abcdef0123456789abcdef").expect("write");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let err = ClusterKey::load(dir.path(), Some(Path::new("k"))).expect_err("refused").to_string();
        assert!(err.contains("may be read by others (mode 644)"), "{err}");
        let err = ClusterKey::load(dir.path(), Some(Path::new("missing"))).expect_err("refused").to_string();
        assert!(err.contains("cannot read the cluster key"), "{err}");
        let err = ClusterKey::from_text("short", "here").expect_err("refused").to_string();
        assert!(err.contains("too short (5 characters; at least 32)"), "{err}");
    }
}
