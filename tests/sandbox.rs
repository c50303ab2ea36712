//! Sandboxes, driven through the real binary with small agent programs
//! (`tests/fixtures/agents/sandbox_*`): what a sandboxed agent cannot reach (outside its workspace,
//! the operator's home, the network, the operator's environment), what `network = "host"` and an
//! `env` allow-list let in, a run-level sandbox shared by several agents, failing closed without
//! bwrap, `awf doctor`, and the example in scripts/.

use crate::common;

use common::{agent_fixture, command, unique_name, wait_with_timeout, Env, Out};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// A file in the operator's home, removed when dropped (also when the test fails).
struct HomeMarker(PathBuf);

impl HomeMarker {
    fn new() -> HomeMarker {
        let home = std::env::var_os("HOME").expect("HOME is set");
        let path = Path::new(&home).join(unique_name(".awf-sandbox-marker"));
        std::fs::write(&path, "the operator's secret\n").expect("write the marker");
        HomeMarker(path)
    }
}

impl Drop for HomeMarker {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Runs `awf ARGS` in `env` with extra environment variables and, when given, a PATH of its own.
fn awf_with(env: &Env, args: &[&str], vars: &[(&str, &str)], path: Option<&Path>) -> Out {
    let mut cmd = command(env.path(), args);
    cmd.envs(vars.iter().copied()).stdout(Stdio::piped()).stderr(Stdio::piped());
    if let Some(p) = path {
        cmd.env("PATH", p);
    }
    wait_with_timeout(cmd.spawn().expect("spawn awf"))
}

/// A script opening one `command` agent `key` that runs the probe with `sandbox` (a Rhai
/// expression, or "" for none) and returns its answer.
fn probe_script(key: &str, sandbox: &str, task: &Value) -> String {
    let sandbox = if sandbox.is_empty() { String::new() } else { format!("sandbox: {sandbox},") };
    let task = serde_json::to_string(&task.to_string()).expect("quote");
    format!(
        r#"
let a = ctx.agents.open(#{{ key: "{key}", {sandbox} runtime: #{{ harness: "command", command: ["python3", "{probe}"] }} }});
a.ask({task}, #{{ type: "object" }})
"#,
        probe = agent_fixture("sandbox_probe.py"),
    )
}

/// Where python3 is on PATH, for the record of what the sandbox had to expose.
fn python3() -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join("python3")).find(|p| p.is_file())
}

#[test]
#[ignore = "needs bubblewrap (.ci/setup installs it; the README's test command runs these)"]
fn a_sandboxed_agent_cannot_escape_its_workspace_yet_answers() {
    let env = Env::new();
    let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a folder outside the workspace");
    let marker = HomeMarker::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let secret = unique_name("SANDBOX_TEST_SECRET").replace('-', "_");
    let task = |file: &str| {
        json!({
            "outside": outside.path().join(file), "marker": marker.0, "env": secret,
            "port": listener.local_addr().expect("port").port(),
        })
    };
    // The same program unsandboxed reaches everything: the checks below are not vacuous.
    env.write("wf.rhai", &probe_script("bare", "", &task("bare.txt")));
    let bare = awf_with(&env, &["script", "run", "wf.rhai"], &[(&secret, "hunter2")], None);
    bare.expect_code(0);
    let b = bare.json();
    assert_eq!(
        (&b["wrote_outside"], &b["saw_marker"], &b["connected"], &b["env"], &b["records"]),
        (&json!(true), &json!(true), &json!(true), &json!("hunter2"), &json!(1)),
        "{b}"
    );

    let sandboxed = Env::new();
    sandboxed.write("awf.toml", "[sandboxes.locked]\n");
    sandboxed.write("wf.rhai", &probe_script("probe", "\"locked\"", &task("escaped.txt")));
    let out = awf_with(&sandboxed, &["script", "run", "wf.rhai"], &[(&secret, "hunter2")], None);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["wrote_outside"], false, "{v}");
    // Read-only where the host's folder shows through; absent where it lay under /tmp, which the
    // sandbox replaces (a checkout under /tmp puts cargo's temp folder there).
    let denied = v["outside_error"].as_str().unwrap_or("");
    assert!(denied == "Read-only file system" || denied == "No such file or directory", "{v}");
    assert!(!outside.path().join("escaped.txt").exists());
    assert_eq!(v["wrote_workspace"], true, "{v}");
    assert!(sandboxed.path().join("inside.txt").is_file(), "the workspace write reaches the host");
    assert_eq!(v["saw_marker"], false, "the operator's home is hidden: {v}");
    assert_eq!(v["records"], 0, "the run records are hidden though they lie in the workspace: {v}");
    assert_eq!(v["env"], Value::Null, "the operator's environment stays out: {v}");
    assert_eq!(v["connected"], false, "no network: {v}");
    let home = v["home"].as_str().expect("home");
    assert!(home.ends_with("/agents/probe/home"), "its own home: {home}");
    assert!(Path::new(home).join(".probe-config").is_file(), "its home is writable and kept");
    assert!(sandboxed.run_dir().join("agents/probe/state/kept.txt").is_file(), "AWF_STATE_DIR is writable");

    let result = sandboxed.result();
    let sandboxes = result["sandboxes"].as_array().expect("sandboxes in result.json");
    assert_eq!(sandboxes.len(), 1, "{result:#}");
    let s = &sandboxes[0];
    assert_eq!(
        (s["name"].as_str(), s["scope"].as_str(), s["provider"].as_str()),
        (Some("locked"), Some("config"), Some("bwrap"))
    );
    assert_eq!(s["policy"]["network"], "none");
    assert_eq!(s["agents"][0]["agent"], "probe");
    assert_eq!(s["agents"][0]["confined"], true);
    let seat = &s["agents"][0]["seat"];
    assert_eq!(seat["workspace"], sandboxed.path().display().to_string());
    // A python3 under a home folder (a pyenv shim) is bound read-only, and the record says so.
    let home_dir = std::env::var("HOME").expect("HOME");
    if let Some(py) = python3().filter(|p| p.starts_with(&home_dir) || p.starts_with("/root") || p.starts_with("/home"))
    {
        let exposed = seat["exposed"].as_array().expect("exposed");
        assert!(exposed.iter().any(|e| e["needed_by"] == py.display().to_string()), "{seat:#}");
    }
    let opened = sandboxed.events_of("sandbox-opened");
    assert_eq!(opened.len(), 1);
    assert_eq!(opened[0]["data"]["sandbox"], "locked");
    assert_eq!(opened[0]["data"]["policy"]["network"], "none");
    let seated = sandboxed.events_of("sandbox-seated");
    assert_eq!(seated[0]["data"]["agent"], "probe");
    let spawned = common::read_jsonl(&sandboxed.run_dir().join("agents/probe/ops/probe-1.jsonl"));
    assert_eq!(spawned[0]["data"]["sandbox"], "locked", "{spawned:?}");
}

#[test]
#[ignore = "needs bubblewrap (.ci/setup installs it; the README's test command runs these)"]
fn network_host_connects_and_the_env_allow_list_lets_named_variables_in() {
    let env = Env::new();
    let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("outside");
    let marker = HomeMarker::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let listed = unique_name("SANDBOX_TEST_LISTED").replace('-', "_");
    let task = json!({
        "outside": outside.path().join("x.txt"), "marker": marker.0, "env": listed,
        "port": listener.local_addr().expect("port").port(),
    });
    env.write("wf.rhai", &probe_script("probe", r#"#{ network: "host", env: ["SANDBOX_TEST_LISTED_*"] }"#, &task));
    let out = awf_with(&env, &["script", "run", "wf.rhai"], &[(&listed, "passed")], None);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["connected"], true, "{v}");
    assert_eq!(v["env"], "passed", "{v}");
    assert_eq!((v["wrote_outside"].clone(), v["saw_marker"].clone()), (json!(false), json!(false)), "{v}");
    let s = &env.result()["sandboxes"][0];
    assert_eq!((s["name"].as_str(), s["scope"].as_str()), (Some("inline:probe"), Some("inline")));
    assert_eq!(s["policy"]["network"], "host");
    assert_eq!(s["policy"]["env"], json!(["SANDBOX_TEST_LISTED_*"]));
}

#[test]
#[ignore = "needs bubblewrap (.ci/setup installs it; the README's test command runs these)"]
fn a_run_level_sandbox_seats_every_agent_in_one_shared_workspace() {
    let env = Env::new();
    env.write("awf.toml", "[sandboxes.shared]\n\n[sandboxes.other]\nnetwork = \"host\"\n");
    let share = agent_fixture("sandbox_share.sh");
    let script = format!(
        r#"
let rt = #{{ harness: "command", command: ["sh", "{share}"] }};
let a = ctx.agents.open(#{{ key: "a", runtime: rt }});
let first = a.ask("leave a file", #{{ type: "array" }});
let b = ctx.agents.open(#{{ key: "b", runtime: rt }});
let second = b.ask("leave a file", #{{ type: "array" }});
let c = ctx.agents.open(#{{ key: "c", sandbox: "shared" }});
c.ask("in-process");
let errors = [];
try {{ ctx.agents.open(#{{ key: "d", sandbox: "other", runtime: rt }}); }} catch (e) {{ errors.push(e); }}
try {{ ctx.agents.open(#{{ key: "a", sandbox: #{{}}, runtime: rt }}); }} catch (e) {{ errors.push(e); }}
#{{ first: first, second: second, errors: errors }}
"#
    );
    env.write("wf.rhai", &script);
    let out = env.awf(&["script", "run", "wf.rhai", "--sandbox", "shared"]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["first"], json!(["a"]));
    assert_eq!(v["second"], json!(["a", "b"]), "b sees a's file: one shared workspace");
    let errors: Vec<&str> = v["errors"].as_array().expect("errors").iter().filter_map(Value::as_str).collect();
    assert!(errors[0].contains("agent d") && errors[0].contains("--sandbox shared"), "{errors:?}");
    assert!(errors[1].contains("agent a is already open with different sandbox"), "{errors:?}");
    let sandboxes = env.result()["sandboxes"].clone();
    assert_eq!(sandboxes.as_array().map(Vec::len), Some(1), "{sandboxes:#}");
    let s = &sandboxes[0];
    assert_eq!((s["name"].as_str(), s["scope"].as_str()), (Some("shared"), Some("run")));
    let agents: Vec<(&str, bool)> = s["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .map(|a| (a["agent"].as_str().unwrap_or(""), a["confined"].as_bool().unwrap_or(true)))
        .collect();
    assert_eq!(agents, vec![("a", true), ("b", true), ("c", false)], "fake agents are recorded, not confined");
    let workspace = env.path().display().to_string();
    assert_eq!(
        (s["agents"][0]["seat"]["workspace"].as_str(), s["agents"][1]["seat"]["workspace"].as_str()),
        (Some(workspace.as_str()), Some(workspace.as_str()))
    );
    assert!(env.path().join("shared-a.txt").is_file() && env.path().join("shared-b.txt").is_file());

    let unknown = env.awf(&["script", "run", "wf.rhai", "--sandbox", "nosuch"]);
    unknown.expect_code(2).stderr_has("unknown sandbox `nosuch`").stderr_has("known: other, shared");
}

/// A folder of symlinks to just the programs named, to run awf with a PATH lacking bwrap.
fn path_with(dir: &Path, programs: &[&str]) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    for p in programs {
        let real = std::env::split_paths(&std::env::var_os("PATH").expect("PATH"))
            .map(|d| d.join(p))
            .find(|c| c.is_file())
            .unwrap_or_else(|| panic!("{p} is not on PATH"));
        std::os::unix::fs::symlink(real, bin.join(p)).expect("symlink");
    }
    bin
}

#[test]
fn without_bwrap_a_sandboxed_agent_is_refused_and_nothing_runs() {
    let env = Env::new();
    let tools = tempfile::tempdir().expect("tempdir");
    let path = path_with(tools.path(), &["sh", "cat"]);
    let share = agent_fixture("sandbox_share.sh");
    env.write(
        "wf.rhai",
        &format!(
            r#"let a = ctx.agents.open(#{{ key: "a", sandbox: #{{}}, runtime: #{{ harness: "command", command: ["sh", "{share}"] }} }});
a.ask("leave a file", #{{ type: "array" }})"#
        ),
    );
    let out = awf_with(&env, &["script", "run", "wf.rhai"], &[], Some(&path));
    out.expect_code(1)
        .stderr_has("agent a: sandbox `inline:a` cannot be made: bubblewrap is missing: no `bwrap` on PATH")
        .stderr_has("apt-get install bubblewrap")
        .stderr_has("the agent was not started");
    assert!(!env.path().join("shared-a.txt").exists(), "the program never ran");
    assert!(env.turns().is_empty());
    assert!(env.events_of("op-started").is_empty() && env.events_of("agent-opened").is_empty());
    assert!(!env.run_dir().join("agents/a/ops").exists());

    let doctor = awf_with(&env, &["doctor"], &[], Some(&path));
    doctor.expect_code(1).stdout_has("FAIL  sandbox: bwrap").stdout_has("apt-get install bubblewrap");
}

#[test]
#[ignore = "needs bubblewrap (.ci/setup installs it; the README's test command runs these)"]
fn doctor_reports_that_sandboxes_work_here_and_the_harnesses_built() {
    let env = Env::new();
    let out = env.awf(&["doctor"]);
    out.expect_code(0).stdout_has("sandbox: namespaces").stdout_has("harness: command");
    let checks = env.awf(&["doctor", "--json"]).json();
    let names: Vec<&str> = checks.as_array().expect("array").iter().filter_map(|c| c["name"].as_str()).collect();
    assert!(names.starts_with(&["sandbox: bwrap", "sandbox: namespaces"]), "{names:?}");
    assert!(names.contains(&"harness: fake") && names.contains(&"harness: command"), "{names:?}");
    assert!(checks.as_array().expect("array").iter().all(|c| c["ok"] == true && c["detail"].is_string()));
}

#[test]
#[ignore = "needs bubblewrap (.ci/setup installs it; the README's test command runs these)"]
fn the_sandboxed_example_confines_its_program_agent() {
    let env = Env::new();
    let scripts = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts");
    std::fs::create_dir_all(env.path().join("scripts/agents")).expect("mkdir");
    std::fs::copy(scripts.join("agents/survey.sh"), env.path().join("scripts/agents/survey.sh")).expect("copy");
    env.write("docs/readme.md", "# a project file the agent may read\n");
    let out = env.awf(&["script", "run", &scripts.join("sandboxed.rhai").display().to_string()]);
    out.expect_code(0);
    let survey = out.json()["survey"].clone();
    assert_eq!(survey["home_entries"], 0, "the operator's home folders are empty: {survey}");
    assert_eq!(survey["can_write_root"], false, "{survey}");
    assert_eq!(survey["interfaces"], 0, "no network besides loopback: {survey}");
    assert_eq!(survey["files"], 2, "the workspace's files, not the run records: {survey}");
    assert!(survey["home"].as_str().is_some_and(|h| h.ends_with("/agents/surveyor/home")), "{survey}");
    let s = &env.result()["sandboxes"][0];
    assert_eq!(s["name"], "inline:surveyor");
    assert_eq!(s["agents"][0]["confined"], true);
}

#[test]
#[ignore = "needs bubblewrap (.ci/setup installs it; the README's test command runs these)"]
fn a_policy_that_cannot_be_enforced_refuses_the_agent() {
    let env = Env::new();
    let share = agent_fixture("sandbox_share.sh");
    let script = format!(
        r#"
let rt = #{{ harness: "command", command: ["sh", "{share}"] }};
let errors = [];
try {{ ctx.agents.open(#{{ key: "a", sandbox: #{{ writable: ["missing"] }}, runtime: rt }}); }} catch (e) {{ errors.push(e); }}
try {{ ctx.agents.open(#{{ key: "b", sandbox: #{{ netwrok: "host" }}, runtime: rt }}); }} catch (e) {{ errors.push(e); }}
try {{ ctx.agents.open(#{{ key: "c", sandbox: #{{ env: ["HOME"] }}, runtime: rt }}); }} catch (e) {{ errors.push(e); }}
try {{ ctx.agents.open(#{{ key: "d", sandbox: 3, runtime: rt }}); }} catch (e) {{ errors.push(e); }}
errors
"#
    );
    let out = env.run(&script, &[]);
    out.expect_code(0);
    let v = out.json();
    let errors: Vec<&str> = v.as_array().expect("errors").iter().filter_map(Value::as_str).collect();
    assert_eq!(errors.len(), 4, "{errors:?}");
    assert!(
        errors[0].contains("agent a: sandbox `inline:a` cannot be made: writable path")
            && errors[0].contains("does not exist"),
        "{errors:?}"
    );
    assert!(errors[1].contains("netwrok"), "{errors:?}");
    assert!(errors[2].contains("HOME is the agent's own home"), "{errors:?}");
    assert!(errors[3].contains("`sandbox` must be a name"), "{errors:?}");
    for agent in std::fs::read_dir(env.run_dir().join("agents")).into_iter().flatten().flatten() {
        assert!(!agent.path().join("ops").exists(), "{} ran a turn", agent.path().display());
    }
    assert!(env.result()["sandboxes"].as_array().is_some_and(Vec::is_empty));
}
