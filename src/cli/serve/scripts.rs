//! Which script a client may name: a relative `.rhai` path inside the server's script folder (the
//! working folder, or `--scripts DIR`), checked before anything is opened; symlinks may not lead
//! out of the folder.

use std::path::{Component, Path, PathBuf};

/// A script a client named, found inside the folder.
pub struct Named {
    /// The real path (symlinks resolved), the one that is read.
    pub path: PathBuf,
    /// As errors show it: the named path, relative to the working folder when under it.
    pub display: String,
}

/// Finds the script `name` inside `root` (canonical), or says why it is refused.
pub fn resolve(root: &Path, cwd: &Path, name: &str) -> Result<Named, String> {
    let rel = Path::new(name);
    let refused = |why: &str| Err(format!("error: script {name:?} is refused: {why}"));
    if name.is_empty() {
        return Err("error: \"script\" is empty; name a .rhai file in the server's script folder".into());
    }
    if rel.is_absolute() {
        return refused("absolute paths are not accepted; name a file relative to the server's script folder");
    }
    if !rel.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir)) {
        return refused("`..` is not accepted; name a file inside the server's script folder");
    }
    if !name.ends_with(".rhai") {
        return refused("only .rhai files are scripts");
    }
    let named = root.join(rel);
    let display = named.strip_prefix(cwd).unwrap_or(&named).display().to_string();
    let path = named.canonicalize().map_err(|e| format!("error: cannot read script {display}: {e}"))?;
    if !path.starts_with(root) {
        return refused("it leads outside the server's script folder (a symlink)");
    }
    if path.extension().is_none_or(|e| e != "rhai") {
        return refused("it leads to a file that is not a .rhai script (a symlink)");
    }
    Ok(Named { path, display })
}
