//! What users read, pinned as snapshots (insta; `tests/snapshots/*.snap`, reviewed like code):
//! a council's output with its footer, `runs show`, `runs logs`, `awf script api`, the closing
//! lines. Run ids, times, durations and temporary paths are filtered out, so a snapshot changes
//! only when the text a user reads does. To accept a changed text: `INSTA_UPDATE=always cargo
//! nextest run snapshots`, then review the diff of the `.snap` files.

use crate::common;
use common::Env;

/// The filters every snapshot goes through: what differs from run to run.
fn filters() -> Vec<(&'static str, &'static str)> {
    vec![
        (r"\d{8}-\d{9}-[0-9a-f]{6}", "[run-id]"),
        (r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z", "[time]"),
        (r"\b\d{2}:\d{2}:\d{2}(\.\d+)?\b", "[clock]"),
        (r"/tmp/\.tmp[A-Za-z0-9]+", "[dir]"),
        (r"\b\d+(\.\d+)?(ms|s)\b", "[duration]"),
        (r"\b\d+ ms\b", "[ms]"),
    ]
}

macro_rules! snapshot {
    ($name:expr, $text:expr) => {
        insta::with_settings!({ filters => filters(), prepend_module_to_snapshot => false }, {
            insta::assert_snapshot!($name, $text);
        })
    };
}

const MAGI: &str = r#"fn respond(turn) {
    switch turn.agent {
        "magi-melchior" => #{ answer: #{ choice: "yes", confidence: 0.9, reason: "The tests pass and the rollback is one command." }, usage: #{ input_tokens: 120, output_tokens: 30 } },
        "magi-balthasar" => #{ answer: #{ choice: "no", confidence: 0.7, reason: "Nobody is on call this weekend." }, usage: #{ input_tokens: 110, output_tokens: 25 } },
        _ => #{ answer: #{ choice: "yes", confidence: 0.6, reason: "The change is small and reviewed." }, usage: #{ input_tokens: 100, output_tokens: 20 } },
    }
}"#;

fn magi_run(env: &Env) -> common::Out {
    env.with_responder(MAGI);
    // One at a time: the records of parallel legs interleave in any order.
    env.awf(&[
        "council",
        "run",
        "magi",
        "--task",
        "Ship the release on Friday?",
        "--param",
        "reflect=off",
        "--max-concurrency",
        "1",
    ])
}

#[test]
fn a_councils_output_and_the_closing_lines() {
    let env = Env::new();
    let out = magi_run(&env);
    out.expect_code(0);
    snapshot!("magi_output", out.stdout);
    snapshot!("magi_closing_lines", out.stderr);
}

#[test]
fn runs_show_and_runs_logs_of_a_council_run() {
    let env = Env::new();
    magi_run(&env).expect_code(0);
    let id = env.run_id();
    let show = env.awf(&["runs", "show", &id]);
    show.expect_code(0);
    snapshot!("runs_show", show.stdout);
    let logs = env.awf(&["runs", "logs", &id]);
    logs.expect_code(0);
    snapshot!("runs_logs", logs.stdout);
}

#[test]
fn the_script_api_reference() {
    let env = Env::new();
    let out = env.awf(&["script", "api"]);
    out.expect_code(0);
    snapshot!("script_api", out.stdout);
}

#[test]
fn a_plan_as_text() {
    let env = Env::new();
    env.write("awf.toml", "default_runtime = \"s\"\n[runtimes.s]\nharness = \"claude\"\nmodel = \"claude-sonnet-4-5\"\n[runtimes.local]\nharness = \"openai\"\nmodel = \"gemma3\"\nbase_url = \"http://127.0.0.1:9/v1\"\n");
    env.write(
        "wf.rhai",
        r#"
let notes = ctx.stage("read", #{ result: #{ type: "array" } }, || {
    ctx.parallel(["a", "b", "c"], |part, i| { ctx.agents.open(#{ key: `reader-${i}` }).turn(#{ prompt: `Read part ${part}.` }).kind }, #{ concurrency: 2 })
});
let lead = ctx.agents.open(#{ key: "lead", runtime: "local" });
lead.turn(#{ prompt: `Merge ${notes}.` });
lead.turn(#{ prompt: "Now shorten it." });
"#,
    );
    let out = env.awf(&["script", "plan", "wf.rhai"]);
    out.expect_code(0);
    snapshot!("plan_text", out.stdout);
}
