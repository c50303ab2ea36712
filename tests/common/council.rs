//! Helpers for the strategy tests: a working folder with the project's stdlib and a scripted
//! responder, a strategy called from a workflow, and the checks its result gets.

use super::{copy_dir, Env};
use serde_json::Value;
use std::path::Path;

/// A working folder with a copy of the project's stdlib (the resolver searches the working
/// folder's `stdlib/`) and `responder` answering every agent.
pub fn council(responder: &str) -> Env {
    let env = Env::new();
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("stdlib"), &env.path().join("stdlib"));
    env.with_responder(responder);
    env
}

/// Runs `s::run(ARGS)` for strategy `name` (ARGS a Rhai map literal) and returns the result map.
#[track_caller]
pub fn call(env: &Env, name: &str, args: &str) -> Value {
    let out = env.run(&format!("import \"council/{name}\" as s;\ns::run({args})\n"), &[]);
    out.expect_code(0);
    out.json()
}

pub fn output(result: &Value) -> &str {
    result["output"].as_str().expect("output is text")
}

/// The op ids of every turn, sorted.
pub fn op_ids(env: &Env) -> Vec<String> {
    let mut ids: Vec<String> = env.turns().iter().map(|t| t["op_id"].as_str().expect("op id").to_string()).collect();
    ids.sort();
    ids
}

/// The usage a strategy reports is every operation turns.jsonl recorded (turns and message
/// operations), operation for operation.
#[track_caller]
pub fn usage_matches_turns(env: &Env, result: &Value) {
    let turns = env.turns();
    let sum = |k: &str| turns.iter().map(|t| t[k].as_u64().expect("token count")).sum::<u64>();
    assert_eq!(result["usage"]["operations"], turns.len(), "{result:#}");
    assert_eq!(result["usage"]["input_tokens"], sum("input_tokens"), "{result:#}");
    assert_eq!(result["usage"]["output_tokens"], sum("output_tokens"), "{result:#}");
}

/// A strategy for the background-council tests: one `command` member (the `MEMBER` program, its
/// path put in place of `MEMBER`) that answers once the file `params.gate` exists.
pub const GATED: &str = r#"export const META = #{ kind: "strategy", name: "gated", when: "a test: one member answers once a gate file exists",
    params: #{ gate: #{ type: "string", "default": "", doc: "the file the member waits for" } }, required: [] };
fn run(input) {
    let m = ctx.agents.open(#{ key: "member", runtime: #{ harness: "command", command: ["sh", "MEMBER", input.params.gate] } });
    #{ output: `ruled: ${m.ask(input.task)}`, ok: true }
}
"#;

/// A member: waits (bounded) for the gate file `$1`, reports 120 tokens, answers "yes".
pub const MEMBER: &str = r#"cat > /dev/null
i=0
while [ ! -e "$1" ] && [ $i -lt 1500 ]; do sleep 0.01; i=$((i + 1)); done
"$AWF_LAUNCHER" usage --input 100 --output 20 --cost 0.001 > /dev/null
printf '"yes"' | "$AWF_LAUNCHER" result "$AWF_OP"
"#;

/// The run folder without a parent (there must be one), and the child runs.
pub fn parent_and_children(env: &Env) -> (std::path::PathBuf, Vec<std::path::PathBuf>) {
    let (children, parents): (Vec<_>, Vec<_>) =
        env.run_dirs().into_iter().partition(|d| super::read_json(&d.join("run.json")).get("parent").is_some());
    assert_eq!(parents.len(), 1, "one top-level run: {parents:?}");
    (parents[0].clone(), children)
}
