//! The agents of one run, by key: opening with the compatibility rules, getting, stopping, the
//! keys that were stopped, the folder names under `agents/`. The book receives the run core and
//! the router; it is the router's `Directory` of agents.

use super::error::KeyTaken;
use super::messenger::AgentMessenger;
use super::seating::SandboxBook;
use super::{lock, resolve_runtime, Agent, OpenError, OpenRequest, RuntimeChoice};
use crate::config::RuntimeConfig;
use crate::control::convene::{Convener, Grant};
use crate::harness::{self, AgentInfo};
use crate::messaging::{Directory, Presence, Router};
use crate::run::{Event, Run};
use crate::sandbox::Confinement;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};

/// A runtime choice by (alias, effort).
type RuntimeKey = (String, Option<String>);

/// The agents of one run, and what opening one needs: the run core, the router, the sandboxes.
pub struct AgentBook {
    pub run: Arc<Run>,
    pub router: Arc<Router>,
    pub sandboxes: SandboxBook,
    pub worktrees: super::worktrees::WorktreeBook,
    pub panes: super::panes::PaneBook,
    responders: super::Responders,
    /// This book, for the agents' messengers and the message operations it starts.
    pub(super) me: Weak<AgentBook>,
    open: Mutex<HashMap<String, Arc<Agent>>>,
    slugs: Mutex<HashSet<String>>,
    stopped: Mutex<HashMap<String, String>>,
    /// Runtimes resolved so far, by (alias, effort); the default runtime under "".
    runtimes: Mutex<HashMap<RuntimeKey, Arc<RuntimeConfig>>>,
    /// Runs the councils agents convene (set once, by the layer that can run them).
    convener: std::sync::OnceLock<Arc<dyn Convener>>,
    /// Where agents' operations run when not here (`script run --nats`), set once before any opens.
    remote: std::sync::OnceLock<Arc<dyn super::remote::Remote>>,
    /// Turns agents not open yet started in stages this attempt reused: their op ids count on.
    skipped: Mutex<HashMap<String, u64>>,
    /// awf's own path, which every local agent's `wf` links to: read once, at the first open.
    launcher: std::sync::OnceLock<std::path::PathBuf>,
}

impl AgentBook {
    pub fn new(
        run: Arc<Run>,
        router: Arc<Router>,
        sandboxes: SandboxBook,
        responders: super::Responders,
    ) -> Arc<AgentBook> {
        Arc::new_cyclic(|me| AgentBook {
            run,
            router,
            sandboxes,
            worktrees: Default::default(),
            panes: Default::default(),
            responders,
            me: me.clone(),
            open: Mutex::new(HashMap::new()),
            slugs: Mutex::new(HashSet::new()),
            stopped: Mutex::new(HashMap::new()),
            runtimes: Mutex::new(HashMap::new()),
            convener: std::sync::OnceLock::new(),
            remote: std::sync::OnceLock::new(),
            skipped: Mutex::new(HashMap::new()),
            launcher: std::sync::OnceLock::new(),
        })
    }

    /// awf's own path (`std::env::current_exe`), read at the first open and kept.
    pub(super) fn launcher(&self) -> std::io::Result<std::path::PathBuf> {
        if let Some(path) = self.launcher.get() {
            return Ok(path.clone());
        }
        let path = std::env::current_exe()?;
        Ok(self.launcher.get_or_init(|| path).clone())
    }

    /// Counts on the op ids of the agents that started `runs` turns in a stage this attempt
    /// reuses (open or opened later), so that an op id names the same turn in every attempt.
    pub fn skip_runs(&self, runs: &std::collections::BTreeMap<String, u64>) {
        let open = lock(&self.open);
        let mut skipped = lock(&self.skipped);
        for (key, n) in runs {
            match open.get(key) {
                Some(agent) => agent.skip_runs(*n),
                None => *skipped.entry(key.clone()).or_default() += n,
            }
        }
    }

    /// Gives the book what runs councils for its agents; only the first call counts.
    pub fn set_convener(&self, convener: Arc<dyn Convener>) {
        let _ = self.convener.set(convener);
    }

    /// Gives the book the sessions of agents whose operations run elsewhere; only the first call counts.
    pub fn set_remote(&self, remote: Arc<dyn super::remote::Remote>) {
        let _ = self.remote.set(remote);
    }

    pub(super) fn remote(&self) -> Option<Arc<dyn super::remote::Remote>> {
        self.remote.get().cloned()
    }

    pub fn convener(&self) -> Option<Arc<dyn Convener>> {
        self.convener.get().cloned()
    }

    pub fn get(&self, key: &str) -> Option<Arc<Agent>> {
        lock(&self.open).get(key).cloned()
    }

    pub fn all(&self) -> Vec<Arc<Agent>> {
        lock(&self.open).values().cloned().collect()
    }

    pub(super) fn messenger(&self, key: &str) -> AgentMessenger {
        AgentMessenger { book: self.me.clone(), key: key.to_string() }
    }

    /// A folder name under `agents/` for `key`, unique in the run (`-2`, `-3`, ... on clashes).
    pub(super) fn claim_slug(&self, key: &str) -> String {
        let mut slugs = lock(&self.slugs);
        let base = crate::record::agent_files::slug(key);
        let mut s = base.clone();
        let mut k = 2;
        while !slugs.insert(s.clone()) {
            s = format!("{base}-{k}");
            k += 1;
        }
        s
    }

    /// Opens an agent, or returns the open one with that key when the spec is compatible.
    pub fn open(&self, req: OpenRequest) -> Result<Arc<Agent>, OpenError> {
        let run = &self.run;
        if req.key.trim().is_empty() {
            return Err(OpenError::Refused("agent spec needs a non-empty `key`".into()));
        }
        if let Some(why) = lock(&self.stopped).get(&req.key) {
            return Err(OpenError::Refused(format!(
                "agent {} was stopped ({why}); its key cannot be opened again in this run",
                req.key
            )));
        }
        // What the configuration gets wrong is told apart (`OpenError::is_config`), so that a run
        // failing on it exits 2.
        let agent = || req.key.clone();
        if req.councils != Grant::None {
            let convener = self
                .convener()
                .ok_or_else(|| OpenError::Refused(format!("agent {}: this run cannot convene councils", req.key)))?;
            convener.check_grant(&req.councils).map_err(|source| OpenError::Grant { agent: agent(), source })?;
        }
        let runtime = self.runtime(&req.runtime)?;
        if req.pane.is_some() {
            self.pane_allowed(&req, runtime.harness)
                .map_err(|source| OpenError::Pane { agent: agent(), source: source.into() })?;
        }
        let skills =
            self.skills(&req, runtime.harness).map_err(|source| OpenError::Skills { agent: agent(), source })?;
        // Its worktree, which `session_for` makes its cwd and its sandbox's workspace: added before
        // the book's lock, so that agents opening at once check their files out at once.
        let isolated = req.isolation.unwrap_or(self.worktrees.run_level()) == crate::worktree::Isolation::Worktree;
        // An agent open under the key already: the compatibility check below decides.
        if isolated && self.get(&req.key).is_none() {
            match self.remote().map(|r| r.worktrees()) {
                Some(super::remote::RemoteWorktrees::Refused) => {
                    return Err(OpenError::Config(format!(
                        "agent {}: isolation \"worktree\" is not built for agents run by workers (--nats); run here, or drop it",
                        req.key
                    )))
                }
                Some(super::remote::RemoteWorktrees::Planned) => self.worktrees.plan(run, &req.key),
                None => self.worktrees.open(run, &req.key, req.keep).map(|_| ()),
            }
            .map_err(|source| OpenError::Worktree { agent: agent(), source })?;
        } else if !isolated && req.keep != crate::worktree::Keep::Never {
            return Err(OpenError::Refused(format!(
                "agent {}: `keep` is for an agent with isolation: \"worktree\", which it has not",
                req.key
            )));
        }
        let beside = req.pane.as_ref().and_then(|p| p.layout.beside.as_deref()).map(|k| self.beside(k));
        let mut open = lock(&self.open);
        if let Some(existing) = open.get(&req.key) {
            let differs = if *existing.runtime != *runtime {
                Some("runtime")
            } else if existing.request.cwd != req.cwd {
                Some("cwd")
            } else if existing.request.instructions != req.instructions {
                Some("instructions")
            } else if existing.request.sandbox != req.sandbox {
                Some("sandbox")
            } else if existing.request.skills != req.skills {
                Some("skills")
            } else if existing.request.isolation != req.isolation || existing.request.keep != req.keep {
                Some("isolation")
            } else if existing.request.pane != req.pane {
                Some("placement")
            } else {
                None
            };
            return match differs {
                Some(f) => Err(OpenError::Refused(format!("agent {} is already open with different {f}", req.key))),
                None => Ok(existing.clone()),
            };
        }
        let sandbox = self
            .sandboxes
            .choose(run, &req.key, req.sandbox.as_deref(), runtime.harness, self.remote().is_none())
            .map_err(|source| OpenError::Sandbox { agent: agent(), source })?;
        run.scheduler.admit_agent()?;
        let agent = self.assemble(req, runtime, sandbox, &skills, beside)?;
        if let Some(n) = lock(&self.skipped).remove(&agent.key) {
            agent.skip_runs(n);
        }
        open.insert(agent.key.clone(), agent.clone());
        drop(open);
        run.progress.agents_open.fetch_add(1, Ordering::Relaxed);
        agent.announce(run);
        if let Some(pane) = self.panes.record_of(&agent.key) {
            run.records.event(&Event::PaneOpened { pane: &pane });
        }
        Ok(agent)
    }

    /// Whether an agent may have a pane here: a CLI harness, on this machine.
    fn pane_allowed(
        &self,
        req: &OpenRequest,
        harness: crate::config::HarnessKind,
    ) -> Result<(), super::panes::Refused> {
        use super::panes::Refused;
        if !harness.is_cli() {
            return Err(Refused::NotCli(harness));
        }
        if req.fork_caller.is_some() {
            return Err(Refused::ForksCaller);
        }
        match self.remote() {
            Some(r) if !r.panes() => Err(Refused::OnWorkers),
            _ => Ok(()),
        }
    }

    /// What agent `key`, named by a `layout.beside`, is to place a pane beside.
    fn beside(&self, key: &str) -> super::panes::Beside {
        use super::panes::Beside;
        use crate::pane::spec::Elsewhere;
        let agent = key.to_string();
        if lock(&self.stopped).contains_key(key) {
            return Beside::Not(Elsewhere::Stopped { agent });
        }
        if self.get(key).is_none() {
            return Beside::Not(Elsewhere::NotOpen { agent });
        }
        match self.panes.pane_of(key) {
            Some(id) => Beside::Pane(agent, id),
            None => Beside::Not(Elsewhere::Headless { agent }),
        }
    }

    /// Opens a one-off agent the book does not keep: a decision model's (`agent/decide.rs`), a
    /// fresh session for each decision, on `runtime` (resolved from `req.runtime` by the caller,
    /// which names it to workers). Its key names it in the records; it takes no agent slot of the
    /// run and no worktree, and sits in the run's sandbox (`--sandbox`) if there is one.
    pub(super) fn open_detached(&self, req: OpenRequest, runtime: RuntimeConfig) -> Result<Arc<Agent>, OpenError> {
        let run = &self.run;
        let runtime = Arc::new(runtime);
        let sandbox = self
            .sandboxes
            .choose(run, &req.key, None, runtime.harness, self.remote().is_none())
            .map_err(|source| OpenError::Sandbox { agent: req.key.clone(), source })?;
        self.assemble(req, runtime, sandbox, &[], None)
    }

    /// An agent put together from its checked request: its harness session (with its responder,
    /// sandbox seat, skills and pane), wrapped so that every text it reports reaches the engine
    /// scrubbed of secrets, and its messenger. `open` and `open_detached` differ only before this.
    fn assemble(
        &self,
        req: OpenRequest,
        runtime: Arc<RuntimeConfig>,
        sandbox: Option<crate::sandbox::Chosen>,
        skills: &[harness::cli::skills::Skill],
        beside: Option<super::panes::Beside>,
    ) -> Result<Arc<Agent>, OpenError> {
        let run = &self.run;
        let info = AgentInfo {
            key: req.key.clone(),
            instructions: req.instructions.clone(),
            model: runtime.model.clone().unwrap_or_else(|| runtime.harness.default_model().to_string()),
            effort: runtime.effort.clone(),
            labels: req.labels.clone(),
        };
        let responder = match &runtime.responder {
            Some(path) => Some(self.responders.get(run, path).map_err(OpenError::Responder)?),
            None => None,
        };
        let (session, endpoint) =
            self.session_for(&req, &runtime, &info, responder, sandbox.as_ref(), skills, beside)?;
        let session = harness::scrubbed::Scrubbed::wrap(session, run.secrets.clone());
        if let Some(s) = sandbox.filter(|_| runtime.harness.confinement() != Confinement::Wrapped) {
            self.sandboxes.seated_in_process(run, &s, &req.key, runtime.harness);
        }
        let messenger = self.messenger(&req.key);
        Ok(Arc::new(Agent::new(req, runtime, info, session, endpoint, messenger)))
    }

    /// The agent's skill folders, checked: relative paths are under the script's folder, and
    /// its harness must take skills.
    fn skills(
        &self,
        req: &OpenRequest,
        harness: crate::config::HarnessKind,
    ) -> Result<Vec<harness::cli::skills::Skill>, harness::cli::skills::SkillError> {
        if req.skills.is_empty() {
            return Ok(Vec::new());
        }
        harness::cli::skills::supported(harness)?;
        let base = self.run.script.parent().map(|p| p.to_path_buf()).unwrap_or_else(|| self.run.cwd.clone());
        let paths: Vec<_> = req.skills.iter().map(|p| if p.is_absolute() { p.clone() } else { base.join(p) }).collect();
        harness::cli::skills::check(&paths)
    }

    /// The runtime `choice` resolves to, shared by every agent that made the same choice (one
    /// copy of a runtime's settings, however many agents use it).
    pub(super) fn runtime(&self, choice: &RuntimeChoice) -> Result<Arc<RuntimeConfig>, crate::config::ConfigError> {
        let key = match choice {
            RuntimeChoice::Inline(_) => return resolve_runtime(&self.run, choice).map(Arc::new),
            RuntimeChoice::Default => (String::new(), None),
            RuntimeChoice::Alias { alias, effort } => (alias.clone(), effort.clone()),
        };
        if let Some(r) = lock(&self.runtimes).get(&key) {
            return Ok(r.clone());
        }
        let r = Arc::new(resolve_runtime(&self.run, choice)?);
        lock(&self.runtimes).insert(key, r.clone());
        Ok(r)
    }

    /// Adds an agent forked from `parent` on the session `session` (see `op::fork`).
    pub(super) fn add_fork(
        &self,
        parent: &Agent,
        info: AgentInfo,
        session: Box<dyn crate::harness::Session>,
    ) -> Result<Arc<Agent>, KeyTaken> {
        let key = info.key.clone();
        let mut open = lock(&self.open);
        if open.contains_key(&key) || lock(&self.stopped).contains_key(&key) {
            return Err(KeyTaken(key));
        }
        let endpoint = session.endpoint();
        let mut request = parent.request.clone();
        request.key = key.clone();
        request.instructions = info.instructions.clone();
        let messenger = self.messenger(&key);
        let agent = Arc::new(Agent::new(request, parent.runtime.clone(), info, session, endpoint, messenger));
        open.insert(key.clone(), agent.clone());
        drop(open);
        self.run.progress.agents_open.fetch_add(1, Ordering::Relaxed);
        self.run.records.event(&Event::AgentOpened {
            agent: &key,
            harness: agent.harness().as_str(),
            model: &agent.model(),
            effort: agent.effort().as_deref(),
            labels: &agent.request.labels,
            forked_from: Some(&parent.key),
        });
        Ok(agent)
    }

    /// Whether `key` is free for a new agent (never opened, never stopped).
    pub(super) fn key_free(&self, key: &str) -> bool {
        !lock(&self.open).contains_key(key) && !lock(&self.stopped).contains_key(key)
    }

    /// Ends an agent; its key is never opened again in this run. False when it was not open.
    pub fn stop(&self, key: &str, reason: &str) -> bool {
        let run = &self.run;
        let Some(agent) = lock(&self.open).remove(key) else {
            return false;
        };
        lock(&self.stopped).insert(key.to_string(), reason.to_string());
        agent.close(&format!("stopped: {reason}"));
        agent.stopped.cancel();
        if let Some(p) = self.panes.stop(key) {
            run.records.event(&Event::PaneClosed { agent: key, target: &p.target, state: p.state });
        }
        // A running turn's process may still write: the turn's end commits its worktree then.
        if agent.busy() == 0 {
            self.worktrees.close(run, key, false);
        }
        self.router.fail_asks_to(run, key, &format!("{key} stopped: {reason}"), true);
        run.progress.agents_closed.fetch_add(1, Ordering::Relaxed);
        run.records.event(&Event::AgentStopped { agent: key, reason });
        true
    }
}

impl AgentBook {
    /// At the run's end: what the agents left in their worktrees committed, the worktrees removed
    /// or kept (an agent closed by a failed operation, or a run that did not succeed, counts as
    /// failed for `keep: "on-failure"`). Runs git: call it off the async threads.
    pub fn settle_worktrees(&self, run_failed: bool) {
        let failed: Vec<String> = self
            .all()
            .into_iter()
            .filter(|a| a.closed().is_some() && !a.stopped.is_cancelled())
            .map(|a| a.key.clone())
            .collect();
        self.worktrees.finish(&self.run, run_failed, &failed);
    }
}

impl AgentBook {
    /// At the run's end: every open pane closed, or released as `keep_pane` says (an agent closed
    /// by a failed operation counts as failed); `result.json` `panes` (null when there are none).
    /// Runs tmux: quick, but not on the async threads' hot paths.
    pub fn settle_panes(&self) -> serde_json::Value {
        let failed: HashSet<String> = self
            .all()
            .into_iter()
            .filter(|a| a.closed().is_some() && !a.stopped.is_cancelled())
            .map(|a| a.key.clone())
            .collect();
        let (changed, summary) = self.panes.finish(&|k| failed.contains(k));
        for p in &changed {
            self.run.records.event(&Event::PaneClosed { agent: &p.agent, target: &p.target, state: p.state });
        }
        summary
    }
}

impl Directory for AgentBook {
    fn presence(&self, key: &str) -> Presence {
        match self.get(key) {
            Some(a) if a.closed().is_none() => {
                if a.busy() == 0 {
                    Presence::Idle
                } else {
                    Presence::Busy
                }
            }
            _ => Presence::Gone,
        }
    }

    fn wake(&self, key: &str, stage: Option<Arc<str>>) {
        match (self.me.upgrade(), self.get(key)) {
            (Some(book), Some(agent)) => super::start::wake_for_messages(book, agent, stage),
            // Gone since it was found idle: nothing will run, so the count comes off again.
            _ => self.router.woke(&stage),
        }
    }
}
