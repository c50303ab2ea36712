//! Secrets stay off command lines and out of records: a sandbox's allowed key reaches the agent
//! through bwrap's environment, never its argv (checked in `/proc/*/cmdline` during the turn), and
//! key values, `Bearer` tokens and `x-api-key` headers echoed back by a harness are scrubbed from
//! `turns.jsonl`, `events.jsonl` and what awf prints.

use crate::common;
use crate::common::fake_model;

use common::{command, wait_for_file, wait_with_timeout, Env, Out};
use fake_model::{FakeModel, Reply};
use std::process::Stdio;

/// A key no other process on the machine carries.
fn unique_key(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{prefix}-{}-{nanos}", std::process::id())
}

/// The pids whose command line holds `needle`, with those command lines.
fn command_lines_holding(needle: &str) -> Vec<(String, String)> {
    common::command_lines().into_iter().filter(|(_, line)| line.contains(needle)).collect()
}

fn bwrap_works() -> bool {
    std::process::Command::new("bwrap")
        .args(["--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--", "/bin/true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
#[ignore = "needs bubblewrap (.ci/setup installs it; the README's test command runs this)"]
fn a_sandboxed_agents_key_is_on_no_command_line_yet_the_agent_sees_it() {
    if !bwrap_works() {
        panic!("bwrap cannot build a sandbox on this machine; this test needs it");
    }
    let env = Env::new();
    let key = unique_key("sk-test-cmdline");
    env.write("awf.toml", "[sandboxes.keyed]\nenv = [\"OPENAI_API_KEY\"]\n");
    let go = env.path().join("go");
    let agent = format!(
        "printf '%s' \"${{OPENAI_API_KEY:-missing}}\" > seen.txt; \
         i=0; while [ ! -f '{go}' ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; \
         echo '\"ok\"' | \"$AWF_LAUNCHER\" result \"$AWF_OP\"",
        go = go.display()
    );
    let script = format!(
        r#"
let a = ctx.agents.open(#{{ key: "keyed", sandbox: "keyed", runtime: #{{ harness: "command", command: ["sh", "-c", {agent}] }} }});
a.ask("go", #{{ type: "string" }})
"#,
        agent = serde_json::to_string(&agent).expect("quote")
    );
    env.write("wf.rhai", &script);
    let child = command(env.path(), &["script", "run", "wf.rhai"])
        .env("OPENAI_API_KEY", &key)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn awf");
    let seen = env.path().join("seen.txt");
    wait_for_file(&seen);
    // The turn is under way: bwrap, the shell and awf are all alive now.
    let leaks = command_lines_holding(&key);
    std::fs::write(&go, "").expect("release the agent");
    let out = wait_with_timeout(child);
    out.expect_code(0);
    assert!(leaks.is_empty(), "the key is on a command line: {leaks:#?}");
    assert_eq!(std::fs::read_to_string(&seen).expect("read seen.txt"), key, "the agent sees the variable");
}

/// Every place a leaked key would show: the run's JSONL records and what awf printed.
fn assert_nowhere(env: &Env, out: &Out, key: &str) {
    for name in ["turns", "events", "stages", "journal"] {
        let path = env.run_dir().join(format!("{name}.jsonl"));
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(!text.contains(key), "{name}.jsonl holds the key:\n{text}");
    }
    let result = std::fs::read_to_string(env.run_dir().join("result.json")).expect("result.json");
    assert!(!result.contains(key), "result.json holds the key:\n{result}");
    assert!(!out.stderr.contains(key) && !out.stdout.contains(key), "printed: {out:#?}");
}

#[test]
fn an_error_body_echoing_the_key_is_scrubbed_from_records_and_output() {
    for (api, var) in [("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY")] {
        let server = FakeModel::start(vec![Reply::EchoHeaders { code: 503 }, Reply::EchoHeaders { code: 401 }]);
        let env = Env::new();
        let base = if api == "openai" { format!("{}/v1", server.base()) } else { server.base() };
        env.write(
            "awf.toml",
            &format!("default_runtime = \"m\"\n[runtimes.m]\nharness = \"{api}\"\nbase_url = \"{base}\"\n"),
        );
        env.write("wf.rhai", "let a = ctx.agents.open(#{ key: \"a\" });\na.ask(\"Say ok.\")\n");
        let key = unique_key("sk-test-echoed");
        let out = wait_with_timeout(
            command(env.path(), &["script", "run", "wf.rhai"])
                .env(var, &key)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn awf"),
        );
        out.expect_code(1);
        assert_nowhere(&env, &out, &key);
        let turns = env.turns();
        let reason = turns[0]["reason"].as_str().unwrap_or("");
        assert!(reason.contains("401") && reason.contains("[redacted]"), "{api}: the reason keeps the rest: {reason}");
        let retries = env.events_of("http-retry");
        assert!(retries[0]["data"]["why"].as_str().unwrap_or("").contains("[redacted]"), "{api}: {retries:?}");
        out.stderr_has("[redacted]");
    }
}

/// Runs `wf.rhai` with `DEPLOY_TOKEN` (a secret-looking name) set to `token`.
fn run_with_token(env: &Env, token: &str) -> Out {
    wait_with_timeout(
        command(env.path(), &["script", "run", "wf.rhai"])
            .env("DEPLOY_TOKEN", token)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn awf"),
    )
}

#[test]
fn a_stderr_tail_with_a_secret_looking_variable_is_scrubbed() {
    let env = Env::new();
    let token = unique_key("ghp-test-token");
    let script = r#"
let a = ctx.agents.open(#{ key: "leaky", runtime: #{ harness: "command", command: ["sh", "-c", "echo \"auth failed for $DEPLOY_TOKEN\" >&2; exit 3"] } });
let o = a.run(#{ prompt: "go" });
o.reason
"#;
    env.write("wf.rhai", script);
    let out = run_with_token(&env, &token);
    out.expect_code(0);
    assert_nowhere(&env, &out, &token);
    out.stdout_has("auth failed for [redacted]");
}

/// Every file under `dir` whose bytes hold `needle`.
fn files_holding(dir: &std::path::Path, needle: &str) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read the run folder") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            found.extend(files_holding(&path, needle));
        } else if let Ok(bytes) = std::fs::read(&path) {
            if String::from_utf8_lossy(&bytes).contains(needle) {
                found.push(path);
            }
        }
    }
    found
}

#[test]
fn an_agent_printing_its_key_leaves_it_in_no_file_of_the_run() {
    let env = Env::new();
    let token = unique_key("ghp-test-printed");
    // The key split over two writes, on stdout and stderr, and the last line without its end.
    let program = r#"printf 'env: DEPLOY_TOKEN=%s\n' "$DEPLOY_TOKEN"; printf '%s' "$DEPLOY_TOKEN" | head -c 6 >&2; sleep 0.1; printf '%s' "$DEPLOY_TOKEN" | tail -c +7 >&2; printf 'tail %s' "$DEPLOY_TOKEN""#;
    let script = format!(
        "let a = ctx.agents.open(#{{ key: \"leaky\", runtime: #{{ harness: \"command\", command: [\"sh\", \"-c\", {program:?}] }} }});\nlet o = a.run(#{{ prompt: \"go\" }});\no.status\n"
    );
    env.write("wf.rhai", &script);
    let out = run_with_token(&env, &token);
    out.expect_code(0);
    assert_nowhere(&env, &out, &token);
    assert_eq!(files_holding(&env.run_dir(), &token), Vec::<std::path::PathBuf>::new(), "the key reached the disk");
    let ops = env.run_dir().join("agents/leaky/ops");
    let stdout: String = std::fs::read_dir(&ops)
        .expect("ops folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "stdout"))
        .map(|p| std::fs::read_to_string(p).expect("read stdout capture"))
        .collect();
    assert!(stdout.contains("env: DEPLOY_TOKEN=[redacted]\n") && stdout.ends_with("tail [redacted]"), "{stdout}");
}
