//! Agents in panes, for real: the pinned CLIs (Claude Code, Codex, pi) run interactively in tmux
//! panes of the run's session against the fake model server (CLI mode: each runs its own shell
//! tool with the prompt's `FAKE_RUN:` command, which pipes the answer into `$AWF_LAUNCHER`). Each
//! test has a tmux server of its own (`TMUX_TMPDIR` in its temp folder) and re-runs itself in a
//! loopback-only network namespace where it can. A pane agent beside another answers a schema,
//! turn after turn (pasted into the running CLI, then after a settings change in the CLI started
//! again with its session resumed), with its usage read from the CLI's session file; the
//! operator's keystrokes reach the CLI and its answer is validated; keep-on-failure leaves the
//! failed agent's pane running; a pane the operator closes fails its operation and `runs stop`
//! closes the rest but the kept one; a run killed with -9 whose tmux session is gone resumes in
//! new panes with the CLI's session resumed; a turn ended without an answer is nudged in the
//! pane; a sandboxed pane agent runs its CLI in its sandbox; the tmux server awf starts gets
//! the open-file limit awf started with; a fork of a pane agent runs headless
//! on a copy of its conversation.

use crate::common;
use crate::common::fake_model;

use common::cli::{installed, rerun_in_netns, setup};
use common::tmux::{awf_command, Tmux};
use common::{poll, poll_seeing, Env, Out};
use fake_model::{FakeModel, Reply};
use serde_json::{json, Value};
use std::time::Duration;

const SCHEMA: &str = r#"#{ type: "object", properties: #{ verdict: #{ type: "string" } }, required: ["verdict"] }"#;
/// Room for several CLI start-ups on a busy machine.
const LIMIT: Duration = Duration::from_secs(120);

/// The prompt that makes the fake's CLI answer `verdict` for operation `op`, and says `text`.
fn answering(text: &str, op: &str, verdict: &str) -> String {
    format!("{text}\nFAKE_RUN: printf '%s' '{{\"verdict\":\"{verdict}\"}}' | \"$AWF_LAUNCHER\" result {op}")
}

/// The test's fake model server (CLI mode, nothing scripted), its folder set up for `cli` and a
/// tmux server of its own; `None` when `cli` is not installed or the test has just re-run itself
/// in a network namespace.
fn begin(cli: &str, test: &str) -> Option<(FakeModel, Env, Tmux)> {
    begin_with(cli, test, vec![])
}

/// `begin`, with the fake model server's scripted replies.
fn begin_with(cli: &str, test: &str, replies: Vec<Reply>) -> Option<(FakeModel, Env, Tmux)> {
    if !installed(cli, test) || rerun_in_netns(test) {
        return None;
    }
    let server = FakeModel::start_cli(replies);
    let env = setup(cli, &server.base(), "");
    let tmux = Tmux::new(&env);
    Some((server, env, tmux))
}

/// Waits (bounded) until the pane's screen shows `text`: the CLI runs on, and one capture may
/// catch it redrawing its screen. Fails with `what` and the last screen.
fn screen_shows(tmux: &Tmux, pane: &str, text: &str, what: &str) {
    poll_seeing(&format!("{what}: {text:?} on the pane's screen"), LIMIT, || {
        let screen = tmux.capture(pane);
        if screen.contains(text) {
            Ok(())
        } else {
            Err(screen)
        }
    })
}

/// Runs `awf ARGS` to its end (bounded) with the test's tmux and the operator's home kept out.
fn awf(env: &Env, tmux: &Tmux, args: &[&str]) -> Out {
    let child = awf_command(env, tmux, &env.path().join("operator-home"), args).spawn().expect("spawn awf");
    common::wait_within(child, LIMIT)
}

/// Writes the workflow and its arguments; the argv of `script run` for them.
fn workflow(env: &Env, script: &str, args: &Value) -> [String; 5] {
    env.write("wf.rhai", script);
    env.write("args.json", &args.to_string());
    ["script", "run", "wf.rhai", "--args", "@args.json"].map(String::from)
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// Two pane agents in stage `review`, `b` below `a`; `a` answers twice, then (its effort changed)
/// once more in its CLI started again; its pane is kept.
const BESIDE: &str = r#"
fn run(args) {
    let schema = SCHEMA;
    ctx.stage("review", #{ result: #{ type: "object" } }, || {
        let a = ctx.agents.open(#{ key: "a", placement: "pane", instructions: "You judge carefully.", keep_pane: "always" });
        let b = ctx.agents.open(#{ key: "b", placement: "pane", layout: #{ beside: "a", split: "below" } });
        let one = a.turn(#{ prompt: args.a1, schema: schema });
        let two = b.turn(#{ prompt: args.b1, schema: schema });
        let three = a.turn(#{ prompt: args.a2, schema: schema });
        a.set(#{ effort: "high" });
        let four = a.turn(#{ prompt: args.a3, schema: schema });
        #{ one: one, two: two, three: three, four: four }
    })
}
"#;

fn two_panes_beside_each_other(cli: &str, test: &str) {
    let Some((server, env, tmux)) = begin(cli, test) else { return };
    let args = json!({
        "a1": answering("Give a first verdict.", "a#1", "one"),
        "b1": answering("Give the other verdict.", "b#1", "two"),
        "a2": answering("Give a second verdict.", "a#2", "three"),
        "a3": answering("Give a third verdict.", "a#3", "four"),
    });
    let argv = workflow(&env, &BESIDE.replace("SCHEMA", SCHEMA), &args);
    let started = std::time::Instant::now();
    let out = awf(&env, &tmux, &strs(&argv));
    println!("{cli}: the run took {:?}", started.elapsed());
    out.expect_code(0);
    let v = out.json();
    for (k, verdict) in [("one", "one"), ("two", "two"), ("three", "three"), ("four", "four")] {
        assert_eq!(v[k]["kind"], "answered", "{cli} {k}: {v}");
        assert_eq!(v[k]["value"]["verdict"], verdict, "{cli} {k}: {v}");
        let u = &v[k]["usage"];
        assert!(u["input_tokens"].as_u64().unwrap_or(0) > 0, "{cli} {k}: tokens from the session file: {u}");
        assert!(u["cost_usd"].as_f64().unwrap_or(0.0) > 0.0, "{cli} {k}: priced: {u}");
    }
    for t in env.turns() {
        assert_eq!(t["cost_source"], "session-priced", "{cli}: {t}");
        assert!(t["session"]["id"].is_string(), "{cli}: the CLI's session id is recorded: {t}");
    }
    // The pasted turn and the one after the restart carry the first: the same session, resumed.
    // (Claude Code also asks for a title for its session, with the prompt alone and no tools.)
    let carries = |needle: &str, earlier: &str| {
        server.bodies().iter().map(|b| b.to_string()).any(|b| b.contains(needle) && b.contains(earlier))
    };
    assert!(carries("Give a second verdict.", "Give a first verdict."), "{cli}: pasted into the same session");
    assert!(carries("Give a third verdict.", "Give a first verdict."), "{cli}: resumed after the restart");
    assert!(carries("Give a first verdict.", "You judge carefully."), "{cli}: the instructions reached the model");
    let log = |op: &str| common::read_jsonl(&env.run_dir().join(format!("agents/a/ops/{op}.jsonl")));
    let has = |op: &str, ty: &str| log(op).iter().any(|e| e["type"] == ty);
    assert!(has("a-1", "pane-started") && has("a-2", "pasted") && has("a-3", "pane-started"), "{cli}");
    // Where the panes went, and what became of them.
    let panes = env.result()["panes"].as_array().cloned().unwrap_or_default();
    let of = |key: &str| panes.iter().find(|p| p["agent"] == key).cloned().unwrap_or(Value::Null);
    assert_eq!((of("a")["went"].as_str(), of("a")["state"].as_str()), (Some("window"), Some("kept")), "{panes:?}");
    assert_eq!((of("b")["went"].as_str(), of("b")["state"].as_str()), (Some("beside"), Some("closed")), "{panes:?}");
    assert_eq!(of("b")["layout"], json!({ "beside": "a", "split": "below" }));
    assert_eq!((of("a")["window"].as_str(), of("a")["harness"].as_str()), (Some("review"), Some(cli)));
    // The kept pane still runs the CLI, whose screen shows the last turn.
    let kept = tmux.pane_of("a").expect("a's pane is kept");
    assert!(kept.kept && !kept.dead, "{kept:?}");
    assert_eq!(tmux.panes().len(), 1, "b's pane was closed");
    screen_shows(&tmux, &kept.id, "Give a third verdict.", cli);
    // Off a terminal, `runs attach` says how to attach, and where each pane agent is.
    let run_id = env.run_id();
    let attach = awf(&env, &tmux, &["runs", "attach", &run_id]);
    attach.expect_code(0);
    let session = format!("=awf-{run_id}");
    assert!(
        attach.stdout.lines().next().unwrap_or_default().ends_with(&format!("attach-session -t {session}")),
        "{}",
        attach.stdout
    );
    attach.stdout_has(&format!("a  {} in window review  kept", kept.id)).stdout_has("b  ");
}

#[test]
#[ignore = "needs tmux and the pinned CLIs"]
fn claude_in_panes_beside_each_other_answers_and_resumes() {
    two_panes_beside_each_other("claude", "claude_in_panes_beside_each_other_answers_and_resumes");
}

#[test]
#[ignore = "needs tmux and the pinned CLIs"]
fn codex_in_panes_beside_each_other_answers_and_resumes() {
    two_panes_beside_each_other("codex", "codex_in_panes_beside_each_other_answers_and_resumes");
}

#[test]
#[ignore = "needs tmux and the pinned CLIs"]
fn pi_in_panes_beside_each_other_answers_and_resumes() {
    two_panes_beside_each_other("pi", "pi_in_panes_beside_each_other_answers_and_resumes");
}

/// Starts `awf ARGS` in the background with the test's tmux; its pid and the child.
fn start(env: &Env, tmux: &Tmux, args: &[&str]) -> std::process::Child {
    awf_command(env, tmux, &env.path().join("operator-home"), args).spawn().expect("spawn awf")
}

/// Waits (bounded) until the run's events hold `n` events of type `ty`.
fn events(env: &Env, ty: &str, n: usize) -> Vec<Value> {
    poll(&format!("{n} {ty} events"), LIMIT, || {
        let seen = common::events_so_far_of(env.run_dirs().first()?, ty);
        (seen.len() >= n).then_some(seen)
    })
}

#[test]
#[ignore = "needs tmux and the pinned CLIs"]
fn the_operators_keystrokes_reach_the_cli_and_its_answer_is_validated() {
    operator_answers("the_operators_keystrokes_reach_the_cli_and_its_answer_is_validated", false);
}

#[test]
#[ignore = "needs tmux and the pinned CLIs"]
fn a_line_the_operator_types_while_the_cli_is_busy_is_answered_too() {
    operator_answers("a_line_the_operator_types_while_the_cli_is_busy_is_answered_too", true);
}

/// The operator types a wrong answer and a right one into a Claude Code pane whose operation
/// waits for them: once the CLI is idle, or (`busy`) while its shell tool still runs, as on a
/// loaded machine, where Claude Code queues the line and folds it into the tool's result.
fn operator_answers(test: &str, busy: bool) {
    let Some((server, env, tmux)) = begin("claude", test) else { return };
    let script = format!(
        r#"let a = ctx.agents.open(#{{ key: "a", placement: "pane" }});
let o = a.run(#{{ prompt: args.wait, schema: {SCHEMA} }});
#{{ kind: o.kind, value: o.value, reason: o.reason }}"#
    );
    // When `busy`, the CLI's shell tool runs on until the operator has typed (bounded at 60 s).
    let typed = env.path().join("operator-typed");
    let hold = format!("; for i in $(seq 600); do [ -e '{}' ] && break; sleep 0.1; done", typed.display());
    let wait = format!(
        "The operator decides.\nFAKE_RUN: \"$AWF_LAUNCHER\" waiting a#1 --reason \"the operator answers\" --timeout 2m{}",
        if busy { hold.as_str() } else { "" }
    );
    let argv = workflow(&env, &script, &json!({ "wait": wait }));
    let child = start(&env, &tmux, &strs(&argv));
    events(&env, "op-waiting", 1);
    let pane = tmux.pane_of("a").expect("a's pane");
    screen_shows(&tmux, &pane.id, "The operator decides.", "capture-pane shows the CLI's screen");
    if !busy {
        // The operator types once the CLI has ended its turn (the fake model's "done").
        poll("the CLI idle", LIMIT, || tmux.capture(&pane.id).contains("● done").then_some(()));
    }
    // The operator types a command for the CLI to run: a wrong answer, then a right one.
    let answers = r#"FAKE_RUN: printf '%s' '{"verdict":7}' | "$AWF_LAUNCHER" result a#1; printf '%s' '{"verdict":"from the operator"}' | "$AWF_LAUNCHER" result a#1"#;
    tmux.type_line(&pane.id, answers);
    std::fs::write(&typed, "").expect("mark the line typed");
    // Typed at machine speed, the line reaches Claude Code as a paste, whose Enter it may miss under
    // load: the operator presses Enter again while nothing was submitted.
    let mut pressed = std::time::Instant::now();
    let end = std::time::Instant::now() + LIMIT;
    while env.events_of("op-submission").is_empty() {
        if std::time::Instant::now() >= end {
            let screen = tmux.capture(&pane.id);
            let last = server.bodies().last().map(|b| b["messages"].as_array().and_then(|m| m.last()).cloned());
            panic!("the operator's answers were not submitted within {LIMIT:?}; the pane:\n{screen}\nthe last request's last message: {last:?}");
        }
        if pressed.elapsed() > Duration::from_secs(2) {
            tmux.run(&["send-keys", "-t", &pane.id, "Enter"]);
            pressed = std::time::Instant::now();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = common::wait_within(child, LIMIT);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["kind"], "answered", "{v}");
    assert_eq!(v["value"]["verdict"], "from the operator", "{v}");
    let rejected = env.events_of("op-rejected");
    assert_eq!(rejected.len(), 1, "the operator's wrong answer was validated and rejected: {rejected:?}");
    assert!(rejected[0]["data"]["errors"].to_string().contains("/verdict"), "{rejected:?}");
    assert_eq!(env.events_of("op-submission").len(), 2);
    assert_eq!(env.result()["panes"][0]["state"], "closed");
}

#[test]
#[ignore = "needs tmux and the pinned CLIs"]
fn keep_on_failure_leaves_the_failed_agents_pane_running() {
    let test = "keep_on_failure_leaves_the_failed_agents_pane_running";
    if !installed("codex", test) || rerun_in_netns(test) {
        return;
    }
    // The failing agent's model server refuses every request (Codex also asks it for a title of
    // the conversation, in any order with the turn's own request).
    let refusal =
        json!({ "type": "error", "error": { "type": "invalid_request_error", "message": "scripted refusal" } });
    let refusing =
        FakeModel::start_cli(vec![Reply::Status { code: 400, retry_after: None, body: refusal.to_string() }; 20]);
    let server = FakeModel::start_cli(vec![]);
    let env = setup("codex", &server.base(), "");
    let tmux = Tmux::new(&env);
    let script = format!(
        r#"let bad = ctx.agents.open(#{{ key: "bad", placement: "pane", keep_pane: "on-failure",
    runtime: #{{ harness: "codex", model: "fake-model", base_url: "{}/v1" }} }});
let good = ctx.agents.open(#{{ key: "good", placement: "pane", keep_pane: "on-failure", layout: #{{ beside: "bad" }} }});
let x = bad.run(#{{ prompt: "Give a verdict.", schema: {SCHEMA} }});
let y = good.run(#{{ prompt: args.good, schema: {SCHEMA} }});
#{{ bad: x.kind, reason: x.reason, good: y.kind }}"#,
        refusing.base()
    );
    let argv = workflow(&env, &script, &json!({ "good": answering("Give yours.", "good#1", "fine") }));
    let out = awf(&env, &tmux, &strs(&argv));
    out.expect_code(0);
    let v = out.json();
    assert_eq!((v["bad"].as_str(), v["good"].as_str()), (Some("failed"), Some("answered")), "{v}");
    assert!(v["reason"].as_str().unwrap_or_default().contains("Codex reported the turn failed"), "{v}");
    let panes = env.result()["panes"].clone();
    assert_eq!(panes[0]["agent"], "bad");
    assert_eq!((panes[0]["state"].as_str(), panes[1]["state"].as_str()), (Some("kept"), Some("closed")), "{panes}");
    let left = tmux.panes();
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(left[0].agent == "bad" && left[0].kept && !left[0].dead, "the failed agent's CLI runs on: {left:?}");
    screen_shows(&tmux, &left[0].id, "Give a verdict.", "its screen stays for the operator");
}

#[test]
#[ignore = "needs tmux and the pinned CLIs"]
fn a_pane_closed_by_the_operator_fails_its_operation_and_runs_stop_closes_all_but_the_kept() {
    let test = "a_pane_closed_by_the_operator_fails_its_operation_and_runs_stop_closes_all_but_the_kept";
    let Some((_server, env, tmux)) = begin("pi", test) else { return };
    let script = format!(
        r#"ctx.parallel(["x", "y", "z"], |k| {{
    let keep = if k == "y" {{ "always" }} else {{ "never" }};
    let a = ctx.agents.open(#{{ key: k, placement: "pane", keep_pane: keep }});
    let o = a.run(#{{ prompt: `Hold on.
FAKE_RUN: "$AWF_LAUNCHER" waiting ${{k}}#1 --reason "held" --timeout 5m`, schema: {SCHEMA} }});
    o.kind
}})"#
    );
    env.write("wf.rhai", &script);
    let child = start(&env, &tmux, &["script", "run", "wf.rhai"]);
    events(&env, "op-waiting", 3);
    let x = tmux.pane_of("x").expect("x's pane");
    tmux.kill_pane(&x.id);
    let settled = events(&env, "op-settled", 1);
    assert_eq!(settled[0]["data"]["op_id"], "x#1", "{settled:?}");
    assert_eq!(settled[0]["data"]["outcome"], "failed");
    assert_eq!(settled[0]["data"]["reason"], "pane closed by the operator");
    let run_id = env.run_id();
    awf(&env, &tmux, &["runs", "stop", &run_id]).expect_code(0);
    let _ = common::wait_within(child, LIMIT);
    let result = env.result();
    let panes = result["panes"].as_array().cloned().unwrap_or_default();
    let state = |k: &str| panes.iter().find(|p| p["agent"] == k).and_then(|p| p["state"].as_str()).map(String::from);
    assert_eq!(
        (state("x").as_deref(), state("y").as_deref(), state("z").as_deref()),
        (Some("gone"), Some("kept"), Some("closed")),
        "{panes:?}"
    );
    let left = tmux.panes();
    assert!(left.len() == 1 && left[0].agent == "y" && left[0].kept, "only y's pane is left, released: {left:?}");
    let closed = env.events_of("pane-closed");
    assert_eq!(closed.len(), 3, "{closed:?}");
}

#[test]
#[ignore = "needs tmux and the pinned CLIs"]
fn a_run_killed_whose_tmux_session_is_gone_resumes_in_new_panes_with_the_session_resumed() {
    let test = "a_run_killed_whose_tmux_session_is_gone_resumes_in_new_panes_with_the_session_resumed";
    let Some((server, env, tmux)) = begin("claude", test) else { return };
    let go = env.path().join("go");
    let script = r#"
fn run(args) {
    let schema = SCHEMA;
    let a = ctx.agents.open(#{ key: "a", placement: "pane" });
    ctx.stage("one", #{ result: #{ type: "object" } }, || a.turn(#{ prompt: args.one, schema: schema }).value);
    ctx.stage("two", #{ result: #{ type: "object" } }, || a.turn(#{ prompt: args.two, schema: schema }).value)
}
"#
    .replace("SCHEMA", SCHEMA);
    let two = format!(
        "Give a second verdict.\nFAKE_RUN: if [ -f {go} ]; then printf '%s' '{{\"verdict\":\"resumed\"}}' | \"$AWF_LAUNCHER\" result a#2; else \"$AWF_LAUNCHER\" waiting a#2 --reason held --timeout 5m; fi",
        go = go.display()
    );
    let argv = workflow(&env, &script, &json!({ "one": answering("Give a first verdict.", "a#1", "one"), "two": two }));
    let mut child = start(&env, &tmux, &strs(&argv));
    events(&env, "op-waiting", 1);
    common::signal(child.id(), "-KILL");
    let _ = child.wait();
    // The CLI ran on in its pane; its tmux session goes too.
    tmux.kill_server();
    std::fs::write(&go, "").expect("the second turn may answer now");
    let run_id = env.run_id();
    let out = awf(&env, &tmux, &["runs", "resume", &run_id]);
    out.expect_code(0);
    assert_eq!(out.json()["verdict"], "resumed", "{}", out.stdout);
    let opened = env.events_of("pane-opened");
    assert_eq!(opened.iter().map(|e| e["attempt"].as_u64()).collect::<Vec<_>>(), [Some(1), Some(2)], "{opened:?}");
    assert_ne!(opened[0]["data"]["target"], Value::Null);
    // The second attempt's CLI resumed the first one's session: the model saw the first turn.
    let resumed = server
        .bodies()
        .into_iter()
        .rev()
        .find(|b| b.to_string().contains("Give a second verdict."))
        .expect("a request");
    assert!(resumed.to_string().contains("Give a first verdict."), "the session was resumed");
    let stages = env.stages();
    assert!(stages.iter().any(|s| s["name"] == "one" && s["status"] == "reused"), "{stages:?}");
}

#[test]
#[ignore = "needs tmux and the pinned CLIs"]
fn a_sandboxed_pane_agent_runs_its_cli_in_the_sandbox_in_its_pane() {
    let test = "a_sandboxed_pane_agent_runs_its_cli_in_the_sandbox_in_its_pane";
    if !installed("pi", test) || rerun_in_netns(test) {
        return;
    }
    // The operator's home lies outside the workspace and /tmp: the sandbox hides it.
    let operator = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("the operator's home");
    let marker = operator.path().join("awf-marker.txt");
    std::fs::write(&marker, "the operator's secret\n").expect("marker");
    let probe = format!(
        r#"if [ -e {m} ]; then s=seen; else s=hidden; fi; printf '{{"verdict":"%s:%s"}}' "$s" "$HOME" | {{launcher}} result {{op}}"#,
        m = fake_model::shell_quote(&marker.display().to_string())
    );
    let server = FakeModel::start_cli(vec![Reply::shell(&probe)]);
    let env = setup("pi", &server.base(), "[sandboxes.cli]\nnetwork = \"host\"\n");
    let tmux = Tmux::new(&env);
    let script = format!(
        r#"let o = ctx.agents.open(#{{ key: "a", sandbox: "cli", placement: "pane" }}).turn(#{{ prompt: "Give a verdict.", schema: {SCHEMA} }});
#{{ kind: o.kind, value: o.value, reason: o.reason }}"#
    );
    env.write("wf.rhai", &script);
    let child = awf_command(&env, &tmux, operator.path(), &["script", "run", "wf.rhai"]).spawn().expect("spawn awf");
    let out = common::wait_within(child, LIMIT);
    out.expect_code(0);
    let v = out.json();
    let home = env.run_dir().join("agents/a/home");
    assert_eq!(v["kind"], "answered", "{v}");
    assert_eq!(v["value"]["verdict"], format!("hidden:{}", home.display()), "in the sandbox: {v}");
    let log = common::read_jsonl(&env.run_dir().join("agents/a/ops/a-1.jsonl"));
    let started = log.iter().find(|e| e["type"] == "pane-started").expect("pane-started");
    assert_eq!(started["data"]["sandbox"], "cli", "{started}");
    let seated = &env.result()["sandboxes"][0]["agents"][0];
    assert_eq!((seated["agent"].as_str(), &seated["confined"]), (Some("a"), &json!(true)), "{seated}");
}

#[test]
#[ignore = "needs tmux and the pinned CLIs"]
fn a_pane_agent_that_ends_its_turn_without_answering_is_nudged_in_its_pane() {
    let test = "a_pane_agent_that_ends_its_turn_without_answering_is_nudged_in_its_pane";
    // The first reply says something and ends the turn; the nudge's reply runs the prompt's command.
    let Some((server, env, tmux)) = begin_with("pi", test, vec![Reply::text("Thinking it over.")]) else { return };
    let script = format!(
        r#"let o = ctx.agents.open(#{{ key: "a", placement: "pane" }}).turn(#{{ prompt: args.p, schema: {SCHEMA} }});
#{{ kind: o.kind, value: o.value }}"#
    );
    let argv = workflow(&env, &script, &json!({ "p": answering("Give a verdict.", "a#1", "nudged") }));
    let out = awf(&env, &tmux, &strs(&argv));
    out.expect_code(0);
    let v = out.json();
    assert_eq!((v["kind"].as_str(), v["value"]["verdict"].as_str()), (Some("answered"), Some("nudged")), "{v}");
    assert_eq!(env.events_of("op-nudged").len(), 1);
    let log = common::read_jsonl(&env.run_dir().join("agents/a/ops/a-1.jsonl"));
    let kinds: Vec<&str> = log.iter().filter_map(|e| e["type"].as_str()).collect();
    assert!(kinds.contains(&"turn-ended") && kinds.contains(&"pasted"), "the nudge was pasted: {kinds:?}");
    let nudge =
        server.bodies().into_iter().map(|b| b.to_string()).any(|b| b.contains("You finished without reporting"));
    assert!(nudge, "the model saw the nudge");
}

/// awf raises its own open-file limit; the tmux server it starts, from which every pane's program
/// starts, gets back the limit the operator's shell gave awf. (The CLIs themselves are Node.js
/// programs, which raise their own soft limit as they start, headless or in a pane.)
#[test]
#[ignore = "needs tmux and the pinned CLIs"]
fn the_tmux_server_awf_starts_gets_the_open_file_limit_awf_started_with() {
    let test = "the_tmux_server_awf_starts_gets_the_open_file_limit_awf_started_with";
    // `$TMUX` is the server's socket, pid and session.
    let probe = r#"server=$(echo "$TMUX" | cut -d, -f2); printf '{"verdict":"%s"}' "$(awk '/open files/ {print $4}' /proc/$server/limits)" | {launcher} result {op}"#;
    let Some((_server, env, tmux)) = begin_with("pi", test, vec![Reply::shell(probe)]) else { return };
    env.write(
        "wf.rhai",
        &format!(
            r#"let o = ctx.agents.open(#{{ key: "a", placement: "pane" }}).turn(#{{ prompt: "Give a verdict.", schema: {SCHEMA} }});
#{{ kind: o.kind, value: o.value }}"#
        ),
    );
    let awf = awf_command(&env, &tmux, &env.path().join("operator-home"), &["script", "run", "wf.rhai"]);
    let mut cmd = common::after("ulimit -S -n 1024", &awf);
    cmd.stdin(std::process::Stdio::null()).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let out = common::wait_within(cmd.spawn().expect("spawn awf"), LIMIT);
    out.expect_code(0);
    let v = out.json();
    assert_eq!((v["kind"].as_str(), v["value"]["verdict"].as_str()), (Some("answered"), Some("1024")), "{v}");
}

#[test]
#[ignore = "needs tmux and the pinned CLIs"]
fn a_fork_of_a_pane_agent_runs_headless_on_a_copy_of_its_conversation() {
    let test = "a_fork_of_a_pane_agent_runs_headless_on_a_copy_of_its_conversation";
    let Some((server, env, tmux)) = begin("claude", test) else { return };
    let script = format!(
        r#"let a = ctx.agents.open(#{{ key: "a", placement: "pane" }});
let one = a.turn(#{{ prompt: args.a1, schema: {SCHEMA} }});
let b = a.fork(#{{ key: "b" }});
let two = b.turn(#{{ prompt: args.b1, schema: {SCHEMA} }});
#{{ one: one.value.verdict, two: two.value.verdict, harness: b.harness }}"#
    );
    let args = json!({
        "a1": answering("Remember the word pelican.", "a#1", "one"),
        "b1": answering("Give the forked verdict.", "b#1", "two"),
    });
    let argv = workflow(&env, &script, &args);
    let out = awf(&env, &tmux, &strs(&argv));
    out.expect_code(0);
    let v = out.json();
    assert_eq!(
        (v["one"].as_str(), v["two"].as_str(), v["harness"].as_str()),
        (Some("one"), Some("two"), Some("claude"))
    );
    // Only `a` had a pane; the fork ran headless.
    let panes = env.result()["panes"].clone();
    assert_eq!(panes.as_array().map(Vec::len), Some(1), "{panes}");
    assert_eq!(panes[0]["agent"], "a");
    assert!(tmux.pane_of("b").is_none(), "no pane for the fork");
    // The fork's turn carried a's conversation.
    let forked = server.bodies().into_iter().map(|b| b.to_string()).find(|b| b.contains("Give the forked verdict."));
    let forked = forked.expect("the fork's request");
    assert!(forked.contains("Remember the word pelican."), "the fork's conversation is a copy of a's");
    let opened = env.events_of("agent-opened");
    let b = opened.iter().find(|e| e["data"]["agent"] == "b").expect("b opened");
    assert_eq!(b["data"]["forked_from"], "a", "{b}");
}
