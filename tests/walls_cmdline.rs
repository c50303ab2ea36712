//! Prompts and instructions never on a command line (issue 46, row 8): every local user reads
//! `/proc/PID/cmdline`, and prompts are the operator's alone. For each pinned CLI (Claude Code,
//! Codex, pi), headless and in a tmux pane, a turn whose prompt and instructions carry markers of
//! their own runs against the fake model server, which holds the CLI's first request: while the
//! CLI waits for its reply, the command line of every process on the machine is read, and none may
//! hold a marker. Then the turn goes on and must be answered, with both markers in what the model
//! was sent (they reached it some other way). Each test runs the turn twice: as is, and in a
//! bubblewrap sandbox, whose `bwrap` process holds the CLI's whole command line for as long as it
//! runs (pi rewrites its own process title once started; bwrap does not). Each test re-runs
//! itself in a loopback-only network namespace where it can (the same pid namespace: /proc still
//! shows every process).

use crate::common;
use crate::common::fake_model;

use common::cli::{installed, rerun_in_netns, setup};
use common::tmux::{awf_command, Tmux};
use fake_model::FakeModel;
use serde_json::json;
use std::time::Duration;

/// Room for a CLI's start on a busy machine.
const LIMIT: Duration = Duration::from_secs(120);

const SCRIPT: &str = r#"
let a = ctx.agents.open(#{ key: "a", placement: args.placement, instructions: args.instructions SANDBOX });
let o = a.run(#{ prompt: args.prompt, schema: #{ type: "object", properties: #{ verdict: #{ type: "string" } }, required: ["verdict"] } });
#{ kind: o.kind, value: o.value, reason: o.reason }
"#;

/// The processes whose command line holds one of `markers`: `pid: command line`.
fn command_lines_with(markers: &[&String]) -> Vec<String> {
    let mut found = Vec::new();
    for (pid, line) in common::command_lines() {
        if let Some(at) = markers.iter().filter_map(|m| line.find(m.as_str())).min() {
            // The marker with what comes before it (a sandbox's own arguments are long).
            let before: String = line[..at].chars().rev().take(200).collect::<Vec<_>>().into_iter().rev().collect();
            found.push(format!("{pid}: ...{before}{}", line[at..].chars().take(100).collect::<String>()));
        }
    }
    found
}

/// Runs one turn of `cli` (in a pane when `pane`), as is and sandboxed, and checks the command
/// lines while it runs.
fn no_prompt_on_a_command_line(cli: &str, test: &str, pane: bool) {
    if !installed(cli, test) || rerun_in_netns(test) {
        return;
    }
    one_turn(cli, pane, true);
    one_turn(cli, pane, false);
}

fn one_turn(cli: &str, pane: bool, sandboxed: bool) {
    let server = FakeModel::start_cli(vec![]);
    let env = setup(cli, &server.base(), if sandboxed { "[sandboxes.cli]\nnetwork = \"host\"\n" } else { "" });
    let tmux = Tmux::new(&env);
    // A sandbox refuses a workspace that holds the operator's home: it lies elsewhere.
    let operator = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("the operator's home");
    let what = format!("{cli} (pane: {pane}, sandboxed: {sandboxed})");
    let id = uuid::Uuid::new_v4().simple().to_string();
    let (prompt_mark, instructions_mark) = (format!("PROMPTMARK{id}"), format!("INSTRUCTIONSMARK{id}"));
    let op = "a#1";
    let args = json!({
        "placement": if pane { "pane" } else { "headless" },
        "instructions": format!("You judge carefully. {instructions_mark}"),
        // A prompt that starts like an option, over several lines.
        "prompt": format!("--verdict please. {prompt_mark}\nFAKE_RUN: printf '%s' '{{\"verdict\":\"kept\"}}' | \"$AWF_LAUNCHER\" result {op}"),
    });
    env.write("wf.rhai", &SCRIPT.replace("SANDBOX", if sandboxed { r#", sandbox: "cli""# } else { "" }));
    env.write("args.json", &args.to_string());
    server.hold();
    let child = awf_command(&env, &tmux, operator.path(), &["script", "run", "wf.rhai", "--args", "@args.json"])
        .spawn()
        .expect("spawn awf");
    let held = server.wait_held(LIMIT);
    // Read while the CLI waits for its reply, before anything is let go (an assertion that
    // failed here would leave the CLI waiting until its stall timeout).
    let seen = command_lines_with(&[&prompt_mark, &instructions_mark]);
    server.release();
    let out = common::wait_within(child, LIMIT);
    assert!(held, "{what}: no model request within {LIMIT:?}: {out:?}");
    assert!(seen.is_empty(), "{what}: a prompt or instructions on a command line:\n{}", seen.join("\n"));
    out.expect_code(0);
    let v = out.json();
    // What the model was sent last, its end: where a turn that went wrong shows why.
    let last: String = server.bodies().last().map(|b| b.to_string()).unwrap_or_default();
    let tail: String = last.chars().skip(last.chars().count().saturating_sub(1500)).collect();
    assert_eq!(v["kind"], "answered", "{what}: {v}\nthe end of the last request: {tail}");
    assert_eq!(v["value"]["verdict"], "kept", "{v}");
    if sandboxed {
        assert_eq!(env.result()["sandboxes"][0]["agents"][0]["confined"], true, "{what}: it ran in its sandbox");
    }
    let sent: Vec<String> = server.bodies().iter().map(|b| b.to_string()).collect();
    assert!(sent.iter().any(|b| b.contains(&prompt_mark)), "{what}: the prompt reached the model");
    assert!(
        sent.iter().any(|b| b.contains(&prompt_mark) && b.contains(&instructions_mark)),
        "{what}: the instructions reached the model with the prompt"
    );
    // The instructions wait in the agent's home, readable by the operator alone.
    let home = env.run_dir().join("agents/a/home");
    let files: Vec<std::path::PathBuf> = std::fs::read_dir(&home)
        .expect("the agent's home")
        .flatten()
        .map(|e| e.path())
        .filter(|p| std::fs::read_to_string(p).is_ok_and(|t| t.contains(&instructions_mark)))
        .collect();
    assert!(!files.is_empty(), "{what}: the instructions are in a file of the agent's home");
    for f in files {
        assert_eq!(common::file_mode(&f), 0o600, "{}", f.display());
    }
}

#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn claude_headless_keeps_its_prompt_and_instructions_off_command_lines() {
    no_prompt_on_a_command_line("claude", "claude_headless_keeps_its_prompt_and_instructions_off_command_lines", false);
}

#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn codex_headless_keeps_its_prompt_and_instructions_off_command_lines() {
    no_prompt_on_a_command_line("codex", "codex_headless_keeps_its_prompt_and_instructions_off_command_lines", false);
}

#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn pi_headless_keeps_its_prompt_and_instructions_off_command_lines() {
    no_prompt_on_a_command_line("pi", "pi_headless_keeps_its_prompt_and_instructions_off_command_lines", false);
}

#[test]
#[ignore = "needs tmux and the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn claude_in_a_pane_keeps_its_prompt_and_instructions_off_command_lines() {
    no_prompt_on_a_command_line("claude", "claude_in_a_pane_keeps_its_prompt_and_instructions_off_command_lines", true);
}

#[test]
#[ignore = "needs tmux and the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn codex_in_a_pane_keeps_its_prompt_and_instructions_off_command_lines() {
    no_prompt_on_a_command_line("codex", "codex_in_a_pane_keeps_its_prompt_and_instructions_off_command_lines", true);
}

#[test]
#[ignore = "needs tmux and the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn pi_in_a_pane_keeps_its_prompt_and_instructions_off_command_lines() {
    no_prompt_on_a_command_line("pi", "pi_in_a_pane_keeps_its_prompt_and_instructions_off_command_lines", true);
}

/// A CLI in a pane is pasted its first turn once it reads its keys: one that never does (its
/// terminal stays line by line) fails the turn as stalled, saying so, within the stall timeout;
/// one that exits first fails it with its exit status. (No real CLI: a stand-in named by
/// `[harnesses.pi] command`.)
#[test]
#[ignore = "needs tmux"]
fn a_pane_cli_that_never_reads_its_keys_or_exits_first_fails_its_turn() {
    for (body, expect) in [
        ("sleep 300", "stalled: `STANDIN` in pane %0 did not read its keys within 2 s; the pane shows: ready?"),
        ("exit 3", "`STANDIN` exited in its pane (STATUS) before its turn was over: "),
    ] {
        let env = common::Env::new();
        let standin = env.write("stand-in-pi", &format!("#!/bin/sh\necho 'ready?'\n{body}\n"));
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&standin, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        env.write(
            "awf.toml",
            &format!(
                "default_runtime = \"m\"\n[runtimes.m]\nharness = \"pi\"\nmodel = \"m\"\n[harnesses.pi]\ncommand = \"{}\"\n[limits]\nstall_timeout = \"2s\"\n",
                standin.display()
            ),
        );
        env.write(
            "wf.rhai",
            r#"let o = ctx.agents.open(#{ key: "a", placement: "pane" }).turn(#{ prompt: "Give a verdict.", schema: #{ type: "object" } });
#{ kind: o.kind, reason: o.reason }"#,
        );
        let tmux = Tmux::new(&env);
        let home = env.path().join("home");
        std::fs::create_dir_all(&home).expect("home");
        let child = awf_command(&env, &tmux, &home, &["script", "run", "wf.rhai"]).spawn().expect("spawn awf");
        let out = common::wait_within(child, LIMIT);
        out.expect_code(0);
        let v = out.json();
        let expect = expect.replace("STANDIN", &standin.display().to_string());
        assert_eq!(v["kind"], "failed", "{v}");
        // tmux 3.3 may report a pane dead without its exit status on a loaded machine (seen in 1
        // of 6 runs beside two busy loops, even after awf asks again for a second): the status is
        // said when tmux knows it.
        let reason = v["reason"].as_str().unwrap_or_default();
        let known = ["status 3", "no status"].iter().any(|s| reason.starts_with(&expect.replace("STATUS", s)));
        assert!(reason.starts_with(&expect) || known, "{v}");
        let log = common::read_jsonl(&env.run_dir().join("agents/a/ops/a-1.jsonl"));
        assert!(!log.iter().any(|e| e["type"] == "pasted"), "nothing pasted into a CLI that does not read: {log:?}");
    }
}

/// A detached run (as `awf mcp` starts every run) gets its arguments on stdin, not its command
/// line: its task or `--args` stay off `/proc/PID/cmdline` for as long as the run lasts.
#[test]
fn a_detached_runs_arguments_are_on_no_command_line() {
    let env = common::Env::new();
    let marker = format!("detached-secret-{}", std::process::id());
    env.write("wf.rhai", r#"let answer = ctx.checkpoint("go on?", #{ type: "boolean" }); args.secret"#);
    let args = json!({ "secret": marker }).to_string();
    let out = env.awf(&["script", "run", "wf.rhai", "--args", &args, "--detach", "-q"]);
    out.expect_code(0);
    let id = out.stdout.trim().to_string();
    // The run waits on its checkpoint: its process is alive, with the arguments it was given.
    common::poll("the detached run waiting", Duration::from_secs(20), || {
        common::events_so_far(&env.runs_root().join(&id)).iter().any(|e| e["type"] == "checkpoint-asked").then_some(())
    });
    let leaked = command_lines_with(&[&marker]);
    env.awf(&["runs", "stop", &id]).expect_code(0);
    assert!(leaked.is_empty(), "the run's arguments are on a command line: {leaked:?}");
}
