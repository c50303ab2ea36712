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
