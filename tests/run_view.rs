//! Seeing a run: the live view's agent rows on a real terminal (tmux, read back with
//! `capture-pane`), `awf runs watch` following a run started elsewhere to its end, and `runs show`
//! of a live run listing its agents as they are now.

use crate::common;

use common::{agent_fixture, command, poll_seeing, wait_until, wait_within, Env, TIMEOUT};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Two agents: `gated` waits for a `release` file in its state folder, `quick` answers at once.
fn workflow(env: &Env) {
    env.write("awf.toml", "[limits]\nbackground = 4\n");
    env.write(
        "wf.rhai",
        &format!(
            r#"
let quick = ctx.agents.open(#{{ key: "quick", runtime: #{{ harness: "command", command: ["sh", "{answer}"] }} }});
let gated = ctx.agents.open(#{{ key: "gated", runtime: #{{ harness: "command", command: ["sh", "{gate}"] }} }});
let schema = #{{ type: "object", properties: #{{ verdict: #{{ type: "string" }} }}, required: ["verdict"] }};
quick.run(#{{ prompt: "go", schema: schema }});
gated.run(#{{ prompt: "go", schema: schema, label: "slow review" }}).value.verdict
"#,
            answer = agent_fixture("answer.sh"),
            gate = agent_fixture("gate.sh")
        ),
    );
}

fn state(env: &Env) -> PathBuf {
    env.run_dir().join("agents/gated/state")
}

/// A tmux server of the test's own (its socket name and config file), killed when dropped.
struct Tmux(String, PathBuf);

impl Tmux {
    /// Every window 120x40 from the start (a detached session gives new ones 80x24, and a
    /// resize pushes drawn lines into the history), kept after its program exits, and a redraw
    /// from the top row not pushed into the history (`scroll-on-clear`).
    fn new(env: &Env) -> Tmux {
        let conf = env
            .write("tmux.conf", "set -g default-size 120x40\nset -g remain-on-exit on\nset -g scroll-on-clear off\n");
        Tmux(format!("awf-test-{}", env.path().file_name().and_then(|n| n.to_str()).unwrap_or("x")), conf)
    }

    fn cmd(&self, args: &[&str]) -> std::process::Output {
        let mut tmux = Command::new("tmux");
        tmux.arg("-L").arg(&self.0).arg("-f").arg(&self.1).args(args);
        tmux.output().expect("tmux runs")
    }

    /// A window running `line` in `dir` on a 120x40 terminal; the pane stays after it exits.
    fn start(&self, name: &str, dir: &Path, line: &str) {
        let new = if self.cmd(&["has-session", "-t", "t"]).status.success() {
            self.cmd(&["new-window", "-t", "t", "-n", name, "-c", &dir.display().to_string(), line])
        } else {
            self.cmd(&[
                "new-session",
                "-d",
                "-s",
                "t",
                "-n",
                name,
                "-x",
                "120",
                "-y",
                "40",
                "-c",
                &dir.display().to_string(),
                line,
            ])
        };
        assert!(new.status.success(), "tmux: {}", String::from_utf8_lossy(&new.stderr));
    }

    /// What the pane shows, with its history (a dead pane scrolls a line into it).
    fn screen(&self, name: &str) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-S", "-100", "-t", &format!("t:{name}")]).stdout)
            .into_owned()
    }

    #[track_caller]
    fn wait_for(&self, name: &str, what: &str, mut seen: impl FnMut(&str) -> bool) -> String {
        poll_seeing(&format!("{what} on the screen"), TIMEOUT, || {
            let screen = self.screen(name);
            if seen(&screen) {
                Ok(screen)
            } else {
                Err(screen)
            }
        })
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

#[test]
fn the_live_view_and_runs_watch_show_each_agent_on_a_terminal_and_end_on_the_summary() {
    let env = Env::new();
    workflow(&env);
    let tmux = Tmux::new(&env);
    tmux.start("run", env.path(), &format!("NO_COLOR=1 {} script run wf.rhai; echo exited $?", common::bin()));
    wait_until("the run folder", || env.run_dirs().len() == 1);
    wait_until("the gated turn", || state(&env).join("turn-1").exists());
    let screen = tmux.wait_for("run", "the gated agent working", |s| {
        s.lines().any(|l| l.contains("gated") && l.contains("working") && l.contains("slow review"))
    });
    assert!(screen.lines().any(|l| l.contains("quick") && l.contains("answered")), "{screen}");
    let row = screen.lines().position(|l| l.contains("gated")).expect("a row");
    let quick = screen.lines().position(|l| l.contains("quick") && l.contains("answered")).expect("a row");
    assert!(row < quick, "the working agent comes first:\n{screen}");

    let id = env.run_id();
    tmux.start("watch", env.path(), &format!("NO_COLOR=1 {} runs watch {id}; echo exited $?", common::bin()));
    let watched = tmux.wait_for("watch", "runs watch's board", |s| s.contains(&format!("run {id} · running")));
    assert!(watched.lines().any(|l| l.contains("gated") && l.contains("working")), "{watched}");

    std::fs::write(state(&env).join("release"), "").expect("release");
    let end = tmux.wait_for("run", "the run's end", |s| s.contains("exited 0"));
    assert!(end.contains("released"), "the value is printed:\n{end}");
    assert!(!end.lines().any(|l| l.contains("working")), "no leftover frame after the end:\n{end}");
    let summary = tmux.wait_for("watch", "watch's end", |s| s.contains("exited 0"));
    assert!(summary.contains(&format!("run {id}: succeeded")), "{summary}");
    assert!(!summary.contains("· running"), "the board is cleared for the summary:\n{summary}");
}

#[test]
fn runs_watch_follows_a_detached_run_to_its_end_and_an_ended_run_gets_its_summary_at_once() {
    let env = Env::new();
    workflow(&env);
    let out = env.awf(&["script", "run", "wf.rhai", "--detach"]);
    out.expect_code(0);
    let id = out.stdout.trim().to_string();
    wait_until("the gated turn", || state(&env).join("turn-1").exists());
    let shown = env.awf(&["runs", "show", &id]);
    shown.expect_code(0).stdout_has("agents now:");
    assert!(shown.stdout.lines().any(|l| l.contains("gated") && l.contains("working  slow review")), "{shown:?}");
    let watch = command(env.path(), &["runs", "watch", &id]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
    let watch = watch.expect("spawn runs watch");
    std::fs::write(state(&env).join("release"), "").expect("release");
    let out = wait_within(watch, TIMEOUT);
    out.expect_code(0).stdout_has(&format!("run {id}: succeeded"));
    let again = env.awf(&["runs", "watch", &id]);
    again.expect_code(0).stdout_has(&format!("run {id}: succeeded"));
    env.awf(&["runs", "watch", "no-such-run"]).expect_code(2).stderr_has("no-such-run");
}
