//! The layering of top-level modules: the order `src/lib.rs` writes under `# Layers`, the arrows
//! the sources draw (`crate::x` paths and `use crate::{x, ..}` groups), and what breaks it: an
//! arrow up, or a cycle among modules of one layer.

use super::source::Source;
use std::collections::{BTreeMap, BTreeSet};

/// An arrow from one top-level module to another, where it was first seen.
#[derive(Debug, Clone, PartialEq)]
pub struct Arrow {
    pub from: String,
    pub to: String,
    pub at: String,
}

/// The layers `lib.rs` lists, bottom first: lines `//! N. `a`, `b`: ...` under `# Layers`.
pub fn parse_layers(lib: &str) -> Vec<Vec<String>> {
    let section = lib.split("//! # Layers").nth(1).unwrap_or_default();
    let section = section.split("//! # ").next().unwrap_or_default();
    let mut layers = Vec::new();
    for line in section.lines() {
        let Some(rest) = line.strip_prefix("//! ") else { continue };
        let Some((n, mut rest)) = rest.split_once(". ") else { continue };
        if n.is_empty() || !n.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let mut names = Vec::new();
        while let Some(after) = rest.strip_prefix('`') {
            let Some((name, tail)) = after.split_once('`') else { break };
            names.push(name.to_string());
            rest = tail.trim_start_matches([',', ' ']).trim_start_matches("and ");
        }
        layers.push(names);
    }
    layers
}

/// The top-level modules each source names, with the first place it names each.
pub fn arrows(sources: &[Source], modules: &BTreeSet<String>) -> Vec<Arrow> {
    let mut seen: BTreeMap<(String, String), String> = BTreeMap::new();
    for s in sources {
        let from = s.top().to_string();
        if !modules.contains(&from) {
            continue;
        }
        for (at, to) in named(&s.code) {
            if to != from && modules.contains(&to) {
                seen.entry((from.clone(), to)).or_insert_with(|| format!("{}:{}", s.path, s.line_of(at)));
            }
        }
    }
    seen.into_iter().map(|((from, to), at)| Arrow { from, to, at }).collect()
}

/// The first segments of every `crate::` path in `code`, with their offsets.
fn named(code: &str) -> Vec<(usize, String)> {
    let ident = |s: &str| s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>();
    let mut out = Vec::new();
    for (k, _) in code.match_indices("crate::") {
        let before = code[..k].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &code[k + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Each element of the group at its top level: `{a::b, c, d::{e, f}}` names a, c, d.
            let (mut depth, mut start) = (0usize, true);
            for (j, ch) in group.char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    c if start && (c.is_alphanumeric() || c == '_') => {
                        out.push((k, ident(&group[j..])));
                        start = false;
                    }
                    c if !c.is_whitespace() => start = false,
                    _ => {}
                }
            }
        } else {
            out.push((k, ident(rest)));
        }
    }
    out
}

/// What is wrong with `arrows` under `layers`: every arrow up, and every cycle within a layer.
pub fn problems(layers: &[Vec<String>], arrows: &[Arrow]) -> Vec<String> {
    let level: BTreeMap<&str, usize> =
        layers.iter().enumerate().flat_map(|(n, l)| l.iter().map(move |m| (m.as_str(), n + 1))).collect();
    let mut out = Vec::new();
    for a in arrows {
        match (level.get(a.from.as_str()), level.get(a.to.as_str())) {
            (Some(f), Some(t)) if t > f => out
                .push(format!("`{}` (layer {f}) names `{}` (layer {t}), a layer above it, at {}", a.from, a.to, a.at)),
            (None, _) => out.push(format!("`{}` is in no layer of src/lib.rs (seen at {})", a.from, a.at)),
            (_, None) => out.push(format!("`{}` is in no layer of src/lib.rs (named at {})", a.to, a.at)),
            _ => {}
        }
    }
    // A cycle across layers has an arrow up, reported above: only those within a layer are left.
    let sideways: Vec<Arrow> =
        arrows.iter().filter(|a| level.get(a.from.as_str()) == level.get(a.to.as_str())).cloned().collect();
    out.extend(cycles(&sideways));
    out
}

/// Every cycle among the arrows, each once, as `a -> b -> a` with where each arrow is.
fn cycles(arrows: &[Arrow]) -> Vec<String> {
    let mut next: BTreeMap<&str, Vec<&Arrow>> = BTreeMap::new();
    for a in arrows {
        next.entry(a.from.as_str()).or_default().push(a);
    }
    let mut found = BTreeSet::new();
    for start in next.keys() {
        let mut path: Vec<&Arrow> = Vec::new();
        walk(start, start, &next, &mut path, &mut found);
    }
    found.into_iter().collect()
}

fn walk<'a>(
    start: &str,
    at: &str,
    next: &BTreeMap<&str, Vec<&'a Arrow>>,
    path: &mut Vec<&'a Arrow>,
    found: &mut BTreeSet<String>,
) {
    for &a in next.get(at).into_iter().flatten() {
        if a.to == start {
            // Reported from its smallest module only, so each cycle is listed once.
            if path.iter().all(|p| p.from.as_str() >= start) {
                let steps: Vec<String> = path
                    .iter()
                    .chain(std::iter::once(&a))
                    .map(|p| format!("{} -> {} ({})", p.from, p.to, p.at))
                    .collect();
                found.insert(format!("cycle: {}", steps.join(", ")));
            }
        } else if a.to.as_str() > start && !path.iter().any(|p| p.from == a.to) {
            path.push(a);
            walk(start, &a.to, next, path, found);
            path.pop();
        }
    }
}
