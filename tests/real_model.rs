//! One workflow against a real language model: llama.cpp's `llama-server` with
//! SmolLM2-135M-Instruct (built and fetched by `.ci/llama.sh`, which `.ci/run` calls), driven by
//! the `openai` harness in structured mode. Without the two files the test says it is skipped;
//! on CI (`CI` set) their absence is a failure.

mod common;

use common::{read_jsonl, Env};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
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

#[test]
fn a_small_real_model_answers_a_schemad_question_in_structured_mode() {
    let (Ok(server), Ok(model)) = (std::env::var("AWF_LLAMA_SERVER"), std::env::var("AWF_SMOLLM2_GGUF")) else {
        assert!(std::env::var_os("CI").is_none(), "on CI, .ci/run must set AWF_LLAMA_SERVER and AWF_SMOLLM2_GGUF");
        eprintln!("SKIPPED: set AWF_LLAMA_SERVER and AWF_SMOLLM2_GGUF (see .ci/llama.sh) to run the real-model test");
        return;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("addr").port();
    let child = Command::new(&server)
        .args([
            "-m",
            &model,
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "-c",
            "4096",
            "-np",
            "2",
            "-t",
            "1",
            "--no-webui",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start llama-server");
    let _server = Server(child);
    let started = Instant::now();
    while !healthy(port) {
        assert!(started.elapsed() < Duration::from_secs(60), "llama-server did not become healthy within 60 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    let env = Env::new();
    env.write(
        "awf.toml",
        &format!(
            "default_runtime = \"small\"\n[runtimes.small]\nharness = \"openai\"\nmodel = \"smollm2-135m\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\nanswer = \"structured\"\nmax_tokens = 200\n[prices.\"smollm2-135m\"]\ninput = 0.01\noutput = 0.02\n"
        ),
    );
    let script = r#"
        let a = ctx.agents.open(#{ key: "capital", instructions: "You answer geography questions briefly." });
        let o = a.turn(#{
            prompt: "What is the capital of France? Answer with the city name.",
            schema: #{ type: "object", properties: #{ city: #{ type: "string", maxLength: 40 } },
                       required: ["city"], additionalProperties: false },
            nudge: false,
        });
        #{ kind: o.kind, value: o.value, reason: o.reason, input: o.usage.input_tokens, output: o.usage.output_tokens }
    "#;
    let out = env.run(script, &["--deadline", "120s"]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["kind"], "answered", "{v}");
    assert!(v["value"]["city"].is_string(), "{v}");
    assert!(v["input"].as_u64().unwrap_or(0) > 0 && v["output"].as_u64().unwrap_or(0) > 0, "usage recorded: {v}");
    let turns = read_jsonl(&env.run_dir().join("turns.jsonl"));
    assert_eq!(turns[0]["harness"], "openai");
    assert_eq!(turns[0]["cost_source"], "priced");
    assert!(turns[0]["cost_usd"].as_f64().unwrap_or(0.0) > 0.0, "{turns:?}");
}
