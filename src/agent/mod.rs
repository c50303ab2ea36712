//! Logical agents: what an agent is (its runtime, harness session, control endpoint, operation
//! counters, whether it is closed) and the book of a run's agents (`book.rs`). `op` is the one
//! operation pipeline every turn, message, compaction and fork goes through; `supervise` nudges a
//! turn to an answer; `session` starts a harness session; `seating` its sandbox; `messenger` is
//! an agent's side of the router; `remote` the hook for agents whose operations run elsewhere;
//! `worktrees` the git worktrees of isolated agents; `panes` the tmux panes of pane agents.

mod book;
mod caller;
pub mod decide;
pub mod error;
mod fingerprint;
mod kinds;
mod message;
pub mod messenger;
pub mod op;
pub mod operation;
pub mod panes;
pub mod remote;
mod responders;
pub mod sandboxes;
pub mod seating;
mod session;
pub mod start;
pub mod supervise;
pub mod worktrees;

pub use crate::run::{Outcome, OutcomeKind};
pub use book::AgentBook;
pub use error::OpenError;
pub use responders::Responders;

use crate::config::RuntimeConfig;
use crate::harness::{AgentInfo, Session};
use crate::run::Run;
use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Which runtime an agent asked for.
#[derive(Debug, Clone, PartialEq)]
pub enum RuntimeChoice {
    Default,
    Alias { alias: String, effort: Option<String> },
    Inline(Box<RuntimeConfig>),
}

/// `ctx.agents.open(spec)`, parsed.
#[derive(Debug, Clone)]
pub struct OpenRequest {
    pub key: String,
    pub runtime: RuntimeChoice,
    pub instructions: Option<String>,
    pub cwd: Option<PathBuf>,
    /// Boxed, as the other options few agents set: a run of 10,000 agents holds 10,000 requests.
    pub sandbox: Option<Box<sandboxes::Asked>>,
    pub labels: Value,
    pub timeout_ms: Option<u64>,
    pub deadline_ms: Option<i64>,
    /// The councils the agent may convene from its turns (`wf council`).
    pub councils: crate::control::convene::Grant,
    /// Skill folders (`skills`), as written: relative ones are under the script's folder.
    pub skills: Vec<PathBuf>,
    /// `ctx.agents.fork_caller`: the caller's session its first turn forks.
    pub fork_caller: Option<Box<crate::harness::cli::caller::CallerFork>>,
    /// Whether the agent may ask the operator from its turns (`wf ask-operator`, agent spec `operator`).
    pub operator: bool,
    /// `isolation`: `None` takes the run's (`--isolation`).
    pub isolation: Option<crate::worktree::Isolation>,
    /// `keep`: what becomes of its worktree when it closes.
    pub keep: crate::worktree::Keep,
    /// `placement: "pane"` with its `layout` and `keep_pane`; `None`: headless.
    pub pane: Option<Box<crate::pane::spec::PaneSpec>>,
}

pub struct Agent {
    pub key: String,
    /// The control socket and launcher, for harnesses that answer through one.
    pub endpoint: Option<Arc<crate::control::server::Endpoint>>,
    /// Shared by the agents that resolved the same runtime choice.
    pub runtime: Arc<RuntimeConfig>,
    pub request: OpenRequest,
    info: Mutex<AgentInfo>,
    session: tokio::sync::Mutex<Box<dyn Session>>,
    /// Operations started, by kind: turn ids count `runs`, message ops `message_ops`, the rest `other_ops`.
    runs: AtomicU64,
    message_ops: AtomicU64,
    other_ops: AtomicU64,
    /// Operations running or queued on this agent: a message to it is held while this is non-zero.
    busy: AtomicUsize,
    /// Outcomes of turns with an explicit id, for the same-id-same-outcome rule.
    ops: Mutex<HashMap<String, (String, Outcome)>>,
    closed: Mutex<Option<String>>,
    /// Cancelled when the workflow stops the agent: its running operation settles `cancelled`.
    stopped: tokio_util::sync::CancellationToken,
    messenger: Arc<messenger::AgentMessenger>,
    /// Tells the CLI session the agent is in, even while a turn holds the session.
    probe: Option<crate::harness::cli::caller::CallerProbe>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every value behind these locks is replaced whole, so a poisoned lock still holds a valid value.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Agent {
    fn new(
        req: OpenRequest,
        runtime: Arc<RuntimeConfig>,
        info: AgentInfo,
        session: Box<dyn Session>,
        endpoint: Option<Arc<crate::control::server::Endpoint>>,
        messenger: messenger::AgentMessenger,
    ) -> Agent {
        let probe = session.caller_probe();
        Agent {
            probe,
            key: req.key.clone(),
            endpoint,
            runtime,
            request: req,
            info: Mutex::new(info),
            session: tokio::sync::Mutex::new(session),
            runs: AtomicU64::new(0),
            message_ops: AtomicU64::new(0),
            other_ops: AtomicU64::new(0),
            busy: AtomicUsize::new(0),
            ops: Mutex::new(HashMap::new()),
            closed: Mutex::new(None),
            stopped: tokio_util::sync::CancellationToken::new(),
            messenger: Arc::new(messenger),
        }
    }

    pub fn busy(&self) -> usize {
        self.busy.load(Ordering::SeqCst)
    }

    /// Counts an operation as started on this agent.
    pub fn enter(&self) {
        self.busy.fetch_add(1, Ordering::SeqCst);
    }

    /// Counts an operation as ended. Messages sent while the agent worked wait for its next turn
    /// or check-in (DESIGN section 4): going idle wakes it only for a question held for it, whose
    /// asker waits for the reply.
    pub fn leave(self: &Arc<Self>, book: &Arc<AgentBook>) {
        if self.busy.fetch_sub(1, Ordering::SeqCst) == 1 && self.closed().is_none() && !book.run.root.is_cancelled() {
            if let Some(stage) = book.router.held_ask_stage(&self.key) {
                book.router.waking(&stage);
                start::wake_for_messages(book.clone(), self.clone(), stage);
            }
        }
    }

    /// The launcher path shown in prompts (`wf` for in-process agents, which need none).
    pub fn launcher(&self) -> String {
        match &self.endpoint {
            Some(e) => e.launcher.display().to_string(),
            None => "wf".to_string(),
        }
    }

    /// Records `agent-opened` for this agent (not a fork: a fork's event names its parent).
    pub(crate) fn announce(&self, run: &crate::run::Run) {
        run.records.event(&crate::run::Event::AgentOpened {
            agent: &self.key,
            harness: self.harness().as_str(),
            model: &self.model(),
            effort: self.effort().as_deref(),
            labels: &self.request.labels,
            forked_from: None,
        });
    }

    pub fn messenger(&self) -> Arc<dyn crate::control::messenger::Messenger> {
        self.messenger.clone()
    }

    /// Closes the agent because an operation failed; asks to it fail with the reason.
    pub fn close_with(&self, book: &AgentBook, why: &str) {
        self.mark_closed(book, why);
        book.router.fail_asks_to(&book.run, &self.key, &format!("{} closed: {why}", self.key), true);
    }

    /// Closes the agent (recorded once) and leaves the asks to it to the caller.
    pub fn mark_closed(&self, book: &AgentBook, why: &str) {
        if self.close(why) {
            book.run.progress.agents_closed.fetch_add(1, Ordering::Relaxed);
            book.run.records.event(&crate::run::Event::AgentClosed { agent: &self.key, reason: why });
        }
    }

    /// The CLI session the agent is in now (for a council it convenes: the child run's caller).
    pub fn calling_session(&self) -> Option<crate::run::caller::Caller> {
        self.probe.as_ref().map(|p| p())
    }

    /// The session's state for another machine to take the agent over (`Session::export`).
    /// Blocks while an operation holds the session: call it off the async threads.
    pub fn export_session(&self) -> Option<crate::harness::SessionExport> {
        self.session.blocking_lock().export()
    }

    /// Takes over a stored session before the agent's first turn (`Session::import`). Blocks like
    /// `export_session`.
    pub fn import_session(&self, session: crate::harness::SessionExport) -> Result<(), crate::harness::HarnessError> {
        self.session.blocking_lock().import(session)
    }

    pub fn harness(&self) -> crate::config::HarnessKind {
        self.runtime.harness
    }

    pub fn info(&self) -> AgentInfo {
        lock(&self.info).clone()
    }

    pub fn model(&self) -> String {
        lock(&self.info).model.clone()
    }

    pub fn effort(&self) -> Option<String> {
        lock(&self.info).effort.clone()
    }

    /// Why the agent is closed, if it is.
    pub fn closed(&self) -> Option<String> {
        lock(&self.closed).clone()
    }

    /// Counts `n` turns as started (those of a stage this attempt reuses).
    pub(crate) fn skip_runs(&self, n: u64) {
        self.runs.fetch_add(n, Ordering::SeqCst);
    }

    /// Closes the agent; the first reason stands. Returns whether this call closed it.
    pub fn close(&self, why: &str) -> bool {
        let mut c = lock(&self.closed);
        if c.is_some() {
            return false;
        }
        *c = Some(why.to_string());
        true
    }
}

/// The runtime an agent asked for, resolved against the run's config.
fn resolve_runtime(run: &Run, choice: &RuntimeChoice) -> Result<RuntimeConfig, crate::config::ConfigError> {
    let (alias, effort) = match choice {
        RuntimeChoice::Inline(r) => return Ok((**r).clone()),
        RuntimeChoice::Default => (run.default_runtime.clone(), None),
        RuntimeChoice::Alias { alias, effort } => (alias.clone(), effort.clone()),
    };
    let mut r = run.config.runtime(&alias)?;
    if effort.is_some() {
        r.effort = effort;
    }
    Ok(r)
}
