//! What a `POST /runs` body may set beside the script or strategy: `deadline` ("30s", "10m"),
//! `budget_usd`, `budget_tokens`, `max_agents`, `max_concurrency`; each checked for its type here,
//! and for its value by the run's `prepare`, as the command line's flags are.

use super::super::script::RunFlags;
use serde_json::Value;

/// The server's flags with the body's limits in place of theirs.
pub fn flags(base: &RunFlags, body: &Value) -> Result<RunFlags, String> {
    let mut flags = base.clone();
    let count = |key: &str| -> Result<Option<u64>, String> {
        match body.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or(format!("\"{key}\" must be a whole number, not negative, got {v}")),
        }
    };
    let size = |key: &str| -> Result<Option<usize>, String> {
        count(key)?.map(|n| usize::try_from(n).map_err(|_| format!("\"{key}\" is too large: {n}"))).transpose()
    };
    if let Some(v) = body.get("deadline").filter(|v| !v.is_null()) {
        let text = v.as_str().ok_or(format!("\"deadline\" must be a duration such as \"30s\" or \"10m\", got {v}"))?;
        crate::config::parse_duration(text).map_err(|e| format!("\"deadline\": {e}"))?;
        flags.deadline = Some(text.to_string());
    }
    if let Some(v) = body.get("budget_usd").filter(|v| !v.is_null()) {
        let usd = v
            .as_f64()
            .filter(|b| *b >= 0.0)
            .ok_or(format!("\"budget_usd\" must be a number of USD, not negative, got {v}"))?;
        flags.budget_usd = Some(usd);
    }
    flags.budget_tokens = count("budget_tokens")?.or(flags.budget_tokens);
    flags.max_agents = size("max_agents")?.or(flags.max_agents);
    if let Some(n) = size("max_concurrency")? {
        if n == 0 {
            return Err("\"max_concurrency\" must be at least 1".into());
        }
        flags.max_concurrency = Some(n);
    }
    Ok(flags)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn base() -> RunFlags {
        RunFlags { quiet: true, ..Default::default() }
    }

    #[test]
    fn limits_in_the_body_become_the_runs_flags() {
        let f = flags(
            &base(),
            &json!({ "deadline": "2s", "budget_usd": 0.5, "budget_tokens": 100,
            "max_agents": 3, "max_concurrency": 2 }),
        )
        .expect("accepted");
        assert_eq!(f.deadline.as_deref(), Some("2s"));
        assert_eq!(
            (f.budget_usd, f.budget_tokens, f.max_agents, f.max_concurrency),
            (Some(0.5), Some(100), Some(3), Some(2))
        );
    }

    #[test]
    fn bad_limits_are_refused_by_name() {
        for (body, needle) in [
            (json!({ "deadline": "soon" }), "\"deadline\""),
            (json!({ "deadline": 30 }), "\"deadline\" must be a duration"),
            (json!({ "budget_usd": -1 }), "\"budget_usd\""),
            (json!({ "budget_tokens": "many" }), "\"budget_tokens\" must be a whole number"),
            (json!({ "max_concurrency": 0 }), "\"max_concurrency\" must be at least 1"),
            (json!({ "max_agents": 1.5 }), "\"max_agents\""),
        ] {
            let Err(err) = flags(&base(), &body) else { panic!("{body} was accepted") };
            assert!(err.contains(needle), "{body}: {err}");
        }
    }
}
