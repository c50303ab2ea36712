//! How HTTP agents are asked for answers and how their answers are taken, against a fake model
//! server on 127.0.0.1: instructions in the terms of the harness's answer mode (no launcher command
//! for a model), answers written as text in tools mode, a model that never calls tools, and
//! rejection loops bounded by the nudge limit and by repeats (issue 18, items 1 to 3).

use crate::common;
use crate::common::fake_model;

use common::Env;
use fake_model::{FakeModel, Reply};
use serde_json::{json, Value};

fn setup(api: &str, script: Vec<Reply>, extra: &str) -> (Env, FakeModel) {
    let server = FakeModel::start(script);
    let env = Env::new();
    let base = if api == "openai" { format!("{}/v1", server.base()) } else { server.base() };
    env.write(
        "awf.toml",
        &format!("default_runtime = \"m\"\n[runtimes.m]\nharness = \"{api}\"\nmodel = \"small\"\nbase_url = \"{base}\"\n{extra}\n[limits]\nstall_timeout = \"2s\"\n"),
    );
    (env, server)
}

const STRUCTURED: &str = "answer = \"structured\"";

fn one_turn(nudge: &str) -> String {
    format!(
        r#"
let a = ctx.agents.open(#{{ key: "a" }});
let o = a.turn(#{{ prompt: "Give a verdict.", schema: #{{ type: "object", properties: #{{ verdict: #{{ type: "string" }} }}, required: ["verdict"] }}{nudge} }});
#{{ kind: o.kind, value: o.value, reason: o.reason, tokens: o.usage.input_tokens + o.usage.output_tokens }}
"#
    )
}

/// The texts of a request's messages of `role`, in order.
fn texts(body: &Value, role: &str) -> Vec<String> {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    messages.iter().filter(|m| m["role"] == role).map(|m| m["content"].as_str().unwrap_or("").to_string()).collect()
}

fn submissions(env: &Env) -> Vec<String> {
    env.events_of("op-submission").iter().map(|e| e["data"]["verdict"].as_str().unwrap_or("").to_string()).collect()
}

#[test]
fn tools_mode_is_told_to_call_wf_result_in_the_prompt_the_rejection_and_the_nudge() {
    let (env, server) = setup(
        "openai",
        vec![
            Reply::result(json!({ "verdict": 3 })),
            Reply::text("Let me think."),
            Reply::result(json!({ "verdict": "ok" })),
        ],
        "",
    );
    let v = env.run(&one_turn(""), &[]).json();
    assert_eq!(v["value"]["verdict"], "ok", "{v}");
    let bodies = server.bodies();
    let prompt = &texts(&bodies[0], "user")[0];
    assert!(prompt.contains("call the `wf_result` tool with the answer as its arguments"), "{prompt}");
    let all = json!(bodies).to_string();
    assert!(!all.contains("WF_JSON") && !all.contains("/wf result"), "no launcher command for a model: {all}");
    let rejection = texts(&bodies[1], "tool").pop().unwrap_or_default();
    assert!(
        rejection.starts_with("rejected:") && rejection.ends_with("call the `wf_result` tool again."),
        "{rejection}"
    );
    let nudge = texts(&bodies[2], "user").pop().unwrap_or_default();
    assert!(nudge.starts_with("You finished without reporting") && nudge.contains("`wf_result` tool"), "{nudge}");
    assert_eq!(submissions(&env), ["rejected", "accepted"]);
}

#[test]
fn structured_mode_is_told_to_reply_with_only_the_json_and_shown_the_schema_it_is_held_to() {
    let (env, server) =
        setup("openai", vec![Reply::text("{\"verdict\": 3}"), Reply::text("{\"verdict\": \"ok\"}")], STRUCTURED);
    let v = env.run(&one_turn(""), &[]).json();
    assert_eq!(v["value"]["verdict"], "ok", "{v}");
    let bodies = server.bodies();
    assert!(texts(&bodies[0], "user")[0].contains("Reply with only the JSON answer"), "{}", bodies[0]);
    let rejection = texts(&bodies[1], "user").pop().unwrap_or_default();
    assert!(rejection.ends_with("Reply again with only the corrected JSON."), "{rejection}");
    assert!(!json!(bodies).to_string().contains("WF_JSON"));
    assert_eq!(submissions(&env), ["rejected", "accepted"], "structured replies are op-submission events");

    // A schema that is no object is sent and shown as it is: no `{value}` wrapper to contradict it.
    let (env, server) = setup("openai", vec![Reply::text("[\"a\", \"b\"]")], STRUCTURED);
    let out = env
        .run(r#"ctx.agents.open(#{ key: "a" }).ask("List two.", #{ type: "array", items: #{ type: "string" } })"#, &[]);
    assert_eq!(out.expect_code(0).json(), json!(["a", "b"]));
    let body = &server.bodies()[0];
    assert_eq!(
        body["response_format"]["json_schema"]["schema"],
        json!({ "type": "array", "items": { "type": "string" } })
    );
    assert!(!texts(body, "user")[0].contains("value"), "{body}");
}

#[test]
fn an_answer_written_as_text_in_tools_mode_is_taken_and_recorded() {
    let (env, server) =
        setup("openai", vec![Reply::text("My verdict:\n```json\n{\"verdict\": \"fine\"}\n```\nThat is all.")], "");
    let v = env.run(&one_turn(""), &[]).json();
    assert_eq!((v["kind"].as_str(), v["value"]["verdict"].as_str()), (Some("answered"), Some("fine")), "{v}");
    assert_eq!(server.bodies().len(), 1, "no nudge");
    assert_eq!(submissions(&env), ["accepted"]);
}

#[test]
fn a_model_that_never_calls_tools_fails_saying_so_and_naming_structured_mode() {
    let said = || Reply::text("The answer to this question is: Yes");
    let (env, _server) = setup("openai", vec![said(), said(), said()], "");
    let v = env.run(&one_turn(""), &[]).json();
    assert_eq!(v["kind"], "failed", "{v}");
    let reason = v["reason"].as_str().unwrap_or("");
    assert!(reason.contains("no tool call in 3 replies") && reason.contains("answer = \"structured\""), "{reason}");
}

#[test]
fn the_same_rejected_answer_is_not_sent_back_a_third_time() {
    let (env, server) = setup("openai", vec![Reply::text("{\"verdict\": 3}"); 10], STRUCTURED);
    let v = env.run(&one_turn(", nudge: #{ max: 9 }"), &[]).json();
    assert_eq!(v["kind"], "unanswered", "{v}");
    assert_eq!(server.bodies().len(), 2, "asked twice, then no more");
    assert_eq!(submissions(&env), ["rejected", "rejected"]);
    let reason = v["reason"].as_str().unwrap_or("");
    assert!(reason.contains("the same answer was rejected 2 times") && reason.contains("/verdict"), "{reason}");
}

#[test]
fn rejections_count_against_the_nudge_limit() {
    let bad = |n: i64| Reply::result(json!({ "verdict": n }));
    let (env, server) = setup("openai", (1..10).map(bad).collect(), "");
    let v = env.run(&one_turn(""), &[]).json();
    assert_eq!(v["kind"], "unanswered", "{v}");
    assert_eq!(server.bodies().len(), 3, "the first answer and two more: the nudge limit is 2");
    assert_eq!(submissions(&env), ["rejected"; 3]);
    let reason = v["reason"].as_str().unwrap_or("");
    assert!(reason.contains("3 rejected answers") && reason.contains("at /verdict: 3 is not of type"), "{reason}");
}

#[test]
fn a_request_failing_after_a_rejection_is_reported_by_the_rejection() {
    let too_long = r#"{"error":{"code":400,"message":"request (2256 tokens) exceeds the available context size (2048 tokens), try increasing it","type":"exceed_context_size_error"}}"#;
    let (env, _server) = setup(
        "openai",
        vec![Reply::text("{\"verdict\": 3}"), Reply::Status { code: 400, retry_after: None, body: too_long.into() }],
        STRUCTURED,
    );
    let v = env.run(&one_turn(""), &[]).json();
    assert_eq!(v["kind"], "failed", "{v}");
    let reason = v["reason"].as_str().unwrap_or("");
    assert!(reason.starts_with("the answer was rejected (at /verdict: 3 is not of type"), "{reason}");
    assert!(
        reason.contains(
            "the conversation no longer fits the model's context: the server counted 2256 tokens for the prompt against its context of 2048"
        ),
        "{reason}"
    );
}

#[test]
fn in_tools_mode_a_reply_cut_at_max_tokens_is_nudged_not_failed() {
    let rambling = Reply::with_usage(100, 200, Reply::Cut("Let me think about this at great length".into()));
    let (env, server) = setup("openai", vec![rambling, Reply::result(json!({ "verdict": "ok" }))], "max_tokens = 200");
    let v = env.run(&one_turn(""), &[]).json();
    assert_eq!((v["kind"].as_str(), v["value"]["verdict"].as_str()), (Some("answered"), Some("ok")), "{v}");
    assert_eq!(server.bodies().len(), 2, "the cut reply was followed by a nudge");
}
