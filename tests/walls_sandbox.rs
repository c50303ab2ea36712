//! Issue 46, the sandbox's own walls, tried for real by the hostile agent
//! (`tests/fixtures/agents/hostile.py`) from inside bubblewrap: a writable path swapped for a
//! symlink between turns (row 2), host sockets (row 4), awf's own places in the project (row 1's
//! socket and token, the cluster key), the repository's `.git` read-only for every sandboxed agent
//! and readable from a worktree under /tmp (rows 3 and 11), and a plan that starts no bwrap (row
//! 9). Each ran as the attacker wanted before the sandbox was built from an allow-list.

use crate::common;

use common::hostile::{self, reached, turn};
use common::{unique_name, Env};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Runs `wf.rhai` in `env` with extra variables; its value.
fn run(env: &Env, vars: &[(&str, &str)]) -> Value {
    let mut cmd = common::command(env.path(), &["script", "run", "wf.rhai"]);
    cmd.envs(vars.iter().copied()).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let out = common::wait_with_timeout(cmd.spawn().expect("spawn awf"));
    out.expect_code(0);
    out.json()
}

#[test]
#[ignore = "needs bubblewrap (.ci/setup installs it; the README's test command runs these)"]
fn a_writable_path_swapped_for_a_symlink_is_refused_at_the_next_turn() {
    let env = Env::new();
    // Where the symlink leads: a folder outside the workspace standing for the operator's home.
    let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("outside");
    std::fs::create_dir_all(env.path().join("out/build")).expect("the writable path");
    env.write("awf.toml", "[sandboxes.box]\nwritable = [\"out/build\"]\n");
    // Relative, as the issue's attack wrote it (`../../home`): resolved inside the new root, where
    // a bind would land on the host's folder of that name.
    let up = "../".repeat(env.path().join("out").components().count() - 1);
    let target = format!("{up}{}", outside.path().display().to_string().trim_start_matches('/'));
    let turns = [
        turn(&["swap_writable"], json!({ "swap": { "dir": "out", "link": "build", "target": target } })),
        turn(&["write_writable"], json!({ "write": { "path": "out/build", "name": "pwned.txt" } })),
    ];
    env.write("wf.rhai", &hostile::workflow_outcomes("h", "sandbox: \"box\"", &turns));
    let v = run(&env, &[]);
    assert!(reached(&v[0]["value"], "swap_writable"), "the swap itself is the agent's to make: {v:#}");
    assert!(env.path().join("out/build").is_symlink());
    let second = &v[1];
    assert_eq!(second["kind"], "failed", "the second turn must not run: {v:#}");
    let reason = second["reason"].as_str().unwrap_or("");
    assert!(
        reason.contains("writable path") && reason.contains("out/build") && reason.contains("changed since"),
        "the reason names the path: {reason}"
    );
    assert!(!outside.path().join("pwned.txt").exists(), "written through the symlink");
}

#[test]
#[ignore = "needs bubblewrap (.ci/setup installs it; the README's test command runs these)"]
fn host_sockets_are_not_in_the_sandbox() {
    let env = Env::new();
    // Stand-ins for the session bus in $XDG_RUNTIME_DIR and awf's tmux server in $TMUX_TMPDIR,
    // both where the sandbox would show them (inside the workspace), and one in /run when this
    // user may make one there (root: CI).
    let mut listeners = Vec::new();
    let mut paths: Vec<PathBuf> = Vec::new();
    for rel in ["rt/bus", "tmuxdir/tmux-0/awf"] {
        let p = env.path().join(rel);
        std::fs::create_dir_all(p.parent().expect("a folder")).expect("mkdir");
        listeners.push(std::os::unix::net::UnixListener::bind(&p).expect("bind"));
        paths.push(p);
    }
    let run_sock = PathBuf::from("/run").join(unique_name("awf-walls").replace('-', "_") + ".sock");
    if let Ok(l) = std::os::unix::net::UnixListener::bind(&run_sock) {
        listeners.push(l);
        paths.push(run_sock.clone());
    }
    let vars = [
        ("XDG_RUNTIME_DIR", env.path().join("rt").display().to_string()),
        ("TMUX_TMPDIR", env.path().join("tmuxdir").display().to_string()),
    ];
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let task = [turn(&["host_sockets"], json!({ "sockets": paths }))];
    // Unsandboxed, the same agent reaches them: the check below is not vacuous.
    env.write("wf.rhai", &hostile::workflow("bare", "labels: #{}", &task));
    assert!(reached(&run(&env, &vars)[0], "host_sockets"));
    env.write("wf.rhai", &hostile::workflow("h", "sandbox: #{ network: \"none\" }", &task));
    let v = run(&env, &vars);
    assert!(!reached(&v[0], "host_sockets"), "a host socket answered: {v:#}");
    let root: Vec<&str> = v[0]["root"].as_array().expect("root").iter().filter_map(Value::as_str).collect();
    // (/root or /home may hold what the program needs from there, e.g. a pyenv python3.)
    for absent in ["run", "var", "sys", "srv", "mnt", "media"] {
        assert!(!root.contains(&absent), "/{absent} is in the sandbox: {root:?}");
    }
    let _ = std::fs::remove_file(&run_sock);
}

#[test]
#[ignore = "needs bubblewrap (.ci/setup installs it; the README's test command runs these)"]
fn awfs_own_places_in_the_project_are_hidden_from_a_sandboxed_agent() {
    let env = Env::new();
    // What `awf serve` (socket, or token on TCP) and a cluster leave in the project.
    let serve = env.path().join(".awf/serve.sock");
    std::fs::create_dir_all(serve.parent().expect("a folder")).expect("mkdir");
    let _listener = std::os::unix::net::UnixListener::bind(&serve).expect("bind");
    env.write(".awf/serve.token", "0123456789abcdef0123456789abcdef");
    env.write(".awf/cluster.key", "the cluster key");
    let task = [turn(
        &["serve_socket", "read_files", "host_sockets"],
        json!({ "files": [".awf/serve.token", ".awf/cluster.key", env.path().join(".awf/serve.token")] }),
    )];
    env.write("wf.rhai", &hostile::workflow("bare", "labels: #{}", &task));
    let bare = run(&env, &[]);
    assert!(reached(&bare[0], "read_files") && reached(&bare[0], "host_sockets"), "{bare:#}");
    env.write("wf.rhai", &hostile::workflow("h", "sandbox: #{ network: \"none\" }", &task));
    let v = run(&env, &[]);
    for attack in ["serve_socket", "read_files", "host_sockets"] {
        assert!(!reached(&v[0], attack), "{attack} reached: {v:#}");
    }
}

/// A repository whose checkout holds the hostile agent's marker target.
fn repository() -> Env {
    let env = common::git::repo();
    common::git::git(env.path(), &["config", "user.name", "t"]);
    common::git::git(env.path(), &["config", "user.email", "t@t"]);
    env
}

#[test]
#[ignore = "needs bubblewrap (.ci/setup installs it; the README's test command runs these)"]
fn the_repositorys_git_is_read_only_in_every_sandbox_and_a_worktree_agent_still_reads_it() {
    let env = repository();
    let config_before = std::fs::read_to_string(env.path().join(".git/config")).expect("config");
    let planted = env.path().join("planted");
    let git_dir = env.path().join(".git");
    let plant = turn(&["plant_git"], json!({ "planted": planted, "git_dir": git_dir }));
    let read = turn(&["works_git"], json!({}));
    // In the checkout itself: its .git is there, read-only.
    env.write(
        "wf.rhai",
        &hostile::workflow("in-checkout", "sandbox: #{ network: \"none\" }", std::slice::from_ref(&plant)),
    );
    let v = run(&env, &[]);
    assert!(!reached(&v[0], "plant_git"), "a write into .git landed: {v:#}");
    // In a worktree of its own, in a project under /tmp: the repository's .git shows read-only,
    // so git status, diff and log work and nothing can be planted.
    let spec = "sandbox: #{ network: \"none\" }, isolation: \"worktree\"";
    env.write("wf.rhai", &hostile::workflow("in-worktree", spec, &[read, plant]));
    let v = run(&env, &[]);
    assert!(reached(&v[0], "works_git"), "git in the worktree: {v:#}");
    assert!(!reached(&v[1], "plant_git"), "a write into the repository's .git landed: {v:#}");
    assert_eq!(std::fs::read_to_string(env.path().join(".git/config")).expect("config"), config_before);
    assert!(!planted.exists());
    let hooks: Vec<String> = std::fs::read_dir(git_dir.join("hooks"))
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    assert!(hooks.iter().all(|h| h.ends_with(".sample")), "a hook was planted: {hooks:?}");
}

#[test]
fn a_plan_of_a_sandboxed_agent_starts_no_bwrap() {
    let env = Env::new();
    // A `bwrap` first on PATH that leaves a mark when anything starts it.
    let bin = env.path().join("bin");
    let mark = env.path().join("bwrap-started");
    env.write("bin/bwrap", &format!("#!/bin/sh\ntouch {}\nexec /usr/bin/env -i true\n", mark.display()));
    std::fs::set_permissions(bin.join("bwrap"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    env.write(
        "wf.rhai",
        r#"let a = ctx.agents.open(#{ key: "a", sandbox: #{ network: "none" }, runtime: #{ harness: "command", command: ["true"] } });
a.ask("go")"#,
    );
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let mut cmd = common::command(env.path(), &["script", "plan", "wf.rhai", "--json"]);
    cmd.env("PATH", &path).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let out = common::wait_with_timeout(cmd.spawn().expect("spawn awf"));
    out.expect_code(0);
    assert_eq!(out.json()["agents"], 1);
    assert!(!mark.exists(), "the plan started bwrap");
    assert!(!Path::new(&env.path().join(".awf/runs")).exists(), "a plan leaves no run folder");
}
