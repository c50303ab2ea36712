//! `src/lib.rs`'s code map against the files: every source file is named in the entry of its
//! top-level module (by its path in the module, its file name, or its stem in backticks), and
//! every `.rs` file the map names exists.

/// The code map's entries (`- `x/`: ...`), comment markers removed, each on one line.
fn entries(lib: &str) -> Vec<String> {
    let section = lib.split("//! # Code map").nth(1).unwrap_or_default();
    let section = section.split("//! # ").next().unwrap_or_default();
    let mut out: Vec<String> = Vec::new();
    for line in section.lines() {
        let text = line.trim_start_matches("//!").trim();
        match (text.strip_prefix("- "), out.last_mut()) {
            (Some(start), _) => out.push(start.to_string()),
            (None, Some(last)) if !text.is_empty() => {
                last.push(' ');
                last.push_str(text);
            }
            _ => {}
        }
    }
    out
}

/// The files of `paths` (relative to `src/`) that the code map in `lib` does not name.
pub fn unmapped(lib: &str, paths: &[String]) -> Vec<String> {
    let entries = entries(lib);
    let whole = entries.join(" ");
    let mut out = Vec::new();
    for path in paths {
        if path == "lib.rs" || path == "main.rs" {
            continue;
        }
        let Some((top, rest)) = path.split_once('/') else {
            if !whole.contains(&format!("`{path}`")) {
                out.push(format!("src/{path}: not in the code map of src/lib.rs"));
            }
            continue;
        };
        let Some(entry) = entries.iter().find(|e| e.starts_with(&format!("`{top}/`"))) else {
            out.push(format!("src/{path}: the code map of src/lib.rs has no entry `{top}/`"));
            continue;
        };
        let (dir, file) = rest.rsplit_once('/').unwrap_or(("", rest));
        let stem = file.trim_end_matches(".rs");
        let named = rest == "mod.rs"
            || entry.contains(&format!("`{rest}`"))
            || entry.contains(&format!("`{file}`"))
            || entry.contains(&format!("/{file}`"))
            || entry.contains(&format!("`{stem}`"))
            || (file == "mod.rs" && entry.contains(&format!("`{dir}/`")));
        if !named {
            out.push(format!("src/{path}: not named in the code map's entry `{top}/` in src/lib.rs"));
        }
    }
    out
}

/// The `.rs` files the code map in `lib` names that do not exist: a name is looked for under its
/// entry's module, then under `src/` (`paths`), then from the repository root (`exists`).
pub fn stale(lib: &str, paths: &[String], exists: impl Fn(&str) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    for entry in entries(lib) {
        let top = entry.strip_prefix('`').and_then(|e| e.split_once("/`")).map(|(t, _)| t.to_string());
        for (k, token) in entry.split('`').enumerate() {
            if k % 2 == 0 || !token.ends_with(".rs") || token.contains(' ') {
                continue;
            }
            let under = |p: &String| p == token || p.ends_with(&format!("/{token}"));
            let in_module =
                paths.iter().filter(|p| top.as_ref().is_none_or(|t| p.starts_with(&format!("{t}/")))).any(under);
            if !in_module && !paths.iter().any(|p| p == token) && !exists(token) {
                let place = top.as_ref().map_or(String::new(), |t| format!(" of `{t}/`"));
                out.push(format!("src/lib.rs: the code map's entry{place} names `{token}`, which does not exist"));
            }
        }
    }
    out
}
