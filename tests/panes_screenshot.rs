//! The README's screenshot of a run's tmux session, taken for real: two Claude Code agents in
//! panes side by side answer against the fake model server, their panes kept; an outer tmux
//! server (the test's own) runs `awf runs attach ID --read-only` in a 150x40 pane, as an operator
//! would; its screen is captured (`capture-pane -e`) and rendered by headless Chromium into a PNG.
//! Both are left in the target's `tmp/` (`panes.png`, `panes.txt`); with `AWF_UPDATE_SCREENSHOT=1`
//! they also replace `tests/snapshots/panes.png` and `tests/snapshots/panes.txt`, which the README shows.

use crate::common;
use crate::common::fake_model;

use common::chrome::Chrome;
use common::cli::{installed, rerun_in_netns, setup};
use common::tmux::{awf_command, Tmux};
use fake_model::FakeModel;
use serde_json::json;
use std::path::Path;
use std::time::Duration;

const WORKFLOW: &str = r#"
fn run(args) {
    let schema = #{ type: "object", properties: #{ verdict: #{ type: "string" } }, required: ["verdict"] };
    ctx.stage("review", #{ result: #{ type: "object" } }, || {
        let w = ctx.agents.open(#{ key: "writer", placement: "pane", keep_pane: "always" });
        let c = ctx.agents.open(#{ key: "critic", placement: "pane", keep_pane: "always", layout: #{ beside: "writer", split: "right" } });
        let draft = w.turn(#{ prompt: args.writer, schema: schema });
        let review = c.turn(#{ prompt: args.critic, schema: schema });
        #{ draft: draft.value, review: review.value }
    })
}
"#;

#[test]
#[ignore = "needs tmux, the pinned CLIs and chromium"]
fn the_readme_screenshot_of_a_runs_panes_side_by_side() {
    let test = "the_readme_screenshot_of_a_runs_panes_side_by_side";
    if !installed("claude", test) || rerun_in_netns(test) {
        return;
    }
    let server = FakeModel::start_cli(vec![]);
    let env = setup("claude", &server.base(), "");
    let tmux = Tmux::new(&env);
    let answer = |text: &str, op: &str, verdict: &str| {
        format!("{text}\nFAKE_RUN: printf '%s' '{{\"verdict\":\"{verdict}\"}}' | \"$AWF_LAUNCHER\" result {op}")
    };
    let args = json!({
        "writer": answer("Draft the release note for 2.1: pane agents.", "writer#1", "drafted"),
        "critic": answer("Review the writer's draft: is it ready to ship?", "critic#1", "ship it"),
    });
    env.write("wf.rhai", WORKFLOW);
    env.write("args.json", &args.to_string());
    let home = env.path().join("operator-home");
    let mut run = awf_command(&env, &tmux, &home, &["script", "run", "wf.rhai", "--args", "@args.json"]);
    // The CLIs in colour, as an operator without NO_COLOR sees them.
    run.env_remove("NO_COLOR");
    let out = common::wait_within(run.spawn().expect("spawn awf"), Duration::from_secs(120));
    out.expect_code(0);
    let run_id = env.run_id();

    // The operator's view: a terminal (the outer server's pane) attached to the run's session.
    let awf = common::bin();
    let dir = env.path().display().to_string();
    let attach = [
        "set-option",
        "-g",
        "default-terminal",
        "screen-256color",
        ";",
        "new-session",
        "-d",
        "-s",
        "operator",
        "-x",
        "150",
        "-y",
        "40",
        "-c",
        &dir,
        "--",
    ];
    let mut outer = tmux.cmd("outer", &attach);
    outer.args([awf, "runs", "attach", &run_id, "--read-only"]);
    assert!(outer.status().expect("start the outer tmux").success(), "the outer tmux session");
    let screen = |escapes: bool| {
        let mut args = vec!["capture-pane", "-p", "-t", "operator"];
        if escapes {
            args.push("-e");
        }
        let out = tmux.cmd("outer", &args).output().expect("capture the operator's screen");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    common::poll("both panes on the operator's screen", Duration::from_secs(30), || {
        let text = screen(false);
        let both = text.contains("writer (claude)") && text.contains("critic (claude)");
        (both && text.contains("Review the writer's draft") && text.contains("Draft the release note")).then_some(())
    });
    let (text, ansi) = (screen(false), screen(true));
    assert!(text.contains(&format!("awf-{run_id}")), "the run's session is shown:\n{text}");

    let html = common::ansi::to_html(&ansi, "awf: two pane agents side by side");
    let mut chrome = Chrome::launch();
    use base64::Engine;
    let page = base64::engine::general_purpose::STANDARD.encode(html.as_bytes());
    chrome.call("Page.navigate", json!({ "url": format!("data:text/html;base64,{page}") }));
    chrome.until("the screen rendered", "document.readyState === 'complete' && !!document.querySelector('pre')");
    let rect = chrome.eval(
        "(() => { const r = document.querySelector('pre').getBoundingClientRect(); return [r.width, r.height]; })()",
    );
    let (w, h) = (rect[0].as_f64().unwrap_or(1200.0), rect[1].as_f64().unwrap_or(800.0));
    let shot = chrome.call(
        "Page.captureScreenshot",
        json!({ "format": "png", "captureBeyondViewport": true, "clip": { "x": 0, "y": 0, "width": w, "height": h, "scale": 1 } }),
    );
    let png =
        base64::engine::general_purpose::STANDARD.decode(shot["data"].as_str().expect("png data")).expect("base64");
    assert!(png.starts_with(b"\x89PNG"), "a PNG");

    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    std::fs::write(tmp.join("panes.png"), &png).expect("write the screenshot");
    std::fs::write(tmp.join("panes.txt"), &text).expect("write the screen's text");
    println!("the panes' screenshot: {}", tmp.join("panes.png").display());
    if std::env::var_os("AWF_UPDATE_SCREENSHOT").is_some() {
        let kept = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots");
        std::fs::write(kept.join("panes.png"), &png).expect("tests/snapshots/panes.png");
        // Times, ids and paths that change from run to run are left as they were taken.
        std::fs::write(kept.join("panes.txt"), &text).expect("tests/snapshots/panes.txt");
    }
}
