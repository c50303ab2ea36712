//! What councils convened from a turn spent, in the parent's records: every child's spend is
//! billed to the agent that convened it once, even when the council settles after the operation
//! that convened it, and `by_model` files it under the models the council's agents ran (the
//! child's own `by_model`), not under the caller's model or a `council` entry. The council is
//! `spender`, a strategy written here whose two members (`command` agents on model
//! `member-model`) each report 120 tokens, the second once a gate file exists.

use crate::common;

use common::council::{parent_and_children, MEMBER};
use common::{agent_fixture, read_json, read_jsonl, Env};
use serde_json::{json, Value};
use std::path::PathBuf;

const SPENDER: &str = r#"export const META = #{ kind: "strategy", name: "spender", when: "a test: two members answer in turn, the second once a gate file exists",
    params: #{ gate: #{ type: "string", "default": "/", doc: "the file the second member waits for" } }, required: [] };
fn run(input) {
    let a = ctx.agents.open(#{ key: "a", runtime: #{ harness: "command", model: "member-model", command: ["sh", "MEMBER", "/"] } });
    let first = a.ask(input.task);
    let b = ctx.agents.open(#{ key: "b", runtime: #{ harness: "command", model: "member-model", command: ["sh", "MEMBER", input.params.gate] } });
    #{ output: `${first} ${b.ask(input.task)}`, ok: true }
}
"#;

/// A folder with the `spender` strategy, and a workflow whose agent `boss` (a command agent on
/// model `boss-model`, running `agent` with `plan`, granted `spender`) is asked once with `turn`.
fn setup(agent: &str, plan: Value, turn: &str) -> Env {
    let env = Env::new();
    let member = env.write("member.sh", MEMBER);
    env.write("stdlib/council/spender.rhai", &SPENDER.replace("MEMBER", &member.display().to_string()));
    env.write(
        "awf.toml",
        "default_runtime = \"scripted\"\n[runtimes.scripted]\nharness = \"fake\"\nmodel = \"fake\"\n",
    );
    let plan = env.write("plan.json", &plan.to_string().replace("@DIR", &env.path().display().to_string()));
    env.write(
        "wf.rhai",
        &format!(
            "let boss = ctx.agents.open(#{{ key: \"boss\", councils: [\"spender\"], runtime: #{{ harness: \"command\", model: \"boss-model\", command: [\"python3\", \"{}\", \"{}\"] }} }});\nboss.turn({turn})",
            agent_fixture(agent),
            plan.display()
        ),
    );
    env
}

/// The parent's accounting, once its child's own says it spent `tokens` on `member-model`.
fn accounting(env: &Env, tokens: u64) -> (PathBuf, Value) {
    let (parent, children) = parent_and_children(env);
    assert_eq!(children.len(), 1, "{children:?}");
    let child = read_json(&children[0].join("result.json"));
    assert_eq!(child["accounting"]["by_model"]["member-model"]["tokens"], tokens, "{child}");
    let acc = read_json(&parent.join("result.json"))["accounting"].clone();
    assert_operations_agree(&acc);
    (parent.clone(), acc)
}

/// `totals` and every breakdown count the same operations: a council's count with its caller.
fn assert_operations_agree(acc: &Value) {
    let total = acc["totals"]["operations"].as_u64().expect("totals.operations");
    for fold in ["by_agent", "by_stage", "by_model", "by_attempt"] {
        let sum: u64 = acc[fold].as_object().expect(fold).values().filter_map(|t| t["operations"].as_u64()).sum();
        assert_eq!(sum, total, "{fold} counts {sum} operations, totals {total}: {acc}");
    }
}

#[test]
fn a_councils_spend_is_filed_under_its_members_models_and_billed_to_the_caller() {
    let env = setup("council_agent.py", json!([["spender", { "task": "Ship?", "gate": "/" }]]), r#""Decide.""#);
    env.awf(&["script", "run", "wf.rhai"]).expect_code(0);
    let (parent, acc) = accounting(&env, 240);
    assert_eq!(acc["by_agent"]["boss"]["tokens"], 240, "{acc}");
    assert_eq!(acc["totals"]["tokens"], 240, "{acc}");
    assert_eq!(acc["by_model"]["member-model"]["tokens"], 240, "{acc}");
    assert_eq!(acc["by_model"]["member-model"]["operations"], 2, "the council's two operations: {acc}");
    // The caller's turn is filed under its own model, with what it spent itself: nothing.
    assert_eq!(acc["by_model"]["boss-model"]["tokens"], 0, "{acc}");
    assert_eq!(acc["by_model"]["boss-model"]["operations"], 1, "{acc}");
    assert_eq!(acc["totals"]["operations"], 3, "the boss's turn and the council's two: {acc}");
    assert_eq!(acc["by_agent"]["boss"]["operations"], 3, "{acc}");
    // The turn's line carries the whole spend and says which models spent the council's part.
    let turn = read_jsonl(&parent.join("turns.jsonl")).into_iter().find(|t| t["op_id"] == "boss#1").expect("boss#1");
    assert_eq!(turn["tokens"], 240, "{turn}");
    assert_eq!(turn["councils_by_model"]["member-model"]["tokens"], 240, "{turn}");
}

#[test]
fn a_background_councils_spend_is_filed_under_its_members_models() {
    let env = setup(
        "msg_agent.py",
        json!({ "turn": [["council_bg", "spender", { "task": "Ship?", "gate": "/" }], ["answer_last"]] }),
        r#""Decide.""#,
    );
    env.awf(&["script", "run", "wf.rhai"]).expect_code(0);
    let (_, acc) = accounting(&env, 240);
    assert_eq!(acc["by_agent"]["boss"]["tokens"], 240, "{acc}");
    assert_eq!(acc["by_model"]["member-model"]["tokens"], 240, "{acc}");
    assert!(acc["by_model"].get("council").is_none(), "no `council` model: {acc}");
}

#[test]
fn a_council_that_settles_after_its_callers_operation_is_billed_on_a_line_of_its_own() {
    // The first member answers at once (120 tokens); the second waits for a gate that never
    // comes, until the boss's turn passes its timeout and the council is stopped with it.
    let env = setup(
        "council_agent.py",
        json!([["spender", { "task": "Ship?", "gate": "@DIR/never" }]]),
        r#"#{ prompt: "Decide.", timeout_ms: 3000 }"#,
    );
    env.awf(&["script", "run", "wf.rhai"]).expect_code(0);
    let (parent, acc) = accounting(&env, 120);
    let turns = read_jsonl(&parent.join("turns.jsonl"));
    let turn = turns.iter().find(|t| t["op_id"] == "boss#1").expect("boss#1");
    assert_eq!(turn["outcome"], "timed-out", "{turn}");
    assert_eq!(turn["tokens"], 0, "the turn had settled before the council did: {turn}");
    let late = turns.iter().find(|t| t["kind"] == "council").expect("the council's own line");
    assert_eq!(late["agent"], "boss");
    assert_eq!(late["tokens"], 120, "{late}");
    let reason = late["reason"].as_str().expect("reason");
    assert!(reason.contains("settled after the operation that convened it (boss#1)"), "{late}");
    assert_eq!(acc["totals"]["tokens"], 120, "{acc}");
    assert_eq!(acc["by_agent"]["boss"]["tokens"], 120, "{acc}");
    assert_eq!(acc["by_model"]["member-model"]["tokens"], 120, "{acc}");
}
