//! Git worktrees for agents, **the only module that runs git**: finding a run's repository and
//! its base commit, adding an agent's worktree on a branch of its own (or finding it again),
//! committing what an agent left, removing it, and what it changed. Every command is
//! `git -C <folder>` with explicit arguments, never a shell; errors are typed. `merge.rs` brings
//! branches back, without ever leaving a half-merged checkout; `recorded.rs` is a run's record of
//! its worktrees and `awf runs clean`.

mod git;
pub mod merge;
pub mod recorded;

pub use git::Git;
use git::{Dirs, Output};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A value `isolation` or `keep` does not take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadChoice {
    #[error("unknown isolation `{0}`: use \"worktree\" (or \"none\")")]
    Isolation(String),
    #[error("unknown keep `{0}`: use \"on-failure\" or \"always\" (default: removed)")]
    Keep(String),
}

/// Whether an agent works in the run's checkout or in a worktree of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Isolation {
    #[default]
    None,
    Worktree,
}

impl Isolation {
    pub fn parse(s: &str) -> Result<Isolation, BadChoice> {
        match s {
            "none" => Ok(Isolation::None),
            "worktree" => Ok(Isolation::Worktree),
            _ => Err(BadChoice::Isolation(s.to_string())),
        }
    }
}

/// What becomes of an agent's worktree when it closes (its branch always stays).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Keep {
    /// Removed.
    #[default]
    Never,
    /// Kept when the agent failed (an operation failed or timed out) or the run did not succeed.
    OnFailure,
    Always,
}

impl Keep {
    pub fn parse(s: &str) -> Result<Keep, BadChoice> {
        match s {
            "never" => Ok(Keep::Never),
            "on-failure" => Ok(Keep::OnFailure),
            "always" => Ok(Keep::Always),
            _ => Err(BadChoice::Keep(s.to_string())),
        }
    }

    pub fn keeps(self, failed: bool) -> bool {
        match self {
            Keep::Never => false,
            Keep::OnFailure => failed,
            Keep::Always => true,
        }
    }
}

#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum Error {
    #[error("git is missing: cannot run `{program}` ({why}); install git, or drop `isolation: \"worktree\"`")]
    GitMissing { program: String, why: String },
    #[error("git at {program} is too old for awf: {why}; install git 2.38 or later")]
    GitTooOld { program: String, why: String },
    #[error("{} is not inside a git repository: run `git init` there (and commit once), or drop `isolation: \"worktree\"`", folder.display())]
    NotARepo { folder: PathBuf },
    #[error("the repository of {} names {} as its work tree (core.worktree), which does not hold it: awf works only in a checkout that holds the run's folder", folder.display(), root.display())]
    WorkTreeElsewhere { folder: PathBuf, root: PathBuf },
    #[error("the repository {} has no commit yet: commit once, or drop `isolation: \"worktree\"`", repo.display())]
    NoCommit { repo: PathBuf },
    #[error("branch {branch} already exists (made by another run or by hand); awf never reuses a branch: delete it (`git branch -D {branch}`) or start a new run")]
    BranchTaken { branch: String },
    #[error("this run's base commit {base} cannot be found in {}: the history was rewritten or the repository moved; start a new run", repo.display())]
    BaseMissing { base: String, repo: PathBuf },
    #[error("no branch or commit `{name}` in {}", repo.display())]
    UnknownBranch { name: String, repo: PathBuf },
    #[error("the checkout {} has uncommitted changes ({}); commit or stash them before merging into it", repo.display(), paths.join(", "))]
    DirtyCheckout { repo: PathBuf, paths: Vec<String> },
    #[error("`git {args}` failed in {}: {stderr}", dir.display())]
    Failed { args: String, dir: PathBuf, stderr: String },
}

/// A repository: its top folder, the checkout's own git folder and the common one.
#[derive(Debug, Clone)]
pub struct Repo {
    pub git: Git,
    pub root: PathBuf,
    pub common: PathBuf,
    /// The checkout's own git folder (the common one, unless the run's checkout is itself a
    /// linked worktree): named in every command after `find`, with `root` as the work tree.
    git_dir: PathBuf,
    /// Held while git adds or removes a worktree: `git worktree add` reads the other worktrees'
    /// admin folders and fails on one being made. Checkouts run outside it.
    admin: std::sync::Arc<std::sync::Mutex<()>>,
}

/// An agent's worktree, as a run records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Worktree {
    pub path: PathBuf,
    pub branch: String,
    pub base: String,
    /// Its admin folder under the common git folder, found as it was added (before an agent ran
    /// in it).
    #[serde(default)]
    pub admin: PathBuf,
}

/// What `commit_leftovers` did.
#[derive(Debug, Clone, PartialEq)]
pub struct Leftovers {
    /// The new commit on the branch, `None` when there was nothing (else) to commit.
    pub commit: Option<String>,
    /// Folders the agent left that are git repositories of their own (`sub/`): git commits none
    /// of their files, only, for one with a commit, a link to a commit no other repository
    /// holds. They are left out of the commit, and the worktree that holds them must stay.
    pub left_out: Vec<String>,
}

impl Repo {
    /// The repository `folder` is in. Its work tree must hold `folder`: a `core.worktree` that
    /// names another folder is refused.
    pub fn find(git: Git, folder: &Path) -> Result<Repo, Error> {
        let args = ["rev-parse", "--path-format=absolute", "--show-toplevel", "--git-common-dir", "--git-dir"];
        let out = match git.command(folder, &args, None) {
            Ok(out) if out.ok => out,
            Ok(_) | Err(Error::Failed { .. }) => return Err(Error::NotARepo { folder: folder.to_path_buf() }),
            Err(e) => return Err(e),
        };
        let mut lines = out.stdout.lines();
        let (Some(root), Some(common), Some(git_dir)) = (lines.next(), lines.next(), lines.next()) else {
            return Err(Error::NotARepo { folder: folder.to_path_buf() });
        };
        let root = PathBuf::from(root);
        let real = std::fs::canonicalize(folder).unwrap_or_else(|_| folder.to_path_buf());
        if !real.starts_with(std::fs::canonicalize(&root).unwrap_or_else(|_| root.clone())) {
            return Err(Error::WorkTreeElsewhere { folder: folder.to_path_buf(), root });
        }
        Ok(Repo { git, root, common: common.into(), git_dir: git_dir.into(), admin: Default::default() })
    }

    /// The checkout's git folders, named in every command run in it.
    fn own(&self) -> Dirs<'_> {
        Dirs { work_tree: &self.root, admin: self.git_dir.clone(), common: &self.common }
    }

    fn run(&self, args: &[&str]) -> Result<String, Error> {
        self.git.run(&self.root, args, Some(&self.own()))
    }

    /// Runs git in the checkout and returns what it printed, whatever its exit status.
    fn output(&self, args: &[&str]) -> Result<Output, Error> {
        self.git.command(&self.root, args, Some(&self.own()))
    }

    /// The commit HEAD names now.
    pub fn head(&self) -> Result<String, Error> {
        self.commit("HEAD").ok_or_else(|| Error::NoCommit { repo: self.root.clone() })
    }

    /// The commit `rev` names, if any.
    pub fn commit(&self, rev: &str) -> Option<String> {
        let spec = format!("{rev}^{{commit}}");
        self.run(&["rev-parse", "--verify", "--quiet", "--end-of-options", &spec]).ok().filter(|s| !s.is_empty())
    }

    /// The tip of branch `name`, if it exists.
    pub fn branch_tip(&self, name: &str) -> Option<String> {
        self.commit(&format!("refs/heads/{name}"))
    }

    /// Refuses a base commit that is no longer in the repository.
    pub fn check_base(&self, base: &str) -> Result<(), Error> {
        match self.commit(base) {
            Some(_) => Ok(()),
            None => Err(Error::BaseMissing { base: base.to_string(), repo: self.root.clone() }),
        }
    }

    /// What is uncommitted in the checkout (tracked or not), but awf's own `.awf` folders.
    pub fn uncommitted(&self, untracked: bool) -> Result<Vec<String>, Error> {
        let mode = if untracked { "--untracked-files=normal" } else { "--untracked-files=no" };
        // Submodules are not entered: their own config would apply.
        let out = self.run(&["status", "--porcelain=v1", "--ignore-submodules=all", mode])?;
        Ok(out
            .lines()
            .filter_map(|l| l.get(3..))
            .filter(|p| !Path::new(p).components().any(|c| c.as_os_str() == ".awf"))
            .map(str::to_string)
            .collect())
    }

    /// Adds a new worktree at `path` on a new branch `branch` from `base`. A branch that exists
    /// already is refused: awf never reuses one.
    pub fn add(&self, path: &Path, branch: &str, base: &str) -> Result<Worktree, Error> {
        if self.branch_tip(branch).is_some() {
            return Err(Error::BranchTaken { branch: branch.to_string() });
        }
        self.check_base(base)?;
        let p = path.to_string_lossy();
        {
            let _one = self.admin_lock();
            self.run(&["worktree", "add", "--quiet", "--no-checkout", "-b", branch, "--end-of-options", &p, base])?;
        }
        let mut wt = Worktree {
            path: path.to_path_buf(),
            branch: branch.to_string(),
            base: base.to_string(),
            admin: PathBuf::new(),
        };
        wt.admin = self.admin_of(&wt.path);
        // The checkout, outside the lock: each worktree has an index of its own.
        self.git.run(&wt.path, &["reset", "--hard", "--quiet"], Some(&self.dirs(&wt)))?;
        Ok(wt)
    }

    /// Finds a worktree a run recorded again: in place when git still knows it there, else added
    /// again from its branch (the branch must exist and its base must still be found).
    pub fn reopen(&self, wt: &mut Worktree) -> Result<(), Error> {
        self.check_base(&wt.base)?;
        if self.branch_tip(&wt.branch).is_none() {
            return Err(Error::UnknownBranch { name: wt.branch.clone(), repo: self.root.clone() });
        }
        if !(self.listed().iter().any(|(p, b)| p == &wt.path && b.as_deref() == Some(&wt.branch)) && wt.path.is_dir()) {
            let _one = self.admin_lock();
            self.run(&["worktree", "prune"])?;
            let p = wt.path.to_string_lossy();
            self.run(&["worktree", "add", "--quiet", "--end-of-options", &p, &wt.branch])?;
        }
        wt.admin = self.admin_of(&wt.path);
        Ok(())
    }

    /// Every worktree git knows: its path and branch.
    pub fn listed(&self) -> Vec<(PathBuf, Option<String>)> {
        let Ok(out) = self.run(&["worktree", "list", "--porcelain"]) else { return Vec::new() };
        let mut list = Vec::new();
        for block in out.split("\n\n") {
            let mut path = None;
            let mut branch = None;
            for line in block.lines() {
                if let Some(p) = line.strip_prefix("worktree ") {
                    path = Some(PathBuf::from(p));
                } else if let Some(b) = line.strip_prefix("branch refs/heads/") {
                    branch = Some(b.to_string());
                }
            }
            list.extend(path.map(|p| (p, branch)));
        }
        list
    }

    fn admin_lock(&self) -> std::sync::MutexGuard<'_, ()> {
        // It guards no value, so a poisoned lock is as good as a clean one.
        self.admin.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A fresh worktree's admin folder: git names it after the folder, a number added on a clash.
    fn admin_of(&self, path: &Path) -> PathBuf {
        let name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
        self.git
            .run(path, &["rev-parse", "--path-format=absolute", "--git-dir"], None)
            .map(PathBuf::from)
            .ok()
            .filter(|d| d.starts_with(self.common.join("worktrees")))
            .unwrap_or_else(|| self.common.join("worktrees").join(name))
    }

    fn dirs<'a>(&'a self, wt: &'a Worktree) -> Dirs<'a> {
        let admin = if wt.admin.as_os_str().is_empty() { self.admin_of(&wt.path) } else { wt.admin.clone() };
        Dirs { work_tree: &wt.path, admin, common: &self.common }
    }

    /// Commits everything uncommitted in the worktree on its branch (on the branch's tip,
    /// whatever the worktree's HEAD says), but the git repositories of their own it holds, which
    /// are left out and listed. awf is the committer; hooks do not run.
    pub fn commit_leftovers(&self, wt: &Worktree, message: &str) -> Result<Leftovers, Error> {
        let tip = self
            .branch_tip(&wt.branch)
            .ok_or_else(|| Error::UnknownBranch { name: wt.branch.clone(), repo: self.root.clone() })?;
        let dirs = self.dirs(wt);
        let git = |args: &[&str]| self.git.run(&wt.path, args, Some(&dirs));
        // git lists an untracked folder that is a repository of its own as `sub/`, never its
        // files; `git add` fails on one without a commit and links one with a commit.
        let others = git(&["ls-files", "-z", "--others", "--exclude-standard"])?;
        let left_out: Vec<String> = others.split('\0').filter(|p| p.ends_with('/')).map(str::to_string).collect();
        let excluded: Vec<String> = left_out.iter().map(|p| format!(":(exclude,literal){p}")).collect();
        let mut add = vec!["add", "--all", "--", "."];
        add.extend(excluded.iter().map(String::as_str));
        git(&add)?;
        let tree = git(&["write-tree"])?;
        if self.run(&["rev-parse", &format!("{tip}^{{tree}}")])? == tree {
            return Ok(Leftovers { commit: None, left_out });
        }
        let commit = self.commit_tree(&tree, &[&tip], message)?;
        self.run(&["update-ref", "-m", "awf: leftovers", &format!("refs/heads/{}", wt.branch), &commit, &tip])?;
        // A kept worktree then shows its branch, clean.
        git(&["symbolic-ref", "HEAD", &format!("refs/heads/{}", wt.branch)])?;
        Ok(Leftovers { commit: Some(commit), left_out })
    }

    /// A commit of `tree` on `parents`, with awf as its author and committer (no hooks run).
    fn commit_tree(&self, tree: &str, parents: &[&str], message: &str) -> Result<String, Error> {
        let mut args = vec!["-c", "user.name=awf", "-c", "user.email=awf@localhost", "commit-tree", tree];
        for p in parents {
            args.extend(["-p", p]);
        }
        args.extend(["-m", message]);
        self.run(&args)
    }

    /// Removes the worktree (its branch stays).
    pub fn remove(&self, wt: &Worktree) -> Result<(), Error> {
        let p = wt.path.to_string_lossy();
        let _one = self.admin_lock();
        self.run(&["worktree", "remove", "--force", "--force", &p])?;
        Ok(())
    }

    /// Deletes a branch.
    pub fn delete_branch(&self, branch: &str) -> Result<(), Error> {
        self.run(&["branch", "-D", "--end-of-options", branch]).map(|_| ())
    }

    /// The paths that differ from the base: in the worktree while it exists (uncommitted and
    /// untracked files too), else on its branch.
    pub fn changed(&self, wt: &Worktree) -> Result<Vec<String>, Error> {
        let mut paths: Vec<String> = if wt.path.is_dir() {
            let dirs = self.dirs(wt);
            let git = |args: &[&str]| self.git.run(&wt.path, args, Some(&dirs));
            let diff = ["diff", "--name-only", "--no-ext-diff", "--no-textconv", "--ignore-submodules=all", &wt.base];
            let mut p: Vec<String> = git(&diff)?.lines().map(str::to_string).collect();
            p.extend(git(&["ls-files", "--others", "--exclude-standard"])?.lines().map(str::to_string));
            p
        } else {
            let range = format!("{}...refs/heads/{}", wt.base, wt.branch);
            self.run(&["diff", "--name-only", "--no-ext-diff", "--no-textconv", &range])?
                .lines()
                .map(str::to_string)
                .collect()
        };
        paths.sort();
        paths.dedup();
        Ok(paths)
    }
}

#[cfg(test)]
mod tests;
