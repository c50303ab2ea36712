//! Prompts promise only what the answer mode can do (issue 26 row 5): an HTTP agent in structured
//! mode (its reply is its answer, no tools) is not offered routes it cannot send on, and the run's
//! log says so once; in tools mode the same route is offered with its tools.

use crate::common;
use crate::common::fake_model;

use common::Env;
use fake_model::{FakeModel, Reply};
use serde_json::{json, Value};

fn setup(answer: &str, script: Vec<Reply>) -> (Env, FakeModel) {
    let server = FakeModel::start(script);
    let env = Env::new();
    env.write(
        "awf.toml",
        &format!(
            "default_runtime = \"m\"\n[runtimes.m]\nharness = \"openai\"\nmodel = \"small\"\nbase_url = \"{}/v1\"\n{answer}\n[runtimes.quiet]\nharness = \"fake\"\n[limits]\nstall_timeout = \"5s\"\n",
            server.base()
        ),
    );
    (env, server)
}

const WORKFLOW: &str = r#"
let writer = ctx.agents.open(#{ key: "writer" });
let critic = ctx.agents.open(#{ key: "critic", runtime: "quiet" });
ctx.messages.allow(#{ between: [writer, critic], purpose: "feedback on the draft" });
let schema = #{ type: "object", properties: #{ text: #{ type: "string" } }, required: ["text"] };
let a = writer.turn(#{ prompt: "Write the essay.", schema: schema });
let b = writer.turn(#{ prompt: "Write it again.", schema: schema });
#{ a: a.kind, b: b.kind }
"#;

fn user_texts(body: &Value) -> String {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .collect()
}

#[test]
fn a_structured_agent_is_not_offered_routes_and_the_log_says_why_once() {
    let essay = || Reply::text("{\"text\": \"Tests keep a project honest.\"}");
    let (env, server) = setup("answer = \"structured\"", vec![essay(), essay()]);
    let v = env.run(WORKFLOW, &[]).expect_code(0).json();
    assert_eq!(v, json!({ "a": "answered", "b": "answered" }));
    for body in server.bodies() {
        let shown = user_texts(&body);
        assert!(!shown.contains("You may message") && !shown.contains("wf_send"), "nothing it cannot do: {shown}");
    }
    let warned: Vec<Value> = env
        .events_of("log")
        .into_iter()
        .filter(|e| e["data"]["text"].as_str().is_some_and(|t| t.starts_with("writer cannot message critic")))
        .collect();
    assert_eq!(warned.len(), 1, "said once for the route, not per turn: {warned:#?}");
    let text = warned[0]["data"]["text"].as_str().unwrap_or_default();
    assert!(text.contains("structured mode") && text.contains("answer = \"tools\""), "{text}");
}

#[test]
fn a_tools_mode_agent_is_offered_the_same_route_with_its_tools() {
    let essay = || Reply::result(json!({ "text": "Tests keep a project honest." }));
    let (env, server) = setup("", vec![essay(), essay()]);
    env.run(WORKFLOW, &[]).expect_code(0);
    let shown = user_texts(&server.bodies()[0]);
    assert!(
        shown.contains("You may message other agents:") && shown.contains("critic: feedback on the draft"),
        "{shown}"
    );
    assert!(shown.contains("wf_send"), "{shown}");
    assert!(env.events_of("log").iter().all(|e| !e["data"]["text"].as_str().unwrap_or("").contains("cannot message")));
}
