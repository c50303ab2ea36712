//! Background runs: `--detach` prints the run id and returns while the run goes on in its own
//! process (its output in the run folder); `[limits] background = N` at once on the machine, the
//! rest `queued` in order; `runs logs -f` and `runs stop` work on them, queued or running.

use crate::common;

use common::{command, read_json, wait_with_timeout, Env};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

const HANG: &str =
    r#"fn respond(turn) { if turn.prompt.contains("hang") { #{ hang: true } } else { #{ answer: "fine" } } }"#;

/// Kills what a failed test leaves running in the background.
struct Reaper(PathBuf);

impl Drop for Reaper {
    fn drop(&mut self) {
        for dir in std::fs::read_dir(&self.0).into_iter().flatten().flatten() {
            for file in ["lock", "background.json"] {
                let text = std::fs::read_to_string(dir.path().join(file)).unwrap_or_default();
                let pid = if file == "lock" {
                    text.trim().to_string()
                } else {
                    serde_json::from_str::<serde_json::Value>(&text).map(|v| v["pid"].to_string()).unwrap_or_default()
                };
                if pid.parse::<u32>().is_ok() {
                    let _ = std::process::Command::new("kill").args(["-KILL", &pid]).status();
                }
            }
        }
    }
}

fn setup(env: &Env, background: usize) -> Reaper {
    env.write(
        "awf.toml",
        &format!("default_runtime = \"scripted\"\n\n[runtimes.scripted]\nharness = \"fake\"\nmodel = \"fake\"\nresponder = \"responder.rhai\"\n\n[limits]\nbackground = {background}\n"),
    );
    env.write("responder.rhai", HANG);
    env.write("wf.rhai", "let a = ctx.agents.open(#{ key: \"a\" });\na.ask(\"hang here\")\n");
    Reaper(env.runs_root())
}

fn detach(env: &Env, args: &[&str]) -> String {
    let started = Instant::now();
    let out = env.awf(args);
    out.expect_code(0).stderr_has("goes on in the background");
    assert!(started.elapsed() < Duration::from_secs(10), "--detach did not return at once");
    let id = out.stdout.trim().to_string();
    assert!(env.runs_root().join(&id).is_dir(), "{out:?}");
    id
}

fn status(env: &Env, id: &str) -> String {
    let list = env.awf(&["runs", "list"]);
    list.expect_code(0);
    let line =
        list.stdout.lines().find(|l| l.starts_with(id)).unwrap_or_else(|| panic!("{id} not listed: {}", list.stdout));
    line.split_whitespace().nth(1).expect("a status").to_string()
}

#[track_caller]
fn wait_status(env: &Env, id: &str, want: &str) {
    common::poll_seeing(&format!("run {id} {want}"), common::TIMEOUT, || {
        let now = status(env, id);
        if now == want {
            Ok(())
        } else {
            Err(now)
        }
    })
}

fn stop(env: &Env, id: &str) -> common::Out {
    let out = env.awf(&["runs", "stop", id]);
    out.expect_code(0);
    out
}

#[test]
fn detached_runs_queue_past_the_limit_start_in_order_and_are_followed_and_stopped() {
    let env = Env::new();
    let _reaper = setup(&env, 1);
    let run = ["script", "run", "wf.rhai", "--detach"];
    let one = detach(&env, &run);
    wait_status(&env, &one, "running");
    let two = detach(&env, &run);
    let three = detach(&env, &run);
    wait_status(&env, &two, "queued");
    assert_eq!(status(&env, &three), "queued");

    // A queued run leaves the queue when stopped; it never starts.
    stop(&env, &three).stdout_has(&format!("run {three}: cancelled"));
    assert!(!env.runs_root().join(&three).join("run.json").exists());
    env.awf(&["runs", "stop", &three]).expect_code(0).stderr_has("never started (cancelled)");

    // Follow the first, then stop it: the follower ends with it, and the second starts.
    let follow = command(env.path(), &["runs", "logs", &one, "-f"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn runs logs -f");
    stop(&env, &one).stdout_has(&format!("run {one}: cancelled"));
    let logs = wait_with_timeout(follow);
    logs.expect_code(0).stdout_has("run started (attempt 1)").stdout_has("run cancelled: stopped by awf runs stop");
    wait_status(&env, &two, "running");
    stop(&env, &two).stdout_has(&format!("run {two}: cancelled"));

    let dir = env.runs_root().join(&one);
    assert_eq!(read_json(&dir.join("result.json"))["status"], "cancelled");
    let output = std::fs::read_to_string(dir.join("output.log")).expect("output.log");
    assert!(output.contains("awf: stopping") || output.contains("cancelled"), "{output}");
}

/// A stop that lands while the queued run's process is still saying who it is (the race CI once
/// hit: the stop's `cancelled` was overwritten by the process's pid) leaves the run cancelled, and
/// it never starts.
#[test]
fn a_run_stopped_the_moment_it_is_queued_stays_cancelled_and_never_starts() {
    let env = Env::new();
    let _reaper = setup(&env, 1);
    let run = ["script", "run", "wf.rhai", "--detach"];
    let holder = detach(&env, &run);
    wait_status(&env, &holder, "running");
    for _ in 0..8 {
        let id = detach(&env, &run);
        stop(&env, &id).stdout_has(&format!("run {id}: cancelled"));
        let dir = env.runs_root().join(&id);
        // Its process ends without queueing: no ticket left, and no run.json ever.
        common::wait_until("the cancelled run's process to end", || {
            !read_json(&dir.join("background.json"))["pid"]
                .as_i64()
                .is_some_and(|p| std::path::Path::new(&format!("/proc/{p}")).exists())
        });
        assert_eq!(status(&env, &id), "cancelled");
        assert!(!dir.join("run.json").exists(), "a cancelled run started");
    }
    stop(&env, &holder).stdout_has(&format!("run {holder}: cancelled"));
}

#[test]
fn a_detached_council_run_goes_on_and_its_log_is_followed_to_the_end() {
    let env = Env::new();
    let _reaper = setup(&env, 2);
    env.write("responder.rhai", r#"fn respond(turn) { #{ answer: "fine" } }"#);
    env.write(
        "stdlib/council/demo.rhai",
        r#"export const META = #{ kind: "strategy", name: "demo", when: "a test", params: #{}, required: [] };
fn run(input) { let a = ctx.agents.open(#{ key: "a" }); #{ output: `said ${a.ask(input.task)}`, ok: true } }
"#,
    );
    let id = detach(&env, &["council", "run", "demo", "--task", "hello", "--detach"]);
    let logs = env.awf(&["runs", "logs", &id, "-f"]);
    logs.expect_code(0).stdout_has("run succeeded");
    let dir: &Path = &env.runs_root().join(&id);
    assert_eq!(read_json(&dir.join("result.json"))["status"], "succeeded");
    let output = std::fs::read_to_string(dir.join("output.log")).expect("output.log");
    assert!(output.contains("said fine"), "{output}");
}

#[test]
fn detach_is_refused_with_watch_and_bad_flags_are_refused_before_detaching() {
    let env = Env::new();
    let _reaper = setup(&env, 1);
    let out = env.awf(&["script", "run", "wf.rhai", "--detach", "--watch"]);
    out.expect_code(2).stderr_has("cannot be used with");
    env.awf(&["script", "run", "wf.rhai", "--detach", "--deadline", "soon"]).expect_code(2).stderr_has("--deadline");
    env.awf(&["council", "run", "nope", "--task", "x", "--detach"]).expect_code(2).stderr_has("unknown strategy");
    let _zero = setup(&env, 0);
    let out = env.awf(&["script", "run", "wf.rhai", "--detach"]);
    out.expect_code(2).stderr_has("[limits] background = 0: at least 1");
    assert!(env.run_dirs().is_empty(), "{:?}", env.run_dirs());
}
