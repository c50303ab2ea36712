//! The files inside one top-level module and the arrows between them (`crate::m::x`, `super::x`,
//! `self::x` paths and `use` groups, and a child module named by its bare name), and the circles
//! they form: files that name each other in a loop, which a newcomer cannot read one at a time.
//! A module's root file (`mod.rs`, or `x.rs` beside a folder `x/`) is left out: it declares and
//! re-exports its children, which is no arrow of reading.

use super::source::Source;
use std::collections::{BTreeMap, BTreeSet};

/// A file's module path: `agent/book.rs` is `["agent", "book"]`, `agent/mod.rs` is `["agent"]`.
fn module_of(path: &str) -> Vec<String> {
    let path = path.strip_suffix(".rs").unwrap_or(path);
    let mut segs: Vec<String> = path.split('/').map(String::from).collect();
    if segs.last().is_some_and(|s| s == "mod" || s == "lib" || s == "main") {
        segs.pop();
    }
    segs
}

fn ident_at(code: &str, at: usize) -> &str {
    let end = code[at..].find(|c: char| !(c.is_alphanumeric() || c == '_')).map_or(code.len(), |e| at + e);
    &code[at..end]
}

/// The paths written at `at`: `a::b::c` yields `[a, b, c]`; `a::{b::c, d}` yields `[a, b, c]` and
/// `[a, d]` (`self` in a group is the prefix itself).
fn paths_at(code: &str, at: usize) -> Vec<Vec<String>> {
    let mut prefix: Vec<String> = Vec::new();
    let mut i = at;
    loop {
        let id = ident_at(code, i);
        if id.is_empty() {
            return vec![prefix];
        }
        prefix.push(id.to_string());
        i += id.len();
        let rest = &code[i..];
        let trimmed = rest.trim_start();
        if !trimmed.starts_with("::") {
            return vec![prefix];
        }
        i += rest.len() - trimmed.len() + 2;
        let after = code[i..].trim_start();
        i += code[i..].len() - after.len();
        if after.starts_with('{') {
            let mut out = Vec::new();
            let (mut depth, mut start) = (0usize, i + 1);
            for (j, ch) in code[i + 1..].char_indices() {
                let k = i + 1 + j;
                match ch {
                    '{' => depth += 1,
                    '}' | ',' if depth == 0 => {
                        let element = code[start..k].trim_start();
                        let from = k - (code[start..k].len()) + (code[start..k].len() - element.len());
                        for tail in paths_at(code, from) {
                            let tail: Vec<String> = tail.into_iter().filter(|s| s != "self").collect();
                            out.push(prefix.iter().cloned().chain(tail).collect());
                        }
                        if ch == '}' {
                            return out;
                        }
                        start = k + 1;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            return out;
        }
    }
}

/// Every arrow from one file of a top-level module to another file of the same module: (from,
/// to, where), `mod.rs` files left out.
pub fn arrows(sources: &[Source]) -> Vec<(String, String, String)> {
    let files: BTreeMap<Vec<String>, &str> = sources.iter().map(|s| (module_of(&s.path), s.path.as_str())).collect();
    // A module's root: a file some other file's module lies under.
    let roots: BTreeSet<&str> = files
        .iter()
        .filter(|(m, _)| files.keys().any(|other| other.len() > m.len() && other.starts_with(m)))
        .map(|(_, f)| *f)
        .collect();
    let mut seen: BTreeMap<(String, String), String> = BTreeMap::new();
    for s in sources {
        if roots.contains(s.path.as_str()) || !s.path.contains('/') {
            continue;
        }
        let me = module_of(&s.path);
        let code = &s.code;
        let mut starts: Vec<usize> = Vec::new();
        for (k, _) in code.match_indices("::") {
            // The first segment of a path: an identifier right before `::`, not itself after `::`.
            let head = code[..k].trim_end();
            let begin = head.rfind(|c: char| !(c.is_alphanumeric() || c == '_')).map_or(0, |b| b + 1);
            if begin == head.len() || code[..begin].trim_end().ends_with("::") {
                continue;
            }
            if !starts.contains(&begin) {
                starts.push(begin);
            }
        }
        for begin in starts {
            for path in paths_at(code, begin) {
                let Some(first) = path.first() else { continue };
                let (mut base, rest): (Vec<String>, &[String]) = match first.as_str() {
                    "crate" => (Vec::new(), &path[1..]),
                    "self" => (me.clone(), &path[1..]),
                    "super" => {
                        let mut base = me.clone();
                        let mut n = 0;
                        while path.get(n).is_some_and(|p| p == "super") {
                            base.pop();
                            n += 1;
                        }
                        (base, &path[n..])
                    }
                    _ => {
                        // A bare child module's name (`seat::Seat` in `sandbox/seat/...`): only
                        // when a file of that child exists.
                        let mut child = me.clone();
                        child.push(first.clone());
                        if !files.contains_key(&child) {
                            continue;
                        }
                        (me.clone(), &path[..])
                    }
                };
                base.extend(rest.iter().cloned());
                // The deepest file the path lies in.
                let to = (1..=base.len()).rev().find_map(|n| files.get(&base[..n]).copied());
                let Some(to) = to else { continue };
                let same_top = to.split('/').next() == s.path.split('/').next();
                if to == s.path || !same_top || roots.contains(to) || !to.contains('/') {
                    continue;
                }
                seen.entry((s.path.clone(), to.to_string()))
                    .or_insert_with(|| format!("{}:{}", s.path, s.line_of(begin)));
            }
        }
    }
    seen.into_iter().map(|((f, t), at)| (f, t, at)).collect()
}

/// The circles among `arrows` (strongly connected sets of two files or more), each as its files
/// in order, with the arrows between them.
pub fn circles(arrows: &[(String, String, String)]) -> Vec<(Vec<String>, Vec<String>)> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (f, t, _) in arrows {
        next.entry(f.as_str()).or_default().push(t.as_str());
        next.entry(t.as_str()).or_default();
    }
    // Files that reach each other: a set each file's reachable set and its reachers share.
    let reach = |from: &str| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(at) = todo.pop() {
            for n in next.get(at.as_str()).into_iter().flatten() {
                if seen.insert(n.to_string()) {
                    todo.push(n.to_string());
                }
            }
        }
        seen
    };
    let all: Vec<&str> = next.keys().copied().collect();
    let reaches: BTreeMap<&str, BTreeSet<String>> = all.iter().map(|f| (*f, reach(f))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for f in &all {
        if done.contains(*f) {
            continue;
        }
        let group: Vec<String> = all
            .iter()
            .filter(|g| *g == f || (reaches[f].contains(**g) && reaches[**g].contains(*f)))
            .map(|g| g.to_string())
            .collect();
        done.extend(group.iter().cloned());
        if group.len() > 1 {
            let inner = arrows
                .iter()
                .filter(|(a, b, _)| group.contains(a) && group.contains(b))
                .map(|(a, b, at)| format!("{a} -> {b} ({at})"))
                .collect();
            out.push((group, inner));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(path: &str, code: &str) -> Source {
        Source { path: path.into(), code: code.into() }
    }

    #[test]
    fn paths_are_read_through_groups_super_and_bare_children() {
        let sources = [
            src("m/a.rs", "use super::{b::Thing, c};\nfn f() { crate::m::d::go(); }"),
            src("m/b.rs", "use super::a::X;"),
            src("m/c.rs", "fn g() -> crate::other::Y { todo() }"),
            src("m/d.rs", "mod inner;\nfn h() { inner::f(); }"),
            src("m/d/inner.rs", "use super::super::c;"),
            src("m/mod.rs", "pub use a::X; use b::Thing;"),
        ];
        let got: Vec<(String, String)> = arrows(&sources).into_iter().map(|(f, t, _)| (f, t)).collect();
        // `m/d.rs` has a folder of children: a root, as `m/mod.rs` is, neither end of an arrow.
        let want = [("m/a.rs", "m/b.rs"), ("m/a.rs", "m/c.rs"), ("m/b.rs", "m/a.rs"), ("m/d/inner.rs", "m/c.rs")];
        let want: Vec<(String, String)> = want.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
        assert_eq!(got, want);
        let circles = circles(&arrows(&sources));
        assert_eq!(circles.len(), 1);
        assert_eq!(circles[0].0, vec!["m/a.rs".to_string(), "m/b.rs".to_string()]);
    }
}
