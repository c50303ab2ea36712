//! The plan from anywhere (issue 29, part 4): `POST /plans` on `awf serve` and the MCP tools
//! `plan_workflow` and `plan_council` return the plan `awf script|council plan --json` prints, and
//! refuse what it refuses.

use crate::common;
use crate::common::fake_model::{FakeModel, Reply};
use crate::common::mcp::RawMcp;

use common::Env;
use serde_json::{json, Value};

const WF: &str = r#"
ctx.stage("fan", #{ result: #{ type: "array" } }, || {
    ctx.parallel([1, 2], |x, i| { ctx.agents.open(#{ key: `r-${i}` }).turn(#{ prompt: "hi" }).kind })
})
"#;

fn setup() -> Env {
    let env = Env::new();
    env.write(
        "awf.toml",
        "default_runtime = \"s\"\n[runtimes.s]\nharness = \"claude\"\nmodel = \"claude-sonnet-4-5\"\n",
    );
    env.write("wf.rhai", WF);
    env
}

/// A plan without what differs between two plans of the same run (its time).
fn timeless(mut plan: Value) -> Value {
    if let Some(m) = plan.as_object_mut() {
        m.remove("plan_ms");
    }
    plan
}

#[test]
fn serve_plans_a_workflow_and_a_council_as_the_command_line_does() {
    let env = setup();
    let cli = timeless(env.awf(&["script", "plan", "wf.rhai", "--json"]).expect_code(0).json());
    let council = timeless(env.awf(&["council", "plan", "magi", "--task", "Ship?", "--json"]).expect_code(0).json());
    let server = common::serve::serve(&env, &[]);
    let (code, plan) = server.json("POST", "/plans", Some(&json!({ "script": "wf.rhai" })));
    assert_eq!(code, 200, "{plan}");
    assert_eq!(timeless(plan), cli);
    let (code, plan) = server.json("POST", "/plans", Some(&json!({ "strategy": "magi", "task": "Ship?" })));
    assert_eq!(code, 200, "{plan}");
    assert_eq!(timeless(plan), council);
    let (code, refused) = server.json("POST", "/plans", Some(&json!({ "strategy": "nope", "task": "x" })));
    assert_eq!(code, 400);
    assert!(refused["error"].as_str().unwrap_or("").starts_with("error: unknown strategy \"nope\""), "{refused}");
    env.write("bad.rhai", "let a = ctx.agents.open(#{ key: \"a\", runtime: \"nope\" }); a.turn(#{ prompt: \"x\" })");
    let (code, refused) = server.json("POST", "/plans", Some(&json!({ "script": "bad.rhai" })));
    assert_eq!(code, 400, "an unknown runtime met as the agent opens: {refused}");
    assert!(refused["error"].as_str().unwrap_or("").contains("nope"), "{refused}");
    assert!(!env.runs_root().exists() || env.run_dirs().is_empty(), "a plan leaves no run folder");
}

#[test]
fn mcp_plans_a_workflow_and_a_council_as_the_command_line_does() {
    let env = setup();
    let cli = timeless(env.awf(&["script", "plan", "wf.rhai", "--json"]).expect_code(0).json());
    let mut mcp = RawMcp::start(&env);
    let (result, _) = mcp.call("plan_workflow", json!({ "script": "wf.rhai" }));
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(timeless(result["structuredContent"].clone()), cli);
    let (result, _) = mcp.call("plan_council", json!({ "name": "magi", "task": "Ship?" }));
    assert_eq!(result["structuredContent"]["agents"], 3, "{result}");
    let (refused, _) = mcp.call("plan_council", json!({ "name": "nope", "task": "x" }));
    assert_eq!(refused["isError"], true, "{refused}");
    let text = refused["content"][0]["text"].as_str().unwrap_or("");
    assert!(text.starts_with("error: unknown strategy \"nope\""), "{refused}");
    drop(mcp.stdin);
    let _ = common::wait_with_timeout(mcp.child);
}

/// A workflow of one priced openai turn on a fake model server, with `confirm_usd = 0`: every
/// plan of it passes the threshold.
fn past_the_threshold() -> (FakeModel, Env) {
    let server = FakeModel::start(vec![Reply::result(json!({}))]);
    let env = Env::new();
    let runtime =
        format!("[runtimes.s]\nharness = \"openai\"\nmodel = \"gpt-5-mini\"\nbase_url = \"{}/v1\"\n", server.base());
    env.write("awf.toml", &format!("[limits]\nconfirm_usd = 0.0\n{runtime}"));
    env.write("wf.rhai", "ctx.agents.open(#{ key: \"a\", runtime: \"s\" }).turn(#{ prompt: \"x\" }).kind");
    (server, env)
}

#[test]
fn an_mcp_run_past_confirm_usd_is_refused_unless_it_says_yes() {
    let (server, env) = past_the_threshold();
    let mut mcp = RawMcp::start(&env);
    let (refused, _) = mcp.call("run_workflow", json!({ "script": "wf.rhai", "wait_s": 0 }));
    assert_eq!(refused["isError"], true, "{refused}");
    let text = refused["content"][0]["text"].as_str().unwrap_or("");
    assert!(text.contains("run with --yes to go ahead"), "{refused}");
    let (bad, _) = mcp.call("run_workflow", json!({ "script": "wf.rhai", "yes": "sure" }));
    assert_eq!(bad["content"][0]["text"], "error: \"yes\" must be true or false, not \"sure\"", "{bad}");
    let (ran, _) = mcp.call("run_workflow", json!({ "script": "wf.rhai", "yes": true, "wait_s": 15 }));
    assert_eq!(ran["structuredContent"]["status"], "succeeded", "{ran}");
    assert!(!server.bodies().is_empty(), "told yes, the run reached the model");
    drop(mcp.stdin);
    let _ = common::wait_with_timeout(mcp.child);
}

#[test]
fn a_serve_run_past_confirm_usd_is_refused_with_its_plan_unless_it_says_yes() {
    let (model, env) = past_the_threshold();
    let server = common::serve::serve(&env, &[]);
    let (code, refused) = server.json("POST", "/runs", Some(&json!({ "script": "wf.rhai" })));
    assert_eq!(code, 409, "{refused}");
    assert!(refused["error"].as_str().unwrap_or("").contains("send \"yes\": true to go ahead"), "{refused}");
    assert_eq!(refused["plan"]["operations"], 1, "{refused}");
    assert!(model.bodies().is_empty(), "refused, nothing reached the model");
    assert!(!env.runs_root().exists() || env.run_dirs().is_empty(), "refused, nothing was accepted");
    let id = server.start(json!({ "script": "wf.rhai", "yes": true }));
    common::wait_until("the run's end", || env.runs_root().join(&id).join("result.json").exists());
    assert_eq!(common::read_json(&env.runs_root().join(&id).join("result.json"))["status"], "succeeded");
    assert!(!model.bodies().is_empty(), "told yes, the run reached the model");
}
