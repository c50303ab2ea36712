//! Which script a client of `awf serve` or `awf mcp` may name: a relative `.rhai` path inside the
//! folder it serves (serve: the working folder or `--scripts DIR`; mcp: the project folder), checked
//! before anything is opened; symlinks may not lead out of the folder.

use std::path::{Component, Path, PathBuf};

/// A script a client named, found inside the folder.
pub struct Named {
    /// The real path (symlinks resolved), the one that is read.
    pub path: PathBuf,
    /// As errors show it: the named path, relative to the working folder when under it.
    pub display: String,
}

/// Finds the script `name` inside `root` (canonical), or says why it is refused; `folder` names
/// `root` in the refusals ("the server's script folder").
pub fn resolve(root: &Path, cwd: &Path, name: &str, folder: &str) -> Result<Named, String> {
    let rel = Path::new(name);
    let refused = |why: &str| Err(format!("error: script {name:?} is refused: {why}"));
    if name.is_empty() {
        return Err(format!("error: \"script\" is empty; name a .rhai file in {folder}"));
    }
    if rel.is_absolute() {
        return refused(&format!("absolute paths are not accepted; name a file relative to {folder}"));
    }
    if !rel.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir)) {
        return refused(&format!("`..` is not accepted; name a file inside {folder}"));
    }
    if !name.ends_with(".rhai") {
        return refused("only .rhai files are scripts");
    }
    let named = root.join(rel);
    let display = named.strip_prefix(cwd).unwrap_or(&named).display().to_string();
    let path = named.canonicalize().map_err(|e| format!("error: cannot read script {display}: {e}"))?;
    if !path.starts_with(root) {
        return refused(&format!("it leads outside {folder} (a symlink)"));
    }
    if path.extension().is_none_or(|e| e != "rhai") {
        return refused("it leads to a file that is not a .rhai script (a symlink)");
    }
    Ok(Named { path, display })
}
