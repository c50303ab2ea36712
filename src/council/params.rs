//! A strategy call checked against its META before any run folder exists: params coerced once to
//! the types META declares (the command line gives text), a value outside a param's `enum`
//! refused, META's defaults filled in, required params present, and no blank roster member.

use super::{check_required, Strategy};
use serde_json::{Map, Value};

/// Why a call of a strategy is refused before any run folder exists; the text names the strategy
/// and the param.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// `installed`: the catalog's strategies, listed.
    #[error("unknown strategy \"{name}\" (installed: {installed})")]
    Unknown { name: String, installed: String },
    #[error("{strategy}: unknown param `{param}` (its params: {params})")]
    UnknownParam { strategy: String, param: String, params: String },
    /// A value that does not fit the param's type or `enum` (`expected`: what it must be).
    #[error("{strategy}: params.{param} must be {expected}, got {got}")]
    Param { strategy: String, param: String, expected: String, got: String },
    /// `missing`: each missing param with its doc (`params.KEY — doc`), listed.
    #[error("\"{strategy}\" requires {missing}")]
    Required { strategy: String, missing: String },
    #[error("roster member {0} has a blank name: name every member")]
    BlankMember(usize),
    /// A council convened from a turn (`wf council NAME`) without its task.
    #[error("council {0} needs `task` (the task, question or goal, as text)")]
    NoTask(String),
    #[error("council {0}: give `team` or `roster`, not both")]
    TeamAndRoster(String),
    /// `known`: the teams there are, listed.
    #[error("council {strategy}: unknown team \"{team}\" (known: {known})")]
    UnknownTeam { strategy: String, team: String, known: String },
    #[error("council {strategy}: `team` must be a team's name, got {got}")]
    TeamNotAName { strategy: String, got: Value },
    #[error("council {strategy}: `roster` must be a list of members, got {got}")]
    RosterNotAList { strategy: String, got: Value },
}

/// The params a call starts with: coerced, checked, required ones present. The error names the
/// param, what it must be and what was given.
pub fn check_call(s: &Strategy, given: &Map<String, Value>) -> Result<Map<String, Value>, CallError> {
    // A param the strategy does not declare would be ignored: a typo must not pass silently.
    if let Some(declared) = s.meta.get("params").and_then(Value::as_object) {
        if let Some(unknown) = given.keys().find(|k| !declared.contains_key(k.as_str())) {
            let order = if s.param_order.is_empty() {
                declared.keys().cloned().collect::<Vec<_>>()
            } else {
                s.param_order.clone()
            };
            return Err(CallError::UnknownParam {
                strategy: s.name.clone(),
                param: unknown.clone(),
                params: order.join(", "),
            });
        }
    }
    let mut params = coerce_params(s, given)?;
    with_defaults(s, &mut params);
    check_required(s, &params)?;
    Ok(params)
}

/// Each param META declares a `default` for and the call leaves out (or gives blank) takes it, so
/// a strategy reads `input.params.X` as META documents it.
fn with_defaults(s: &Strategy, params: &mut Map<String, Value>) {
    let Some(declared) = s.meta.get("params").and_then(Value::as_object) else { return };
    for (key, spec) in declared {
        if let Some(default) = spec.get("default").filter(|d| !d.is_null()) {
            if !params.contains_key(key) {
                params.insert(key.clone(), default.clone());
            }
        }
    }
}

/// Each param META declares a `type` for, coerced to it: `"bool"` (true/false, on/off, yes/no,
/// 1/0), `"int"` (a whole number, also written as text), `"string"` (one of `enum` when META lists
/// one, matched without regard to case or surrounding spaces), `"array"` (a JSON array, or text
/// split at commas). A blank or null value of a non-text type (or of a text type with an `enum`) is
/// left out, so its default applies.
/// Params META does not declare pass unchanged.
pub fn coerce_params(s: &Strategy, given: &Map<String, Value>) -> Result<Map<String, Value>, CallError> {
    let mut out = Map::new();
    for (key, value) in given {
        let spec = s.meta.get("params").and_then(|p| p.get(key));
        let ty = spec.and_then(|p| p.get("type")).and_then(Value::as_str).unwrap_or("");
        let choices: Vec<&str> = spec
            .and_then(|p| p.get("enum"))
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let refuse = |expected: String| CallError::Param {
            strategy: s.name.clone(),
            param: key.clone(),
            expected,
            got: shown(value),
        };
        let blank = value.is_null() || value.as_str().is_some_and(|t| t.trim().is_empty());
        let coerced = match ty {
            "bool" | "int" | "array" if blank => continue,
            "string" if blank && !choices.is_empty() => continue,
            "bool" => Some(Value::Bool(as_bool(value).ok_or_else(|| refuse("true or false".into()))?)),
            "int" => Some(Value::from(as_int(value).ok_or_else(|| refuse("a whole number".into()))?)),
            "array" => Some(as_array(value).ok_or_else(|| refuse("a list".into()))?),
            "string" if !choices.is_empty() => {
                let text = value.as_str().map(str::trim).unwrap_or_default();
                let pick = choices.iter().find(|c| c.eq_ignore_ascii_case(text));
                Some(Value::from(*pick.ok_or_else(|| refuse(one_of(&choices)))?))
            }
            "string" => match value {
                Value::String(_) | Value::Null => Some(value.clone()),
                Value::Number(_) | Value::Bool(_) => Some(Value::String(value.to_string())),
                _ => return Err(refuse("text".into())),
            },
            _ => Some(value.clone()),
        };
        if let Some(v) = coerced {
            out.insert(key.clone(), v);
        }
    }
    Ok(out)
}

/// Refuses a roster with a blank member: a member is a name, or a map with a `name`.
pub fn check_roster(roster: &Value) -> Result<(), CallError> {
    let Some(members) = roster.as_array() else { return Ok(()) };
    for (i, m) in members.iter().enumerate() {
        let name = match m {
            Value::Object(o) => o.get("name").and_then(Value::as_str).unwrap_or(""),
            Value::String(n) => n,
            _ => continue,
        };
        if name.trim().is_empty() {
            return Err(CallError::BlankMember(i + 1));
        }
    }
    Ok(())
}

fn shown(v: &Value) -> String {
    v.to_string()
}

fn one_of(choices: &[&str]) -> String {
    let quoted: Vec<String> = choices.iter().map(|c| format!("\"{c}\"")).collect();
    match quoted.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

fn as_bool(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => match n.as_i64() {
            Some(1) => Some(true),
            Some(0) => Some(false),
            _ => None,
        },
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "on" | "yes" | "1" => Some(true),
            "false" | "off" | "no" | "0" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

fn as_int(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => {
            n.as_i64().or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9e15).map(|f| f as i64))
        }
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn as_array(v: &Value) -> Option<Value> {
    match v {
        Value::Array(_) => Some(v.clone()),
        Value::String(s) => {
            let parts = s.split(',').map(str::trim).filter(|p| !p.is_empty()).map(Value::from);
            Some(Value::Array(parts.collect()))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn demo() -> Strategy {
        let meta = json!({ "params": {
            "reflect": { "type": "bool" }, "n": { "type": "int" }, "mode": { "type": "string", "enum": ["off", "warn", "enforce"] },
            "who": { "type": "string" }, "choices": { "type": "array" },
        }, "required": ["who"] });
        Strategy { name: "demo".into(), origin: "test".into(), meta, param_order: Vec::new(), error: None }
    }

    fn call(given: Value) -> Result<Value, String> {
        let Value::Object(m) = given else { panic!("an object") };
        check_call(&demo(), &m).map(Value::Object).map_err(|e| e.to_string())
    }

    #[test]
    fn metas_defaults_fill_what_the_call_leaves_out() {
        let meta = json!({ "params": {
            "aggregate": { "type": "string", "default": "majority", "enum": ["majority", "unanimity"] },
            "reflect": { "type": "bool", "default": true }, "who": { "type": "string" },
        } });
        let s = Strategy { name: "d".into(), origin: "test".into(), meta, param_order: Vec::new(), error: None };
        let Value::Object(given) = json!({ "reflect": "off", "aggregate": " " }) else { panic!("an object") };
        let got = check_call(&s, &given).map(Value::Object).expect("fits");
        assert_eq!(got, json!({ "aggregate": "majority", "reflect": false }));
    }

    #[test]
    fn params_are_coerced_to_metas_types() {
        let got = call(json!({ "reflect": "off", "n": "3", "mode": " Warn ", "who": 5, "choices": "yes, no" }));
        assert_eq!(got, Ok(json!({ "reflect": false, "n": 3, "mode": "warn", "who": "5", "choices": ["yes", "no"] })));
        // A param META does not declare is a typo, not a value to pass along.
        assert_eq!(
            call(json!({ "who": "a", "other": "x" })),
            Err("demo: unknown param `other` (its params: choices, mode, n, reflect, who)".to_string())
        );
        let got = call(json!({ "reflect": 1, "n": 2.0, "who": "a", "choices": [1] }));
        assert_eq!(got, Ok(json!({ "reflect": true, "n": 2, "who": "a", "choices": [1] })));
        assert_eq!(call(json!({ "reflect": " ", "n": null, "mode": "", "who": "a" })), Ok(json!({ "who": "a" })));
    }

    #[test]
    fn values_that_do_not_fit_are_refused_naming_the_param() {
        for (given, want) in [
            (json!({ "reflect": "maybe" }), "demo: params.reflect must be true or false, got \"maybe\""),
            (json!({ "n": "security" }), "demo: params.n must be a whole number, got \"security\""),
            (json!({ "n": 1.5 }), "demo: params.n must be a whole number, got 1.5"),
            (json!({ "mode": "strict" }), "demo: params.mode must be \"off\", \"warn\" or \"enforce\", got \"strict\""),
            (json!({ "choices": { "a": 1 } }), "demo: params.choices must be a list, got {\"a\":1}"),
            (json!({ "who": ["a"] }), "demo: params.who must be text, got [\"a\"]"),
        ] {
            assert_eq!(call(given.clone()), Err(want.to_string()), "{given}");
        }
        assert_eq!(call(json!({ "who": "  " })), Err("\"demo\" requires params.who — ".into()));
    }

    #[test]
    fn a_blank_roster_member_is_refused() {
        assert_eq!(check_roster(&json!(["a", "b"])), Ok(()));
        assert_eq!(check_roster(&json!(["a", " "])), Err(CallError::BlankMember(2)));
        let e = check_roster(&json!([{ "name": "" }])).expect_err("blank");
        assert_eq!(e.to_string(), "roster member 1 has a blank name: name every member");
    }
}
