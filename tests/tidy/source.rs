//! The crate's sources as the tidy checks read them: comments and string literals blanked (so
//! that prose and messages never count as code), test-only code removed, line numbers kept.

use std::path::{Path, PathBuf};

/// One source file under `src/`.
pub struct Source {
    /// Relative to `src/`, with `/` separators: `cluster/worker.rs`.
    pub path: String,
    /// The code outside tests, comments and literals blanked with spaces; newlines kept.
    pub code: String,
}

impl Source {
    /// The top-level module the file belongs to (`lib` and `main` for the crate roots).
    pub fn top(&self) -> &str {
        let first = self.path.split('/').next().unwrap_or_default();
        first.strip_suffix(".rs").unwrap_or(first)
    }

    /// The 1-based line of byte offset `at`.
    pub fn line_of(&self, at: usize) -> usize {
        self.code[..at].matches('\n').count() + 1
    }
}

/// Every `.rs` file under `src`, sorted, test-only files (`#[cfg(test)] mod x;`) left out.
pub fn load(src: &Path) -> Vec<Source> {
    let mut files = Vec::new();
    walk(src, &mut files);
    files.sort();
    let raw: Vec<(String, String)> = files
        .iter()
        .map(|p| {
            let rel = p.strip_prefix(src).expect("under src").to_string_lossy().replace('\\', "/");
            (rel, std::fs::read_to_string(p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display())))
        })
        .collect();
    let mut test_only = Vec::new();
    for (path, text) in &raw {
        test_only.extend(test_modules(path, &blank(text)));
    }
    raw.into_iter()
        .filter(|(path, _)| !test_only.contains(path))
        .map(|(path, text)| Source { code: strip_tests(&blank(&text)), path })
        .collect()
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
    for entry in entries.flatten() {
        let p = entry.path();
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `text` with comments and the insides of string and char literals replaced by spaces.
pub fn blank(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out: Vec<char> = c.clone();
    let keep_lines = |out: &mut Vec<char>, from: usize, to: usize| {
        for (i, slot) in out.iter_mut().enumerate().take(to.min(c.len())).skip(from) {
            *slot = if c[i] == '\n' { '\n' } else { ' ' };
        }
    };
    let mut i = 0;
    while i < c.len() {
        let prev_ident = i > 0 && is_ident(c[i - 1]);
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            let end = (i..c.len()).find(|&j| c[j] == '\n').unwrap_or(c.len());
            keep_lines(&mut out, i, end);
            i = end;
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let (mut depth, mut j) = (1, i + 2);
            while j < c.len() && depth > 0 {
                if c[j] == '/' && c.get(j + 1) == Some(&'*') {
                    depth += 1;
                    j += 1;
                } else if c[j] == '*' && c.get(j + 1) == Some(&'/') {
                    depth -= 1;
                    j += 1;
                }
                j += 1;
            }
            keep_lines(&mut out, i, j);
            i = j;
        } else if c[i] == 'r'
            && (!prev_ident || (i > 1 && c[i - 1] == 'b' && !is_ident(c[i - 2])))
            && raw_start(&c, i + 1).is_some()
        {
            let (hashes, open) = raw_start(&c, i + 1).unwrap_or_default();
            let close: String = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
            let rest: String = c[open + 1..].iter().collect();
            let end = rest.find(&close).map(|k| open + 1 + rest[..k].chars().count()).unwrap_or(c.len());
            keep_lines(&mut out, open + 1, end);
            i = end + close.len();
        } else if c[i] == '"' {
            let mut j = i + 1;
            while j < c.len() && c[j] != '"' {
                j += if c[j] == '\\' { 2 } else { 1 };
            }
            keep_lines(&mut out, i + 1, j);
            i = j + 1;
        } else if c[i] == '\'' {
            // A char literal ('x', '\n', '\u{..}'), else a lifetime or label.
            let end = if c.get(i + 1) == Some(&'\\') {
                (i + 2..c.len()).find(|&j| c[j] == '\'')
            } else if c.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(e) => {
                    keep_lines(&mut out, i + 1, e);
                    i = e + 1;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    out.into_iter().collect()
}

/// After an `r`: the number of `#` and the index of the opening quote of a raw string.
fn raw_start(c: &[char], from: usize) -> Option<(usize, usize)> {
    let hashes = c[from.min(c.len())..].iter().take_while(|&&x| x == '#').count();
    (c.get(from + hashes) == Some(&'"')).then_some((hashes, from + hashes))
}

/// Where the item after an attribute ending at `from` ends: past its `;`, or its closing brace.
pub fn item_end(code: &str, from: usize) -> usize {
    let b = code.as_bytes();
    let Some(open) = (from..b.len()).find(|&j| b[j] == b'{' || b[j] == b';') else {
        return b.len();
    };
    if b[open] == b';' {
        return open + 1;
    }
    let mut depth = 0usize;
    for (j, &ch) in b.iter().enumerate().skip(open) {
        match ch {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return j + 1;
                }
            }
            _ => {}
        }
    }
    b.len()
}

const CFG_TEST: &str = "#[cfg(test)]";

/// Blanked `code` with every `#[cfg(test)]` item removed (newlines kept).
pub fn strip_tests(code: &str) -> String {
    let mut out = code.to_string();
    let mut from = 0;
    while let Some(k) = out[from..].find(CFG_TEST) {
        let start = from + k;
        let end = item_end(&out, start + CFG_TEST.len());
        let gap: String = out[start..end].chars().map(|ch| if ch == '\n' { '\n' } else { ' ' }).collect();
        out.replace_range(start..end, &gap);
        from = end;
    }
    out
}

/// The files of the modules `path` declares `#[cfg(test)] mod name;`.
fn test_modules(path: &str, code: &str) -> Vec<String> {
    let dir = match path.rsplit_once('/') {
        Some((d, "mod.rs")) => format!("{d}/"),
        Some(_) | None if path == "lib.rs" || path == "main.rs" => String::new(),
        Some((d, f)) => format!("{d}/{}/", f.trim_end_matches(".rs")),
        None => format!("{}/", path.trim_end_matches(".rs")),
    };
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(k) = code[from..].find(CFG_TEST) {
        let start = from + k + CFG_TEST.len();
        let end = item_end(code, start);
        let item: Vec<&str> = code[start..end].split_whitespace().collect();
        if let ["mod", name] = item.as_slice() {
            let name = name.trim_end_matches(';');
            found.push(format!("{dir}{name}.rs"));
            found.push(format!("{dir}{name}/mod.rs"));
        }
        from = end;
    }
    found
}
