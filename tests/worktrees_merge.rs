//! `ctx.worktrees.merge` through the real binary: a conflict left out whole, refusals that merge
//! nothing, a merge into a named branch, and `map` with worktrees (write sets checked against each
//! branch's real diff, branches merged back).

use crate::common;

use common::git::{git, read, repo};

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

/// `map` with worktrees: a script calling the strategy with a program as splitter and workers.
fn map_script(ownership: &str) -> String {
    let program = common::agent_fixture("map_worktree.sh");
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
