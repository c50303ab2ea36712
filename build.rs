//! Embeds `stdlib/` in the binary: strategies, teams and helpers load from here when neither the
//! project nor the user's config folder overrides them.

use std::path::Path;

fn collect(dir: &Path, base: &Path, out: &mut Vec<(String, String)>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect(&path, base, out);
        } else if path.extension().is_some_and(|e| e == "rhai") {
            let rel = path.strip_prefix(base).map(|p| p.to_string_lossy().replace('\\', "/")).unwrap_or_default();
            out.push((rel, path.display().to_string()));
        }
    }
}

fn main() {
    let root = std::env::var("CARGO_MANIFEST_DIR").map(std::path::PathBuf::from).unwrap_or_default();
    let stdlib = root.join("stdlib");
    println!("cargo:rerun-if-changed=stdlib");
    let mut files = Vec::new();
    collect(&stdlib, &stdlib, &mut files);
    let mut code = String::from(
        "/// Every file of `stdlib/`: (path relative to stdlib/, contents).\npub const FILES: &[(&str, &str)] = &[\n",
    );
    for (rel, abs) in &files {
        code.push_str(&format!("    ({rel:?}, include_str!({abs:?})),\n"));
    }
    code.push_str("];\n");
    let out = std::env::var("OUT_DIR").map(std::path::PathBuf::from).unwrap_or_default();
    if let Err(e) = std::fs::write(out.join("stdlib.rs"), code) {
        panic!("cannot write the embedded stdlib: {e}");
    }
}
