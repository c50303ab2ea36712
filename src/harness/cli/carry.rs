//! A CLI agent's home carried to another machine: its files (the operator's credential copies and
//! what a fork's home leaves out excepted) packed into a session export, at most `MAX_HOME` bytes,
//! and unpacked into the home of the agent that takes it over.

use crate::harness::{HarnessError, SessionExport};
use base64::Engine;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The most a home's files may hold to be carried.
pub const MAX_HOME: u64 = 48 << 20;

/// Packs the files under `home` that `keep` keeps (by name) and `skip` does not name.
pub fn pack(home: &Path, session: &str, keep: &dyn Fn(&str) -> bool, skip: &[PathBuf]) -> SessionExport {
    let mut files = Vec::new();
    let mut total = 0u64;
    match walk(home, home, keep, skip, &mut files, &mut total) {
        Ok(()) => SessionExport::Home { session: session.to_string(), files: Value::Array(files) },
        Err(why) => SessionExport::Unstorable { why: why.to_string() },
    }
}

fn walk(
    home: &Path,
    dir: &Path,
    keep: &dyn Fn(&str) -> bool,
    skip: &[PathBuf],
    files: &mut Vec<Value>,
    total: &mut u64,
) -> Result<(), HarnessError> {
    let entries = std::fs::read_dir(dir).map_err(|e| HarnessError::io(format!("cannot read {}", dir.display()), e))?;
    for entry in entries.flatten() {
        let path = entry.path();
        if !keep(&entry.file_name().to_string_lossy()) || skip.contains(&path) {
            continue;
        }
        let Ok(ty) = entry.file_type() else { continue };
        if ty.is_dir() {
            walk(home, &path, keep, skip, files, total)?;
        } else if ty.is_file() {
            let bytes =
                std::fs::read(&path).map_err(|e| HarnessError::io(format!("cannot read {}", path.display()), e))?;
            *total += bytes.len() as u64;
            if *total > MAX_HOME {
                return Err(HarnessError::Cannot(format!("the home {} holds over {MAX_HOME} bytes", home.display())));
            }
            // Every entry was reached by walking down from `home`.
            let Ok(rel) = path.strip_prefix(home) else { continue };
            let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
            files.push(json!({ "path": rel.to_string_lossy(), "data": data }));
        }
    }
    Ok(())
}

/// One file of a packed home, as `pack` writes it: its path under the home and its bytes, base64.
#[derive(serde::Deserialize)]
struct Packed {
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    data: Option<String>,
}

/// Writes the packed `files` into `home` (private files and folders). Every entry is checked and
/// decoded first, so that a refused one (a path that leaves the home, data that does not decode)
/// leaves nothing; then the files are written into a fresh folder beside the home and moved into
/// it, each top-level entry whole.
pub fn unpack(home: &Path, files: &Value) -> Result<(), HarnessError> {
    let stored = |why: &str| HarnessError::Stored(why.to_string());
    let list = files.as_array().ok_or_else(|| stored("the stored home is not a list of files"))?;
    let mut decoded = Vec::with_capacity(list.len());
    for f in list {
        let f = serde_json::from_value::<Packed>(f.clone()).unwrap_or(Packed { path: None, data: None });
        let rel = PathBuf::from(f.path.ok_or_else(|| stored("a stored file has no path"))?);
        if rel.is_absolute() || rel.components().any(|c| !matches!(c, std::path::Component::Normal(_))) {
            return Err(HarnessError::Stored(format!("the stored file {} leaves the home", rel.display())));
        }
        let data = base64::engine::general_purpose::STANDARD
            .decode(f.data.unwrap_or_default())
            .map_err(|source| HarnessError::Decode { file: rel.clone(), source })?;
        decoded.push((rel, data));
    }
    let name = home.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let stage = home.with_file_name(format!(".{name}.incoming-{}", uuid::Uuid::new_v4().simple()));
    let placed = write_all(&stage, &decoded).and_then(|()| move_into(&stage, home));
    let _ = std::fs::remove_dir_all(&stage);
    placed
}

fn write_all(stage: &Path, files: &[(PathBuf, Vec<u8>)]) -> Result<(), HarnessError> {
    crate::record::private::create_dir(stage).map_err(HarnessError::create(stage))?;
    for (rel, data) in files {
        let target = stage.join(rel);
        if let Some(parent) = target.parent() {
            crate::record::private::create_dir(parent).map_err(HarnessError::create(parent))?;
        }
        crate::record::private::write(&target, data)
            .map_err(|e| HarnessError::io(format!("cannot write {}", target.display()), e))?;
    }
    Ok(())
}

/// Moves each entry of `stage` into `home`, replacing what is there under that name.
fn move_into(stage: &Path, home: &Path) -> Result<(), HarnessError> {
    crate::record::private::create_dir(home).map_err(HarnessError::create(home))?;
    let entries =
        std::fs::read_dir(stage).map_err(|e| HarnessError::io(format!("cannot read {}", stage.display()), e))?;
    for entry in entries.flatten() {
        let target = home.join(entry.file_name());
        match std::fs::symlink_metadata(&target) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&target),
            Ok(_) => std::fs::remove_file(&target),
            Err(_) => Ok(()),
        }
        .map_err(|e| HarnessError::io(format!("cannot replace {}", target.display()), e))?;
        std::fs::rename(entry.path(), &target)
            .map_err(|e| HarnessError::io(format!("cannot move {} into place", target.display()), e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_home_round_trips_without_its_credentials_or_what_forks_leave_out() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (from, to) = (dir.path().join("from"), dir.path().join("to"));
        std::fs::create_dir_all(from.join("projects/p")).expect("mkdir");
        std::fs::write(from.join("projects/p/s1.jsonl"), "turn one").expect("write");
        std::fs::write(from.join("auth.json"), "secret").expect("write");
        std::fs::write(from.join("state.sqlite"), "db").expect("write");
        let packed = pack(&from, "s1", &|name| !name.contains(".sqlite"), &[from.join("auth.json")]);
        let SessionExport::Home { session, files } = packed else { panic!("packed: {packed:?}") };
        assert_eq!(session, "s1");
        unpack(&to, &files).expect("unpack");
        assert_eq!(std::fs::read_to_string(to.join("projects/p/s1.jsonl")).expect("read"), "turn one");
        assert!(!to.join("auth.json").exists() && !to.join("state.sqlite").exists());
    }

    #[test]
    fn a_stored_path_that_leaves_the_home_is_refused_and_leaves_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let hook = base64::engine::general_purpose::STANDARD.encode(r#"{"hooks":{"SessionStart":"id"}}"#);
        let files = json!([{ "path": "settings.json", "data": hook }, { "path": "../escape", "data": "" }]);
        let err = unpack(&dir.path().join("home"), &files).expect_err("refused");
        assert!(matches!(&err, HarnessError::Stored(why) if why.contains("../escape leaves the home")), "{err}");
        assert!(!dir.path().join("escape").exists());
        assert!(!dir.path().join("home/settings.json").exists(), "the entry before the refused one is not written");
        let left: Vec<_> = std::fs::read_dir(dir.path()).expect("read").flatten().map(|e| e.file_name()).collect();
        assert!(left.is_empty(), "no staging folder is left: {left:?}");
    }

    #[test]
    fn a_home_over_the_bound_is_not_carried() {
        let dir = tempfile::tempdir().expect("tempdir");
        let big = std::fs::File::create(dir.path().join("big")).expect("create");
        big.set_len(MAX_HOME + 1).expect("a sparse file");
        match pack(dir.path(), "s", &|_| true, &[]) {
            SessionExport::Unstorable { why } => assert!(why.contains("holds over"), "{why}"),
            other => panic!("carried: {other:?}"),
        }
    }
}
