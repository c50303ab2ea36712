//! What the tidy checks look for in code: calls that print, calls that write files, and
//! process-wide statics, each found with its file and line.

use super::source::{item_end, Source};

/// One place in the sources.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub path: String,
    pub line: usize,
    /// What was found: the call, or the static's name.
    pub what: String,
}

impl std::fmt::Display for Hit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "src/{}:{}: {}", self.path, self.line, self.what)
    }
}

/// Printing to the terminal: the CLI's to do.
pub const PRINTS: &[&str] = &["println!", "eprintln!", "print!", "eprint!", "dbg!", "io::stdout()", "io::stderr()"];

/// Writing a file: the run folder is `record/`'s to write.
pub const WRITES: &[&str] =
    &["fs::write(", "File::create(", "File::options(", "OpenOptions::new(", "fs::rename(", "fs::copy("];

/// Reading an error's text to decide what to do: callers branch on a variant instead. The names
/// are those errors go by in this code base (`e`, `err`, `error`, `why`).
pub const ERROR_TEXT_TESTS: &[&str] = &[
    "e.contains(",
    "e.starts_with(",
    "e.ends_with(",
    "err.contains(",
    "err.starts_with(",
    "error.contains(",
    "error.starts_with(",
    "why.contains(",
    "why.starts_with(",
    "to_string().contains(",
    "to_string().starts_with(",
];

fn ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Every occurrence of the `needles` in `sources`, each starting a token.
pub fn calls(sources: &[Source], needles: &[&str]) -> Vec<Hit> {
    let mut out = Vec::new();
    for s in sources {
        for needle in needles {
            for (k, _) in s.code.match_indices(needle) {
                if s.code[..k].chars().next_back().is_some_and(ident_char) {
                    continue;
                }
                out.push(Hit {
                    path: s.path.clone(),
                    line: s.line_of(k),
                    what: needle.trim_end_matches('(').to_string(),
                });
            }
        }
    }
    out.sort_by(|a, b| (&a.path, a.line).cmp(&(&b.path, b.line)));
    out
}

/// Every `static NAME:` outside `thread_local!` (a thread's own value is not process-wide).
pub fn statics(sources: &[Source]) -> Vec<Hit> {
    let mut out = Vec::new();
    for s in sources {
        let locals: Vec<(usize, usize)> =
            s.code.match_indices("thread_local!").map(|(k, _)| (k, item_end(&s.code, k))).collect();
        for (k, _) in s.code.match_indices("static ") {
            let before = s.code[..k].chars().next_back();
            if before.is_some_and(|c| ident_char(c) || c == '\'') || locals.iter().any(|&(a, b)| a < k && k < b) {
                continue;
            }
            let rest = s.code[k + "static ".len()..].trim_start();
            let rest = rest.strip_prefix("mut ").unwrap_or(rest).trim_start();
            let name: String = rest.chars().take_while(|&c| ident_char(c)).collect();
            if !name.is_empty() && rest[name.len()..].trim_start().starts_with(':') {
                out.push(Hit { path: s.path.clone(), line: s.line_of(k), what: name });
            }
        }
    }
    out
}

/// The hits an allow-list of `(path, what, count, reason)` does not cover: a file with more of
/// one kind than listed reports them all; an entry with more than found is reported as stale.
pub fn unallowed(hits: &[Hit], allowed: &[(&str, &str, usize, &str)]) -> Vec<String> {
    let mut out = Vec::new();
    let mut keys: Vec<(&str, &str)> = hits.iter().map(|h| (h.path.as_str(), h.what.as_str())).collect();
    keys.sort();
    keys.dedup();
    for (path, what) in keys {
        let here: Vec<&Hit> = hits.iter().filter(|h| h.path == path && h.what == what).collect();
        let listed = allowed.iter().find(|a| a.0 == path && a.1 == what).map_or(0, |a| a.2);
        if here.len() > listed {
            let places: Vec<String> = here.iter().map(|h| h.to_string()).collect();
            out.push(format!("{} found, {listed} allowed: {}", here.len(), places.join(", ")));
        }
    }
    for (path, what, count, why) in allowed {
        if why.trim().is_empty() {
            out.push(format!("allow-list entry src/{path} `{what}` gives no reason"));
        }
        let found = hits.iter().filter(|h| h.path == *path && h.what == *what).count();
        if found < *count {
            out.push(format!("stale allow-list entry: src/{path} `{what}` allows {count}, {found} found"));
        }
    }
    out
}

/// Every path through crate `krate` (`krate::x`, `krate!`, and for `opentelemetry` its family:
/// `opentelemetry_sdk::x`), each found where an identifier starts.
pub fn crate_paths(sources: &[Source], krate: &str) -> Vec<Hit> {
    let mut out = Vec::new();
    for s in sources {
        for (k, _) in s.code.match_indices(krate) {
            if s.code[..k].chars().next_back().is_some_and(|c| ident_char(c) || c == ':') {
                continue;
            }
            let rest = &s.code[k + krate.len()..];
            let rest = rest.trim_start_matches(ident_char);
            if rest.starts_with("::") || rest.starts_with('!') {
                out.push(Hit { path: s.path.clone(), line: s.line_of(k), what: krate.to_string() });
            }
        }
    }
    out
}

/// Every `Result<T, String>` (a failure carried as bare text), each found where `Result<` starts
/// a path segment (`io::Result<` is another type): the generic arguments are read to the matching
/// `>`, so `Result<Vec<String>, String>` counts once and `Result<String, E>` not at all.
pub fn string_errors(sources: &[Source]) -> Vec<Hit> {
    let mut out = Vec::new();
    for s in sources {
        for (k, _) in s.code.match_indices("Result<") {
            if s.code[..k].chars().next_back().is_some_and(ident_char) {
                continue;
            }
            if last_argument(&s.code[k + "Result<".len()..]).is_some_and(|a| a == "String") {
                out.push(Hit { path: s.path.clone(), line: s.line_of(k), what: "Result<_, String>".into() });
            }
        }
    }
    out
}

/// The last top-level generic argument of the list starting after a `<` (trimmed; a trailing
/// comma allowed), or `None` when the list has a single argument (`io::Result<String>`) or does
/// not close.
fn last_argument(code: &str) -> Option<&str> {
    let (mut depth, mut start) = (0usize, 0usize);
    let mut args = Vec::new();
    let mut prev = ' ';
    for (j, ch) in code.char_indices() {
        match ch {
            '<' | '(' | '[' => depth += 1,
            // `->` in a `Fn(..) -> T` bound closes nothing.
            '>' if prev == '-' => {}
            '>' | ')' | ']' if depth > 0 => depth -= 1,
            '>' | ',' if depth == 0 => {
                args.push(code[start..j].trim());
                start = j + 1;
                if ch == '>' {
                    args.retain(|a| !a.is_empty());
                    return (args.len() > 1).then(|| args[args.len() - 1]);
                }
            }
            ';' | '{' | '}' => return None,
            _ => {}
        }
        prev = ch;
    }
    None
}
