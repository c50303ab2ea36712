//! The agent's home: where the operator keeps a CLI's files, the credential copies seeded into
//! the home and written back when a turn refreshed them, config files, and copying a home for a fork.

use crate::harness::HarnessError;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Where the operator keeps a CLI's files: `$VAR`, else `~/<default>`.
pub fn operator_dir(var: &str, default: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").filter(|h| !h.is_empty()).map(|h| PathBuf::from(h).join(default)))
}

/// Serializes credential write-backs within this process.
static CREDENTIALS: Mutex<()> = Mutex::new(());

/// One credential file: the operator's, its copy in the agent's home, and the content last synced.
#[derive(Debug, Clone)]
pub struct Credential {
    pub operator: PathBuf,
    pub local: PathBuf,
    known: Option<Vec<u8>>,
}

impl Credential {
    pub fn new(operator: PathBuf, local: PathBuf) -> Credential {
        Credential { operator, local, known: None }
    }

    /// Copies the operator's file into the home when it is new or changed since the last sync.
    pub fn seed(&mut self) -> Result<(), HarnessError> {
        let Ok(bytes) = std::fs::read(&self.operator) else { return Ok(()) };
        if self.known.as_ref() != Some(&bytes) || !self.local.exists() {
            write_private(&self.local, &bytes)?;
            self.known = Some(bytes);
        }
        Ok(())
    }

    /// Writes the home's copy back when a turn refreshed it. Never creates the operator's file,
    /// and never overwrites it when it changed meanwhile (another agent refreshed it first).
    /// Returns whether it wrote.
    pub fn write_back(&mut self) -> Result<bool, HarnessError> {
        let _guard = CREDENTIALS.lock().unwrap_or_else(|p| p.into_inner());
        let Some(known) = &self.known else { return Ok(false) };
        // The home's copy is the agent's to replace: a symlink there (to a file of the operator's
        // it could not read itself) is never followed, only a plain file is read.
        let Some(now) = read_plain(&self.local) else { return Ok(false) };
        if &now == known || now.iter().all(u8::is_ascii_whitespace) || serde_json::from_slice::<Value>(&now).is_err() {
            return Ok(false);
        }
        match std::fs::read(&self.operator) {
            Ok(current) if &current == known => {}
            _ => return Ok(false),
        }
        write_private(&self.operator, &now)?;
        self.known = Some(now);
        Ok(true)
    }
}

/// The bytes of `path` when it is a regular file, opened without following a symlink.
fn read_plain(path: &Path) -> Option<Vec<u8>> {
    use nix::fcntl::OFlag;
    use std::io::Read;
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let mut f = std::fs::File::from(nix::fcntl::open(path, flags, nix::sys::stat::Mode::empty()).ok()?);
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// Writes a file readable by its owner only, atomically (a temporary file, then a rename).
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), HarnessError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = path.parent().ok_or_else(|| HarnessError::Config(format!("{} has no folder", path.display())))?;
    crate::record::private::create_dir(dir).map_err(HarnessError::create(dir))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.awf-{}", uuid::Uuid::new_v4().simple()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|_| f.sync_all()))
        .and_then(|_| std::fs::rename(&tmp, path));
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        HarnessError::io(format!("cannot write {}", path.display()), e)
    })
}

/// Writes a configuration file into a CLI's home.
pub fn write_config(path: &Path, text: &str) -> Result<(), HarnessError> {
    if let Some(dir) = path.parent() {
        crate::record::private::create_dir(dir).map_err(HarnessError::create(dir))?;
    }
    if std::fs::read_to_string(path).is_ok_and(|old| old == text) {
        return Ok(());
    }
    crate::record::private::write(path, text)
        .map_err(|e| HarnessError::io(format!("cannot write {}", path.display()), e))
}

/// Copies a folder tree (files, folders and symlinks whose names `keep` accepts; sockets and
/// the like are skipped). The tree may be a live CLI's home: an entry that goes away while it is
/// copied (a lock or a temporary file) is skipped, not an error.
pub fn copy_tree(from: &Path, to: &Path, keep: &dyn Fn(&str) -> bool) -> std::io::Result<()> {
    crate::record::private::create_dir(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        if !keep(&entry.file_name().to_string_lossy()) {
            continue;
        }
        let source = entry.path();
        let target = to.join(entry.file_name());
        let copied = entry.file_type().and_then(|ty| {
            if ty.is_dir() {
                copy_tree(&source, &target, keep)
            } else if ty.is_file() {
                crate::record::private::copy(&source, &target).map(|_| ())
            } else if ty.is_symlink() {
                let link = std::fs::read_link(&source)?;
                let _ = std::fs::remove_file(&target);
                std::os::unix::fs::symlink(link, &target)
            } else {
                Ok(())
            }
        });
        match copied {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && std::fs::symlink_metadata(&source).is_err() => {}
            other => other?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_that_goes_away_while_the_tree_is_copied_is_skipped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let from = dir.path().join("home");
        std::fs::create_dir_all(from.join("sub")).expect("mkdir");
        for name in ["keep.json", "lock", "sub/inner"] {
            std::fs::write(from.join(name), name).expect("write");
        }
        // The live CLI removes its lock (and a folder) between the listing and the copy.
        let gone = |name: &str| {
            match name {
                "lock" => std::fs::remove_file(from.join("lock")).expect("removed"),
                "sub" => std::fs::remove_dir_all(from.join("sub")).expect("removed"),
                _ => {}
            }
            true
        };
        let to = dir.path().join("copy");
        copy_tree(&from, &to, &gone).expect("copied without what went away");
        assert_eq!(std::fs::read_to_string(to.join("keep.json")).expect("copied"), "keep.json");
        assert!(!to.join("lock").exists() && !to.join("sub/inner").exists());
        // A destination that cannot be written is still an error.
        std::fs::write(dir.path().join("file"), "").expect("write");
        assert!(copy_tree(&to, &dir.path().join("file/below"), &|_: &str| true).is_err());
    }

    #[test]
    fn a_symlink_or_fifo_in_the_home_is_never_read_back_into_the_operators_credentials() {
        let dir = tempfile::tempdir().expect("tempdir");
        let operator = dir.path().join("operator.json");
        let local = dir.path().join("home/.credentials.json");
        let other = dir.path().join("other-secret.json");
        std::fs::write(&operator, "{\"token\":\"a\"}").expect("write");
        std::fs::write(&other, "{\"token\":\"someone else's\"}").expect("write");
        let mut c = Credential::new(operator.clone(), local.clone());
        c.seed().expect("seed");
        std::fs::remove_file(&local).expect("rm");
        std::os::unix::fs::symlink(&other, &local).expect("symlink");
        assert!(!c.write_back().expect("no error"), "a symlink is not followed");
        std::fs::remove_file(&local).expect("rm");
        nix::unistd::mkfifo(&local, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("fifo");
        assert!(!c.write_back().expect("no error"), "a fifo is not read (nor waited on)");
        assert_eq!(std::fs::read_to_string(&operator).expect("read"), "{\"token\":\"a\"}");
    }

    #[test]
    fn credentials_are_seeded_and_written_back_only_when_refreshed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let operator = dir.path().join("op/auth.json");
        let local = dir.path().join("home/auth.json");
        let mut c = Credential::new(operator.clone(), local.clone());
        c.seed().expect("seed without a file");
        assert!(!local.exists(), "nothing to seed");
        std::fs::create_dir_all(local.parent().expect("parent")).expect("mkdir");
        std::fs::write(&local, "{\"new\":1}").expect("write");
        assert!(!c.write_back().expect("write back"), "the operator had no file: none is created");
        assert!(!operator.exists());

        std::fs::create_dir_all(operator.parent().expect("parent")).expect("mkdir");
        std::fs::write(&operator, "{\"token\":\"a\"}").expect("write");
        c.seed().expect("seed");
        assert_eq!(std::fs::read_to_string(&local).expect("read"), "{\"token\":\"a\"}");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&local).expect("meta").permissions().mode() & 0o777, 0o600);
        assert!(!c.write_back().expect("unchanged"), "unchanged: nothing written");

        std::fs::write(&local, "{\"token\":\"b\"}").expect("refresh");
        assert!(c.write_back().expect("refreshed"));
        assert_eq!(std::fs::read_to_string(&operator).expect("read"), "{\"token\":\"b\"}");

        std::fs::write(&operator, "{\"token\":\"c\"}").expect("another agent refreshed");
        std::fs::write(&local, "{\"token\":\"d\"}").expect("and this one too");
        assert!(!c.write_back().expect("conflict"), "a newer operator file is kept");
        c.seed().expect("seed");
        assert_eq!(std::fs::read_to_string(&local).expect("read"), "{\"token\":\"c\"}", "and adopted");

        std::fs::write(&local, "not json").expect("garbage");
        assert!(!c.write_back().expect("garbage"), "a broken file is never written back");
    }

    #[test]
    fn configs_and_copies_in_a_home_are_private_whatever_the_source_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
        let config = dir.path().join("home/.codex/config.toml");
        write_config(&config, "model = \"m\"\n").expect("write config");
        assert_eq!((mode(&config), mode(config.parent().expect("parent"))), (0o600, 0o700));
        let source = dir.path().join("from");
        std::fs::create_dir_all(source.join("sub")).expect("mkdir");
        std::fs::write(source.join("sub/open.json"), "{}").expect("write");
        std::fs::set_permissions(source.join("sub/open.json"), std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let to = dir.path().join("fork-home");
        copy_tree(&source, &to, &|_| true).expect("copy");
        assert_eq!((mode(&to), mode(&to.join("sub")), mode(&to.join("sub/open.json"))), (0o700, 0o700, 0o600));
    }
}
