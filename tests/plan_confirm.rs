//! Runs that ask first and record their plan (issue 29, parts 2 and 3): `[limits] confirm_usd`
//! and `--confirm-above` plan a new run first; past the threshold a run without a terminal is
//! refused unless `--yes`; a budget below the plan's low end warns; the run keeps `plan.json`, and
//! its closing line and `runs show` compare planned and spent.

use crate::common;
use crate::common::fake_model::{FakeModel, Reply};

use common::Env;
use serde_json::json;

const SAY: &str = r#"#{ type: "object", properties: #{ text: #{ type: "string" } }, required: ["text"] }"#;

fn setup(server: &FakeModel, limits: &str) -> Env {
    let env = Env::new();
    env.write(
        "awf.toml",
        &format!(
            "default_runtime = \"m\"\n[runtimes.m]\nharness = \"openai\"\nmodel = \"small\"\nbase_url = \"{}/v1\"\n\
             [prices.small]\ninput = 1.0\noutput = 10.0\n[limits]\n{limits}\n",
            server.base()
        ),
    );
    env.write(
        "wf.rhai",
        &format!("let a = ctx.agents.open(#{{ key: \"a\" }});\na.turn(#{{ prompt: \"One.\", schema: {SAY} }}).kind\n"),
    );
    env
}

#[test]
fn a_run_past_confirm_usd_without_a_terminal_is_refused_unless_yes() {
    let server = FakeModel::start(vec![Reply::with_usage(1000, 100, Reply::result(json!({ "text": "one" })))]);
    let env = setup(&server, "confirm_usd = 0.000001");
    let refused = env.awf(&["script", "run", "wf.rhai"]);
    refused
        .expect_code(2)
        .stderr_has("awf: planned in ")
        .stderr_has("1 operation, $")
        .stderr_has("awf: refused: the plan's high end $");
    refused.stderr_has("run with --yes to go ahead").stderr_has("stages: (none)");
    assert!(env.run_dirs().is_empty(), "a refused run leaves no folder");
    assert_eq!(server.bodies().len(), 0, "nothing was sent");

    let ran = env.awf(&["script", "run", "wf.rhai", "--yes"]);
    ran.expect_code(0).stdout_has("answered");
    let plan = common::read_json(&env.run_dir().join("plan.json"));
    assert_eq!(plan["operations"], 1, "{plan:#}");
    ran.stderr_has("awf: planned ").stderr_has("; spent 1.1k tokens, $0.0020: within the plan");
    let show = env.awf(&["runs", "show", &env.run_id()]);
    show.expect_code(0).stdout_has("plan: planned ");
}

#[test]
fn a_run_below_the_threshold_starts_and_a_small_budget_warns() {
    let server = FakeModel::start(vec![Reply::with_usage(1000, 100, Reply::result(json!({ "text": "one" })))]);
    let env = setup(&server, "");
    let out = env.awf(&["script", "run", "wf.rhai", "--confirm-above", "100", "--budget-usd", "0.0000001"]);
    out.stderr_has("awf: planned in ").stderr_has("awf: warning: the budget $0.0000 is below the plan's low end $");
    assert!(env.path().join(".awf/runs").exists());
    assert!(env.run_dir().join("plan.json").exists(), "the plan is recorded");
}

#[test]
fn a_negative_threshold_is_refused_by_name() {
    let server = FakeModel::start(vec![]);
    let env = setup(&server, "confirm_usd = -1.0");
    env.awf(&["script", "run", "wf.rhai"])
        .expect_code(2)
        .stderr_has("[limits] confirm_usd must be a number of USD, not negative (got -1)");
    env.awf(&["council", "run", "magi", "--task", "x", "--confirm-above=-2"])
        .expect_code(2)
        .stderr_has("--confirm-above must be a number of USD, not negative (got -2)");
}

#[test]
fn a_council_past_the_threshold_is_refused_too() {
    let server = FakeModel::start(vec![]);
    let env = setup(&server, "confirm_usd = 0.000001");
    env.awf(&["council", "run", "magi", "--task", "Ship it?"])
        .expect_code(2)
        .stderr_has("awf: refused: the plan's high end $");
    assert_eq!(server.bodies().len(), 0);
}

/// `awf script run wf.rhai` on a terminal (`script(1)` gives it one), answering `answer`.
fn on_a_terminal(env: &Env, answer: &str) -> common::Out {
    use std::io::Write;
    let line = format!("{} script run wf.rhai", common::bin());
    let mut child = std::process::Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .current_dir(env.path())
        .env("XDG_CONFIG_HOME", env.path().join(".xdg-config"))
        .env("XDG_STATE_HOME", env.path().join(".xdg-state"))
        .env("NO_COLOR", "1")
        .env_remove("AWF_RUNTIME")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn script(1)");
    child.stdin.take().expect("stdin").write_all(answer.as_bytes()).expect("answer");
    common::wait_with_timeout(child)
}

#[test]
fn on_a_terminal_the_run_asks_and_goes_on_only_when_told_yes() {
    let server = FakeModel::start(vec![Reply::with_usage(1000, 100, Reply::result(json!({ "text": "one" })))]);
    let env = setup(&server, "confirm_usd = 0.000001");
    let no = on_a_terminal(&env, "n\n");
    assert!(no.stdout.contains("run it? [y/N]") && no.stdout.contains("awf: not run"), "{no:#?}");
    assert!(env.run_dirs().is_empty(), "declined: no run");
    let yes = on_a_terminal(&env, "y\n");
    assert!(yes.stdout.contains("run it? [y/N]"), "{yes:#?}");
    assert_eq!(server.bodies().len(), 1, "told yes, the run went on: {yes:#?}");
    assert!(env.run_dir().join("plan.json").exists());
}
