//! The strategy catalog: which strategies are installed (the project's `stdlib/council/`, then
//! `$XDG_CONFIG_HOME/awf/strategies/`, then the stdlib built into awf), their META read without
//! running them, teams, catalog lines, and the required-param refusal made before any agent opens.
//! `params.rs` checks a call against META (params coerced to their types, a blank roster member
//! refused) before any run folder exists.

pub mod background;
pub mod child;
mod params;
pub mod registry;

pub use params::{check_call, check_roster, coerce_params, CallError};

use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// An installed strategy.
#[derive(Debug, Clone)]
pub struct Strategy {
    pub name: String,
    /// Where it was found: a file path, or `built in`.
    pub origin: String,
    pub meta: Value,
    /// `META.params`' keys in the order the file writes them.
    pub param_order: Vec<String>,
    /// Why the file could not be read (it does not parse): it is listed, and refused when called.
    pub error: Option<String>,
}

/// Where a stdlib file may come from, most specific first.
fn candidates(cwd: &Path, rel: &str) -> Vec<(String, Option<PathBuf>)> {
    let mut out = vec![(cwd.join("stdlib").join(rel).display().to_string(), Some(cwd.join("stdlib").join(rel)))];
    if let Some(dir) = crate::config::xdg_config_home().map(|d| d.join("awf").join("strategies")) {
        let short = rel.strip_prefix("council/").unwrap_or(rel);
        out.push((dir.join(short).display().to_string(), Some(dir.join(short))));
    }
    out.push(("built in".into(), None));
    out
}

/// The text of a stdlib file as the resolver would find it, and where it came from.
pub fn stdlib_text(cwd: &Path, rel: &str) -> Option<(String, String)> {
    for (origin, path) in candidates(cwd, rel) {
        match path {
            Some(p) if p.is_file() => {
                if let Ok(text) = std::fs::read_to_string(&p) {
                    return Some((text, origin));
                }
            }
            Some(_) => {}
            None => return crate::stdlib::file(rel).map(|t| (t.to_string(), origin)),
        }
    }
    None
}

/// Every installed strategy, by name, the most specific copy of each.
pub fn discover(cwd: &Path) -> Vec<Strategy> {
    names(cwd).into_iter().filter_map(|name| describe(cwd, name)).collect()
}

/// The name of every `.rhai` file a strategy could come from (built in, the project's
/// `stdlib/council/`, the user's strategies folder), sorted, each once. Cheap: nothing is parsed.
pub fn names(cwd: &Path) -> Vec<String> {
    let mut names: Vec<String> = crate::stdlib::FILES
        .iter()
        .filter_map(|(p, _)| p.strip_prefix("council/").and_then(|n| n.strip_suffix(".rhai")))
        .map(String::from)
        .collect();
    let mut dirs = vec![cwd.join("stdlib").join("council")];
    if let Some(d) = crate::config::xdg_config_home() {
        dirs.push(d.join("awf").join("strategies"));
    }
    for dir in dirs {
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries.filter_map(Result::ok) {
                let p = e.path();
                if let (Some(stem), Some("rhai")) =
                    (p.file_stem().and_then(|s| s.to_str()), p.extension().and_then(|s| s.to_str()))
                {
                    names.push(stem.to_string());
                }
            }
        }
    }
    names.sort();
    names.dedup();
    names
}

/// Strategy `name` as its most specific copy reads now; `None` when there is no such file or it
/// is not a strategy (no META, or another kind).
pub fn describe(cwd: &Path, name: String) -> Option<Strategy> {
    let (text, origin) = stdlib_text(cwd, &format!("council/{name}.rhai"))?;
    match crate::script::read_literals(&origin, &text) {
        // A file that does not parse is still listed, with its error, so that it does not
        // silently vanish (a broken override would otherwise hide the built-in one too).
        Err(error) => {
            Some(Strategy { name, origin, meta: Value::Null, param_order: Vec::new(), error: Some(error.to_string()) })
        }
        Ok(mut lits) => {
            let meta = lits.remove("META")?;
            (meta.get("kind").and_then(Value::as_str) == Some("strategy")).then(|| Strategy {
                name,
                origin,
                meta,
                param_order: crate::script::meta_param_order(&text),
                error: None,
            })
        }
    }
}

/// Finds a strategy by name, or says which are installed.
pub fn find(cwd: &Path, name: &str) -> Result<Strategy, CallError> {
    let all = discover(cwd);
    all.iter().find(|s| s.name == name).cloned().ok_or_else(|| {
        let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
        CallError::Unknown { name: name.to_string(), installed: names.join(", ") }
    })
}

/// A member of a team in `teams.rhai` (or of a call's `roster`): a persona's name, or a map with
/// its `name` and its own persona fields (`label`, `instructions`, ...).
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(untagged)]
pub enum Member {
    Name(String),
    Spec {
        #[serde(default)]
        name: Option<String>,
        #[serde(flatten)]
        persona: Map<String, Value>,
    },
}

impl Member {
    /// A member as written: `None` for what is neither a name nor a map.
    pub fn of(v: &Value) -> Option<Member> {
        serde_json::from_value(v.clone()).ok()
    }

    /// Its name, when it has one.
    pub fn name(&self) -> Option<&str> {
        match self {
            Member::Name(n) => Some(n),
            Member::Spec { name, .. } => name.as_deref(),
        }
    }
}

/// `TEAMS` and `PERSONAS` from the teams file the resolver would use.
pub fn teams(cwd: &Path) -> (Map<String, Value>, Map<String, Value>) {
    let Some((text, origin)) = stdlib_text(cwd, "teams.rhai") else { return Default::default() };
    let mut lits = crate::script::read_literals(&origin, &text).unwrap_or_default();
    let take = |lits: &mut Map<String, Value>, k: &str| match lits.remove(k) {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    (take(&mut lits, "TEAMS"), take(&mut lits, "PERSONAS"))
}

fn text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| x.as_str().map(String::from).unwrap_or_else(|| x.to_string()))
            .collect::<Vec<_>>()
            .join(", "),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

fn required(meta: &Value) -> Vec<String> {
    meta.get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).map(String::from).collect())
        .unwrap_or_default()
}

/// `- name(param, required*) — when; roster: positions; default team X.` Params in META's order,
/// no parentheses when there are none; the team is left out when it is magi, the fallback every
/// call already gets.
pub fn catalog_line(s: &Strategy) -> String {
    if let Some(e) = &s.error {
        let first = e.lines().next().unwrap_or("").trim_start_matches("error: ");
        return format!("- {} — does not compile ({}): {first}", s.name, s.origin);
    }
    let req = required(&s.meta);
    let declared: Vec<String> =
        s.meta.get("params").and_then(Value::as_object).map(|p| p.keys().cloned().collect()).unwrap_or_default();
    // The file's order, then any key it could not tell (a META built by an expression).
    let mut keys: Vec<&String> = s.param_order.iter().filter(|k| declared.contains(k)).collect();
    keys.extend(declared.iter().filter(|k| !s.param_order.contains(k)));
    let params: Vec<String> =
        keys.into_iter().map(|k| if req.contains(k) { format!("{k}*") } else { k.clone() }).collect();
    let params = if params.is_empty() { String::new() } else { format!("({})", params.join(", ")) };
    let mut line = format!("- {}{params} — {}", s.name, text(s.meta.get("when")));
    let roster = text(s.meta.get("roster"));
    if !roster.is_empty() {
        line.push_str(&format!("; roster: {roster}"));
    }
    let team = text(s.meta.get("team"));
    if !team.is_empty() && team != "magi" {
        line.push_str(&format!("; default team {team}"));
    }
    line.push('.');
    line
}

/// Refuses a call whose required params are missing or blank: `"NAME" requires params.KEY — doc`.
pub fn check_required(s: &Strategy, params: &Map<String, Value>) -> Result<(), CallError> {
    let missing: Vec<String> = required(&s.meta)
        .into_iter()
        .filter(|k| match params.get(k) {
            None | Some(Value::Null) => true,
            Some(Value::String(v)) => v.trim().is_empty(),
            _ => false,
        })
        .map(|k| {
            let doc = s.meta.get("params").and_then(|p| p.get(&k)).map(|p| text(p.get("doc"))).unwrap_or_default();
            format!("params.{k} — {doc}")
        })
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(CallError::Required { strategy: s.name.clone(), missing: missing.join("; ") })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn strategy(meta: Value) -> Strategy {
        Strategy { name: "demo".into(), origin: "test".into(), meta, param_order: Vec::new(), error: None }
    }

    #[test]
    fn catalog_lines_follow_the_format() {
        let mut s = strategy(json!({ "when": "many angles", "roster": "gatherers", "team": "review",
            "params": { "peers": {}, "synthesizer": {}, "extra": {} }, "required": ["synthesizer"] }));
        s.param_order = vec!["synthesizer".into(), "peers".into()];
        assert_eq!(
            catalog_line(&s),
            "- demo(synthesizer*, peers, extra) — many angles; roster: gatherers; default team review."
        );
        let m = strategy(json!({ "when": "a vote", "roster": ["a", "b"], "team": "magi", "params": {} }));
        assert_eq!(catalog_line(&m), "- demo — a vote; roster: a, b.");
    }

    #[test]
    fn param_order_is_read_from_the_source() {
        let text =
            "export const META = #{ kind: \"strategy\", params: #{ zeta: #{ type: \"int\" }, alpha: #{}, mid: #{} } };";
        assert_eq!(crate::script::meta_param_order(text), ["zeta", "alpha", "mid"]);
        assert!(crate::script::meta_param_order("let x = 1;").is_empty());
    }

    #[test]
    fn missing_or_blank_required_params_are_refused_with_their_docs() {
        let s = strategy(json!({ "params": { "goal": { "doc": "what to reach" }, "n": { "doc": "how many" } },
            "required": ["goal", "n"] }));
        let mut given = Map::new();
        given.insert("goal".into(), json!("  "));
        assert_eq!(
            check_required(&s, &given).expect_err("refused").to_string(),
            "\"demo\" requires params.goal — what to reach; params.n — how many"
        );
        given.insert("goal".into(), json!("x"));
        given.insert("n".into(), json!(3));
        assert!(check_required(&s, &given).is_ok());
    }

    #[test]
    fn the_built_in_strategies_are_found() {
        let dir = tempfile::tempdir().expect("tempdir");
        let names: Vec<String> = discover(dir.path()).into_iter().map(|s| s.name).collect();
        for n in ["magi", "map", "pair", "pipeline", "synthesize"] {
            assert!(names.contains(&n.to_string()), "{n} missing from {names:?}");
        }
        assert!(!names.contains(&"common".to_string()));
        let err = find(dir.path(), "nope").expect_err("unknown");
        assert!(matches!(&err, CallError::Unknown { name, installed } if name == "nope" && installed.contains("magi")));
    }
}
