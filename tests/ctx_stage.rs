//! `ctx.stage`: values, schemas, summaries, the once-per-run and no-nesting rules, and failures
//! recorded in stages.jsonl and result.json.

use crate::common;

use common::Env;
use serde_json::{json, Value};

#[test]
fn a_stage_without_options_runs_its_closure_and_returns_unit() {
    let env = Env::new();
    let script = r#"
        let r = ctx.stage("work", || { let a = ctx.agents.open(#{ key: "a" }); a.ask("hi"); () });
        #{ r: r }
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    assert_eq!(out.json(), json!({ "r": null }));
    let stages = env.stages();
    assert_eq!(stages.len(), 1);
    assert_eq!(stages[0]["name"], "work");
    assert_eq!(stages[0]["status"], "succeeded");
    assert_eq!(stages[0]["attempt"], 1);
    assert_eq!(stages[0]["value"], Value::Null);
    // The turn is filed under the stage.
    assert_eq!(env.turn("a#1")["stage"], "work");
    let result = env.result();
    assert_eq!(result["stages"], json!([{ "name": "work", "status": "succeeded" }]));
    assert_eq!(result["accounting"]["by_stage"]["work"]["operations"], 1);
    assert_eq!(result["ended_in"], Value::Null);
    assert_eq!(env.events_of("stage-started").len(), 1);
    assert_eq!(env.events_of("stage-finished")[0]["data"]["status"], "succeeded");
}

#[test]
fn a_stage_with_a_result_schema_and_summary_records_and_returns_the_value() {
    let env = Env::new();
    let script = r#"
        let v = ctx.stage("count", #{ result: #{ type: "object", properties: #{ n: #{ type: "integer" } }, required: ["n"] },
                                      summary: |v| `counted ${v.n}` }, || #{ n: 3 });
        let w = ctx.stage("bare", #{ result: #{ type: "array" } }, || [1, 2]);
        #{ v: v, w: w }
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    assert_eq!(out.json(), json!({ "v": { "n": 3 }, "w": [1, 2] }));
    let stages = env.stages();
    assert_eq!(stages.len(), 2);
    assert_eq!(stages[0]["name"], "count");
    assert_eq!(stages[0]["status"], "succeeded");
    assert_eq!(stages[0]["value"], json!({ "n": 3 }));
    assert_eq!(stages[0]["summary"], "counted 3");
    assert_eq!(stages[1]["value"], json!([1, 2]));
    assert_eq!(stages[1]["summary"], Value::Null);
}

#[test]
fn returning_a_value_from_a_stage_without_a_schema_is_an_error() {
    let env = Env::new();
    let out = env.run("ctx.stage(\"loose\", || 5);\n", &[]);
    out.expect_code(1)
        .stderr_has("stage `loose` returned a value")
        .stderr_has("no result schema")
        .stderr_has("wf.rhai:1:");
    let stages = env.stages();
    assert_eq!(stages.len(), 1);
    assert_eq!(stages[0]["status"], "failed");
    assert!(stages[0]["reason"].as_str().expect("reason").contains("no result schema"), "{stages:#?}");
    assert_eq!(env.result()["ended_in"], "loose");
}

#[test]
fn a_value_not_matching_the_result_schema_fails_the_stage_with_pointers() {
    let env = Env::new();
    let out = env.run(
        r#"ctx.stage("typed", #{ result: #{ type: "object", properties: #{ n: #{ type: "integer" } } } }, || #{ n: "three" })"#,
        &[],
    );
    out.expect_code(1).stderr_has("does not match its result schema").stderr_has("/n");
    assert_eq!(env.stages()[0]["status"], "failed");
    assert_eq!(env.stages()[0]["value"], Value::Null);
}

#[test]
fn an_invalid_result_schema_is_refused_before_the_stage_runs() {
    let env = Env::new();
    let script =
        r#"ctx.stage("bad", #{ result: #{ type: "nonsense" } }, || { ctx.agents.open(#{ key: "a" }).ask("x") })"#;
    let out = env.run(script, &[]);
    out.expect_code(1).stderr_has("not a valid JSON Schema").stderr_has("bad");
    assert!(env.turns().is_empty(), "nothing may be spent: {:#?}", env.turns());
    assert!(env.events_of("agent-opened").is_empty());
}

#[test]
fn bad_stage_options_are_refused() {
    let env = Env::new();
    let script = r#"
        let errors = [];
        try { ctx.stage("a", #{ schema: #{} }, || ()); } catch (e) { errors.push(e); }
        try { ctx.stage("b", #{ result: #{ type: "integer" }, summary: "text" }, || 1); } catch (e) { errors.push(e); }
        errors
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let v = out.json();
    assert!(v[0].as_str().expect("e0").contains("schema"), "{v}");
    assert!(v[1].as_str().expect("e1").contains("summary"), "{v}");
}

#[test]
fn a_stage_name_is_used_once_per_run() {
    let env = Env::new();
    let out = env.run("ctx.stage(\"once\", || ());\nctx.stage(\"once\", || ());\n", &[]);
    out.expect_code(1).stderr_has("stage `once` was already used in this run").stderr_has("wf.rhai:2:");
    assert_eq!(env.stages().len(), 1);
}

#[test]
fn a_stage_inside_a_stage_is_an_error() {
    let env = Env::new();
    let out = env.run("ctx.stage(\"outer\", || {\n    ctx.stage(\"inner\", || ());\n});\n", &[]);
    out.expect_code(1).stderr_has("stage `inner` cannot start inside stage `outer`").stderr_has("wf.rhai:2:");
    let stages = env.stages();
    assert_eq!(stages.len(), 1, "{stages:#?}");
    assert_eq!(stages[0]["name"], "outer");
    assert_eq!(stages[0]["status"], "failed");
    assert_eq!(env.result()["ended_in"], "outer");
}

#[test]
fn a_stage_inside_a_parallel_branch_inside_a_stage_is_still_nested() {
    let env = Env::new();
    let out = env.run(r#"ctx.stage("outer", || { ctx.parallel([1], |x| ctx.stage(`in${x}`, || ())); () })"#, &[]);
    out.expect_code(1).stderr_has("cannot start inside stage `outer`");
}

#[test]
fn stages_may_run_concurrently_in_branches() {
    let env = Env::new();
    let script = r#"
        ctx.parallel([1, 2, 3], |x| ctx.stage(`part-${x}`, #{ result: #{ type: "integer" } }, || {
            ctx.agents.open(#{ key: `w${x}` }).ask("x");
            x * 2
        }))
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    assert_eq!(out.json(), json!([2, 4, 6]));
    let mut names: Vec<String> = env.stages().iter().map(|s| s["name"].as_str().expect("name").to_string()).collect();
    names.sort();
    assert_eq!(names, vec!["part-1", "part-2", "part-3"]);
    assert_eq!(env.turn("w2#1")["stage"], "part-2");
}

#[test]
fn a_failing_stage_is_recorded_with_its_message_and_propagates() {
    let env = Env::new();
    let script = r#"
        fn run(args) {
            ctx.stage("prepare", || ());
            ctx.stage("explode", || {
                ctx.agents.open(#{ key: "a" }).ask("x");
                throw "the stage went wrong";
            });
            "never"
        }
    "#;
    let out = env.run(script, &[]);
    out.expect_code(1).stderr_has("error: the stage went wrong");
    let stages = env.stages();
    assert_eq!(stages.len(), 2);
    assert_eq!(stages[1]["name"], "explode");
    assert_eq!(stages[1]["status"], "failed");
    assert_eq!(stages[1]["reason"], "the stage went wrong");
    let result = env.result();
    assert_eq!(result["status"], "failed");
    assert_eq!(result["ended_in"], "explode");
    assert_eq!(result["error"], "the stage went wrong");
    assert_eq!(
        result["stages"],
        json!([{ "name": "prepare", "status": "succeeded" }, { "name": "explode", "status": "failed" }])
    );
}

#[test]
fn a_caught_stage_failure_lets_the_run_succeed() {
    let env = Env::new();
    let script = r#"
        let msg = ();
        try { ctx.stage("risky", || { throw "nope"; }); } catch (e) { msg = e; }
        msg
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "nope");
    assert_eq!(env.stages()[0]["status"], "failed");
    let result = env.result();
    assert_eq!(result["status"], "succeeded");
    assert_eq!(result["ended_in"], Value::Null);
}

#[test]
fn an_error_in_a_stage_cancels_what_it_started() {
    let env = Env::new();
    env.with_responder(
        r#"fn respond(turn) { if turn.agent == "stuck" { return #{ hang: true }; } if turn.agent == "broken" { return #{ fail: "crash", delay_ms: 200 }; } () }"#,
    );
    let script = r#"
        ctx.stage("group", || {
            ctx.parallel(["stuck", "broken"], |k| ctx.agents.open(#{ key: k }).ask("x"));
            ()
        })
    "#;
    let out = env.run(script, &[]);
    out.expect_code(1).stderr_has("agent broken did not answer (failed): crash");
    assert_eq!(env.turn("stuck#1")["outcome"], "cancelled");
    assert_eq!(env.turn("stuck#1")["stage"], "group");
    assert_eq!(env.stages()[0]["status"], "failed");
    assert_eq!(env.result()["ended_in"], "group");
}
