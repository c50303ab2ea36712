//! Throwaway git repositories for the worktree tests: git run with a fixed identity, and a
//! repository holding the worktree example's agent program and `issues/*.txt`.

use super::Env;
use std::path::{Path, PathBuf};
use std::process::Command;

pub fn git(dir: &Path, args: &[&str]) -> String {
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
pub fn repo() -> Env {
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

pub fn read(env: &Env, rel: &str) -> String {
    std::fs::read_to_string(env.path().join(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
}
