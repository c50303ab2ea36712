//! The host API as documentation, generated from the engine's own metadata: the Markdown
//! reference (`awf script api`, kept in README.md by a test) and the Rhai definition files editors
//! load (`awf script defs`).

use rhai::Engine;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// One registered function as the reference shows it.
struct Entry {
    /// `run_id`, or the property name for a getter.
    name: String,
    getter: bool,
    /// `name: Type` for each parameter, the receiver first.
    params: Vec<String>,
    returns: String,
    doc: String,
}

/// The receivers in the order the reference lists them: (first parameter name, how scripts write it, heading).
const SECTIONS: &[(&str, &str, &str)] = &[
    ("ctx", "ctx", "`ctx`: the run"),
    ("agents", "ctx.agents", "`ctx.agents`"),
    ("messages", "ctx.messages", "`ctx.messages`"),
    ("worktrees", "ctx.worktrees", "`ctx.worktrees`"),
    ("decisions", "ctx.decisions", "`ctx.decisions`"),
    ("agent", "a", "`Agent`: a handle `ctx.agents.open` returns"),
    ("caller", "c", "`Caller`: the run's calling session, as `ctx.agents.caller()` returns it"),
    ("sandboxes", "ctx.sandboxes", "`ctx.sandboxes`"),
    ("sandbox", "sb", "`Sandbox`: a handle `ctx.sandboxes.open` returns"),
];

/// An engine holding only the host API (no standard library), for documentation.
pub fn api_engine() -> Engine {
    let mut engine = Engine::new_raw();
    super::api::register(&mut engine);
    engine
}

fn entries(engine: &Engine) -> Vec<Entry> {
    let mut list = engine.collect_fn_metadata(
        None,
        |info| {
            let m = info.metadata;
            let (name, getter) = match m.name.strip_prefix("get$") {
                Some(p) => (p.to_string(), true),
                None => (m.name.to_string(), false),
            };
            let doc = m
                .comments
                .iter()
                .flat_map(|c| c.lines())
                .map(|l| l.trim_start_matches("///").strip_prefix(' ').unwrap_or(l.trim_start_matches("///")))
                .collect::<Vec<_>>()
                .join("\n");
            let any = |t: &str| t.replace("Dynamic", "any");
            let params = m.params_info.iter().map(|p| any(p)).collect();
            Some(Entry { name, getter, params, returns: any(&m.return_type), doc })
        },
        false,
    );
    list.sort_by(|a, b| {
        (&a.name, !a.getter, a.params.len(), &a.params).cmp(&(&b.name, !b.getter, b.params.len(), &b.params))
    });
    list
}

/// Functions registered without a doc comment: the reference must cover every one.
pub fn undocumented() -> Vec<String> {
    entries(&api_engine()).into_iter().filter(|e| e.doc.trim().is_empty()).map(|e| e.name).collect()
}

fn receiver(e: &Entry) -> &str {
    e.params.first().and_then(|p| p.split(':').next()).map(str::trim).unwrap_or("")
}

/// The reference in Markdown: one heading per receiver, one entry per name with every form it
/// takes (property, call, overloads) and its documentation.
pub fn markdown() -> String {
    let all = entries(&api_engine());
    let mut out = String::new();
    for (recv, shown, heading) in SECTIONS {
        let mut by_name: BTreeMap<&str, Vec<&Entry>> = BTreeMap::new();
        for e in all.iter().filter(|e| receiver(e) == *recv) {
            by_name.entry(&e.name).or_default().push(e);
        }
        if by_name.is_empty() {
            continue;
        }
        let _ = writeln!(out, "### {heading}\n");
        for (name, forms) in by_name {
            let shapes = shapes(shown, name, &forms);
            let _ = writeln!(out, "- {}", shapes.join(" · "));
            let mut docs: Vec<&str> = Vec::new();
            for f in &forms {
                if !docs.contains(&f.doc.as_str()) {
                    docs.push(&f.doc);
                }
            }
            // The fullest text first: a shorthand's one line after the call it abbreviates.
            docs.sort_by_key(|d| std::cmp::Reverse(d.len()));
            for doc in docs {
                for line in doc.lines() {
                    let _ = writeln!(out, "  {line}");
                }
            }
        }
        out.push('\n');
    }
    out.trim_end().to_string() + "\n"
}

/// The forms a name takes, overloads that differ only in a parameter's type merged into one
/// (`items: Array | Range<int>`).
fn shapes(shown: &str, name: &str, forms: &[&Entry]) -> Vec<String> {
    // (getter, parameter names, return) → the types seen at each position
    type Shape<'a> = (bool, Vec<&'a str>, &'a str);
    let mut merged: Vec<(Shape, Vec<Vec<&str>>)> = Vec::new();
    for f in forms {
        let split: Vec<(&str, &str)> = f
            .params
            .iter()
            .skip(1)
            .map(|p| p.split_once(':').map_or((p.as_str(), "?"), |(n, t)| (n.trim(), t.trim())))
            .collect();
        let key = (f.getter, split.iter().map(|(n, _)| *n).collect::<Vec<_>>(), f.returns.as_str());
        let slot = match merged.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                merged.push((key, vec![Vec::new(); split.len()]));
                merged.len() - 1
            }
        };
        for (i, (_, t)) in split.iter().enumerate() {
            if !merged[slot].1[i].contains(t) {
                merged[slot].1[i].push(t);
            }
        }
    }
    merged
        .into_iter()
        .map(|((getter, names, returns), types)| {
            let ret = if returns.is_empty() || returns == "()" { String::new() } else { format!(" → {returns}") };
            if getter {
                return format!("`{shown}.{name}`{ret}");
            }
            let params: Vec<String> = names.iter().zip(types).map(|(n, t)| format!("{n}: {}", t.join(" | "))).collect();
            format!("`{shown}.{name}({})`{ret}", params.join(", "))
        })
        .collect()
}

/// Writes Rhai definition files for the whole host API (and the standard library) into `dir`,
/// with `ctx` declared, for the Rhai language server and editors.
pub fn write_definitions(engine: &Engine, dir: &Path) -> std::io::Result<Vec<String>> {
    engine.definitions().write_to_dir(dir)?;
    // `ctx` is supplied by the host at run time, not declared in the script.
    std::fs::write(
        dir.join("__scope__.d.rhai"),
        "module static;\n\n/// The run: see `awf script api`.\nlet ctx: Ctx;\n",
    )?;
    let mut files: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".d.rhai"))
        .collect();
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_host_function_is_documented() {
        assert_eq!(
            super::undocumented(),
            Vec::<String>::new(),
            "register these with a doc comment (script/api/doc.rs)"
        );
    }
}
