//! awf's own git against a repository an agent could write: hooks, `core.hooksPath`,
//! `core.fsmonitor`, `core.worktree`, filters (by `.git/info/attributes` and by a `.gitattributes`
//! an agent commits), diff drivers and a merge driver, each planted to `touch` a marker, then
//! worktree agents whose leftovers awf commits and merges back (a fast-forward and a merge commit):
//! no marker is ever made and the work lands. And what an agent leaves that awf cannot commit (a
//! nested repository, a locked branch) keeps its worktree, with the reason recorded and shown.

use crate::common;

use common::git::{git, read, repo};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Every hook name git knows that a command awf could run might fire.
const HOOKS: &[&str] = &[
    "reference-transaction",
    "post-merge",
    "pre-commit",
    "post-commit",
    "post-checkout",
    "pre-merge-commit",
    "post-rewrite",
    "post-index-change",
    "pre-auto-gc",
    "commit-msg",
    "prepare-commit-msg",
];

/// What an agent that can write the checkout's `.git` plants, as a `command` agent seated in the
/// checkout. `$1`: the markers' folder; `$2`: a folder the planted `core.worktree` names.
fn planter(hooks: &str) -> String {
    format!(
        r#"cat > /dev/null
M="$1"
hook() {{ printf '#!/bin/sh\ntouch "%s/%s"\n' "$M" "$2" > "$1"; chmod +x "$1"; }}
mkdir -p .git/hooks .git/planted-hooks .git/info
for h in {hooks}; do hook ".git/hooks/$h" "hook-$h"; hook ".git/planted-hooks/$h" "hookspath-$h"; done
git config core.hooksPath "$PWD/.git/planted-hooks"
hook .git/fsmonitor.sh fsmonitor
git config core.fsmonitor "$PWD/.git/fsmonitor.sh"
git config core.worktree "$2"
git config filter.ev.clean "touch '$M/filter-clean'; cat"
git config filter.ev.smudge "touch '$M/filter-smudge'; cat"
git config filter.ev.required true
git config filter.pr.process "touch '$M/filter-process'; exit 1"
git config filter.ag.clean "touch '$M/agent-filter-clean'; cat"
git config filter.ag.smudge "touch '$M/agent-filter-smudge'; cat"
git config diff.ev.textconv "touch '$M/textconv'; cat"
git config diff.ev.command "touch '$M/diff-command'"
hook .git/extdiff.sh diff-external
git config diff.external "$PWD/.git/extdiff.sh"
git config merge.ev.driver "touch '$M/merge-driver'; exit 1"
git config merge.ev.recursive binary
printf '*.txt filter=ev diff=ev merge=ev\n*.md filter=pr\n' > .git/info/attributes
printf '{{}}' | "$AWF_LAUNCHER" result "$AWF_OP"
"#
    )
}

/// A worktree agent's program: `$1` is run by `sh -c` in its worktree, then it answers `{}`.
const AGENT: &str = r#"cat > /dev/null
sh -c "$1"
printf '{}' | "$AWF_LAUNCHER" result "$AWF_OP"
"#;

/// `text` as a Rhai string literal's contents.
fn quoted(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"")
}

/// Files in `dir`, sorted (none when it is missing).
fn listed(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(Result::ok).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

struct Outside {
    _dir: tempfile::TempDir,
    markers: PathBuf,
    elsewhere: PathBuf,
    planter: PathBuf,
    agent: PathBuf,
}

/// The planter, the agent program, the markers' folder and the folder `core.worktree` names,
/// all outside the repository.
fn outside() -> Outside {
    let dir = tempfile::tempdir().expect("tempdir");
    let markers = dir.path().join("markers");
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(&markers).expect("mkdir");
    std::fs::create_dir_all(&elsewhere).expect("mkdir");
    let planter_path = dir.path().join("plant.sh");
    std::fs::write(&planter_path, planter(&HOOKS.join(" "))).expect("write");
    let agent = dir.path().join("agent.sh");
    std::fs::write(&agent, AGENT).expect("write");
    Outside { _dir: dir, markers, elsewhere, planter: planter_path, agent }
}

#[test]
fn awfs_own_git_runs_nothing_an_agent_planted_in_the_repository_and_the_work_lands() {
    let env = repo();
    env.write("shared.txt", "one\ntwo\nthree\nfour\nfive\nsix\nseven\n");
    git(env.path(), &["add", "shared.txt"]);
    git(env.path(), &["commit", "-qm", "shared"]);
    let o = outside();
    // Agent a fast-forwards the checkout; b then needs a merge commit whose content merge of
    // shared.txt names the planted merge driver. a commits a `.gitattributes` naming a filter.
    let a_work = "sed -i 's/^one$/ONE/' shared.txt; printf '*.dat filter=ag\\n' > .gitattributes; \
                  printf 'data\\n' > data.dat; printf 'notes\\n' > notes.md; printf 'new\\n' > new.txt";
    let b_work = "sed -i 's/^seven$/SEVEN/' shared.txt; printf 'b\\n' > b.txt";
    let script = format!(
        r#"
let planter = ctx.agents.open(#{{ key: "planter",
    runtime: #{{ harness: "command", command: ["sh", "{plant}", "{markers}", "{elsewhere}"] }} }});
planter.ask("plant", #{{ type: "object" }});
let a = ctx.agents.open(#{{ key: "a", isolation: "worktree",
    runtime: #{{ harness: "command", command: ["sh", "{agent}", "{a_work}"] }} }});
let b = ctx.agents.open(#{{ key: "b", isolation: "worktree",
    runtime: #{{ harness: "command", command: ["sh", "{agent}", "{b_work}"] }} }});
a.ask("go", #{{ type: "object" }});
b.ask("go", #{{ type: "object" }});
let changed = a.worktree.changed;
a.stop("done");
b.stop("done");
#{{ changed: changed, report: ctx.worktrees.merge([a, b]) }}
"#,
        plant = o.planter.display(),
        markers = o.markers.display(),
        elsewhere = o.elsewhere.display(),
        agent = o.agent.display(),
        a_work = quoted(a_work),
        b_work = quoted(b_work),
    );
    let out = env.run(&script, &[]);
    // Read before any git of the test's own runs: it would run what was planted.
    let fired = listed(&o.markers);
    let redirected = listed(&o.elsewhere);
    assert!(env.path().join(".git/planted-hooks/post-merge").is_file(), "the planter ran: {}", out.stderr);
    assert_eq!(fired, Vec::<String>::new(), "what awf's own git ran of what was planted; {}", out.stderr);
    assert_eq!(redirected, Vec::<String>::new(), "the planted core.worktree redirected awf's git");
    out.expect_code(0);
    let v = out.json();
    let id = env.run_id();
    let report = &v["report"];
    assert_eq!(report["conflicts"], serde_json::json!([]), "{v}");
    let merged: Vec<(Value, Value)> = report["merged"]
        .as_array()
        .expect("merged")
        .iter()
        .map(|m| (m["branch"].clone(), m["fast_forward"].clone()))
        .collect();
    assert_eq!(
        merged,
        vec![
            (Value::from(format!("awf/{id}/a")), Value::from(true)),
            (Value::from(format!("awf/{id}/b")), Value::from(false))
        ],
        "{v}"
    );
    assert_eq!(
        v["changed"],
        serde_json::json!([".gitattributes", "data.dat", "new.txt", "notes.md", "shared.txt"]),
        "{v}"
    );
    // The work landed in the checkout, as the agents left it.
    assert_eq!(read(&env, "shared.txt"), "ONE\ntwo\nthree\nfour\nfive\nsix\nSEVEN\n");
    for (file, text) in [("data.dat", "data\n"), ("notes.md", "notes\n"), ("new.txt", "new\n"), ("b.txt", "b\n")] {
        assert_eq!(read(&env, file), text, "{file}");
    }
    let head = git(env.path(), &["rev-parse", "HEAD"]);
    assert_eq!(report["head"], head.as_str());
    assert_eq!(git(env.path(), &["log", "-1", "--format=%s", "HEAD"]), format!("awf: merge awf/{id}/b (run {id})"));
}

/// One worktree agent doing `work`, stopped; returns the run's output and `a.worktree` after.
fn one_agent(env: &common::Env, o: &Outside, work: &str) -> common::Out {
    let script = format!(
        r#"
let a = ctx.agents.open(#{{ key: "a", isolation: "worktree",
    runtime: #{{ harness: "command", command: ["sh", "{agent}", "{work}"] }} }});
a.ask("go", #{{ type: "object" }});
a.stop("done");
a.worktree
"#,
        agent = o.agent.display(),
        work = quoted(work),
    );
    env.run(&script, &[])
}

#[test]
fn a_nested_repository_without_a_commit_keeps_the_worktree_and_the_rest_is_committed() {
    let env = repo();
    let o = outside();
    let out =
        one_agent(&env, &o, "git init -q fresh; printf 'precious\\n' > fresh/work.txt; printf 'top\\n' > top.txt");
    out.expect_code(0).stderr_has("fresh/");
    let v = out.json();
    let id = env.run_id();
    let path = env.path().join(format!(".awf/worktrees/{id}/a"));
    assert_eq!(v["state"], "kept", "{v}");
    let reason = v["reason"].as_str().unwrap_or_default().to_string();
    assert!(reason.contains("fresh/") && reason.contains("repository of its own"), "{v}");
    assert_eq!(std::fs::read_to_string(path.join("fresh/work.txt")).expect("kept"), "precious\n");
    // What could be committed was.
    assert_eq!(git(env.path(), &["show", &format!("awf/{id}/a:top.txt")]), "top");
    assert_eq!(git(env.path(), &["ls-tree", "--name-only", &format!("awf/{id}/a"), "fresh"]), "");
    let entry = &env.run_json()["worktrees"]["agents"]["a"];
    assert_eq!(entry["state"], "kept");
    assert_eq!(entry["reason"], reason.as_str());
    env.awf(&["runs", "show", &id]).expect_code(0).stdout_has("kept").stdout_has("repository of its own");
}

#[test]
fn a_nested_repository_with_commits_is_not_committed_as_a_link_and_its_worktree_is_kept() {
    let env = repo();
    let o = outside();
    let work = "git init -q dep && printf 'mine\\n' > dep/d.txt && git -C dep add d.txt && \
                git -C dep -c user.name=a -c user.email=a@a commit -qm d";
    let out = one_agent(&env, &o, work);
    out.expect_code(0);
    let v = out.json();
    let id = env.run_id();
    let path = env.path().join(format!(".awf/worktrees/{id}/a"));
    assert_eq!(v["state"], "kept", "{v}");
    assert!(v["reason"].as_str().is_some_and(|r| r.contains("dep/")), "{v}");
    assert_eq!(std::fs::read_to_string(path.join("dep/d.txt")).expect("kept"), "mine\n");
    assert_eq!(git(env.path(), &["ls-tree", "--name-only", &format!("awf/{id}/a"), "dep"]), "", "no link committed");
}

#[test]
fn a_commit_that_fails_keeps_the_worktree_with_the_reason() {
    let env = repo();
    let o = outside();
    // The agent locks its own branch, so awf's update-ref fails.
    let work = "printf 'x\\n' > x.txt; b=$(git symbolic-ref HEAD); c=$(git rev-parse --git-common-dir); \
                mkdir -p \"$(dirname \"$c/$b\")\"; touch \"$c/$b.lock\"";
    let out = one_agent(&env, &o, work);
    out.expect_code(0).stderr_has("cannot commit what it left");
    let v = out.json();
    let id = env.run_id();
    assert_eq!(v["state"], "kept", "{v}");
    assert!(v["reason"].as_str().is_some_and(|r| r.contains("update-ref")), "{v}");
    assert!(env.path().join(format!(".awf/worktrees/{id}/a/x.txt")).is_file(), "kept");
    let entry = &env.run_json()["worktrees"]["agents"]["a"];
    assert_eq!(entry["state"], "kept");
    assert!(entry["reason"].as_str().is_some_and(|r| r.contains("update-ref")), "{entry}");
}
