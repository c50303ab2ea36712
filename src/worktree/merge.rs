//! Bringing branches back: each branch, in the given order, merged into the checkout's branch or a
//! named one. Every merge is computed without touching a working tree (`git merge-tree
//! --write-tree`): a branch that conflicts is reported with its paths and left out, so a checkout
//! is never half-merged; the checkout moves once, at the end, by a fast-forward git checks whole
//! before it writes a file.

use super::{Error, Repo};
use serde::Serialize;

/// Where the branches go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The checkout the run started in (its branch, or its detached HEAD).
    Checkout,
    /// A named branch; the checkout when it is the checkout's branch.
    Branch(String),
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Merged {
    pub branch: String,
    /// The commit the target moved to (the branch's own on a fast-forward).
    pub commit: String,
    pub fast_forward: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Skipped {
    pub branch: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Conflict {
    pub branch: String,
    pub paths: Vec<String>,
}

/// What a merge did, as data for the script.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The branch merged into (`HEAD` for a detached checkout).
    pub into: String,
    pub merged: Vec<Merged>,
    pub skipped: Vec<Skipped>,
    pub conflicts: Vec<Conflict>,
    /// The target's commit before and after.
    pub before: String,
    pub head: String,
}

/// Merges `branches` (each resolved first: an unknown one fails before anything merges) into
/// `target`. `message(branch)` is each merge commit's message.
pub fn merge(
    repo: &Repo,
    branches: &[String],
    target: &Target,
    message: &dyn Fn(&str) -> String,
) -> Result<Report, Error> {
    let current = repo.run(&["symbolic-ref", "--quiet", "--short", "HEAD"]).ok();
    let (into, checkout) = match target {
        Target::Checkout => (current.clone().unwrap_or_else(|| "HEAD".into()), true),
        Target::Branch(b) => (b.clone(), current.as_deref() == Some(b.as_str())),
    };
    let before = if checkout {
        repo.head()?
    } else {
        repo.branch_tip(&into).ok_or_else(|| Error::UnknownBranch { name: into.clone(), repo: repo.root.clone() })?
    };
    if !checkout {
        if let Some((p, _)) = repo.listed().into_iter().find(|(_, b)| b.as_deref() == Some(into.as_str())) {
            return Err(Error::Failed {
                args: format!("merge into {into}"),
                dir: repo.root.clone(),
                stderr: format!("branch {into} is checked out in {}; merge into it there", p.display()),
            });
        }
    }
    if checkout {
        let dirty = repo.uncommitted(false)?;
        if !dirty.is_empty() {
            return Err(Error::DirtyCheckout { repo: repo.root.clone(), paths: dirty });
        }
    }
    let mut tips = Vec::new();
    for b in branches {
        let tip =
            repo.branch_tip(b).ok_or_else(|| Error::UnknownBranch { name: b.clone(), repo: repo.root.clone() })?;
        tips.push((b.clone(), tip));
    }
    let mut report = Report {
        into: into.clone(),
        merged: vec![],
        skipped: vec![],
        conflicts: vec![],
        before: before.clone(),
        head: before.clone(),
    };
    let mut cur = before.clone();
    for (branch, tip) in tips {
        if is_ancestor(repo, &tip, &cur)? {
            report.skipped.push(Skipped { branch, reason: format!("nothing to merge: already in {into}") });
            continue;
        }
        if is_ancestor(repo, &cur, &tip)? {
            cur = tip.clone();
            report.merged.push(Merged { branch, commit: tip, fast_forward: true });
            continue;
        }
        let out = repo.output(&["merge-tree", "--write-tree", "--name-only", "--no-messages", &cur, &tip])?;
        let mut lines = out.stdout.lines();
        let tree = lines.next().unwrap_or_default().to_string();
        match out.code {
            Some(0) => {
                let commit = repo.commit_tree(&tree, &[&cur, &tip], &message(&branch))?;
                cur = commit.clone();
                report.merged.push(Merged { branch, commit, fast_forward: false });
            }
            Some(1) => {
                let mut paths: Vec<String> = lines.take_while(|l| !l.is_empty()).map(str::to_string).collect();
                paths.dedup();
                report.conflicts.push(Conflict { branch, paths });
            }
            _ => {
                return Err(Error::Failed {
                    args: format!("merge-tree {cur} {tip}"),
                    dir: repo.root.clone(),
                    stderr: out.stderr,
                })
            }
        }
    }
    if cur != before {
        if checkout {
            repo.run(&["merge", "--ff-only", "--quiet", &cur])?;
        } else {
            repo.run(&["update-ref", "-m", "awf: merge", &format!("refs/heads/{into}"), &cur, &before])?;
        }
    }
    report.head = cur;
    Ok(report)
}

fn is_ancestor(repo: &Repo, a: &str, b: &str) -> Result<bool, Error> {
    let out = repo.output(&["merge-base", "--is-ancestor", a, b])?;
    match out.code {
        Some(0) => Ok(true),
        Some(1) => Ok(false),
        _ => Err(Error::Failed {
            args: format!("merge-base --is-ancestor {a} {b}"),
            dir: repo.root.clone(),
            stderr: out.stderr,
        }),
    }
}
