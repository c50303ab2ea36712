//! The `openai` and `anthropic` harnesses against a fake model server on 127.0.0.1: tool-call
//! answers, rejections, nudges, rate limits, server errors, slow and dropped streams, sessions that
//! carry their history into the next turn, and structured answers.

use crate::common;
use crate::common::fake_model;

use common::{read_jsonl, Env};
use fake_model::{FakeModel, Reply};
use serde_json::{json, Value};

const APIS: [&str; 2] = ["openai", "anthropic"];

fn setup(api: &str, script: Vec<Reply>, extra: &str) -> (Env, FakeModel) {
    let server = FakeModel::start(script);
    let env = Env::new();
    env.write(
        "awf.toml",
        &format!("{}[limits]\nstall_timeout = \"1s\"\n", fake_model::http_config(api, &server, extra)),
    );
    (env, server)
}

const ONE_TURN: &str = r#"
let a = ctx.agents.open(#{ key: "a", instructions: "You judge." });
let o = a.turn(#{ prompt: "Give a verdict.", schema: #{ type: "object", properties: #{ verdict: #{ type: "string" } }, required: ["verdict"] } });
#{ kind: o.kind, value: o.value, reason: o.reason, input: o.usage.input_tokens, output: o.usage.output_tokens, cost: o.usage.cost_usd }
"#;

#[test]
fn a_tool_call_answers_and_usage_is_priced() {
    for api in APIS {
        let (env, server) = setup(api, vec![Reply::result(json!({ "verdict": "ok" }))], "");
        let out = env.run(ONE_TURN, &[]);
        out.expect_code(0);
        let v = out.json();
        assert_eq!(v["kind"], "answered", "{api}: {v}");
        assert_eq!(v["value"]["verdict"], "ok");
        assert_eq!(v["output"], 20, "{api}: {v}");
        assert!(v["cost"].as_f64().unwrap_or(0.0) > 0.0, "{api}: priced from the built-in table: {v}");
        let turns = read_jsonl(&env.run_dir().join("turns.jsonl"));
        assert_eq!(turns[0]["cost_source"], "priced");
        assert_eq!(turns[0]["harness"], api);
        let body = &server.bodies()[0];
        let tools = body["tools"].as_array().expect("tools offered");
        assert!(tools.iter().any(|t| t.to_string().contains("wf_result")), "{api}: {body}");
        assert!(body.to_string().contains("You judge."), "{api}: the instructions are the system prompt");
        assert!(env.run_dir().join("agents/a/history.json").is_file(), "{api}: history kept in the run folder");
    }
}

#[test]
fn an_invalid_result_is_rejected_and_the_fix_accepted() {
    for api in APIS {
        let (env, server) =
            setup(api, vec![Reply::result(json!({ "verdict": 3 })), Reply::result(json!({ "verdict": "fixed" }))], "");
        let out = env.run(ONE_TURN, &[]);
        out.expect_code(0);
        assert_eq!(out.json()["value"]["verdict"], "fixed", "{api}");
        let second = server.bodies()[1].to_string();
        assert!(
            second.contains("rejected:") && second.contains("/verdict"),
            "{api}: the rejection went back: {second}"
        );
        let turns = read_jsonl(&env.run_dir().join("turns.jsonl"));
        assert_eq!(turns[0]["rejections"], 1);
    }
}

#[test]
fn a_turn_without_a_result_is_nudged() {
    for api in APIS {
        let (env, _server) =
            setup(api, vec![Reply::text("Let me think."), Reply::result(json!({ "verdict": "late" }))], "");
        let out = env.run(ONE_TURN, &[]);
        out.expect_code(0);
        assert_eq!(out.json()["value"]["verdict"], "late", "{api}");
        assert_eq!(env.events_of("op-nudged").len(), 1, "{api}");
    }
}

#[test]
fn a_rate_limit_is_retried_after_its_retry_after() {
    for api in APIS {
        let limited = Reply::Status { code: 429, retry_after: Some(0), body: "{\"error\":\"rate limited\"}".into() };
        let (env, _server) = setup(api, vec![limited, Reply::result(json!({ "verdict": "ok" }))], "");
        let out = env.run(ONE_TURN, &[]);
        out.expect_code(0);
        assert_eq!(out.json()["kind"], "answered", "{api}");
        let retries = env.events_of("http-retry");
        assert_eq!(retries.len(), 1, "{api}");
        assert!(retries[0]["data"]["why"].as_str().unwrap_or("").contains("429"));
    }
}

#[test]
fn a_server_error_fails_the_turn_with_its_message() {
    for api in APIS {
        let (env, _server) = setup(
            api,
            vec![Reply::Status { code: 500, retry_after: None, body: "{\"error\":\"boom inside\"}".into() }],
            "",
        );
        let out = env.run(ONE_TURN, &[]);
        out.expect_code(0);
        let v = out.json();
        assert_eq!(v["kind"], "failed", "{api}: {v}");
        let reason = v["reason"].as_str().unwrap_or("");
        assert!(reason.contains("500") && reason.contains("boom inside"), "{api}: {reason}");
    }
}

#[test]
fn a_slow_stream_is_waited_for_but_a_stalled_one_fails() {
    for api in APIS {
        let slow = Reply::Slow { pause_ms: 200, then: Box::new(Reply::result(json!({ "verdict": "slow" }))) };
        let (env, _server) = setup(api, vec![slow], "");
        let out = env.run(ONE_TURN, &[]);
        out.expect_code(0);
        assert_eq!(out.json()["value"]["verdict"], "slow", "{api}");

        let stalled = Reply::Slow { pause_ms: 2000, then: Box::new(Reply::result(json!({ "verdict": "late" }))) };
        let (env, _server) = setup(api, vec![stalled], "");
        let out = env.run(ONE_TURN, &[]);
        out.expect_code(0);
        let v = out.json();
        assert_eq!(v["kind"], "failed", "{api}: {v}");
        assert!(v["reason"].as_str().unwrap_or("").starts_with("stalled"), "{api}: {v}");
    }
}

#[test]
fn a_dropped_connection_fails_the_turn() {
    for api in APIS {
        let (env, _server) = setup(api, vec![Reply::Drop], "");
        let out = env.run(ONE_TURN, &[]);
        out.expect_code(0);
        let v = out.json();
        assert_eq!(v["kind"], "failed", "{api}: {v}");
        assert!(v["reason"].as_str().unwrap_or("").contains("closed before the reply ended"), "{api}: {v}");
    }
}

#[test]
fn the_second_turn_carries_the_first_in_its_history() {
    for api in APIS {
        let (env, server) = setup(
            api,
            vec![Reply::result(json!({ "value": "first" })), Reply::result(json!({ "value": "second" }))],
            "",
        );
        let out = env.run(r#"let a = ctx.agents.open(#{ key: "a" }); [a.ask("One?"), a.ask("Two?")]"#, &[]);
        out.expect_code(0);
        assert_eq!(out.json(), json!(["first", "second"]), "{api}");
        let second = server.bodies()[1].to_string();
        assert!(second.contains("One?") && second.contains("first") && second.contains("Two?"), "{api}: {second}");
    }
}

#[test]
fn structured_mode_takes_the_reply_as_the_answer_and_refuses_a_cut_one() {
    let (env, server) = setup("openai", vec![Reply::text("{\"verdict\":\"structured\"}")], "answer = \"structured\"");
    let out = env.run(ONE_TURN, &[]);
    out.expect_code(0);
    assert_eq!(out.json()["value"]["verdict"], "structured");
    let body = &server.bodies()[0];
    assert_eq!(body["response_format"]["type"], "json_schema", "{body}");
    assert!(body.get("tools").is_none(), "structured mode offers no tools: {body}");

    let (env, _server) = setup("openai", vec![Reply::Cut("{\"verdict\":\"tru".into())], "answer = \"structured\"");
    let v = env.run(ONE_TURN, &[]).json();
    assert_eq!(v["kind"], "failed", "{v}");
    assert!(v["reason"].as_str().unwrap_or("").contains("finish_reason: length"), "{v}");
}

#[test]
fn a_remote_api_without_a_key_is_refused_naming_the_variable() {
    let env = Env::new();
    env.write("awf.toml", "[runtimes.m]\nharness = \"anthropic\"\napi_key_env = \"AWF_TEST_NO_SUCH_KEY\"\n");
    let out = env.run(r#"ctx.agents.open(#{ key: "a", runtime: "m" })"#, &[]);
    out.expect_code(2);
    out.stderr_has("$AWF_TEST_NO_SUCH_KEY");
    out.stderr_has("https://api.anthropic.com");
}

#[test]
fn the_shared_two_turn_workflow_resumes_and_records_usage_and_cost() {
    for api in APIS {
        let (env, server) = setup(
            api,
            vec![Reply::result(json!({ "verdict": "one" })), Reply::result(json!({ "verdict": "two" }))],
            "",
        );
        let out = env.run(&common::two_turn_workflow(), &[]);
        out.expect_code(0);
        let v = out.json();
        assert_eq!((v["one"].as_str(), v["two"].as_str()), (Some("answered"), Some("answered")), "{api}: {v}");
        assert_eq!((v["v1"]["verdict"].as_str(), v["v2"]["verdict"].as_str()), (Some("one"), Some("two")), "{api}");
        for u in [&v["u1"], &v["u2"]] {
            assert!(
                u["input_tokens"].as_u64().unwrap_or(0) > 0 && u["output_tokens"].as_u64().unwrap_or(0) > 0,
                "{api}: {v}"
            );
            assert!(u["cost_usd"].as_f64().unwrap_or(0.0) > 0.0, "{api}: {v}");
        }
        let second = server.bodies()[1].to_string();
        assert!(
            second.contains("Give a first verdict.") && second.contains("Give a second verdict."),
            "{api}: {second}"
        );
        if api == "openai" {
            assert_eq!(server.bodies()[1]["reasoning_effort"], "high", "set() reached the request");
        }
    }
}

#[test]
fn doctor_reports_each_http_runtime_key_and_server() {
    let server = FakeModel::start(vec![]);
    let env = Env::new();
    env.write(
        "awf.toml",
        &format!(
            "[runtimes.up]\nharness = \"openai\"\nbase_url = \"{}/v1\"\n[runtimes.keyless]\nharness = \"anthropic\"\napi_key_env = \"AWF_TEST_NO_SUCH_KEY\"\n[runtimes.down]\nharness = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n",
            server.base()
        ),
    );
    let out = env.awf(&["doctor", "--json"]);
    out.expect_code(1);
    let checks: Vec<Value> = serde_json::from_str(&out.stdout).expect("doctor --json");
    let check = |name: &str| {
        checks.iter().find(|c| c["name"] == name).cloned().unwrap_or_else(|| panic!("no {name}: {checks:?}"))
    };
    assert_eq!(check("runtime: up")["ok"], true);
    let keyless = check("runtime: keyless");
    assert_eq!(keyless["ok"], false);
    assert!(keyless["detail"].as_str().unwrap_or("").contains("$AWF_TEST_NO_SUCH_KEY"), "{keyless}");
    let down = check("runtime: down");
    assert_eq!(down["ok"], false);
    assert!(down["detail"].as_str().unwrap_or("").contains("unreachable"), "{down}");
}

#[test]
fn a_message_operation_on_an_http_agent_is_priced() {
    let (env, server) = setup("openai", vec![Reply::text("Noted.")], "");
    env.write(
        "responder.rhai",
        r#"fn respond(turn) { if turn.replies.len() == 0 { return #{ send: [#{ to: "b", text: "hello b" }] }; } () }"#,
    );
    let script = r#"
        let a = ctx.agents.open(#{ key: "a", runtime: #{ harness: "fake", responder: "responder.rhai" } });
        let b = ctx.agents.open(#{ key: "b" });
        ctx.stage("talk", || {
            ctx.messages.allow(#{ from: a, to: b, purpose: "news" });
            a.ask("Tell b.");
            ()
        });
        "done"
    "#;
    env.run(script, &[]).expect_code(0);
    let turns = read_jsonl(&env.run_dir().join("turns.jsonl"));
    let m = turns.iter().find(|t| t["op_id"] == "b#m1").unwrap_or_else(|| panic!("no message op: {turns:?}"));
    assert_eq!(m["kind"], "message");
    assert_eq!(m["cost_source"], "priced", "{m}");
    assert!(m["cost_usd"].as_f64().unwrap_or(0.0) > 0.0, "{m}");
    assert!(server.bodies()[0].to_string().contains("hello b"), "the message reached the model");
}

#[test]
fn a_compaction_is_an_operation_billed_like_a_turn() {
    for api in APIS {
        let (env, _server) = setup(api, vec![Reply::text("We agreed the verdict is ok.")], "");
        let script = r#"
            let a = ctx.agents.open(#{ key: "a" });
            let summary = a.compact(#{ prompt: "Summarise." });
            #{ summary: summary, usage: a.usage }
        "#;
        let out = env.run(script, &[]);
        out.expect_code(0);
        let v = out.json();
        assert_eq!(v["summary"], "We agreed the verdict is ok.", "{api}: {v}");
        let turns = read_jsonl(&env.run_dir().join("turns.jsonl"));
        assert_eq!(turns.len(), 1, "{api}: the compaction left its turns.jsonl line: {turns:?}");
        assert_eq!(turns[0]["kind"], "compact");
        assert!(turns[0]["tokens"].as_u64().unwrap_or(0) > 0, "{api}: its tokens are counted: {turns:?}");
        assert!(turns[0]["cost_usd"].as_f64().unwrap_or(0.0) > 0.0, "{api}: and priced: {turns:?}");
        assert_eq!(v["usage"]["operations"], 1, "{api}: {v}");
        assert_eq!(env.events_of("agent-compacted").len(), 1);
    }
}

/// A server that accepts connections and never answers: each try ends at `request_timeout`, every
/// retry is shown on stderr as it happens (try N of M, the wait), and the failure lists the tries
/// (regression: with the stall timeout's default the run waited 50 minutes in silence).
#[test]
fn a_server_that_never_answers_is_reported_try_by_try_not_waited_on() {
    let port = fake_model::silent_server();
    let env = Env::new();
    env.write("awf.toml", &fake_model::openai_on(port, "request_timeout = \"200ms\"\n"));
    let out = env.run("let a = ctx.agents.open(#{ key: \"q\" }); let o = a.run(#{ prompt: \"hi\" }); o.reason", &[]);
    out.expect_code(0);
    for n in 2..=5 {
        out.stderr_has(&format!("try {n} of 5"));
    }
    out.stderr_has("agent q: no response from");
    assert!(out.stdout.contains("(tried 5 times: 1) no response from"), "{}", out.stdout);
    assert!(out.stdout.contains("request_timeout"), "{}", out.stdout);
    let bad = Env::new();
    bad.write("awf.toml", "default_runtime = \"m\"\n[runtimes.m]\nharness = \"openai\"\nmodel = \"x\"\nbase_url = \"http://127.0.0.1:9/v1\"\nidle_timeout = \"soon\"\n");
    let out = bad.run("ctx.agents.open(#{ key: \"q\" }); 1", &[]);
    assert_ne!(out.code, Some(0));
    out.stderr_has("agent q: idle_timeout: `soon` is not a duration");
}

/// A request queued on a busy server (accepted, no first byte yet) is shown waiting as it waits,
/// each quarter of its first-byte bound, and its waits add up to the stall timeout at most.
#[test]
fn a_request_waiting_for_its_first_byte_is_shown_waiting() {
    let port = fake_model::silent_server();
    let env = Env::new();
    env.write("awf.toml", &fake_model::openai_on(port, "request_timeout = \"2s\"\n[limits]\nstall_timeout = \"3s\"\n"));
    let out = env.run("let a = ctx.agents.open(#{ key: \"q\" }); let o = a.run(#{ prompt: \"hi\" }); o.reason", &[]);
    out.expect_code(0);
    out.stderr_has(&format!("agent q: waiting on http://127.0.0.1:{port}/v1/chat/completions: no first byte for"));
    out.stderr_has("(a busy server queues requests; given up after 2s)");
    let waiting = env.events_of("http-waiting");
    assert!(waiting.len() >= 3, "said each half second of the first 2 s try: {waiting:?}");
    assert_eq!(waiting[0]["data"]["agent"], "q");
    assert!(waiting.iter().all(|e| e["data"]["limit_ms"] == 2000), "{waiting:?}");
    assert!(out.stdout.contains("reached the stall timeout (3s)"), "{}", out.stdout);
}
