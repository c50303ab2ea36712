//! Script errors rendered like rustc: the message, `file:line:col`, the source line with a caret,
//! then each closure, function and module call that led there, innermost first.

use rhai::{Dynamic, EvalAltResult, Position};
use std::collections::HashMap;
use std::path::Path;

/// Source texts by source name; names not given are read from disk when first needed.
pub struct Sources {
    texts: HashMap<String, String>,
    main: String,
    cwd: std::path::PathBuf,
}

impl Sources {
    pub fn new(main_name: &str, main_text: &str, cwd: &Path) -> Sources {
        let mut texts = HashMap::new();
        texts.insert(main_name.to_string(), main_text.to_string());
        Sources { texts, main: main_name.to_string(), cwd: cwd.to_path_buf() }
    }

    fn line(&mut self, name: &str, line: usize) -> Option<String> {
        if !self.texts.contains_key(name) {
            let embedded = name.strip_prefix("<embedded>/stdlib/").and_then(crate::stdlib::file).map(String::from);
            let text = embedded.or_else(|| std::fs::read_to_string(name).ok())?;
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
            let gutter = line.to_string();
            let pad = " ".repeat(gutter.len());
            out.push_str(&format!("{pad} |\n{gutter} | {text}\n"));
            if step.note.is_none() {
                out.push_str(&format!("{pad} | {}^ here\n", " ".repeat(col.saturating_sub(1))));
            }
        }
    }
    out.trim_end().to_string()
}
