//! Signals and pipes (issue 17, finding 6): SIGTERM and SIGHUP settle a run like Ctrl-C (exit 4,
//! records flushed, result.json written), a closed stdout ends the output quietly, and `-q`
//! prints nothing but errors.

use crate::common;

use common::{wait_until, Env, Running};
use std::process::Stdio;
use std::time::{Duration, Instant};

const HANG: &str = r#"fn respond(turn) { if turn.agent == "stuck" { #{ hang: true } } else { () } }"#;

const STUCK: &str = r#"
fn run(args) {
    ctx.stage("before", || { ctx.agents.open(#{ key: "quick" }).ask("x"); () });
    ctx.agents.open(#{ key: "stuck" }).ask("never answered")
}
"#;

#[test]
fn sigterm_and_sighup_settle_the_run_like_ctrl_c() {
    for (sig, name) in [("-TERM", "SIGTERM"), ("-HUP", "SIGHUP")] {
        let env = Env::new();
        env.with_responder(HANG);
        env.write("wf.rhai", STUCK);
        let run = Running::start(env.path(), &["script", "run", "wf.rhai"]);
        wait_until("stuck#1 has started", || {
            env.run_dirs().first().is_some_and(|d| {
                common::events_so_far(d).iter().any(|e| e["type"] == "op-started" && e["data"]["op_id"] == "stuck#1")
            })
        });
        let sent = Instant::now();
        common::signal(run.pid, sig);
        let out = run.finish();
        assert!(sent.elapsed() < Duration::from_secs(5), "{name} took {:?} to stop the run", sent.elapsed());
        out.expect_code(4).stderr_has(&format!("awf: stopping on {name}"));
        let result = env.result();
        assert_eq!(result["status"], "cancelled", "{name}: {result}");
        assert_eq!(result["error"], format!("interrupted ({name})"), "{result}");
        assert_eq!(env.run_json()["attempts"][0]["status"], "cancelled", "{name}");
        assert_eq!(env.turn("stuck#1")["outcome"], "cancelled", "{name}");
        assert_eq!(env.turn("quick#1")["outcome"], "answered");
        assert_eq!(env.events().last().map(|e| e["type"].clone()), Some(serde_json::json!("run-finished")));
    }
}

#[test]
fn a_closed_stdout_ends_the_output_quietly() {
    let env = Env::new();
    for _ in 0..3 {
        env.run("\"one line\"", &[]).expect_code(0);
    }
    // The reader is gone before awf writes a line: `awf runs list | head -0`, deterministically.
    for args in [&["runs", "list"][..], &["script", "run", "wf.rhai"], &["council", "list"]] {
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        let child = common::command(env.path(), args)
            .stdout(Stdio::from(writer))
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn awf");
        let out = common::wait_with_timeout(child);
        assert_eq!(out.code, Some(0), "awf {args:?} with stdout closed: {out:?}");
        assert!(!out.stderr.contains("panicked") && !out.stderr.contains("Broken pipe"), "{}", out.stderr);
    }
}

#[test]
fn quiet_prints_nothing_but_errors() {
    let env = Env::new();
    let script = r#"
        let a = ctx.agents.open(#{ key: "a" });
        let x = ctx.stage("one", #{ result: #{ type: "string" } }, || a.ask("one"));
        print("a log line");
        if ctx.attempt == 1 { throw "tripped"; }
        x
    "#;
    let out = env.run(script, &["-q"]);
    out.expect_code(1).stderr_has("tripped");
    assert!(!out.stderr.contains("a log line") && !out.stderr.contains("awf: failed in"), "{}", out.stderr);
    let id = env.run_dir().file_name().and_then(|n| n.to_str()).expect("run id").to_string();
    let out = env.awf(&["runs", "resume", &id, "-q"]);
    out.expect_code(0);
    assert_eq!(out.stderr, "", "a quiet resume prints nothing on stderr");
    assert_eq!(out.stdout.trim(), "a: one");
    // Without -q the resume says what it reuses.
    let out = env.awf(&["runs", "resume", &id, "--again"]);
    out.expect_code(0).stderr_has(&format!("awf: attempt 3 of run {id}: 1 stages reused"));
}
