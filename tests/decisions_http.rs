//! `ctx.decisions.decide` against an HTTP decision model (the fake model server of
//! `common::fake_model`): an `openai` runtime answers in structured mode and is asked for
//! log-probabilities; the distribution is read from the tokens where the choice was written, not
//! from the model's claim, and the record says which source it used; without log-probabilities
//! the claim is used; `logprobs = false` asks for none; an unreachable server fails the decision
//! as fast, and in the same words, as an agent's turn; a reply cut off, or slower than the
//! decision's `timeout_ms`, is no answer and the fallback decides.

use crate::common;

use common::fake_model::{FakeModel, Reply, Token};
use common::Env;
use serde_json::Value;
use std::time::{Duration, Instant};

/// A folder whose runtime `m` is `server` and whose decision model is `m`, with `extra` lines in
/// `[decisions]`.
fn env_on(server: &FakeModel, extra: &str) -> Env {
    let env = Env::new();
    env.write(
        "awf.toml",
        &format!(
            "[runtimes.m]\nharness = \"openai\"\nmodel = \"judge\"\nbase_url = \"{}/v1\"\n\n[decisions]\nruntime = \"m\"\n{extra}\n\n[prices.judge]\ninput = 1.0\noutput = 2.0\n",
            server.base()
        ),
    );
    env
}

/// The tokens of `{"choice": "<sampled>", "confidence": 0.95}`, the choice's own token sampled
/// with probability `p` beside `others`.
fn choice_tokens(sampled: &str, p: f64, others: &[(&str, f64)]) -> Reply {
    Reply::Logprobs(vec![
        Token::sure("{\""),
        Token::sure("choice"),
        Token::sure("\":"),
        Token::sure(" \""),
        Token::among(sampled, p, others),
        Token::sure("\","),
        Token::sure(" \"confidence\": 0.95}"),
    ])
}

const DECIDE: &str = r#"ctx.decisions.decide(#{ key: "ship", question: "Ship it?", options: ["yes", "no"] })"#;

fn close(a: &Value, b: f64) -> bool {
    a.as_f64().is_some_and(|a| (a - b).abs() < 1e-9)
}

#[test]
fn the_distribution_is_read_from_the_logprobs_of_the_choice_not_from_the_claim() {
    let server = FakeModel::start(vec![choice_tokens("no", 0.7, &[("yes", 0.2), ("maybe", 0.05)])]);
    let env = env_on(&server, "");
    let out = env.run(DECIDE, &["--json"]);
    out.expect_code(0);
    let d = &out.json()["value"];
    assert_eq!((d["choice"].as_str(), d["source"].as_str()), (Some("no"), Some("logprobs")), "{d}");
    assert!(close(&d["confidence"], 0.7 / 0.9), "not the claimed 0.95: {d}");
    assert!(close(&d["distribution"]["yes"], 0.2 / 0.9), "{d}");
    assert_eq!(d["model"], "judge");

    let body = &server.bodies()[0];
    assert_eq!((body["logprobs"].as_bool(), body["top_logprobs"].as_u64()), (Some(true), Some(20)), "{body}");
    let schema = &body["response_format"]["json_schema"]["schema"];
    assert_eq!(schema["properties"]["choice"]["enum"], serde_json::json!(["yes", "no"]), "structured mode: {body}");
    assert!(body["tools"].is_null(), "no tools in structured mode: {body}");

    // Billed like a turn: priced, under `decisions` and the model.
    let result = env.result();
    let cost = 100.0 * 1.0 / 1e6 + 20.0 * 2.0 / 1e6;
    assert!(close(&result["accounting"]["by_agent"]["decisions"]["cost_usd"], cost), "{result}");
    assert!(close(&result["decisions"][0]["spend"]["cost_usd"], cost), "{result}");
    assert_eq!(result["decisions"][0]["source"], "logprobs");
    assert_eq!(env.turn("decisions#ship")["cost_source"], "priced");
}

#[test]
fn the_option_the_model_put_most_on_is_the_choice_and_the_written_one_is_kept() {
    let server = FakeModel::start(vec![choice_tokens("yes", 0.3, &[("no", 0.6)])]);
    let env = env_on(&server, "");
    let out = env.run(DECIDE, &["--json"]);
    out.expect_code(0);
    let d = &out.json()["value"];
    assert_eq!((d["choice"].as_str(), d["sampled"].as_str()), (Some("no"), Some("yes")), "{d}");
    assert!(close(&d["confidence"], 0.6 / 0.9), "{d}");
}

#[test]
fn without_logprobs_the_claim_is_used_and_the_record_says_so() {
    let server = FakeModel::start(vec![Reply::text(r#"{"choice": "yes", "confidence": 0.9}"#)]);
    let env = env_on(&server, "");
    let out = env.run(DECIDE, &["--json"]);
    out.expect_code(0);
    let d = &out.json()["value"];
    assert_eq!((d["source"].as_str(), d["confidence"].as_f64()), (Some("claimed"), Some(0.9)), "{d}");

    // `logprobs = false`: none asked for.
    let server = FakeModel::start(vec![Reply::text(r#"{"choice": "no", "confidence": 0.8}"#)]);
    let env = env_on(&server, "logprobs = false");
    env.run(DECIDE, &[]).expect_code(0);
    let body = &server.bodies()[0];
    assert!(body["logprobs"].is_null() && body["top_logprobs"].is_null(), "{body}");
    assert_eq!(env.result()["decisions"][0]["source"], "claimed");
}

#[test]
fn an_unreachable_decision_model_fails_as_fast_and_in_the_same_words_as_an_agent() {
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let env = Env::new();
    env.write(
        "awf.toml",
        &format!("[runtimes.m]\nharness = \"openai\"\nmodel = \"x\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\n\n[decisions]\nruntime = \"m\"\n"),
    );
    let started = Instant::now();
    let out = env.run(
        &format!(
            r#"let said = [];
            try {{ {DECIDE}; }} catch (e) {{ said.push(`${{e}}`); }}
            try {{ ctx.agents.open(#{{ key: "a", runtime: "m" }}).ask("hi"); }} catch (e) {{ said.push(e.reason); }}
            said"#
        ),
        &["--json"],
    );
    out.expect_code(0);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "not retried as if the server were busy: {:?}",
        started.elapsed()
    );
    let said = out.json()["value"].clone();
    let (decision, agent) = (said[0].as_str().unwrap_or_default(), said[1].as_str().unwrap_or_default());
    assert!(
        decision.starts_with("ctx.decisions.decide `ship`: the decision model failed: its turn on x failed: "),
        "{decision}"
    );
    assert!(agent.contains(&format!("request to http://127.0.0.1:{port}/v1/chat/completions failed")), "{agent}");
    assert!(decision.ends_with(agent), "the same reason: {decision} / {agent}");
    assert!(env.result()["decisions"][0]["error"].as_str().is_some_and(|e| e.contains("failed")), "recorded");
}

/// Decides "Ship it?" (yes or no) with the spec's `fields` and `fallback`.
fn ship(fields: &str, fallback: &str) -> String {
    format!(
        r#"ctx.decisions.decide(#{{ key: "ship", question: "Ship it?", options: ["yes", "no"], {fields} fallback: "{fallback}" }})"#
    )
}

/// Runs `call` in a workflow that catches what it throws and returns it as text.
fn caught(env: &Env, call: &str) -> common::Out {
    env.run(&format!("let e = \"\"; try {{ {call}; }} catch (x) {{ e = `${{x}}`; }} e"), &[])
}

#[test]
fn a_model_slower_than_the_decisions_timeout_leaves_it_to_the_fallback() {
    let slow = |pause_ms| Reply::Slow { pause_ms, then: Box::new(choice_tokens("yes", 0.9, &[("no", 0.1)])) };
    let server = FakeModel::start(vec![slow(20_000), slow(20_000)]);
    let env = env_on(&server, "");
    let started = Instant::now();
    let decide = |fallback: &str| ship("timeout_ms: 300,", fallback);
    let out = env.run(&decide("default:no"), &["--json"]);
    out.expect_code(0);
    let d = &out.json()["value"];
    assert_eq!((d["choice"].as_str(), d["decided_by"].as_str()), (Some("no"), Some("default")), "{d}");
    assert_eq!(d["no_answer"], "no answer within timeout_ms 300", "{d}");
    assert_eq!(d["model_choice"], Value::Null, "{d}");
    assert!(started.elapsed() < Duration::from_secs(15), "the decision waited {:?}", started.elapsed());
    assert_eq!(env.result()["decisions"][0]["no_answer"], "no answer within timeout_ms 300");
    assert_eq!(env.turn("decisions#ship")["outcome"], "timed-out");
    std::fs::remove_dir_all(env.runs_root()).expect("clear the runs");

    // With "fail", the error says why.
    let out = caught(&env, &decide("fail"));
    out.expect_code(0)
        .stdout_has("the model gave no valid answer (no answer within timeout_ms 300) and the fallback is \"fail\"");
}

#[test]
fn a_reply_cut_off_at_max_tokens_is_no_answer_and_the_fallback_decides() {
    let cut = || Reply::with_usage(100, 64, Reply::Cut("{\"choice\": \"ye".into()));
    let server = FakeModel::start(vec![cut(), cut()]);
    let env = env_on(&server, "");
    let toml = std::fs::read_to_string(env.path().join("awf.toml")).expect("awf.toml");
    env.write("awf.toml", &toml.replace("model = \"judge\"\n", "model = \"judge\"\nmax_tokens = 64\n"));
    let decide = |fallback: &str| ship("", fallback);
    let out = env.run(&decide("default:no"), &["--json"]);
    out.expect_code(0);
    let d = &out.json()["value"];
    assert_eq!((d["choice"].as_str(), d["decided_by"].as_str()), (Some("no"), Some("default")), "{d}");
    let why = d["no_answer"].as_str().unwrap_or_default();
    assert!(why.starts_with("its reply failed: the reply was cut off at max_tokens (64 tokens"), "{d}");
    // Billed: the model spent the tokens.
    assert_eq!(env.result()["decisions"][0]["spend"]["tokens"], 164);
    std::fs::remove_dir_all(env.runs_root()).expect("clear the runs");

    let out = caught(&env, &decide("fail"));
    out.expect_code(0)
        .stdout_has("the model gave no valid answer (its reply failed: the reply was cut off at max_tokens");
}
