//! `ctx.stop(reason)`: status `stopped`, exit 3, not catchable, from anywhere.

use crate::common;

use common::Env;
use serde_json::Value;
use std::time::{Duration, Instant};

#[test]
fn stop_ends_the_run_with_exit_3_and_status_stopped() {
    let env = Env::new();
    let out = env.run("ctx.log(\"before\");\nctx.stop(\"nothing to do\");\nctx.log(\"after\");\n1\n", &[]);
    out.expect_code(3).stderr_has("awf: run stopped: nothing to do").stderr_has("awf: stopped in");
    assert!(!out.stderr.contains("after"), "{}", out.stderr);
    assert_eq!(out.stdout, "");
    let result = env.result();
    assert_eq!(result["status"], "stopped");
    assert_eq!(result["error"], "nothing to do");
    assert_eq!(result["value"], Value::Null);
    assert_eq!(env.run_json()["attempts"][0]["status"], "stopped");
}

#[test]
fn stop_without_a_reason_still_stops() {
    let env = Env::new();
    env.run("ctx.stop(); 1", &[]).expect_code(3);
    assert_eq!(env.result()["status"], "stopped");
}

#[test]
fn stop_cannot_be_caught() {
    let env = Env::new();
    let script = r#"
        let caught = false;
        try { ctx.stop("really"); } catch (e) { caught = true; }
        print(`caught=${caught}`);
        "went on"
    "#;
    let out = env.run(script, &[]);
    out.expect_code(3);
    assert!(!out.stderr.contains("caught="), "the script went on after ctx.stop: {}", out.stderr);
    assert_eq!(env.result()["status"], "stopped");
}

#[test]
fn stop_inside_a_stage_records_the_stage_stopped() {
    let env = Env::new();
    let out = env.run(r#"ctx.stage("check", || { ctx.stop("input is empty"); () }); 1"#, &[]);
    out.expect_code(3);
    let stages = env.stages();
    assert_eq!(stages.len(), 1);
    assert_eq!(stages[0]["name"], "check");
    assert_eq!(stages[0]["status"], "stopped");
    assert_eq!(env.result()["status"], "stopped");
}

#[test]
fn stop_from_a_parallel_branch_stops_the_run_and_its_siblings() {
    let env = Env::new();
    env.with_responder(r#"fn respond(turn) { if turn.agent == "stuck" { return #{ hang: true }; } () }"#);
    let script = r#"
        fn run(args) {
            ctx.parallel(["stuck", "stopper", "sleeper"], |what| {
                if what == "stuck" { return ctx.agents.open(#{ key: "stuck" }).ask("x"); }
                if what == "sleeper" { ctx.sleep(60000); return 1; }
                ctx.sleep(200);
                ctx.stop("a branch decided");
            });
            "not reached"
        }
    "#;
    let started = Instant::now();
    let out = env.run(script, &[]);
    assert!(started.elapsed() < Duration::from_secs(10), "siblings kept the run alive");
    out.expect_code(3).stderr_has("a branch decided");
    assert_eq!(out.stdout, "");
    let result = env.result();
    assert_eq!(result["status"], "stopped");
    assert_eq!(result["error"], "a branch decided");
    assert_eq!(env.turn("stuck#1")["outcome"], "cancelled");
}

#[test]
fn stop_inside_parallel_settled_is_not_swallowed() {
    let env = Env::new();
    let out = env
        .run(r#"ctx.parallel_settled([1, 2], |x| { if x == 2 { ctx.stop("settled stop"); } x }); "not reached""#, &[]);
    out.expect_code(3);
    assert_eq!(out.stdout, "");
    assert_eq!(env.result()["status"], "stopped");
}
