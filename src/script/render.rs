//! Script errors rendered like rustc: the message, `file:line:col`, the source line with a caret,
//! then each closure, function and module call that led there, innermost first. Which files may
//! show a line is a process-wide choice: all of them for the operator's terminal, only the script
//! folder's `.rhai` files and the embedded stdlib in `awf serve`.

use rhai::{Dynamic, EvalAltResult, Position};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The most characters of a source line an error shows; a longer line is cut around the caret.
const LINE_MAX: usize = 200;

/// Set once by `awf serve`: the (canonical) folders whose `.rhai` files may show lines in errors.
/// Unset, every file may (the CLI shows everything to the operator).
static SHOWN_UNDER: OnceLock<Vec<PathBuf>> = OnceLock::new();

/// From now on, errors rendered in this process show source lines only of `.rhai` files under
/// `roots` (canonical paths) and of the embedded stdlib. False when a choice was already made.
pub fn show_lines_only_under(roots: Vec<PathBuf>) -> bool {
    SHOWN_UNDER.set(roots).is_ok()
}

/// Source texts by source name; names not given are read from disk when first needed.
pub struct Sources {
    texts: HashMap<String, String>,
    main: String,
    cwd: PathBuf,
    shown_under: Option<&'static [PathBuf]>,
}

impl Sources {
    pub fn new(main_name: &str, main_text: &str, cwd: &Path) -> Sources {
        let mut texts = HashMap::new();
        texts.insert(main_name.to_string(), main_text.to_string());
        let shown_under = SHOWN_UNDER.get().map(Vec::as_slice);
        Sources { texts, main: main_name.to_string(), cwd: cwd.to_path_buf(), shown_under }
    }

    /// Whether an error may show lines of the source `name`: always, unless the process narrowed
    /// it; then only the embedded stdlib and `.rhai` files whose real path is under a shown folder.
    fn may_show(&self, name: &str) -> bool {
        let Some(roots) = self.shown_under else { return true };
        if let Some(rel) = name.strip_prefix("<embedded>/stdlib/") {
            return crate::stdlib::file(rel).is_some();
        }
        // Names are real paths, relative ones to the process's folder, as Rhai opened them.
        match Path::new(name).canonicalize() {
            Ok(real) => {
                real.extension().is_some_and(|e| e == "rhai") && roots.iter().any(|root| real.starts_with(root))
            }
            Err(_) => false,
        }
    }

    fn line(&mut self, name: &str, line: usize) -> Option<String> {
        if !self.may_show(name) {
            return None;
        }
        if !self.texts.contains_key(name) {
            let text = match name.strip_prefix("<embedded>/stdlib/") {
                Some(rel) => crate::stdlib::file(rel)?.to_string(),
                None => std::fs::read_to_string(name).ok()?,
            };
            self.texts.insert(name.to_string(), text);
        }
        self.texts.get(name)?.lines().nth(line.checked_sub(1)?).map(String::from)
    }

    fn display(&self, name: &str) -> String {
        Path::new(name).strip_prefix(&self.cwd).map(|p| p.display().to_string()).unwrap_or_else(|_| name.to_string())
    }
}

/// The message a script error carries, without its position. A thrown map shows its `message`.
pub fn message(err: &EvalAltResult) -> String {
    match err.unwrap_inner() {
        EvalAltResult::ErrorRuntime(v, _) => value_message(v),
        EvalAltResult::ErrorTerminated(v, _) => value_message(v),
        EvalAltResult::ErrorParsing(p, _) => p.to_string(),
        inner => strip_position(&inner.to_string()),
    }
}

/// Drops the ` (line N, position M)` suffix Rhai appends; positions are rendered separately.
fn strip_position(text: &str) -> String {
    if let Some(i) = text.rfind(" (line ") {
        if text.ends_with(')') && text[i..].contains("position") {
            return text[..i].to_string();
        }
    }
    text.to_string()
}

fn value_message(v: &Dynamic) -> String {
    if let Some(map) = v.read_lock::<rhai::Map>() {
        if let Some(m) = map.get("message") {
            return m.to_string();
        }
        if let Some(s) = map.get("stopped") {
            return format!("stopped: {s}");
        }
    }
    v.to_string()
}

struct Step {
    note: Option<String>,
    source: String,
    pos: Position,
}

/// Renders `err`, raised while running the script named `sources.main`.
pub fn render(err: &EvalAltResult, sources: &mut Sources) -> String {
    let mut steps = Vec::new();
    let mut source = sources.main.clone();
    let mut cur = err;
    loop {
        match cur {
            EvalAltResult::ErrorInFunctionCall(name, fn_source, inner, pos) => {
                let what = if name.starts_with("anon$") { "closure".to_string() } else { format!("fn {name}") };
                steps.push(Step { note: Some(format!("in call to {what}")), source: source.clone(), pos: *pos });
                if !fn_source.is_empty() {
                    source = fn_source.clone();
                }
                cur = inner;
            }
            EvalAltResult::ErrorInModule(path, inner, pos) => {
                steps.push(Step {
                    note: Some(format!("in module {}", sources.display(path))),
                    source: source.clone(),
                    pos: *pos,
                });
                source = path.clone();
                cur = inner;
            }
            other => {
                steps.push(Step { note: None, source: source.clone(), pos: other.position() });
                break;
            }
        }
    }
    let mut out = format!("error: {}\n", message(cur));
    for step in steps.iter().rev() {
        if let Some(note) = &step.note {
            out.push_str(&format!("  = note: {note}\n"));
        }
        if step.pos.is_none() {
            continue;
        }
        let (line, col) = (step.pos.line().unwrap_or(0), step.pos.position().unwrap_or(1));
        out.push_str(&format!(" --> {}:{line}:{col}\n", sources.display(&step.source)));
        if let Some(text) = sources.line(&step.source, line) {
            let (text, col) = excerpt(&text, col);
            let gutter = line.to_string();
            let pad = " ".repeat(gutter.len());
            out.push_str(&format!("{pad} |\n{gutter} | {text}\n"));
            if let (None, Some(col)) = (&step.note, col) {
                out.push_str(&format!("{pad} | {}^ here\n", " ".repeat(col.saturating_sub(1))));
            }
        }
    }
    out.trim_end().to_string()
}

/// The part of a source line an error shows, and the caret's (1-based) column in it: the whole
/// line when it is short; else at most `LINE_MAX` characters around column `col`, with `…` where
/// it was cut (a 50 MB string literal's error must not print the literal). Rhai's columns stop
/// counting at 65535: past that the true column is unknown, so the line's start is shown without
/// a caret.
fn excerpt(text: &str, col: usize) -> (String, Option<usize>) {
    let n = text.chars().count();
    let known = col < usize::from(u16::MAX);
    if n <= LINE_MAX {
        return (text.to_string(), known.then_some(col));
    }
    let start = match known {
        true if col > LINE_MAX => (col - 1).saturating_sub(LINE_MAX / 2).min(n - LINE_MAX),
        _ => 0,
    };
    let shown: String = text.chars().skip(start).take(LINE_MAX).collect();
    let head = if start > 0 { "…" } else { "" };
    let tail = if start + LINE_MAX < n { "…" } else { "" };
    (format!("{head}{shown}{tail}"), known.then(|| col - start + head.chars().count()))
}
