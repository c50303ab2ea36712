//! Which workflow a client may run: a relative `.rhai` path inside the project folder (the folder
//! `awf mcp` started in), checked before anything starts; symlinks may not lead out of it. The
//! rule and its texts are `awf serve`'s (`cli/serve/scripts.rs`), with the project folder for the
//! server's script folder.

use std::path::{Component, Path, PathBuf};

/// Finds the script `name` inside `root` (canonical), or says why it is refused.
pub fn resolve(root: &Path, name: &str) -> Result<PathBuf, String> {
    let rel = Path::new(name);
    let refused = |why: &str| Err(format!("error: script {name:?} is refused: {why}"));
    if name.is_empty() {
        return Err("error: \"script\" is empty; name a .rhai file in the project folder".into());
    }
    if rel.is_absolute() {
        return refused("absolute paths are not accepted; name a file relative to the project folder");
    }
    if !rel.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir)) {
        return refused("`..` is not accepted; name a file inside the project folder");
    }
    if !name.ends_with(".rhai") {
        return refused("only .rhai files are scripts");
    }
    let path = root.join(rel).canonicalize().map_err(|e| format!("error: cannot read script {name}: {e}"))?;
    if !path.starts_with(root) {
        return refused("it leads outside the project folder (a symlink)");
    }
    if path.extension().is_none_or(|e| e != "rhai") {
        return refused("it leads to a file that is not a .rhai script (a symlink)");
    }
    Ok(path)
}
