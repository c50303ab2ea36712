//! Workflows against a real language model: llama.cpp's `llama-server` with SmolLM2-135M-Instruct
//! (built and fetched by `.ci/llama.sh`; `.ci/test` exports the two paths), driven by the `openai`
//! harness in structured and in tools mode. They catch what the fake model cannot (issue 18): the
//! prompt a model is shown, a model that makes no tool call, a server's real context limit, the
//! usage a real server reports, what `awf doctor --deep` finds. `#[ignore]`d on machines without
//! the model; run with the variables missing they fail.

use crate::common;

use common::{command, read_json, wait_within, Env, Out};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub(crate) const NEEDS: &str =
    "needs llama-server + SmolLM2 (AWF_LLAMA_SERVER, AWF_SMOLLM2_GGUF; .ci/llama.sh builds them)";

/// A llama-server on a free port, killed when dropped.
pub(crate) struct Server {
    child: Child,
    pub(crate) port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn healthy(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").is_err() {
        return false;
    }
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    text.starts_with("HTTP/1.1 200")
}

/// Starts llama-server with one slot of 2,048 tokens (the size the issue was found with).
fn server() -> Server {
    server_with(&["-c", "2048", "-np", "1"])
}

/// Starts llama-server with `sizes` (its `-c` and `-np`).
pub(crate) fn server_with(sizes: &[&str]) -> Server {
    let var = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("${name} is not set: this test {NEEDS}"));
    let (bin, model) = (var("AWF_LLAMA_SERVER"), var("AWF_SMOLLM2_GGUF"));
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("addr").port();
    let args = ["-m", &model, "--host", "127.0.0.1", "--port", &port.to_string(), "-t", "1"];
    let child = Command::new(&bin)
        .args(args)
        .args(sizes)
        .arg("--no-webui")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {bin}: {e}"));
    let server = Server { child, port };
    common::poll("llama-server healthy", Duration::from_secs(90), || healthy(port).then_some(()));
    server
}

/// A folder whose default runtime `small` is the server, with `extra` settings.
fn env_for(server: &Server, extra: &str) -> Env {
    let env = Env::new();
    env.write(
        "awf.toml",
        &format!(
            "default_runtime = \"small\"\n[runtimes.small]\nharness = \"openai\"\nmodel = \"smollm2-135m\"\nbase_url = \"http://127.0.0.1:{}/v1\"\n{extra}\n[prices.\"smollm2-135m\"]\ninput = 0.01\noutput = 0.02\n",
            server.port
        ),
    );
    env
}

const CAPITAL: &str = r#"
    let a = ctx.agents.open(#{ key: "capital", instructions: "You answer geography questions briefly." });
    let o = a.turn(#{
        prompt: "What is the capital of France? Answer with the city name.",
        schema: #{ type: "object", properties: #{ city: #{ type: "string", maxLength: 40 } },
                   required: ["city"], additionalProperties: false },
    });
    #{ kind: o.kind, value: o.value, reason: o.reason, input: o.usage.input_tokens, output: o.usage.output_tokens }
"#;

/// Runs `script` with a 240 s deadline, waiting up to 300 s: a small model on a busy machine
/// writes a few tokens a second.
pub(crate) fn run_slow(env: &Env, script: &str) -> Out {
    env.write("wf.rhai", script);
    let args = ["script", "run", "wf.rhai", "--deadline", "240s"];
    let child = command(env.path(), &args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn awf");
    wait_within(child, Duration::from_secs(300))
}

/// What the agent was sent and what it replied, as text.
fn history(env: &Env, agent: &str) -> String {
    let doc = read_json(&env.run_dir().join(format!("agents/{agent}/history.json")));
    assert!(doc["messages"].is_array(), "{agent} keeps its history.json: {doc}");
    doc.to_string()
}

/// Nothing a model over HTTP is told may be the launcher's shell command (item 1).
fn no_launcher_text(text: &str) {
    for launcher in ["WF_JSON", "run the command", " result capital#1 <<", " result n#1 <<"] {
        assert!(!text.contains(launcher), "an HTTP agent was told the launcher's command ({launcher}): {text}");
    }
}

fn submissions(env: &Env) -> Vec<Value> {
    env.events_of("op-submission")
}

#[test]
#[ignore = "needs llama-server + SmolLM2 (AWF_LLAMA_SERVER, AWF_SMOLLM2_GGUF; .ci/llama.sh builds them)"]
fn structured_mode_answers_is_told_to_reply_with_json_and_is_billed() {
    let server = server();
    let env = env_for(&server, "answer = \"structured\"\nmax_tokens = 200");
    let out = run_slow(&env, CAPITAL);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["kind"], "answered", "{v}");
    assert!(v["value"]["city"].is_string(), "{v}");
    assert!(v["input"].as_u64().unwrap_or(0) > 0 && v["output"].as_u64().unwrap_or(0) > 0, "usage recorded: {v}");
    let text = history(&env, "capital");
    no_launcher_text(&text);
    assert!(text.contains("Reply with only the JSON answer"), "{text}");
    let subs = submissions(&env);
    assert!(subs.iter().any(|s| s["data"]["accepted"] == true), "the answer is an op-submission: {subs:?}");
    let turns = env.turns();
    assert_eq!(turns[0]["harness"], "openai");
    assert_eq!(turns[0]["cost_source"], "priced");
    assert!(turns[0]["cost_usd"].as_f64().unwrap_or(0.0) > 0.0, "{turns:?}");
}

#[test]
#[ignore = "needs llama-server + SmolLM2 (AWF_LLAMA_SERVER, AWF_SMOLLM2_GGUF; .ci/llama.sh builds them)"]
fn tools_mode_takes_an_answer_from_text_or_says_the_model_makes_no_tool_call() {
    let server = server();
    let env = env_for(&server, "max_tokens = 120");
    let out = run_slow(&env, CAPITAL);
    out.expect_code(0);
    let v = out.json();
    let text = history(&env, "capital");
    no_launcher_text(&text);
    assert!(text.contains("call the `wf_result` tool"), "{text}");
    let reason = v["reason"].as_str().unwrap_or("");
    match v["kind"].as_str() {
        // From a tool call or from the text: either way it went through the dispatcher.
        Some("answered") => {
            let subs = submissions(&env);
            assert!(subs.iter().any(|s| s["data"]["accepted"] == true), "{subs:?}");
        }
        // SmolLM2 through llama-server makes no tool call: the failure says so and what to do.
        _ => assert!(reason.contains("made no tool call") && reason.contains("answer = \"structured\""), "{v}"),
    }
    assert!(!reason.contains("HTTP 4"), "{v}");
    assert!(v["input"].as_u64().unwrap_or(0) > 0, "every reply is billed: {v}");
}

#[test]
#[ignore = "needs llama-server + SmolLM2 (AWF_LLAMA_SERVER, AWF_SMOLLM2_GGUF; .ci/llama.sh builds them)"]
fn a_conversation_past_the_servers_context_is_reported_as_the_context_limit() {
    let server = server();
    let long = "word ".repeat(3000);
    let script = format!(
        r#"let o = ctx.agents.open(#{{ key: "long" }}).turn(#{{ prompt: "{long}", schema: #{{ type: "string" }} }});
           #{{ kind: o.kind, reason: o.reason }}"#
    );
    // Not declared: the server's refusal is read as the context limit it is.
    let env = env_for(&server, "answer = \"structured\"\nmax_tokens = 100");
    let v = run_slow(&env, &script).json();
    assert_eq!(v["kind"], "failed", "{v}");
    let reason = v["reason"].as_str().unwrap_or("");
    assert!(reason.starts_with("the conversation no longer fits the model's context: the server counted "), "{v}");
    assert!(reason.contains("against its context of 2048"), "{v}");
    // Declared: the request is not sent at all.
    let env = env_for(&server, "answer = \"structured\"\nmax_tokens = 100\ncontext_tokens = 2048");
    let v = run_slow(&env, &script).json();
    let reason = v["reason"].as_str().unwrap_or("");
    assert!(
        reason.starts_with("the conversation no longer fits the model's context: the prompt is ")
            && reason.contains("tokens (counted by the server's /tokenize), context_tokens = 2048"),
        "{v}"
    );
    assert!(history(&env, "long").contains("word word"), "the agent keeps its history");
}

/// Two long turns that do not both fit 2,048 tokens: the second starts by summarising the first
/// (a real summary request to the real server), and then fits.
#[test]
#[ignore = "needs llama-server + SmolLM2 (AWF_LLAMA_SERVER, AWF_SMOLLM2_GGUF; .ci/llama.sh builds them)"]
fn a_second_long_turn_summarises_the_first_and_then_fits() {
    let server = server();
    let long = "word ".repeat(900);
    let script = format!(
        r#"let a = ctx.agents.open(#{{ key: "long" }});
           let one = a.turn(#{{ prompt: "{long} Is this one word repeated?", schema: #{{ type: "string", enum: ["yes", "no"] }} }});
           let two = a.turn(#{{ prompt: "{long} And this?", schema: #{{ type: "string", enum: ["yes", "no"] }} }});
           #{{ one: one.kind, two: two.kind, reason: two.reason }}"#
    );
    let env = env_for(&server, "answer = \"structured\"\nmax_tokens = 60\ncontext_tokens = 2048");
    let v = run_slow(&env, &script).json();
    assert_eq!((v["one"].as_str(), v["two"].as_str()), (Some("answered"), Some("answered")), "{v}");
    let compacted = env.events_of("context-compacted");
    assert_eq!(compacted.len(), 1, "{compacted:?}");
    assert!(compacted[0]["data"]["summary_chars"].as_u64().is_some(), "{compacted:?}");
    assert!(compacted[0]["data"]["context"] == 2048, "{compacted:?}");
}

#[test]
#[ignore = "needs llama-server + SmolLM2 (AWF_LLAMA_SERVER, AWF_SMOLLM2_GGUF; .ci/llama.sh builds them)"]
fn doctor_deep_reads_the_context_from_props_and_asks_whether_the_model_calls_tools() {
    let server = server();
    let env = env_for(&server, "max_tokens = 60");
    let args = ["doctor", "--deep", "--json"];
    let child = command(env.path(), &args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn awf");
    let out = wait_within(child, Duration::from_secs(300));
    let checks: Vec<Value> =
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("doctor --json ({e}): {}", out.stdout));
    let find = |name: &str| {
        checks.iter().find(|c| c["name"] == name).cloned().unwrap_or_else(|| panic!("no {name}: {checks:?}"))
    };
    let context = find("runtime: small: context");
    assert!(
        context["detail"].as_str().unwrap_or("").contains("the server gives 2048 tokens (llama-server /props)"),
        "{context}"
    );
    let tools = find("runtime: small: tools");
    let detail = tools["detail"].as_str().unwrap_or("");
    assert!(
        (tools["ok"] == true && detail.contains("calls tools"))
            || (tools["ok"] == false
                && detail.contains("made no tool call")
                && detail.contains("answer = \"structured\"")),
        "{tools}"
    );
}

#[test]
#[ignore = "needs llama-server + SmolLM2 (AWF_LLAMA_SERVER, AWF_SMOLLM2_GGUF; .ci/llama.sh builds them)"]
fn rejections_of_a_real_model_are_bounded_and_the_last_one_is_the_reason() {
    let server = server();
    let env = env_for(&server, "answer = \"structured\"\nmax_tokens = 40");
    // The server's grammar cannot hold a reply to multipleOf: the slot rejects what the model says.
    let script = r#"
        let o = ctx.agents.open(#{ key: "n" }).turn(#{
            prompt: "Give a number.",
            schema: #{ type: "object", properties: #{ n: #{ type: "integer", multipleOf: 1000003 } }, required: ["n"] },
        });
        #{ kind: o.kind, reason: o.reason }
    "#;
    let v = run_slow(&env, script).json();
    let subs = submissions(&env);
    let rejected = subs.iter().filter(|s| s["data"]["accepted"] == false).count();
    assert!(!subs.is_empty() && rejected <= 3, "rejections count against the 2 nudges: {subs:?}");
    if v["kind"] != "answered" {
        let reason = v["reason"].as_str().unwrap_or("");
        assert!(reason.contains("rejected") && reason.contains("multiple of"), "{v}");
        assert!(!reason.contains("HTTP"), "{v}");
    }
    no_launcher_text(&history(&env, "n"));
}

#[test]
#[ignore = "needs llama-server + SmolLM2 (AWF_LLAMA_SERVER, AWF_SMOLLM2_GGUF; .ci/llama.sh builds them)"]
fn a_real_request_cancelled_by_a_siblings_failure_is_billed() {
    let server = server();
    let env = env_for(&server, "answer = \"structured\"\nmax_tokens = 400");
    // A second runtime whose agent fails after 5 s, while the model is still writing.
    let config = std::fs::read_to_string(env.path().join("awf.toml")).expect("awf.toml");
    env.write(
        "awf.toml",
        &format!("{config}[runtimes.failing]\nharness = \"fake\"\nmodel = \"fake\"\nresponder = \"responder.rhai\"\n"),
    );
    env.write("responder.rhai", r#"fn respond(turn) { #{ fail: "boom", delay_ms: 5000 } }"#);
    let script = r#"
        try {
            ctx.parallel([0, 1], |i| {
                if i == 0 {
                    ctx.agents.open(#{ key: "writer" }).ask("Write a long story about a cat, in many paragraphs.")
                } else {
                    ctx.agents.open(#{ key: "failing", runtime: "failing" }).ask("Fail.")
                }
            });
        } catch (e) {}
        "done"
    "#;
    run_slow(&env, script).expect_code(0);
    let op = env.turn("writer#1");
    // Cancelled mid-reply on a slow machine, answered on a fast one: billed either way.
    assert!(op["tokens"].as_u64().unwrap_or(0) > 0, "the tokens the server spent are billed: {op}");
    assert_eq!(op["cost_source"], "priced", "{op}");
    history(&env, "writer");
}

/// README's "Local models" settings, verbatim, with the test server's port.
fn readme_local_settings(server: &Server) -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).expect("README.md");
    let start = readme.find("```toml\n[runtimes.local]\n").expect("README's [runtimes.local] block") + 8;
    let block = &readme[start..start + readme[start..].find("```").expect("the block ends")];
    assert!(block.contains("127.0.0.1:8080"), "the block names llama-server's port: {block}");
    format!("default_runtime = \"local\"\n{}", block.replace("127.0.0.1:8080", &format!("127.0.0.1:{}", server.port)))
}

#[test]
#[ignore = "needs llama-server + SmolLM2 (AWF_LLAMA_SERVER, AWF_SMOLLM2_GGUF; .ci/llama.sh builds them)"]
fn the_hello_that_awf_init_writes_succeeds_on_smollm2_with_readmes_local_settings() {
    // README: `llama-server -m model.gguf -c 4096 -np 2`, and its [runtimes.local] block.
    let server = server_with(&["-c", "4096", "-np", "2"]);
    let env = Env::new();
    env.awf(&["init", "--runtime", "openai"]).expect_code(0);
    env.write("awf.toml", &readme_local_settings(&server));
    let mut failed = Vec::new();
    for i in 1..=5 {
        let args = ["script", "run", "scripts/hello.rhai", "--deadline", "240s"];
        let child =
            command(env.path(), &args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn awf");
        let out = wait_within(child, Duration::from_secs(300));
        if out.code != Some(0) {
            failed.push(format!("run {i}: {}", out.stderr));
        }
    }
    assert!(failed.is_empty(), "every first run succeeds: {failed:#?}");
}
