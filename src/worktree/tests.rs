//! The worktree module on throwaway repositories: add, commit leftovers, reopen, remove, the
//! refusals, and merges (clean, fast-forward, conflicting, into a named branch).

use super::merge::{merge, Target};
use super::*;
use std::process::Command;

fn sh_git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"])
        .args(args)
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A repository with one commit: `a.txt` and `b.txt`.
fn repo() -> (tempfile::TempDir, Repo) {
    let dir = tempfile::tempdir().expect("tempdir");
    sh_git(dir.path(), &["init", "-q"]);
    std::fs::write(dir.path().join("a.txt"), "one\ntwo\nthree\n").expect("write");
    std::fs::write(dir.path().join("b.txt"), "b\n").expect("write");
    std::fs::write(dir.path().join(".gitignore"), ".awf/\n").expect("write");
    sh_git(dir.path(), &["add", "."]);
    sh_git(dir.path(), &["commit", "-qm", "init"]);
    let repo = Repo::find(Git::default(), dir.path()).expect("repo");
    (dir, repo)
}

fn add(repo: &Repo, name: &str) -> Worktree {
    let base = repo.head().expect("head");
    repo.add(&repo.root.join(".awf/worktrees/r1").join(name), &format!("awf/r1/{name}"), &base).expect("add")
}

#[test]
fn a_worktree_is_added_committed_and_removed_and_its_branch_stays() {
    let (_d, repo) = repo();
    let wt = add(&repo, "a");
    assert!(wt.path.join("a.txt").is_file());
    assert!(wt.admin.starts_with(repo.common.join("worktrees")), "{}", wt.admin.display());
    assert_eq!(repo.commit_leftovers(&wt, "nothing").expect("commit").commit, None);
    std::fs::write(wt.path.join("new.txt"), "new\n").expect("write");
    std::fs::write(wt.path.join("a.txt"), "ONE\n").expect("write");
    assert_eq!(repo.changed(&wt).expect("changed"), vec!["a.txt", "new.txt"]);
    let commit = repo.commit_leftovers(&wt, "awf: run r1, agent a").expect("commit").commit.expect("a commit");
    assert_eq!(repo.branch_tip("awf/r1/a"), Some(commit.clone()));
    assert_eq!(sh_git(&repo.root, &["log", "-1", "--format=%s", "awf/r1/a"]), "awf: run r1, agent a");
    repo.remove(&wt).expect("remove");
    assert!(!wt.path.exists());
    assert_eq!(repo.branch_tip("awf/r1/a"), Some(commit));
    assert_eq!(repo.changed(&wt).expect("changed"), vec!["a.txt", "new.txt"]);
    // The main checkout never saw it.
    assert_eq!(std::fs::read_to_string(repo.root.join("a.txt")).expect("read"), "one\ntwo\nthree\n");
}

#[test]
fn a_taken_branch_is_refused_and_never_reused() {
    let (_d, repo) = repo();
    sh_git(&repo.root, &["branch", "awf/r1/a"]);
    let base = repo.head().expect("head");
    let err = repo.add(&repo.root.join(".awf/worktrees/r1/a"), "awf/r1/a", &base).expect_err("taken");
    assert_eq!(err, Error::BranchTaken { branch: "awf/r1/a".into() });
    assert!(err.to_string().contains("never reuses a branch"), "{err}");
}

#[test]
fn outside_a_repository_git_missing_and_a_lost_base_are_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let err = Repo::find(Git::default(), dir.path()).expect_err("no repo");
    assert!(matches!(err, Error::NotARepo { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains(&dir.path().display().to_string()) && text.contains("git init"), "{text}");
    let missing = Git { program: dir.path().join("no-git-here") };
    let err = Repo::find(missing, dir.path()).expect_err("no git");
    assert!(matches!(err, Error::GitMissing { .. }) && err.to_string().contains("install git"), "{err}");
    sh_git(dir.path(), &["init", "-q"]);
    let empty = Repo::find(Git::default(), dir.path()).expect("a repository");
    assert!(matches!(empty.head(), Err(Error::NoCommit { .. })), "a repository without a commit");
    let (_d, repo) = repo();
    let base = "0123456789012345678901234567890123456789";
    let err = repo.check_base(base).expect_err("lost");
    assert!(matches!(err, Error::BaseMissing { .. }) && err.to_string().contains(base), "{err}");
    let mut wt =
        Worktree { path: repo.root.join("x"), branch: "awf/r1/x".into(), base: base.into(), admin: PathBuf::new() };
    assert!(matches!(repo.reopen(&mut wt), Err(Error::BaseMissing { .. })));
}

#[test]
fn a_removed_worktree_is_added_again_from_its_branch() {
    let (_d, repo) = repo();
    let mut wt = add(&repo, "a");
    std::fs::write(wt.path.join("c.txt"), "c\n").expect("write");
    repo.commit_leftovers(&wt, "left").expect("commit");
    repo.remove(&wt).expect("remove");
    repo.reopen(&mut wt).expect("reopen");
    assert_eq!(std::fs::read_to_string(wt.path.join("c.txt")).expect("read"), "c\n");
    // Found in place the second time.
    repo.reopen(&mut wt).expect("reopen in place");
}

#[test]
fn uncommitted_changes_of_the_checkout_are_listed_but_awf_folders() {
    let (_d, repo) = repo();
    let _wt = add(&repo, "a");
    assert!(repo.uncommitted(true).expect("status").is_empty());
    std::fs::write(repo.root.join("b.txt"), "changed\n").expect("write");
    std::fs::write(repo.root.join("loose.txt"), "x\n").expect("write");
    assert_eq!(repo.uncommitted(true).expect("status"), vec!["b.txt", "loose.txt"]);
    assert_eq!(repo.uncommitted(false).expect("status"), vec!["b.txt"]);
}

#[test]
fn branches_merge_in_order_and_a_conflict_is_left_out_whole() {
    let (_d, repo) = repo();
    let (a, b, c) = (add(&repo, "a"), add(&repo, "b"), add(&repo, "c"));
    std::fs::write(a.path.join("a.txt"), "ONE\ntwo\nthree\n").expect("write");
    std::fs::write(b.path.join("b.txt"), "B\n").expect("write");
    std::fs::write(c.path.join("a.txt"), "uno\ntwo\nthree\n").expect("write");
    for wt in [&a, &b, &c] {
        repo.commit_leftovers(wt, "work").expect("commit");
    }
    let branches: Vec<String> = ["awf/r1/a", "awf/r1/b", "awf/r1/c"].map(String::from).to_vec();
    let report = merge(&repo, &branches, &Target::Checkout, &|b| format!("merge {b}")).expect("merge");
    assert_eq!(report.into, "main");
    assert_eq!(report.merged.iter().map(|m| m.branch.as_str()).collect::<Vec<_>>(), ["awf/r1/a", "awf/r1/b"]);
    assert!(report.merged[0].fast_forward && !report.merged[1].fast_forward);
    assert_eq!(report.conflicts.len(), 1);
    assert_eq!(report.conflicts[0].branch, "awf/r1/c");
    assert_eq!(report.conflicts[0].paths, vec!["a.txt"]);
    assert_eq!(std::fs::read_to_string(repo.root.join("a.txt")).expect("read"), "ONE\ntwo\nthree\n");
    assert_eq!(std::fs::read_to_string(repo.root.join("b.txt")).expect("read"), "B\n");
    assert!(repo.uncommitted(false).expect("status").is_empty(), "no half merge");
    assert_eq!(repo.head().expect("head"), report.head);
    // Again: both merged ones are skipped, the conflict stays.
    let again = merge(&repo, &branches, &Target::Checkout, &|b| format!("merge {b}")).expect("merge");
    assert_eq!(again.skipped.len(), 2);
    assert_eq!(again.conflicts.len(), 1);
    assert_eq!(again.head, report.head);
}

#[test]
fn a_merge_into_a_named_branch_leaves_the_checkout_alone() {
    let (_d, repo) = repo();
    let a = add(&repo, "a");
    std::fs::write(a.path.join("b.txt"), "B\n").expect("write");
    repo.commit_leftovers(&a, "work").expect("commit");
    sh_git(&repo.root, &["branch", "integration"]);
    let report =
        merge(&repo, &["awf/r1/a".into()], &Target::Branch("integration".into()), &|b| b.to_string()).expect("merge");
    assert_eq!(report.merged.len(), 1);
    assert_eq!(repo.branch_tip("integration"), Some(report.head.clone()));
    assert_eq!(std::fs::read_to_string(repo.root.join("b.txt")).expect("read"), "b\n");
    let err = merge(&repo, &["nope".into()], &Target::Checkout, &|b| b.to_string()).expect_err("unknown");
    assert!(matches!(err, Error::UnknownBranch { .. }), "{err:?}");
}

#[test]
fn a_dirty_checkout_is_refused_before_anything_merges() {
    let (_d, repo) = repo();
    let a = add(&repo, "a");
    std::fs::write(a.path.join("b.txt"), "B\n").expect("write");
    repo.commit_leftovers(&a, "work").expect("commit");
    std::fs::write(repo.root.join("a.txt"), "dirty\n").expect("write");
    let err = merge(&repo, &["awf/r1/a".into()], &Target::Checkout, &|b| b.to_string()).expect_err("dirty");
    assert!(matches!(&err, Error::DirtyCheckout { paths, .. } if paths == &vec!["a.txt".to_string()]), "{err:?}");
    assert_eq!(std::fs::read_to_string(repo.root.join("b.txt")).expect("read"), "b\n");
}

#[test]
fn isolation_and_keep_values_are_parsed_or_named() {
    assert_eq!(Isolation::parse("worktree"), Ok(Isolation::Worktree));
    let e = Isolation::parse("container").expect_err("unknown");
    assert_eq!(e.to_string(), "unknown isolation `container`: use \"worktree\" (or \"none\")");
    assert_eq!(Keep::parse("on-failure"), Ok(Keep::OnFailure));
    assert_eq!(Keep::parse("sometimes"), Err(BadChoice::Keep("sometimes".into())));
    assert!(Keep::OnFailure.keeps(true) && !Keep::OnFailure.keeps(false) && Keep::Always.keeps(false));
}

#[test]
fn the_repositorys_program_keys_are_overridden_and_the_operators_are_not() {
    let listing = b"system\0filter.lfs.clean\ngit-lfs clean -- %f\0\
global\0diff.tool.textconv\nglobal-tool\0\
local\0core.bare\nfalse\0\
local\0filter.ev.clean\nevil\0\
local\0filter.a=b.c.smudge\nevil\0\
local\0filter.ev.required\ntrue\0\
local\0filter.ev.clean\nevil again\0\
worktree\0diff.ev.textconv\nevil\0\
local\0diff.external\nevil\0\
local\0merge.ev.driver\nevil %A\0\
local\0merge.ev.name\nharmless\0\
local\0gpg.ssh.program\nevil\0\
local\0credential.https://x.helper\nevil\0\
local\0core.sshcommand\nevil\0\
local\0protocol.file.allow\nalways\0\
local\0x.flag\0\
command\0core.hookspath\n/dev/null\0";
    let entries = super::git::parse_listing(listing);
    assert_eq!(entries.len(), 17);
    assert_eq!(entries[15], super::git::Entry { scope: b"local", key: b"x.flag" });
    let found = super::git::overrides(&entries, Path::new("/usr/bin/git"));
    let text: Vec<(String, String)> = found
        .iter()
        .map(|(k, v)| (String::from_utf8_lossy(k).into_owned(), String::from_utf8_lossy(v).into_owned()))
        .collect();
    let want = [
        ("filter.ev.clean", ""),
        ("filter.a=b.c.smudge", ""),
        ("filter.ev.required", "false"),
        ("diff.ev.textconv", ""),
        ("diff.external", ""),
        ("merge.ev.driver", "'/usr/bin/git' merge-file --marker-size=%L %A %O %B"),
        ("gpg.ssh.program", ""),
        ("credential.https://x.helper", ""),
        ("core.sshcommand", ""),
        ("protocol.file.allow", "never"),
    ];
    assert_eq!(text, want.map(|(k, v)| (k.to_string(), v.to_string())).to_vec());
}

/// A program in `dir` that prints `listing` for `git config --list` and runs git for the rest.
fn fake_git(dir: &Path, listing: &str) -> Git {
    let path = dir.join("git");
    let script = format!(
        "#!/bin/sh\nfor a; do [ \"$a\" = config ] && {{ printf '{listing}'; exit 0; }}; done\nexec git \"$@\"\n"
    );
    std::fs::write(&path, script).expect("write");
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    Git { program: path }
}

#[test]
fn a_git_that_ignores_the_overrides_is_refused_and_so_is_a_work_tree_elsewhere() {
    let (d, repo) = repo();
    let bin = tempfile::tempdir().expect("tempdir");
    let old = fake_git(bin.path(), "local\\0core.bare\\nfalse\\0");
    let err = Repo::find(old, &repo.root).expect_err("too old");
    assert!(matches!(&err, Error::GitTooOld { .. }) && err.to_string().contains("GIT_CONFIG_COUNT"), "{err}");
    let elsewhere = tempfile::tempdir().expect("tempdir");
    sh_git(d.path(), &["config", "core.worktree", &elsewhere.path().display().to_string()]);
    let err = Repo::find(Git::default(), d.path()).expect_err("elsewhere");
    assert!(matches!(&err, Error::WorkTreeElsewhere { .. }) && err.to_string().contains("core.worktree"), "{err}");
}

#[test]
fn planted_hooks_fsmonitor_and_drivers_run_in_none_of_awfs_commands() {
    let (_d, repo) = repo();
    let markers = tempfile::tempdir().expect("tempdir");
    let m = markers.path().display().to_string();
    let hooks = repo.common.join("hooks");
    std::fs::create_dir_all(&hooks).expect("mkdir");
    for h in ["reference-transaction", "post-checkout", "post-merge", "post-index-change", "pre-auto-gc"] {
        std::fs::write(hooks.join(h), format!("#!/bin/sh\ntouch '{m}/{h}'\n")).expect("write");
        std::fs::set_permissions(hooks.join(h), std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    }
    std::fs::write(repo.common.join("info/attributes"), "*.txt filter=ev merge=ev\n").expect("write");
    for (k, v) in [
        ("core.fsmonitor", format!("touch '{m}/fsmonitor'; false")),
        ("filter.ev.clean", format!("touch '{m}/clean'; cat")),
        ("filter.ev.smudge", format!("touch '{m}/smudge'; cat")),
        ("merge.ev.driver", format!("touch '{m}/driver'; false")),
    ] {
        sh_git(&repo.root, &["config", k, &v]);
    }
    let (a, b) = (add(&repo, "a"), add(&repo, "b"));
    std::fs::write(a.path.join("a.txt"), "ONE\ntwo\nthree\n").expect("write");
    std::fs::write(b.path.join("a.txt"), "one\ntwo\nTHREE\n").expect("write");
    for wt in [&a, &b] {
        repo.commit_leftovers(wt, "work").expect("commit");
    }
    repo.uncommitted(true).expect("status");
    let branches = ["awf/r1/a".to_string(), "awf/r1/b".to_string()];
    let report = merge(&repo, &branches, &Target::Checkout, &|b| format!("merge {b}")).expect("merge");
    assert_eq!(report.merged.len(), 2, "{report:?}");
    assert_eq!(std::fs::read_to_string(repo.root.join("a.txt")).expect("read"), "ONE\ntwo\nTHREE\n");
    let fired: Vec<_> =
        std::fs::read_dir(markers.path()).expect("read").filter_map(Result::ok).map(|e| e.file_name()).collect();
    assert!(fired.is_empty(), "{fired:?}");
}

#[test]
fn nested_repositories_are_left_out_of_the_commit_and_listed() {
    let (_d, repo) = repo();
    let wt = add(&repo, "a");
    sh_git(&wt.path, &["init", "-q", "fresh"]);
    std::fs::write(wt.path.join("fresh/f.txt"), "f\n").expect("write");
    std::fs::create_dir_all(wt.path.join("deep/er")).expect("mkdir");
    sh_git(&wt.path.join("deep/er"), &["init", "-q", "dep"]);
    std::fs::write(wt.path.join("deep/er/dep/d.txt"), "d\n").expect("write");
    sh_git(&wt.path.join("deep/er/dep"), &["add", "."]);
    sh_git(&wt.path.join("deep/er/dep"), &["commit", "-qm", "d"]);
    std::fs::write(wt.path.join("top.txt"), "top\n").expect("write");
    let left = repo.commit_leftovers(&wt, "work").expect("commit");
    assert_eq!(left.left_out, vec!["deep/er/dep/", "fresh/"]);
    let commit = left.commit.expect("the rest committed");
    assert_eq!(sh_git(&repo.root, &["ls-tree", "-r", "--name-only", &commit]), ".gitignore\na.txt\nb.txt\ntop.txt");
    // Nothing else to commit: still listed.
    assert_eq!(
        repo.commit_leftovers(&wt, "again").expect("commit"),
        Leftovers { commit: None, left_out: left.left_out }
    );
}
