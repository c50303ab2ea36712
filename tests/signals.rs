//! Ctrl-C (SIGINT) and `--deadline`: the run is cancelled, running turns settle `cancelled`,
//! records are flushed, exit 4.

use crate::common;

use common::{Env, Running};
use std::time::{Duration, Instant};

const HANG: &str = r#"fn respond(turn) { if turn.agent == "stuck" { #{ hang: true } } else { () } }"#;

/// Waits until each of `ops` has started (its `op-started` event is on file).
fn wait_started(env: &Env, ops: &[&str]) {
    common::poll(&format!("{ops:?} started"), common::TIMEOUT, || {
        // The run's folder may not exist yet: `run_dir` would refuse that.
        let events = common::events_so_far(env.run_dirs().first()?);
        let started: Vec<_> = events.iter().filter(|e| e["type"] == "op-started").collect();
        ops.iter().all(|op| started.iter().any(|e| e["data"]["op_id"] == *op)).then_some(())
    });
}

#[test]
fn ctrl_c_cancels_the_run_and_its_hanging_turn() {
    let env = Env::new();
    env.with_responder(HANG);
    env.write(
        "wf.rhai",
        r#"
        fn run(args) {
            ctx.stage("before", || { ctx.agents.open(#{ key: "quick" }).ask("x"); () });
            let a = ctx.agents.open(#{ key: "stuck" });
            print("ready");
            a.ask("never answered")
        }
        "#,
    );
    let mut run = Running::start(env.path(), &["script", "run", "wf.rhai"]);
    run.wait_for_line("ready");
    // `ready` is printed before the ask: Ctrl-C must come once the turn runs.
    wait_started(&env, &["stuck#1"]);
    let sent = Instant::now();
    common::signal(run.pid, "-INT");
    let out = run.finish();
    assert!(sent.elapsed() < Duration::from_secs(5), "Ctrl-C took {:?} to stop the run", sent.elapsed());
    out.expect_code(4).stderr_has("awf: stopping").stderr_has("interrupted (Ctrl-C)");
    assert_eq!(out.stdout, "");
    let result = env.result();
    assert_eq!(result["status"], "cancelled");
    assert!(result["error"].as_str().expect("error").contains("Ctrl-C"), "{result}");
    assert_eq!(env.run_json()["attempts"][0]["status"], "cancelled");
    let t = env.turn("stuck#1");
    assert_eq!(t["outcome"], "cancelled", "{t}");
    // What was done before is kept.
    assert_eq!(env.turn("quick#1")["outcome"], "answered");
    assert_eq!(env.stages()[0]["status"], "succeeded");
    assert_eq!(env.events().last().map(|e| e["type"].clone()), Some(serde_json::json!("run-finished")));
}

#[test]
fn ctrl_c_cancels_turns_in_every_parallel_branch() {
    let env = Env::new();
    env.with_responder(r#"fn respond(turn) { #{ hang: true } }"#);
    env.write(
        "wf.rhai",
        r#"
        ctx.stage("all", || {
            ctx.parallel([1, 2, 3], |x, i| {
                let a = ctx.agents.open(#{ key: `stuck-${x}` });
                if x == 3 { print("ready"); }
                a.ask("x")
            }, #{ label: "hangers" });
            ()
        })
        "#,
    );
    let mut run = Running::start(env.path(), &["script", "run", "wf.rhai"]);
    run.wait_for_line("ready");
    wait_started(&env, &["stuck-1#1", "stuck-2#1", "stuck-3#1"]);
    common::signal(run.pid, "-INT");
    let out = run.finish();
    out.expect_code(4);
    assert_eq!(env.result()["status"], "cancelled");
    let turns = env.turns();
    assert_eq!(turns.len(), 3, "every running turn is recorded: {turns:#?}");
    assert!(turns.iter().all(|t| t["outcome"] == "cancelled"), "{turns:#?}");
    let stages = env.stages();
    assert_eq!(stages.len(), 1);
    assert_eq!(stages[0]["status"], "failed");
    assert_eq!(env.result()["ended_in"], "all");
}

#[test]
fn ctrl_c_interrupts_ctx_sleep() {
    let env = Env::new();
    env.write("wf.rhai", "print(\"ready\");\nctx.sleep(60000);\n\"woke\"\n");
    let mut run = Running::start(env.path(), &["script", "run", "wf.rhai"]);
    run.wait_for_line("ready");
    let sent = Instant::now();
    common::signal(run.pid, "-INT");
    let out = run.finish();
    assert!(sent.elapsed() < Duration::from_secs(5), "took {:?}", sent.elapsed());
    out.expect_code(4);
    assert_eq!(out.stdout, "");
    assert_eq!(env.result()["status"], "cancelled");
}

#[test]
fn ctrl_c_stops_a_tight_loop() {
    let env = Env::new();
    env.write("wf.rhai", "print(\"ready\");\nlet i = 0;\nloop { i += 1; }\n");
    let mut run = Running::start(env.path(), &["script", "run", "wf.rhai"]);
    run.wait_for_line("ready");
    let sent = Instant::now();
    common::signal(run.pid, "-INT");
    let out = run.finish();
    assert!(sent.elapsed() < Duration::from_secs(5), "took {:?}", sent.elapsed());
    out.expect_code(4);
    assert_eq!(env.result()["status"], "cancelled");
}

#[test]
fn the_deadline_stops_a_tight_loop_quickly() {
    let env = Env::new();
    env.write("wf.rhai", "loop { }\n");
    let started = Instant::now();
    let out = env.awf(&["script", "run", "wf.rhai", "--deadline", "200ms"]);
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
    out.expect_code(4).stderr_has("run deadline exceeded");
    assert_eq!(env.result()["status"], "cancelled");
    assert_eq!(env.run_json()["attempts"][0]["status"], "cancelled");
}

#[test]
fn the_deadline_stops_a_loop_inside_parallel_branches() {
    let env = Env::new();
    env.write("wf.rhai", "ctx.parallel([1, 2, 3], |x| { loop { } })\n");
    let started = Instant::now();
    let out = env.awf(&["script", "run", "wf.rhai", "--deadline", "300ms"]);
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
    out.expect_code(4);
    assert_eq!(env.result()["status"], "cancelled");
}

#[test]
fn the_deadline_from_config_applies() {
    let env = Env::new();
    env.write("awf.toml", "[limits]\ndeadline = \"250ms\"\n");
    env.write("wf.rhai", "ctx.sleep(60000); 1\n");
    let started = Instant::now();
    let out = env.awf(&["script", "run", "wf.rhai"]);
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
    out.expect_code(4);
}
