//! Helpers for tests that drive the pinned agent CLIs against the fake model server: whether a
//! CLI is installed (a missing one fails the #[ignore]d test), the re-run in a loopback-only
//! network namespace, a folder whose default runtime is the CLI, and `awf` run with the
//! operator's home and keys kept out.
#![allow(dead_code)]

use super::{Env, Out};
use std::path::Path;
use std::process::{Command, Stdio};

/// Set inside the network namespace, so that the re-run does not re-run itself.
const IN_NETNS: &str = "AWF_TEST_IN_NETNS";

/// The variables that would let a CLI reach the operator's own configuration or keys.
pub const OPERATOR_VARS: [&str; 9] = [
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "PI_CODING_AGENT_DIR",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "CLAUDECODE",
];

/// Panics when `cli` does not run here: the tests that need it are #[ignore]d, and run only when asked.
pub fn installed(cli: &str, test: &str) -> bool {
    let ok = Command::new(cli)
        .arg("--version")
        .env("PI_OFFLINE", "1")
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(ok, "{test}: `{cli}` is not installed (.ci/setup installs the version pinned in src/harness/cli/mod.rs)");
    ok
}

/// Runs `test` again, alone, in a loopback-only network namespace; true when it did (the caller
/// then returns). False when already inside one, or when none can be made here.
pub fn rerun_in_netns(test: &str) -> bool {
    if std::env::var_os(IN_NETNS).is_some() {
        return false;
    }
    let netns = Command::new("unshare")
        .args(["-n", "--", "sh", "-c", "ip link set lo up"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !netns {
        eprintln!("{test}: no network namespace here (unshare -n needs root): running against 127.0.0.1 only");
        return false;
    }
    let exe = std::env::current_exe().expect("test binary");
    // The test's full path (`module::name` in the one test binary): libtest names its thread so.
    let current = std::thread::current();
    let test = current.name().filter(|n| n.ends_with(test)).unwrap_or(test);
    let out = Command::new("unshare")
        .args(["-n", "--", "sh", "-c", "ip link set lo up && exec \"$0\" \"$@\""])
        .arg(&exe)
        .args([test, "--exact", "--include-ignored", "--nocapture", "--test-threads=1"])
        .env(IN_NETNS, "1")
        .stdin(Stdio::null())
        .output()
        .expect("run the test in a network namespace");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("--- {test}, re-run in a loopback-only network namespace:\n{stdout}\n{stderr}");
    assert!(out.status.success(), "{test} failed in the network namespace");
    assert!(stdout.contains("1 passed"), "{test} did not run in the network namespace");
    true
}

/// The runtime table for `cli` against the fake at `base`.
pub fn runtime(cli: &str, base: &str) -> String {
    match cli {
        "claude" => format!("harness = \"claude\"\nmodel = \"claude-sonnet-4-5\"\nbase_url = \"{base}\"\n"),
        _ => format!("harness = \"{cli}\"\nmodel = \"fake-model\"\nbase_url = \"{base}/v1\"\n"),
    }
}

/// A working folder whose default runtime `m` is `cli` at `base`, with `extra` appended to
/// `awf.toml`, and an empty home for the operator. Its stall timeout (60 s) leaves room for a
/// CLI's start on a loaded machine: CI saw Claude Code and Codex take over 15 s to write their
/// first session line in a pane; these tests are not about stalls (`cli_harness` is).
pub fn setup(cli: &str, base: &str, extra: &str) -> Env {
    let env = Env::new();
    env.write(
        "awf.toml",
        &format!(
            "default_runtime = \"m\"\n[runtimes.m]\n{}\n[prices.\"fake-model\"]\ninput = 1.0\noutput = 2.0\n[limits]\nstall_timeout = \"60s\"\n{extra}",
            runtime(cli, base)
        ),
    );
    std::fs::create_dir_all(env.path().join("operator-home")).expect("home");
    env
}

/// Runs `awf ARGS` in the folder with HOME at `home` and the operator's variables removed,
/// with room for several CLI start-ups on a busy machine.
pub fn awf_as(env: &Env, args: &[&str], home: &Path) -> Out {
    let mut cmd = super::command(env.path(), args);
    cmd.env("HOME", home);
    for var in OPERATOR_VARS {
        cmd.env_remove(var);
    }
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn awf");
    super::wait_within(child, std::time::Duration::from_secs(120))
}
