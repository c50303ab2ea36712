//! Decisions on a real small model: llama-server with SmolLM2-135M-Instruct as the decision
//! model, asked for log-probabilities. Twenty closed questions with known answers
//! (`tests/fixtures/decisions/known.json`) are decided in one run; the test checks that every
//! distribution was read from the log-probabilities and is one (it sums to 1, the confidence is
//! the choice's share), that each decision was billed, and prints the measurement: how many the
//! model got right, its mean confidence when right and when wrong, and how often the floor sent
//! a decision to its fallback. `#[ignore]`d on machines without the model.

use crate::common;

use super::real_model::{server_with, NEEDS};
use common::{command, wait_within, Env};
use serde_json::Value;
use std::process::Stdio;
use std::time::Duration;

/// The floor of the measurement: under it, the fallback (the row's last option) decides.
const FLOOR: f64 = 0.7;

const WORKFLOW: &str = r#"
fn run(args) {
    let out = [];
    let i = 0;
    for row in args.rows {
        i += 1;
        let last = row.options[row.options.len() - 1];
        out.push(ctx.decisions.decide(#{ key: `q${i}`, question: row.question, options: row.options,
                                         min_confidence: args.floor, fallback: `default:${last}` }));
    }
    out
}
"#;

#[test]
#[ignore = "needs llama-server + SmolLM2 (AWF_LLAMA_SERVER, AWF_SMOLLM2_GGUF; .ci/llama.sh builds them)"]
fn twenty_known_decisions_on_smollm2_are_read_from_logprobs_and_measured() {
    let _ = NEEDS;
    let server = server_with(&["-c", "2048", "-np", "1"]);
    let env = Env::new();
    env.write(
        "awf.toml",
        &format!(
            "[runtimes.small]\nharness = \"openai\"\nmodel = \"smollm2-135m\"\nbase_url = \"http://127.0.0.1:{}/v1\"\n\n[decisions]\nruntime = \"small\"\n\n[prices.\"smollm2-135m\"]\ninput = 0.01\noutput = 0.02\n",
            server.port
        ),
    );
    let table = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/decisions/known.json"))
        .expect("the table");
    let rows: Vec<Value> = serde_json::from_str(&table).expect("the table is JSON");
    assert_eq!(rows.len(), 20);
    env.write("args.json", &serde_json::json!({ "rows": rows, "floor": FLOOR }).to_string());
    env.write("wf.rhai", WORKFLOW);
    // A small model on a busy machine writes a few tokens a second: 20 decisions take minutes.
    let args = ["script", "run", "wf.rhai", "--args", "@args.json", "--json", "--deadline", "900s"];
    let child = command(env.path(), &args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn awf");
    let out = wait_within(child, Duration::from_secs(960));
    out.expect_code(0);
    let decided = out.json()["value"].as_array().cloned().unwrap_or_default();
    assert_eq!(decided.len(), 20, "{}", out.stdout);

    let (mut right, mut fell_back, mut no_answer) = (0, 0, 0);
    let (mut when_right, mut when_wrong) = (Vec::new(), Vec::new());
    for (row, d) in rows.iter().zip(&decided) {
        let dist = d["distribution"].as_object().cloned().unwrap_or_default();
        let Some(pick) = d["model_choice"].as_str() else {
            // No valid answer within the nudges: the fallback decided. An answer accepted is always
            // read: llama-server's tokens are its text.
            assert_eq!(d["decided_by"], "default", "{d}");
            assert_eq!(d["source"], "none", "{d}");
            no_answer += 1;
            continue;
        };
        assert_eq!(d["source"], "logprobs", "llama-server sends log-probabilities: {d}");
        let sum: f64 = dist.values().filter_map(Value::as_f64).sum();
        assert!((sum - 1.0).abs() < 1e-6, "a distribution sums to 1: {d}");
        assert_eq!(dist.len(), row["options"].as_array().map(Vec::len).unwrap_or(0), "every option has a share: {d}");
        let confidence = dist[pick].as_f64().unwrap_or(-1.0);
        let best = dist.values().filter_map(Value::as_f64).fold(0.0, f64::max);
        assert_eq!(confidence, best, "the model's pick is its most probable option: {d}");
        if d["decided_by"] == "default" {
            assert!(confidence < FLOOR, "only a pick under the floor falls back: {d}");
            fell_back += 1;
        } else {
            assert_eq!((d["decided_by"].as_str(), d["confidence"].as_f64()), (Some("model"), Some(confidence)), "{d}");
        }
        if row["answer"].as_str() == Some(pick) {
            right += 1;
            when_right.push(confidence);
        } else {
            when_wrong.push(confidence);
        }
    }
    let result = env.result();
    assert_eq!(result["decisions"].as_array().map(Vec::len), Some(20));
    let billed = &result["accounting"]["by_agent"]["decisions"];
    assert!(billed["operations"].as_u64() >= Some(20) && billed["tokens"].as_u64() > Some(0), "{billed}");

    let mean = |v: &[f64]| if v.is_empty() { f64::NAN } else { v.iter().sum::<f64>() / v.len() as f64 };
    println!(
        "decisions on SmolLM2-135M (logprobs, floor {FLOOR}): {right}/20 right; mean confidence {:.3} when right \
         ({} decisions), {:.3} when wrong ({}); {fell_back}/20 sent to the fallback by the floor, {no_answer} \
         for want of a valid answer; {} tokens",
        mean(&when_right),
        when_right.len(),
        mean(&when_wrong),
        when_wrong.len(),
        billed["tokens"]
    );
    for (row, d) in rows.iter().zip(&decided) {
        let pick = d["model_choice"].as_str().unwrap_or("-");
        println!(
            "  {:<48} answer {:<8} model {pick:<8} p {:.3} ({}) {}",
            row["question"].as_str().unwrap_or_default(),
            row["answer"].as_str().unwrap_or_default(),
            d["distribution"][pick].as_f64().unwrap_or(0.0),
            d["decided_by"].as_str().unwrap_or_default(),
            d.get("no_answer").unwrap_or(&d["distribution"])
        );
    }
}
