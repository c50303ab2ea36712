//! The hostile agent (`tests/fixtures/agents/hostile.py`) as the walls tests drive it: a workflow
//! that opens it with a sandbox and gives it one turn per list of attacks, and its reports read
//! back. What each attack tries and reports is in the fixture's docstring.

use serde_json::{json, Value};

/// The fixture's absolute path.
pub fn program() -> String {
    super::agent_fixture("hostile.py")
}

/// A workflow opening the hostile agent `key` with `spec_extra` (Rhai map entries such as
/// `sandbox: "box", isolation: "worktree"`, without the braces) that gives it one turn per entry
/// of `turns` (each `{"attacks": [...], "args": {...}}`) and returns the reports in order.
pub fn workflow(key: &str, spec_extra: &str, turns: &[Value]) -> String {
    let turns: Vec<String> =
        turns.iter().map(|t| serde_json::to_string(&t.to_string()).expect("a JSON string")).collect();
    format!(
        r#"
let a = ctx.agents.open(#{{ key: "{key}", {spec_extra}, runtime: #{{ harness: "command", command: ["python3", "{program}"] }} }});
let reports = [];
for t in [{turns}] {{ reports.push(a.ask(t, #{{ type: "object" }})); }}
reports
"#,
        program = program(),
        turns = turns.join(", "),
    )
}

/// One turn's task: `attacks` with `args`.
pub fn turn(attacks: &[&str], args: Value) -> Value {
    json!({ "attacks": attacks, "args": args })
}

/// Whether attack `name` reached what it was after, in a report; panics with the report when the
/// attack is missing from it.
#[track_caller]
pub fn reached(report: &Value, name: &str) -> bool {
    match report[name]["reached"].as_bool() {
        Some(r) => r,
        None => panic!("no report of attack {name}: {report:#}"),
    }
}

/// As `workflow`, but each turn's outcome is returned whole (`#{ kind, reason, value }`), so that
/// a turn awf refused shows as `failed` with its reason instead of ending the run.
pub fn workflow_outcomes(key: &str, spec_extra: &str, turns: &[Value]) -> String {
    workflow(key, spec_extra, turns).replace(
        "reports.push(a.ask(t, #{ type: \"object\" }));",
        "let o = a.turn(#{ prompt: t, schema: #{ type: \"object\" } }); reports.push(#{ kind: o.kind, reason: o.reason, value: o.value }); if !o.ok { break; }",
    )
}
