//! The one control dispatcher: an HTTP agent's `wf_*` tool calls and structured replies leave the
//! same events as a program agent's frames on its socket (`op-submission` with its verdict,
//! `control-refused`), against the fake model server on 127.0.0.1.

use crate::common;
use crate::common::fake_model;

use common::{agent_fixture, Env};
use fake_model::{FakeModel, Reply};
use serde_json::{json, Value};
use std::collections::BTreeSet;

const APIS: [&str; 2] = ["openai", "anthropic"];

fn setup(api: &str, script: Vec<Reply>, extra: &str) -> (Env, FakeModel) {
    let server = FakeModel::start(script);
    let env = Env::new();
    env.write("awf.toml", &fake_model::http_config(api, &server, extra));
    (env, server)
}

const ONE_TURN: &str = r#"
let a = ctx.agents.open(#{ key: "a" });
let o = a.turn(#{ prompt: "Give a verdict.", schema: #{ type: "object", properties: #{ verdict: #{ type: "string" } }, required: ["verdict"] } });
#{ kind: o.kind, value: o.value }
"#;

fn data(events: &[Value]) -> Vec<&Value> {
    events.iter().map(|e| &e["data"]).collect()
}

#[test]
fn an_http_agents_rejected_then_accepted_answer_leaves_two_submissions() {
    for api in APIS {
        let script = vec![Reply::result(json!({ "verdict": 3 })), Reply::result(json!({ "verdict": "fixed" }))];
        let (env, _server) = setup(api, script, "");
        let out = env.run(ONE_TURN, &[]);
        out.expect_code(0);
        assert_eq!(out.json()["value"]["verdict"], "fixed", "{api}");
        let subs = env.events_of("op-submission");
        let subs = data(&subs);
        assert_eq!(subs.len(), 2, "{api}: {subs:?}");
        assert_eq!((&subs[0]["accepted"], &subs[0]["verdict"]), (&json!(false), &json!("rejected")), "{api}");
        assert_eq!((&subs[1]["accepted"], &subs[1]["verdict"]), (&json!(true), &json!("accepted")), "{api}");
        assert!(subs.iter().all(|s| s["agent"] == "a" && s["op_id"] == "a#1"), "{api}: {subs:?}");
    }
}

#[test]
fn a_structured_reply_is_an_op_submission() {
    let script = vec![Reply::text("{\"verdict\": 3}"), Reply::text("{\"verdict\":\"structured\"}")];
    let (env, server) = setup("openai", script, "answer = \"structured\"");
    let out = env.run(ONE_TURN, &[]);
    out.expect_code(0);
    assert_eq!(out.json()["value"]["verdict"], "structured");
    assert!(server.bodies()[1].to_string().contains("rejected:"), "the rejection went back");
    let subs = env.events_of("op-submission");
    let verdicts: Vec<&Value> = data(&subs).iter().map(|s| &s["verdict"]).collect();
    assert_eq!(verdicts, [&json!("rejected"), &json!("accepted")], "{subs:?}");
}

#[test]
fn a_refused_wf_send_is_recorded_as_control_refused() {
    for api in APIS {
        let script = vec![
            Reply::tool("wf_send", json!({ "to": "nobody", "text": "hello" })),
            Reply::result(json!({ "verdict": "alone" })),
        ];
        let (env, server) = setup(api, script, "");
        let out = env.run(ONE_TURN, &[]);
        out.expect_code(0);
        assert_eq!(out.json()["value"]["verdict"], "alone", "{api}");
        let told = server.bodies()[1].to_string();
        assert!(told.contains("refused: no route from a to nobody"), "{api}: the model was told: {told}");
        let refused = env.events_of("control-refused");
        let refused = data(&refused);
        assert_eq!(refused.len(), 1, "{api}: {refused:?}");
        assert_eq!(refused[0]["agent"], "a");
        assert_eq!(refused[0]["frame"], json!({ "cmd": "send", "to": "nobody" }), "{api}");
        assert!(refused[0]["why"].as_str().unwrap_or("").starts_with("refused: no route"), "{api}: {refused:?}");
    }
}

#[test]
fn the_socket_and_the_tools_record_submissions_alike() {
    let keys = |env: &Env| -> Vec<BTreeSet<String>> {
        let subs = env.events_of("op-submission");
        data(&subs).iter().map(|s| s.as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default()).collect()
    };
    let (http, _server) = setup("openai", vec![Reply::result(json!({ "verdict": "ok" }))], "");
    http.run(ONE_TURN, &[]).expect_code(0);
    let program = Env::new();
    let answer = agent_fixture("answer.sh");
    let script = ONE_TURN.replace(
        r#"#{ key: "a" }"#,
        &format!(r#"#{{ key: "a", runtime: #{{ harness: "command", command: ["sh", "{answer}"] }} }}"#),
    );
    program.run(&script, &[]).expect_code(0);
    let (from_tools, from_socket) = (keys(&http), keys(&program));
    assert_eq!(from_tools.len(), 1, "{from_tools:?}");
    assert_eq!(from_tools, from_socket);
}
