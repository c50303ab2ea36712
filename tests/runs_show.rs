//! Debugging a bad answer from the command line: `awf runs show` lists each agent's operations
//! with outcome and reason, `awf runs show --agent KEY` prints that agent's turns (prompt,
//! rejections with their errors and what was submitted, nudges, answer), and `awf runs logs`
//! renders a rejection as its errors. Spend reads as tokens where a $0 would say nothing.

use crate::common;
use crate::common::fake_model;

use common::Env;
use fake_model::{FakeModel, Reply};
use serde_json::json;

const RESPONDER: &str = r#"fn respond(turn) {
    if turn.agent == "quiet" { return #{ silent: true }; }
    if turn.rejection == () { return #{ answer: #{ verdict: "maybe" }, usage: #{ input_tokens: 30, output_tokens: 12 } }; }
    #{ answer: #{ verdict: "yes" }, usage: #{ input_tokens: 30, output_tokens: 12 } }
}"#;

const SCRIPT: &str = r#"
let judge = ctx.agents.open(#{ key: "judge" });
let quiet = ctx.agents.open(#{ key: "quiet" });
let verdict = judge.ask("Ship the release on Friday?",
    #{ type: "object", required: ["verdict"], properties: #{ verdict: #{ enum: ["yes", "no"] } } });
let silent = quiet.run(#{ prompt: "Say nothing at all." });
#{ verdict: verdict.verdict, quiet: silent.kind }
"#;

fn debugged_run() -> (Env, String) {
    let env = Env::new();
    env.with_responder(RESPONDER);
    let out = env.run(SCRIPT, &["--json"]);
    out.expect_code(0);
    assert_eq!(out.json()["value"]["verdict"], "yes", "{}", out.stdout);
    let id = env.run_id();
    (env, id)
}

#[test]
fn runs_show_lists_each_agents_operations_with_outcome_reason_and_tokens() {
    let (env, id) = debugged_run();
    let show = env.awf(&["runs", "show", &id]);
    show.expect_code(0)
        .stdout_has("agent judge (fake, fake): 1 operation, 1 rejected answer")
        .stdout_has("judge#1 turn answered (1 rejected answer) · 84 tokens")
        .stdout_has("agent quiet (fake, fake): 1 operation")
        .stdout_has("quiet#1 turn unanswered: ")
        .stdout_has(&format!("awf runs show {id} --agent judge"));
    // A fake model's spend is tokens; a $0.0000 would say nothing.
    assert!(!show.stdout.contains('$'), "{}", show.stdout);
}

#[test]
fn runs_show_agent_prints_the_prompt_each_rejection_with_its_errors_the_nudges_and_the_answer() {
    let (env, id) = debugged_run();
    let judge = env.awf(&["runs", "show", &id, "--agent", "judge"]);
    judge
        .expect_code(0)
        .stdout_has(&format!("agent judge of run {id}: 1 operation"))
        .stdout_has("  prompt: Ship the release on Friday?")
        .stdout_has("  rejected (19 bytes submitted):")
        .stdout_has("    - at /verdict: ")
        .stdout_has(r#"submitted: {"verdict":"maybe"}"#)
        .stdout_has(r#"  answer: {"verdict":"yes"}"#);
    let errors = judge.stdout.lines().find(|l| l.starts_with("    - at /verdict")).expect("the error line");
    assert!(errors.contains("maybe") && errors.contains("yes"), "{errors}");

    let quiet = env.awf(&["runs", "show", &id, "--agent", "quiet"]);
    quiet
        .expect_code(0)
        .stdout_has("  prompt: Say nothing at all.")
        .stdout_has("  nudge 1: ")
        .stdout_has("  nudge 2: ")
        .stdout_has("  no answer");
    let turn = quiet.stdout.lines().find(|l| l.starts_with("quiet#1 turn unanswered: ")).expect("the turn line");
    assert!(turn.len() > "quiet#1 turn unanswered: ".len() + 5, "the reason is named: {turn}");

    env.awf(&["runs", "show", &id, "--agent", "nobody"])
        .expect_code(2)
        .stderr_has("has no operations of agent nobody (its agents: judge, quiet)");
}

#[test]
fn runs_logs_renders_a_rejection_as_its_errors_and_unpriced_spend_as_tokens() {
    let (env, id) = debugged_run();
    let logs = env.awf(&["runs", "logs", &id]);
    logs.expect_code(0);
    let rejected = logs.stdout.lines().find(|l| l.contains("judge#1 answer rejected")).expect("a rejection line");
    assert!(rejected.contains("(19 bytes): at /verdict: ") && rejected.contains("maybe"), "{rejected}");
    assert_eq!(logs.stdout.matches("judge#1 answer rejected").count(), 1, "said once:\n{}", logs.stdout);
    logs.stdout_has("judge#1 answer accepted").stdout_has("quiet#1 nudged (check-in 1)").stdout_has("spent 84 tokens");
    assert!(!logs.stdout.contains("op-submission {"), "{}", logs.stdout);
    assert!(!logs.stdout.contains("$0.0000"), "{}", logs.stdout);
}

#[test]
fn a_council_run_is_shown_as_council_name() {
    let env = Env::new();
    env.with_responder(r#"fn respond(turn) { #{ answer: #{ choice: "yes", confidence: 0.8, reason: "it holds" } } }"#);
    env.awf(&["council", "run", "magi", "--task", "Ship on Friday?"]).expect_code(0);
    let id = env.run_id();
    env.awf(&["runs", "show", &id]).expect_code(0).stdout_has("script: council magi");
    env.awf(&["runs", "list"]).expect_code(0).stdout_has("  council magi");
    env.awf(&["runs", "logs", &id]).expect_code(0).stdout_has("run started (attempt 1): council magi");
}

#[test]
fn an_http_agents_turn_shows_what_the_model_said_and_a_local_models_spend_is_tokens() {
    let server = FakeModel::start(vec![
        Reply::result(json!({ "verdict": 3 })),
        Reply::text("Let me think."),
        Reply::result(json!({ "verdict": "ok" })),
    ]);
    let env = Env::new();
    env.write(
        "awf.toml",
        &format!(
            "default_runtime = \"m\"\n[runtimes.m]\nharness = \"openai\"\nmodel = \"small\"\nbase_url = \"{}/v1\"\n",
            server.base()
        ),
    );
    let script = r#"
let a = ctx.agents.open(#{ key: "a" });
a.ask("Give a verdict.", #{ type: "object", properties: #{ verdict: #{ type: "string" } }, required: ["verdict"] })
"#;
    env.run(script, &[]).expect_code(0);
    let id = env.run_id();
    let shown = env.awf(&["runs", "show", &id, "--agent", "a"]);
    shown
        .expect_code(0)
        .stdout_has("  prompt: Give a verdict.")
        .stdout_has("    - at /verdict: ")
        .stdout_has("  reply: Let me think.")
        .stdout_has("[calls wf_result ")
        .stdout_has("(wf_result answered) rejected:")
        .stdout_has(r#"  answer: {"verdict":"ok"}"#);
    let show = env.awf(&["runs", "show", &id]);
    show.expect_code(0).stdout_has("agent a (openai, small): 1 operation, 1 rejected answer");
    assert!(!show.stdout.contains('$'), "an unpriced model's spend is tokens:\n{}", show.stdout);
}
