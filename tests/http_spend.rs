//! What HTTP agents spend and how much room they have, against fake model servers on 127.0.0.1:
//! requests sized to a runtime's declared context, a conversation that no longer fits, a reply cut
//! off by the context rather than by `max_tokens`, operations cancelled mid-turn still billed, every
//! agent's history kept, and `awf doctor` reading a server's context and (`--deep`) whether its
//! model calls tools (issue 18, items 2, 4 and 5).

use crate::common;
use crate::common::fake_model;

use common::{read_json, Env};
use fake_model::{FakeModel, Reply};
use serde_json::{json, Value};

fn runtime(name: &str, server: &FakeModel, extra: &str) -> String {
    format!(
        "[runtimes.{name}]\nharness = \"openai\"\nmodel = \"small\"\nbase_url = \"{}/v1\"\n{extra}\n",
        server.base()
    )
}

fn setup(script: Vec<Reply>, extra: &str) -> (Env, FakeModel) {
    let server = FakeModel::start(script);
    let env = Env::new();
    env.write(
        "awf.toml",
        &format!("default_runtime = \"m\"\n{}[limits]\nstall_timeout = \"2s\"\n", runtime("m", &server, extra)),
    );
    (env, server)
}

const VERDICT: &str = r#"#{ type: "object", properties: #{ verdict: #{ type: "string" } }, required: ["verdict"] }"#;

fn ask_twice() -> String {
    format!(
        r#"
let a = ctx.agents.open(#{{ key: "a" }});
let first = a.turn(#{{ prompt: "Give a verdict.", schema: {VERDICT} }});
let second = a.turn(#{{ prompt: "Give another verdict, with your reasons weighed again in full.", schema: {VERDICT} }});
#{{ first: first.kind, second: second.kind, reason: second.reason }}
"#
    )
}

#[test]
fn requests_are_sized_to_the_declared_context_and_fail_when_it_is_full() {
    let (env, server) =
        setup(vec![Reply::with_usage(460, 20, Reply::result(json!({ "verdict": "ok" })))], "context_tokens = 500");
    let v = env.run(&ask_twice(), &[]).json();
    assert_eq!(v["first"], "answered", "{v}");
    let max = server.bodies()[0]["max_tokens"].as_u64().unwrap_or(0);
    assert!(max > 0 && max < 500, "max_tokens 4096 clipped to the room left: {max}");
    assert_eq!(v["second"], "failed", "{v}");
    let reason = v["reason"].as_str().unwrap_or("");
    assert!(
        reason.starts_with("the conversation no longer fits the model's context: the prompt is ")
            && reason.contains("context_tokens = 500, which leaves 0 tokens for the reply (max_tokens 4096"),
        "{reason}"
    );
    assert_eq!(server.bodies().len(), 1, "a conversation that does not fit is not sent");
}

#[test]
fn a_turn_past_80_percent_of_the_context_summarises_the_history_first() {
    let (env, server) = setup(
        vec![
            Reply::with_usage(850, 20, Reply::result(json!({ "verdict": "ok" }))),
            Reply::with_usage(880, 40, Reply::text("We weighed the release and said ok.")),
            Reply::with_usage(120, 10, Reply::result(json!({ "verdict": "still ok" }))),
        ],
        "context_tokens = 1000",
    );
    let v = env.run(&ask_twice(), &[]).json();
    assert_eq!((v["first"].as_str(), v["second"].as_str()), (Some("answered"), Some("answered")), "{v}");
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 3, "the first turn, the summary, the second turn");
    let text = |b: &Value| b["messages"].to_string();
    // The summary request: the first turn's conversation and the summary prompt, no tools.
    assert!(text(&bodies[1]).contains("Give a verdict.") && text(&bodies[1]).contains("outgrow your context"));
    assert!(bodies[1]["tools"].as_array().is_none_or(|t| t.is_empty()), "{}", bodies[1]);
    // The second turn goes on from the summary: the first prompt is gone.
    let second = text(&bodies[2]);
    assert!(
        second.contains("We weighed the release and said ok.") && second.contains("Give another verdict"),
        "{second}"
    );
    assert!(!second.contains("Give a verdict."), "{second}");
    let compacted = env.events_of("context-compacted");
    assert_eq!(compacted.len(), 1, "{compacted:?}");
    let d = &compacted[0]["data"];
    assert!(d["tokens"].as_u64().is_some_and(|t| t > 800) && d["context"] == 1000, "{d}");
    assert_eq!(d["summary_chars"], "We weighed the release and said ok.".len());
    // The summary is billed to the turn that needed it.
    let turns = env.turns();
    assert_eq!(turns[1]["input_tokens"], 880 + 120, "{}", turns[1]);
    assert_eq!(turns[1]["output_tokens"], 40 + 10, "{}", turns[1]);
}

#[test]
fn auto_compact_false_leaves_the_history_whole() {
    let (env, server) = setup(
        vec![
            Reply::with_usage(850, 20, Reply::result(json!({ "verdict": "ok" }))),
            Reply::with_usage(900, 10, Reply::result(json!({ "verdict": "still ok" }))),
        ],
        "context_tokens = 1100\nauto_compact = false",
    );
    let v = env.run(&ask_twice(), &[]).json();
    assert_eq!(v["second"], "answered", "{v}");
    assert_eq!(server.bodies().len(), 2);
    assert!(server.bodies()[1]["messages"].to_string().contains("Give a verdict."));
    assert!(env.events_of("context-compacted").is_empty());
}

#[test]
fn a_reply_cut_below_max_tokens_is_reported_as_the_context_limit() {
    let cut = |out: u64| Reply::with_usage(1990, out, Reply::Cut("{\"verdict\": \"tr".into()));
    let one = format!(r#"ctx.agents.open(#{{ key: "a" }}).turn(#{{ prompt: "Verdict?", schema: {VERDICT} }}).reason"#);
    let (env, _server) = setup(vec![cut(58)], "answer = \"structured\"\nmax_tokens = 200");
    let reason = env.run(&one, &[]).stdout;
    assert!(
        reason.contains("cut off by the model's context after 58 tokens (finish_reason: length, below max_tokens 200)"),
        "{reason}"
    );
    let (env, _server) = setup(vec![cut(200)], "answer = \"structured\"\nmax_tokens = 200");
    let reason = env.run(&one, &[]).stdout;
    assert!(reason.contains("cut off at max_tokens (200 tokens; finish_reason: length)"), "{reason}");
}

#[test]
fn an_operation_cancelled_mid_turn_is_billed_for_what_its_requests_spent() {
    // a's first reply ends (no answer: a nudge follows), its second never does; b fails once a's
    // second request is in, and the failure cancels a.
    let a = FakeModel::start(vec![Reply::text("Let me think."), Reply::Hang]);
    let failing = Reply::Status { code: 500, retry_after: None, body: "{\"error\":\"boom\"}".into() };
    let b = FakeModel::start(vec![Reply::After { requests: a.requests.clone(), n: 2, then: Box::new(failing) }]);
    let env = Env::new();
    env.write(
        "awf.toml",
        &format!("{}{}[limits]\nstall_timeout = \"20s\"\n", runtime("ra", &a, ""), runtime("rb", &b, "")),
    );
    let script = r#"
        ctx.agents.open(#{ key: "idle", runtime: "ra" });
        try {
            ctx.parallel([0, 1], |i| {
                if i == 0 { ctx.agents.open(#{ key: "a", runtime: "ra" }).ask("Think.") }
                else { ctx.agents.open(#{ key: "b", runtime: "rb" }).ask("Fail.") }
            });
        } catch (e) {}
        "done"
    "#;
    env.run(script, &[]).expect_code(0);
    let a_op = env.turn("a#1");
    assert_eq!(a_op["outcome"], "cancelled", "{a_op}");
    let tokens = a_op["tokens"].as_u64().unwrap_or(0);
    assert!(tokens > 120, "the finished request (120 tokens) and the cut one are billed: {a_op}");
    for agent in ["a", "b", "idle"] {
        let history = read_json(&env.run_dir().join(format!("agents/{agent}/history.json")));
        assert!(history["messages"].is_array(), "{agent} keeps its history.json");
    }
    let a_history = read_json(&env.run_dir().join("agents/a/history.json")).to_string();
    assert!(a_history.contains("Let me think.") && a_history.contains("You finished without reporting"), "{a_history}");
}

fn doctor(env: &Env, args: &[&str]) -> Vec<Value> {
    let out = env.awf(args);
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("doctor --json ({e}): {}", out.stdout))
}

fn check(checks: &[Value], name: &str) -> Value {
    checks.iter().find(|c| c["name"] == name).cloned().unwrap_or_else(|| panic!("no {name}: {checks:?}"))
}

#[test]
fn doctor_reads_the_servers_context_and_deep_asks_whether_the_model_calls_tools() {
    let llama = FakeModel::start(vec![Reply::text("I would rather not.")]);
    llama.serve_doc("/props", json!({ "default_generation_settings": { "n_ctx": 2048 } }));
    let vllm = FakeModel::start(vec![Reply::result(json!({ "ok": true }))]);
    vllm.serve_doc("/v1/models", json!({ "data": [{ "id": "small", "max_model_len": 8192 }] }));
    let ollama = FakeModel::start(vec![]);
    ollama.serve_doc(
        "/api/show",
        json!({ "parameters": "stop \"<|im_end|>\"\nnum_ctx 8192", "model_info": { "llama.context_length": 32768 } }),
    );
    let env = Env::new();
    env.write(
        "awf.toml",
        &format!(
            "{}{}{}",
            runtime("llama", &llama, "context_tokens = 4096"),
            runtime("vllm", &vllm, ""),
            runtime("ollama", &ollama, "context_tokens = 4096")
        ),
    );
    let plain = doctor(&env, &["doctor", "--json"]);
    let c = check(&plain, "runtime: llama: context");
    assert_eq!(c["ok"], false, "{c}");
    assert!(
        c["detail"]
            .as_str()
            .unwrap_or("")
            .contains("the server gives 2048 tokens (llama-server /props): set context_tokens = 2048"),
        "{c}"
    );
    let c = check(&plain, "runtime: vllm: context");
    assert!(c["detail"].as_str().unwrap_or("").contains("declare context_tokens = 8192"), "{c}");
    let c = check(&plain, "runtime: ollama: context");
    assert_eq!(c["ok"], true, "{c}");
    assert!(
        c["detail"]
            .as_str()
            .unwrap_or("")
            .contains("context_tokens = 4096; the server gives 8192 (Ollama /api/show (num_ctx))"),
        "{c}"
    );
    // Without --deep no request is sent, and tools mode is said to be unchecked, not ok.
    for alias in ["llama", "vllm", "ollama"] {
        let c = check(&plain, &format!("runtime: {alias}: tools"));
        assert_eq!((&c["ok"], &c["unchecked"]), (&json!(false), &json!(true)), "{c}");
        assert!(c["detail"].as_str().unwrap_or("").contains("not checked: `awf doctor --deep` asks it"), "{c}");
    }
    assert!(llama.bodies().is_empty() && vllm.bodies().is_empty());
    let text = env.awf(&["doctor"]);
    assert!(text.stdout.lines().any(|l| l.starts_with("?") && l.contains("runtime: llama: tools")), "{}", text.stdout);

    let deep = doctor(&env, &["doctor", "--json", "--deep"]);
    let tools = check(&deep, "runtime: llama: tools");
    assert_eq!(tools["ok"], false, "{tools}");
    assert!(
        tools["detail"].as_str().unwrap_or("").contains("made no tool call")
            && tools["detail"].as_str().unwrap_or("").contains("answer = \"structured\""),
        "{tools}"
    );
    assert_eq!(check(&deep, "runtime: vllm: tools")["ok"], true);
    assert_eq!(llama.bodies().len(), 1, "one request per runtime");
}

#[test]
fn a_context_of_zero_tokens_is_refused_naming_the_agent() {
    let (env, server) = setup(vec![], "context_tokens = 0");
    let out = env.run(r#"ctx.agents.open(#{ key: "a" }).ask("Hi.")"#, &[]);
    out.expect_code(2).stderr_has("agent a: context_tokens must be more than 0");
    assert!(server.bodies().is_empty());
}

#[test]
fn a_refused_connection_fails_at_once_with_the_systems_reason() {
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let env = Env::new();
    env.write(
        "awf.toml",
        &format!(
            "default_runtime = \"m\"\n[runtimes.m]\nharness = \"openai\"\nmodel = \"small\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\n"
        ),
    );
    let out = env.run(r#"ctx.agents.open(#{ key: "a" }).turn(#{ prompt: "Hi" }).reason"#, &[]);
    out.expect_code(0);
    assert!(out.stdout.contains("Connection refused"), "the OS's reason is kept: {}", out.stdout);
    assert!(
        env.events_of("http-retry").is_empty(),
        "a refused connection is not retried: {:?}",
        env.events_of("http-retry")
    );
}
