//! Traces over OTLP/HTTP: a receiver started by the test decodes the protobuf and checks the span
//! tree (run, stage, parallel group, agent operations) and its GenAI attributes; content only
//! when asked for; a receiver that is down or hangs never fails or holds up a run.

use crate::common;

use common::Env;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const FAN: &str = r#"
ctx.stage("plan", #{ result: #{ type: "array" } }, || {
    ctx.parallel(["x", "y"], |k| {
        let a = ctx.agents.open(#{ key: k });
        a.ask("think about " + k)
    }, #{ label: "fan" })
})
"#;

/// An OTLP/HTTP receiver on a loopback port: every span it was sent.
struct Receiver {
    port: u16,
    spans: Arc<Mutex<Vec<Span>>>,
}

fn receiver(answer: bool) -> Receiver {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let spans = Arc::new(Mutex::new(Vec::new()));
    let keep = spans.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let spans = keep.clone();
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(20)));
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let mut stream = stream;
                loop {
                    let mut length = 0usize;
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    loop {
                        let mut h = String::new();
                        if reader.read_line(&mut h).unwrap_or(0) == 0 {
                            return;
                        }
                        if h.trim().is_empty() {
                            break;
                        }
                        if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    if !answer {
                        // A receiver that hangs: it never answers.
                        std::thread::sleep(Duration::from_secs(30));
                        return;
                    }
                    let req = ExportTraceServiceRequest::decode(body.as_slice()).expect("an OTLP trace request");
                    for rs in req.resource_spans {
                        for ss in rs.scope_spans {
                            spans.lock().expect("lock").extend(ss.spans);
                        }
                    }
                    let _ = stream.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n",
                    );
                }
            });
        }
    });
    Receiver { port, spans }
}

fn attr(span: &Span, key: &str) -> Option<Any> {
    span.attributes.iter().find(|a| a.key == key).and_then(|a| a.value.clone()).and_then(|v| v.value)
}

fn text(span: &Span, key: &str) -> String {
    match attr(span, key) {
        Some(Any::StringValue(s)) => s,
        other => panic!("{key} of {} is {other:?}", span.name),
    }
}

fn int(span: &Span, key: &str) -> i64 {
    match attr(span, key) {
        Some(Any::IntValue(n)) => n,
        other => panic!("{key} of {} is {other:?}", span.name),
    }
}

impl Receiver {
    /// Waits (bounded) until `n` spans arrived.
    fn spans(&self, n: usize) -> Vec<Span> {
        common::poll_seeing(&format!("{n} spans"), common::TIMEOUT, || {
            let spans = self.spans.lock().expect("lock").clone();
            if spans.len() >= n {
                Ok(spans)
            } else {
                Err(format!("{} spans: {spans:#?}", spans.len()))
            }
        })
    }
}

fn config(endpoint: Option<&str>, capture: bool) -> String {
    let mut text = "default_runtime = \"scripted\"\n\n[runtimes.scripted]\nharness = \"fake\"\nmodel = \"fake\"\nresponder = \"responder.rhai\"\n".to_string();
    if let Some(e) = endpoint {
        text.push_str(&format!("\n[telemetry]\notlp_endpoint = \"{e}\"\ncapture_content = {capture}\n"));
    }
    text
}

fn setup(env: &Env, endpoint: Option<&str>, capture: bool) {
    env.write("awf.toml", &config(endpoint, capture));
    env.write(
        "responder.rhai",
        r#"fn respond(turn) { #{ answer: "idea", usage: #{ input_tokens: 10, output_tokens: 5 } } }"#,
    );
    env.write("wf.rhai", FAN);
}

#[test]
fn a_run_is_exported_as_a_span_tree_with_genai_attributes() {
    let env = Env::new();
    let rx = receiver(true);
    setup(&env, Some(&format!("http://127.0.0.1:{}", rx.port)), true);
    env.awf(&["script", "run", "wf.rhai"]).expect_code(0);
    let spans = rx.spans(5);
    let named = |name: &str| spans.iter().filter(|s| s.name == name).cloned().collect::<Vec<_>>();
    let run = named("invoke_workflow wf").pop().expect("the run span");
    assert!(run.parent_span_id.is_empty(), "the run is the root");
    assert_eq!(text(&run, "gen_ai.operation.name"), "invoke_workflow");
    assert_eq!(text(&run, "awf.status"), "succeeded");
    assert_eq!(int(&run, "gen_ai.usage.input_tokens"), 20);
    let stage = named("stage plan").pop().expect("the stage span");
    assert_eq!(stage.parent_span_id, run.span_id);
    let group = named("parallel fan").pop().expect("the group span");
    assert_eq!(group.parent_span_id, stage.span_id);
    for agent in ["x", "y"] {
        let op = named(&format!("invoke_agent {agent}")).pop().unwrap_or_else(|| panic!("{agent}'s span: {spans:#?}"));
        assert_eq!(op.parent_span_id, group.span_id, "{agent}");
        assert_eq!(op.trace_id, run.trace_id);
        assert_eq!(text(&op, "gen_ai.operation.name"), "invoke_agent");
        assert_eq!(text(&op, "gen_ai.agent.name"), agent);
        assert_eq!(text(&op, "gen_ai.request.model"), "fake");
        assert_eq!((int(&op, "gen_ai.usage.input_tokens"), int(&op, "gen_ai.usage.output_tokens")), (10, 5));
        assert_eq!(text(&op, "awf.op_id"), format!("{agent}#1"));
        assert_eq!(text(&op, "awf.outcome"), "answered");
        assert!(matches!(attr(&op, "awf.cost_usd"), Some(Any::DoubleValue(_))));
        assert_eq!(text(&op, "gen_ai.output.messages"), "\"idea\"");
        assert!(
            op.start_time_unix_nano <= op.end_time_unix_nano && op.start_time_unix_nano >= run.start_time_unix_nano
        );
    }
}

#[test]
fn the_environment_names_the_endpoint_and_content_stays_out_unless_asked() {
    let env = Env::new();
    let rx = receiver(true);
    setup(&env, None, false);
    let out = common::wait_with_timeout(
        common::command(env.path(), &["script", "run", "wf.rhai"])
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://127.0.0.1:{}", rx.port))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn"),
    );
    out.expect_code(0);
    let spans = rx.spans(5);
    let op = spans.iter().find(|s| s.name == "invoke_agent x").expect("x's span");
    assert!(attr(op, "gen_ai.output.messages").is_none(), "content was exported without capture_content");
}

#[test]
fn a_receiver_that_is_down_or_hangs_never_fails_or_holds_up_a_run() {
    // Down: nothing listens on the port.
    let env = Env::new();
    let port = common::free_port();
    setup(&env, Some(&format!("http://127.0.0.1:{port}")), false);
    let out = env.awf(&["script", "run", "wf.rhai"]);
    out.expect_code(0);
    assert_eq!(out.stderr.matches("telemetry: cannot export traces").count(), 1, "{}", out.stderr);

    // Hangs: it takes the request and never answers.
    let env = Env::new();
    let rx = receiver(false);
    setup(&env, Some(&format!("http://127.0.0.1:{}", rx.port)), false);
    let started = Instant::now();
    let out = env.awf(&["script", "run", "wf.rhai"]);
    out.expect_code(0);
    assert!(started.elapsed() < Duration::from_secs(8), "a hanging receiver held the run up {:?}", started.elapsed());
    assert_eq!(common::read_json(&env.run_dir().join("result.json"))["status"], "succeeded");

    // Not a URL: refused before the run starts.
    let env = Env::new();
    setup(&env, Some("127.0.0.1:4318"), false);
    env.awf(&["script", "run", "wf.rhai"]).expect_code(2).stderr_has("[telemetry] otlp_endpoint");
    assert!(env.run_dirs().is_empty());
}

#[test]
fn an_endpoint_that_is_no_url_is_refused_before_the_run() {
    let env = Env::new();
    setup(&env, Some("127.0.0.1:4318"), false);
    let out = env.awf(&["script", "run", "wf.rhai"]);
    out.expect_code(2).stderr_has("[telemetry] otlp_endpoint").stderr_has("http://");
    assert!(env.run_dirs().is_empty(), "{:?}", env.run_dirs());
}
