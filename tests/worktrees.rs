//! Agents in git worktrees of their own, through the real binary in throwaway repositories: the
//! example in scripts/worktrees/ (three agents, three branches, merged back), `keep`,
//! `a.worktree`, the warning about uncommitted changes, a spec's `cwd`, `--isolation` for a script
//! run and a council run, `runs show` and `runs clean`, and resume (found again, re-added, a lost
//! base refused).

use crate::common;

use common::git::{git, read, repo};
use serde_json::Value;

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
    let logs = env.events_of("log");
    let field = |text: &str, f: &str| {
        let e = logs.iter().find(|e| e["data"]["text"].as_str().is_some_and(|t| t.contains(text))).expect(text);
        e["data"]["fields"][f].clone()
    };
    assert_eq!(field("works in", "branch"), format!("awf/{id}/k"), "the worktree's add is in the log");
    assert_eq!(field("is committed on", "commit"), git(env.path(), &["rev-parse", &format!("awf/{id}/k")]));
    env.awf(&["runs", "clean", &id]).expect_code(0).stdout_has("1 worktree removed");
    assert!(!path.exists());
    git(env.path(), &["rev-parse", "--verify", &format!("refs/heads/awf/{id}/k")]);
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
fn a_turn_that_fails_commits_what_its_agent_left_and_keeps_the_worktree_on_failure() {
    let env = repo();
    let script = r#"
let a = ctx.agents.open(#{ key: "a", isolation: "worktree", keep: "on-failure",
    runtime: #{ harness: "command", command: ["sh", "-c", "cat >/dev/null; echo half > half.txt; exit 3"] } });
let o = a.run(#{ prompt: "go" });
#{ kind: o.kind, state: a.worktree.state, changed: a.worktree.changed }
"#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let id = env.run_id();
    assert_eq!(out.json(), serde_json::json!({ "kind": "failed", "state": "kept", "changed": ["half.txt"] }));
    assert_eq!(git(env.path(), &["show", &format!("awf/{id}/a:half.txt")]), "half");
    assert!(env.path().join(format!(".awf/worktrees/{id}/a/half.txt")).is_file(), "kept");
}

#[test]
fn runs_clean_refuses_a_live_run() {
    let env = repo();
    env.with_responder(r#"fn respond(turn) { #{ hang: true } }"#);
    env.write("wf.rhai", r#"let a = ctx.agents.open(#{ key: "w", isolation: "worktree" }); a.ask("hang")"#);
    let running = common::Running::start(env.path(), &["script", "run", "wf.rhai"]);
    let dir = common::poll("a run folder", common::TIMEOUT, || env.run_dirs().first().cloned());
    common::poll("the worktree's log line", common::TIMEOUT, || {
        std::fs::read_to_string(dir.join("events.jsonl")).ok().filter(|e| e.contains("works in")).map(|_| ())
    });
    let id = env.run_id();
    env.awf(&["runs", "clean", &id]).expect_code(2).stderr_has("is running; stop it first");
    assert!(env.path().join(format!(".awf/worktrees/{id}/w")).is_dir(), "left alone");
    env.awf(&["runs", "stop", &id, "--now"]);
    running.finish();
}

#[test]
fn eight_agents_opening_at_once_each_get_a_worktree_and_all_merge() {
    let env = repo();
    let script = r#"
let program = `${ctx.cwd}/scripts/worktrees/fix_issue.sh`;
let keys = ctx.parallel([0, 1, 2, 3, 4, 5, 6, 7], |i| {
    let a = ctx.agents.open(#{ key: `a ${i}`, isolation: "worktree",
        runtime: #{ harness: "command", command: ["sh", program, `out/${i}.txt`, "x"] } });
    a.ask("go", #{ type: "object" });
    a.stop("done");
    a.key
});
ctx.worktrees.merge(keys).merged.len()
"#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    assert_eq!(out.json(), 8);
    for i in 0..8 {
        assert_eq!(read(&env, &format!("out/{i}.txt")), "x\n");
    }
    assert_eq!(git(env.path(), &["worktree", "list", "--porcelain"]).matches("worktree ").count(), 1, "all removed");
}
