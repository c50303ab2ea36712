//! The lifecycle of a turn's process (`harness/process.rs`), where the harness tests do not reach
//! it: a process that tries to leave its own process group.

use crate::common;

use common::{process_alive, Env};
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

/// A CLI stand-in that tries to move into awf's process group (out of the group its turn runs in,
/// where a group kill would no longer reach it), notes how that went and its pid, and sleeps
/// without a word. A turn's process leads a session of its own, so it cannot (EPERM).
const RUNAWAY: &str = r#"#!/usr/bin/env python3
import os, time
try:
    os.setpgid(0, os.getpgid(os.getppid()))
    left = "left"
except OSError as e:
    left = str(e.errno)
with open("runaway.left", "w") as f:
    f.write(left)
with open("runaway.pid", "w") as f:
    f.write(str(os.getpid()))
time.sleep(120)
"#;

#[test]
fn a_stalled_cli_that_tries_to_leave_its_group_is_killed_without_waiting_for_the_timeout() {
    let env = Env::new();
    let program = env.write("runaway.py", RUNAWAY);
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    env.write(
        "awf.toml",
        &format!(
            "[runtimes.m]\nharness = \"claude\"\nbase_url = \"http://127.0.0.1:9\"\n[harnesses.claude]\ncommand = \"{}\"\n[limits]\nstall_timeout = \"3s\"\n",
            program.display()
        ),
    );
    let script = r#"
let a = ctx.agents.open(#{ key: "a", runtime: "m" });
let o = a.run(#{ prompt: "x", schema: #{ type: "object" }, timeout_ms: 60000 });
#{ kind: o.kind, reason: o.reason }
"#;
    let started = Instant::now();
    let out = env.run(script, &[]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["kind"], "failed", "{v}");
    assert!(v["reason"].as_str().unwrap_or("").starts_with("stalled"), "{v}");
    assert!(started.elapsed() < Duration::from_secs(30), "waited {:?} for a process out of reach", started.elapsed());
    let left = std::fs::read_to_string(env.path().join("runaway.left")).expect("the runaway tried");
    assert_eq!(left, nix::libc::EPERM.to_string(), "a session leader cannot leave its group");
    let pid = std::fs::read_to_string(env.path().join("runaway.pid")).expect("the runaway started");
    assert!(!process_alive(&pid), "the runaway {pid} still runs after its turn");
}
