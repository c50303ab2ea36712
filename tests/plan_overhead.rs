//! The per-harness overhead the plan's price table keeps (`accounting::harness_overhead`),
//! measured: each pinned CLI's first request on a fresh session, against the fake model server,
//! beyond the text awf sent it (what the plan measures itself). Printed, for updating the table;
//! #[ignore]d like every test that needs the CLIs.

use crate::common;
use crate::common::fake_model::{FakeModel, Reply};

use common::cli::{awf_as, setup};
use serde_json::json;

fn measure(cli: &str) {
    let server = FakeModel::start_cli(vec![Reply::answer(json!({ "verdict": "x" }))]);
    let env = setup(cli, &server.base(), "");
    let prompt = "Give a verdict.";
    env.write(
        "wf.rhai",
        &format!(
            "ctx.agents.open(#{{ key: \"a\" }}).turn(#{{ prompt: \"{prompt}\", schema: #{{ type: \"object\", properties: #{{ verdict: #{{ type: \"string\" }} }}, required: [\"verdict\"] }} }}).kind"
        ),
    );
    let plan = env.awf(&["script", "plan", "wf.rhai", "--json"]).json();
    let out = awf_as(&env, &["script", "run", "wf.rhai"], &env.path().join("operator-home"));
    assert_eq!(out.code, Some(0), "{out:#?}");
    let bodies = server.bodies();
    let first = bodies.first().map(|b| b.to_string().len()).unwrap_or(0);
    let all: usize = bodies.iter().map(|b| b.to_string().len()).sum();
    let spent = env.result()["accounting"]["totals"].clone();
    println!(
        "OVERHEAD {cli}: {} requests; first request {first} bytes (~{}-{} tokens), all {all} bytes; planned tokens {}; spent (fake usage) {}",
        bodies.len(),
        first / 4,
        first / 3,
        plan["tokens"],
        spent["tokens"]
    );
}

#[test]
#[ignore = "needs the pinned agent CLIs; a measurement, printed"]
fn measure_claude() {
    measure("claude");
}

#[test]
#[ignore = "needs the pinned agent CLIs; a measurement, printed"]
fn measure_codex() {
    measure("codex");
}

#[test]
#[ignore = "needs the pinned agent CLIs; a measurement, printed"]
fn measure_pi() {
    measure("pi");
}
