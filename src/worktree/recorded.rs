//! A run's worktrees as `run.json` records them (`worktrees`: repository, base commit, each
//! agent's worktree, branch and what became of it), and `awf runs clean`: what a run left taken
//! away.

use super::{Error, Git, Keep, Repo, Worktree};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// What became of an agent's worktree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    Open,
    Kept,
    Removed,
}

/// One agent's worktree as `run.json` records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    #[serde(flatten)]
    pub worktree: Worktree,
    pub keep: Keep,
    pub state: State,
    /// Why awf kept a worktree its `keep` would have removed: what it could not commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `run.json` `worktrees`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Recorded {
    #[serde(default)]
    pub repo: Option<PathBuf>,
    #[serde(default)]
    pub base: Option<String>,
    #[serde(default)]
    pub agents: BTreeMap<String, Entry>,
}

/// What `clean` took away.
#[derive(Debug, Default, PartialEq)]
pub struct Cleaned {
    pub worktrees: usize,
    pub branches: usize,
}

impl Recorded {
    /// Removes the worktrees the run left (kept or still open) and, with `branches`, its branches.
    pub fn clean(&self, git: Git, branches: bool) -> Result<Cleaned, Error> {
        let Some(root) = &self.repo else { return Ok(Cleaned::default()) };
        let repo = Repo::find(git, root)?;
        let mut done = Cleaned::default();
        let listed = repo.listed();
        for e in self.agents.values() {
            let w = &e.worktree;
            if w.path.is_dir() && listed.iter().any(|(p, _)| p == &w.path) {
                repo.remove(w)?;
                done.worktrees += 1;
            }
            if branches && repo.branch_tip(&w.branch).is_some() {
                repo.delete_branch(&w.branch)?;
                done.branches += 1;
            }
        }
        Ok(done)
    }
}
