//! A run's agent worktrees: the repository and base commit (HEAD when the run started, `run.json`
//! `worktrees.base`), each isolated agent's worktree added (or found again on resume) as it
//! opens, what it left committed on its branch as it closes or the run ends, the worktree then
//! removed or kept, and the record of them all (`run.json` `worktrees`).

use crate::run::Run;
use crate::worktree::recorded::{Entry, Recorded, State};
use crate::worktree::{self, merge, Git, Isolation, Keep, Repo};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The record is replaced field by field under the lock, each write whole.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The run's worktrees.
#[derive(Default)]
pub struct WorktreeBook {
    /// `--isolation`: the isolation of agents whose spec says none.
    run_level: OnceLock<Isolation>,
    repo: OnceLock<Result<Repo, worktree::Error>>,
    record: Mutex<Recorded>,
    /// Worktrees being added now, and the agents opened in this attempt; taken before `record`.
    adding: Mutex<Adding>,
    added: std::sync::Condvar,
    warned: OnceLock<()>,
    /// A plan's run: worktrees are named and described, never added, committed or merged.
    planned: OnceLock<()>,
}

/// The worktrees being added (agent key → folder name) and the agents opened in this attempt.
#[derive(Default)]
struct Adding {
    names: std::collections::HashMap<String, String>,
    opened: std::collections::HashSet<String>,
}

impl WorktreeBook {
    /// Reads what earlier attempts recorded and, for a run in a git repository, its base commit
    /// (recorded at once, so that it is HEAD when the run started).
    pub fn start(&self, run: &Run, run_level: Isolation) {
        let _ = self.run_level.set(run_level);
        let earlier: Recorded = serde_json::from_value(run.doc_field("worktrees")).unwrap_or_default();
        let in_repo = run.cwd.ancestors().any(|a| a.join(".git").exists());
        *lock(&self.record) = earlier.clone();
        if earlier.base.is_some() || !(in_repo || run_level == Isolation::Worktree) {
            return;
        }
        if let Ok(repo) = self.repo(run) {
            if let Ok(head) = repo.head() {
                let mut r = lock(&self.record);
                r.repo = Some(repo.root.clone());
                r.base = Some(head);
                self.write(run, &r);
            }
        }
    }

    pub fn run_level(&self) -> Isolation {
        self.run_level.get().copied().unwrap_or_default()
    }

    fn repo(&self, run: &Run) -> Result<&Repo, worktree::Error> {
        self.repo.get_or_init(|| Repo::find(Git::default(), &run.cwd)).as_ref().map_err(Clone::clone)
    }

    fn write(&self, run: &Run, r: &Recorded) {
        if let Err(e) = run.set_doc_field("worktrees", json!(r)) {
            tracing::warn!("cannot record the run's worktrees in run.json: {e}");
        }
    }

    /// A plan's agent: refused as `open` refuses (no repository, no git, no commit), then named
    /// as it would be, on the base it would have, with nothing added: `a.worktree` describes it,
    /// closing it runs no git and `merge` reports every branch merged without touching any.
    pub fn plan(&self, run: &Run, key: &str) -> Result<(), worktree::Error> {
        let head = self.repo(run)?.head()?;
        let _ = self.planned.set(());
        let mut r = lock(&self.record);
        if r.agents.contains_key(key) {
            return Ok(());
        }
        let name = free_name(&r, &Default::default(), key);
        let worktree = worktree::Worktree {
            path: run.cwd.join(".awf/worktrees").join(&run.id).join(&name),
            branch: format!("awf/{}/{name}", run.id),
            base: head,
            admin: PathBuf::new(),
        };
        r.agents.insert(key.to_string(), Entry { worktree, keep: Keep::Never, state: State::Open, reason: None });
        Ok(())
    }

    fn planned(&self) -> bool {
        self.planned.get().is_some()
    }

    /// The worktree agent `key` works in, added now (or found again when an earlier attempt
    /// added it). Refuses outside a repository, without git, on a lost base or a taken branch.
    /// Agents opening at once add their worktrees at once; the same key waits for the first.
    pub fn open(&self, run: &Run, key: &str, keep: Keep) -> Result<PathBuf, worktree::Error> {
        let repo = self.repo(run)?;
        let mut adding = lock(&self.adding);
        while adding.names.contains_key(key) {
            adding = self.added.wait(adding).unwrap_or_else(|p| p.into_inner());
        }
        let mut r = lock(&self.record);
        let base = match r.base.clone() {
            Some(b) => b,
            None => {
                let head = repo.head()?;
                r.repo = Some(repo.root.clone());
                r.base = Some(head.clone());
                head
            }
        };
        repo.check_base(&base)?;
        if self.warned.set(()).is_ok() {
            self.warn_uncommitted(run, repo);
        }
        if let Some(e) = r.agents.get_mut(key) {
            // Opened again in this attempt (the same spec): it is there.
            if e.state == State::Open && adding.opened.contains(key) {
                return Ok(e.worktree.path.clone());
            }
            repo.reopen(&mut e.worktree)?;
            e.state = State::Open;
            e.keep = keep;
            e.reason = None;
            let path = e.worktree.path.clone();
            adding.opened.insert(key.to_string());
            self.write(run, &r);
            return Ok(path);
        }
        let name = free_name(&r, &adding.names, key);
        adding.names.insert(key.to_string(), name.clone());
        drop(r);
        drop(adding);
        let path = run.cwd.join(".awf/worktrees").join(&run.id).join(&name);
        let branch = format!("awf/{}/{name}", run.id);
        let added = repo.add(&path, &branch, &base);
        let mut adding = lock(&self.adding);
        adding.names.remove(key);
        self.added.notify_all();
        let wt = added?;
        adding.opened.insert(key.to_string());
        let mut r = lock(&self.record);
        let text = format!("agent {key} works in {} on branch {branch}", path.display());
        run.log("info", &text, &json!({ "agent": key, "path": path, "branch": branch, "base": base }));
        r.agents.insert(key.to_string(), Entry { worktree: wt, keep, state: State::Open, reason: None });
        self.write(run, &r);
        Ok(path)
    }

    fn warn_uncommitted(&self, run: &Run, repo: &Repo) {
        let dirty = repo.uncommitted(true).unwrap_or_default();
        if !dirty.is_empty() {
            let text = format!(
                "worktree agents do not see what is uncommitted in {}: {}",
                repo.root.display(),
                dirty.join(", ")
            );
            run.log("warn", &text, &json!({ "uncommitted": dirty }));
        }
    }

    /// Commits what agent `key` left on its branch and removes its worktree, or keeps it
    /// (`keep`, `failed`: the agent or the run failed). A worktree holding what awf could not
    /// commit is always kept, with the reason recorded and logged: removing it would lose work.
    /// Nothing for an agent without one.
    pub fn close(&self, run: &Run, key: &str, failed: bool) {
        // Marked kept while git works without the lock (a second close finds nothing open); an
        // agent without a worktree runs no git.
        let entry = {
            let mut r = lock(&self.record);
            let Some(e) = r.agents.get_mut(key).filter(|e| e.state == State::Open) else { return };
            if self.planned() {
                e.state = State::Removed;
                return;
            }
            e.state = State::Kept;
            e.clone()
        };
        let Ok(repo) = self.repo(run) else { return };
        let message = format!("awf: what agent {key} left in run {}", run.id);
        let branch = &entry.worktree.branch;
        let path = &entry.worktree.path;
        let fields = |reason: &str| json!({ "agent": key, "branch": branch, "path": path, "reason": reason });
        let reason = match repo.commit_leftovers(&entry.worktree, &message) {
            Ok(left) => {
                if let Some(commit) = &left.commit {
                    let short = &commit[..commit.len().min(12)];
                    let text = format!("agent {key}: what it left is committed on {branch} ({short})");
                    run.log("info", &text, &json!({ "agent": key, "branch": branch, "commit": commit }));
                }
                (!left.left_out.is_empty()).then(|| nested(&left.left_out))
            }
            Err(err) => Some(format!("cannot commit what it left: {err}")),
        };
        let state = if let Some(reason) = &reason {
            let text = format!("agent {key}: {reason}; its worktree {} is kept", path.display());
            run.log("warn", &text, &fields(reason));
            State::Kept
        } else if entry.keep.keeps(failed) {
            State::Kept
        } else {
            match repo.remove(&entry.worktree) {
                Ok(()) => State::Removed,
                Err(err) => {
                    run.log("warn", &format!("agent {key}: cannot remove its worktree: {err}"), &Value::Null);
                    State::Kept
                }
            }
        };
        let mut r = lock(&self.record);
        if let Some(e) = r.agents.get_mut(key) {
            e.state = state;
            e.reason = reason;
        }
        self.write(run, &r);
    }

    /// At the run's end: every worktree still open closed (`failed` when the run did not succeed
    /// or the agent is in `failed_agents`).
    pub fn finish(&self, run: &Run, run_failed: bool, failed_agents: &[String]) {
        let open: Vec<String> =
            lock(&self.record).agents.iter().filter(|(_, e)| e.state == State::Open).map(|(k, _)| k.clone()).collect();
        for key in open {
            self.close(run, &key, run_failed || failed_agents.contains(&key));
        }
    }

    /// `a.worktree`: `#{ path, branch, base, head, changed }`, or `None` for an agent without one.
    pub fn describe(&self, run: &Run, key: &str) -> Option<Value> {
        let e = lock(&self.record).agents.get(key).cloned()?;
        let w = &e.worktree;
        if self.planned() {
            return Some(json!({ "path": w.path, "branch": w.branch, "base": w.base, "head": w.base,
                                "changed": [], "state": e.state, "planned": true }));
        }
        let repo = self.repo(run).ok()?;
        let mut v = json!({
            "path": w.path, "branch": w.branch, "base": w.base,
            "head": repo.branch_tip(&w.branch), "changed": repo.changed(w).unwrap_or_default(),
            "state": e.state,
        });
        if let Some(reason) = &e.reason {
            v["reason"] = json!(reason);
        }
        Some(v)
    }

    /// The folder of agent `key`'s worktree while it is open.
    pub fn path_of(&self, key: &str) -> Option<PathBuf> {
        lock(&self.record).agents.get(key).filter(|e| e.state == State::Open).map(|e| e.worktree.path.clone())
    }

    /// The repository's common git folder, once the run found its repository.
    pub fn git_common(&self) -> Option<PathBuf> {
        Some(self.repo.get()?.as_ref().ok()?.common.clone())
    }

    /// The branch of agent `key`'s worktree.
    pub fn branch_of(&self, key: &str) -> Option<String> {
        lock(&self.record).agents.get(key).map(|e| e.worktree.branch.clone())
    }

    /// `ctx.worktrees.merge`: `branches` into the run's checkout, or `into`.
    pub fn merge(&self, run: &Run, branches: &[String], into: Option<&str>) -> Result<merge::Report, worktree::Error> {
        let repo = self.repo(run)?;
        if self.planned() {
            let head = repo.head()?;
            let merged = branches
                .iter()
                .map(|b| merge::Merged { branch: b.clone(), commit: head.clone(), fast_forward: false })
                .collect();
            let into = into.unwrap_or("HEAD").to_string();
            return Ok(merge::Report { into, merged, skipped: vec![], conflicts: vec![], before: head.clone(), head });
        }
        let target = match into {
            Some(b) => merge::Target::Branch(b.to_string()),
            None => merge::Target::Checkout,
        };
        let id = run.id.clone();
        merge::merge(repo, branches, &target, &|b| format!("awf: merge {b} (run {id})"))
    }
}

/// Why a worktree holding repositories of their own is kept.
fn nested(folders: &[String]) -> String {
    let (verb, them) = if folders.len() == 1 { ("is", "it") } else { ("are", "them") };
    format!("{} {verb} a git repository of its own: awf commits none of {them}", folders.join(", "))
}

/// A worktree folder name for `key`, unused in the run and not being added (keys that slug alike
/// get `-2`, `-3`).
fn free_name(r: &Recorded, adding: &std::collections::HashMap<String, String>, key: &str) -> String {
    let base = crate::record::agent_files::slug(key);
    let taken = |n: &str| {
        adding.values().any(|a| a == n)
            || r.agents.values().any(|e| e.worktree.path.file_name() == Some(Path::new(n).as_os_str()))
    };
    let mut name = base.clone();
    let mut k = 2;
    while taken(&name) {
        name = format!("{base}-{k}");
        k += 1;
    }
    name
}
