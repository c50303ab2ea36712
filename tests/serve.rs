//! `awf serve`: the HTTP JSON API over a loopback TCP port, driven by the small hand-written
//! HTTP/1.1 client in `common/serve.rs` (with the token; tests/serve_security.rs tries without).

use crate::common;

use common::serve::serve;
use common::Env;
use serde_json::{json, Value};
use std::time::Duration;

const HANG: &str = r#"fn respond(turn) { #{ hang: true } }"#;
const STUCK: &str = "let a = ctx.agents.open(#{ key: \"stuck\" });\na.ask(\"x\")\n";

#[test]
fn a_workflow_run_succeeds_with_its_value_and_bad_input_is_refused() {
    let env = Env::new();
    env.write(
        "scripts/x.rhai",
        r#"export const META = #{ name: "x", args: #{ type: "object", required: ["n"], properties: #{ n: #{ type: "integer" } } } };
fn run(args) { args.n + 1 }"#,
    );
    env.write("scripts/broken.rhai", "let = ;");
    let s = serve(&env, &[]);
    let id = s.start(json!({ "script": "scripts/x.rhai", "args": { "n": 41 } }));
    let result = s.until(&id, "succeeded");
    assert_eq!(result["value"], 42);
    assert_eq!(result["run_id"], id.as_str());
    assert!(env.runs_root().join(&id).join("result.json").is_file());
    assert_eq!(s.listed_status(&id), "succeeded");

    let (events_status, events) = s.request("GET", &format!("/runs/{id}/events"), None);
    assert_eq!(events_status, 200);
    assert!(events.contains("event: run-started"), "{events}");
    assert!(events.contains("event: run-finished"), "{events}");

    let bad = |body: Value, needle: &str| {
        let (status, v) = s.json("POST", "/runs", Some(&body));
        assert_eq!(status, 400, "{v}");
        let error = v["error"].as_str().expect("an error");
        assert!(error.contains(needle), "{needle:?} not in {error}");
    };
    bad(json!({ "script": "scripts/missing.rhai" }), "cannot read script scripts/missing.rhai");
    bad(json!({ "script": "scripts/broken.rhai" }), "scripts/broken.rhai");
    bad(json!({ "script": "scripts/x.rhai", "args": { "n": "many" } }), "do not match META.args");
    bad(json!({ "strategy": "helper", "task": "x" }), "unknown strategy \"helper\"");
    bad(json!({ "strategy": "magi" }), "needs \"task\"");
    bad(json!({ "nothing": 1 }), "\"script\"");
}

#[test]
fn a_strategy_run_and_the_catalog() {
    let env = Env::new();
    env.with_responder(
        r#"fn respond(turn) {
    #{ answer: #{ choice: "yes", confidence: 0.8, reason: "it holds" }, usage: #{ input_tokens: 10, output_tokens: 5 } }
}"#,
    );
    let s = serve(&env, &[]);
    let (status, catalog) = s.json("GET", "/strategies", None);
    assert_eq!(status, 200);
    let magi = catalog["strategies"].as_array().expect("a list").iter().find(|x| x["name"] == "magi").expect("magi");
    assert!(magi["line"].as_str().expect("a line").starts_with("- magi("), "{magi}");
    assert_eq!(magi["meta"]["name"], "magi");

    let id = s.start(json!({ "strategy": "magi", "task": "Ship on Friday?", "params": {} }));
    let result = s.until(&id, "succeeded");
    assert_eq!(result["value"]["ok"], true, "{result}");
    assert!(result["value"]["output"].as_str().is_some_and(|o| o.contains("yes")), "{result}");
}

#[test]
fn a_run_in_flight_is_stopped_over_the_api() {
    let env = Env::new();
    env.with_responder(HANG);
    env.write("wf.rhai", STUCK);
    let s = serve(&env, &[]);
    let id = s.start(json!({ "script": "wf.rhai" }));
    s.until(&id, "running");
    let (status, v) = s.json("POST", &format!("/runs/{id}/stop"), None);
    assert_eq!(status, 202, "{v}");
    let result = s.until(&id, "cancelled");
    assert_eq!(result["error"], "stopped over the API");
    let (status, _) = s.json("POST", &format!("/runs/{id}/stop"), None);
    assert_eq!(status, 409);
}

#[test]
fn runs_past_max_runs_are_queued_visibly() {
    let env = Env::new();
    env.with_responder(HANG);
    env.write("wf.rhai", STUCK);
    let s = serve(&env, &["--max-runs", "1"]);
    let first = s.start(json!({ "script": "wf.rhai" }));
    s.until(&first, "running");
    let second = s.start(json!({ "script": "wf.rhai" }));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(s.listed_status(&second), "queued");
    assert_eq!(s.listed_status(&first), "running");
    s.json("POST", &format!("/runs/{first}/stop"), None);
    s.until(&first, "cancelled");
    // The freed slot goes to the queued run.
    s.until(&second, "running");
    s.json("POST", &format!("/runs/{second}/stop"), None);
    s.until(&second, "cancelled");
}
