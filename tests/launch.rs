//! One way to launch a run (issue 27 rows 1-3): the failure path of a background run honours
//! awf.toml's `runs_dir`, and `Host::start` is called from `host/launch.rs` alone.

use crate::common;

use common::{read_json, Env};

/// Row 3: a background process whose run cannot be prepared (here a bad `stall_timeout`) marks
/// its folder `failed` under awf.toml's `runs_dir`, not under `.awf/runs`.
#[test]
fn a_detached_run_that_fails_in_prepare_is_marked_under_the_configured_runs_dir() {
    let env = Env::new();
    env.write("awf.toml", "runs_dir = \"elsewhere\"\n[limits]\nstall_timeout = \"soon\"\n");
    env.write("wf.rhai", "42\n");
    // What `--detach` leaves for the process it starts: the folder, queued.
    let id = "20250101T000000Z-abcdef";
    env.write(
        &format!("elsewhere/{id}/background.json"),
        &format!(r#"{{"v": 1, "id": "{id}", "script": "wf.rhai", "status": "queued", "pid": null}}"#),
    );
    let out = env.awf(&["script", "run", "wf.rhai", "--as-run", id]);
    out.expect_code(2).stderr_has("bad value for limits.stall_timeout");
    let doc = read_json(&env.path().join(format!("elsewhere/{id}/background.json")));
    assert_eq!(doc["status"], "failed", "{doc}");
    assert!(doc["error"].as_str().unwrap_or("").contains("limits.stall_timeout"), "{doc}");
    assert!(!env.path().join(".awf/runs").join(id).exists(), "nothing is written under the default folder");
}

/// Row 1: a run is put together in one place. `Host::open` is private to `host/`, so the
/// compiler holds `launch::start` to be its only caller; this holds that nothing in `src/` calls
/// `Host::start` (kept for `serve` until it calls `launch`) but the files listed here.
#[test]
fn host_start_is_called_only_from_the_launch_path() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut callers = Vec::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read src").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let code: String =
                text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n");
            if code.contains("Host::start(") || code.contains("Host::open(") {
                callers.push(path.strip_prefix(&src).expect("under src").display().to_string());
            }
        }
    }
    callers.sort();
    assert_eq!(callers, ["host/launch.rs"], "a run is started outside host/launch.rs");
}
