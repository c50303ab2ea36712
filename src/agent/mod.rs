//! Logical agents: opening with the compatibility rules, the per-agent operation queue, outcomes,
//! deterministic op ids, and closing. `op` runs one operation; `supervise` nudges it to an answer.

pub mod message_op;
pub mod op;
mod session;
pub mod supervise;

use crate::accounting::{CostSource, Usage};
use crate::config::RuntimeConfig;
use crate::control::server::Endpoint;
use crate::harness::{self, AgentInfo, Session};
use crate::run::Run;
use crate::sandbox::Confinement;
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// How an operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutcomeKind {
    Answered,
    Unanswered,
    Blocked,
    TimedOut,
    Failed,
    Cancelled,
}

impl OutcomeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeKind::Answered => "answered",
            OutcomeKind::Unanswered => "unanswered",
            OutcomeKind::Blocked => "blocked",
            OutcomeKind::TimedOut => "timed-out",
            OutcomeKind::Failed => "failed",
            OutcomeKind::Cancelled => "cancelled",
        }
    }
}

/// The settled result of one operation, as scripts and records see it.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Outcome {
    pub kind: OutcomeKind,
    pub value: Option<Value>,
    pub reason: Option<String>,
    pub op_id: String,
    pub usage: Usage,
    pub duration_ms: u64,
    pub cost_source: CostSource,
    pub simulated: bool,
}

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
    pub sandbox: Option<Value>,
    pub labels: Value,
    pub timeout_ms: Option<u64>,
    pub deadline_ms: Option<i64>,
}

pub struct Agent {
    pub key: String,
    /// The control socket and launcher, for harnesses that answer through one.
    pub endpoint: Option<Arc<crate::control::server::Endpoint>>,
    pub runtime: RuntimeConfig,
    pub request: OpenRequest,
    info: Mutex<AgentInfo>,
    session: tokio::sync::Mutex<Box<dyn Session>>,
    runs: AtomicU64,
    message_ops: AtomicU64,
    /// Operations running or queued on this agent: a message to it is held while this is non-zero.
    busy: std::sync::atomic::AtomicUsize,
    ops: Mutex<HashMap<String, (String, Outcome)>>,
    closed: Mutex<Option<String>>,
    messenger: Arc<crate::messaging::AgentMessenger>,
}

impl Agent {
    pub fn busy(&self) -> usize {
        self.busy.load(Ordering::SeqCst)
    }

    /// Counts an operation as started on this agent.
    pub fn enter(&self) {
        self.busy.fetch_add(1, Ordering::SeqCst);
    }

    /// Counts an operation as ended; messages held for an agent that is now idle wake it.
    pub fn leave(self: &Arc<Self>, run: &Arc<Run>) {
        if self.busy.fetch_sub(1, Ordering::SeqCst) == 1 && self.closed().is_none() && !run.root.is_cancelled() {
            if let Some(stage) = run.router.held_stage(&self.key) {
                run.router.waking(&stage);
                message_op::wake(run.clone(), self.clone(), stage);
            }
        }
    }

    fn next_message_op(&self) -> u64 {
        self.message_ops.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The launcher path shown in prompts (`wf` for in-process agents, which need none).
    pub fn launcher(&self) -> String {
        match &self.endpoint {
            Some(e) => e.launcher.display().to_string(),
            None => "wf".to_string(),
        }
    }

    pub fn messenger(&self) -> Arc<dyn crate::control::messenger::Messenger> {
        self.messenger.clone()
    }

    /// Closes the agent because an operation failed; asks to it fail with the reason.
    pub fn close_with(&self, run: &Run, why: &str) {
        if self.close(why) {
            run.progress.agents_closed.fetch_add(1, Ordering::Relaxed);
            run.records.event("agent-closed", &serde_json::json!({ "agent": self.key, "reason": why }));
        }
        run.router.fail_asks_to(run, &self.key, &format!("{} closed: {why}", self.key), true);
    }
    pub fn harness(&self) -> &str {
        &self.runtime.harness
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

    /// Closes the agent; the first reason stands. Returns whether this call closed it.
    pub fn close(&self, why: &str) -> bool {
        let mut c = lock(&self.closed);
        if c.is_some() {
            return false;
        }
        *c = Some(why.to_string());
        true
    }

    fn next_run(&self) -> u64 {
        self.runs.fetch_add(1, Ordering::SeqCst) + 1
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every value behind these locks is replaced whole, so a poisoned lock still holds a valid value.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A harness session and, for harnesses that answer through one, its control endpoint.
type SessionParts = (Box<dyn Session>, Option<Arc<Endpoint>>);

/// The agents of one run, by key, and the keys that were stopped.
#[derive(Default)]
pub struct AgentBook {
    open: Mutex<HashMap<String, Arc<Agent>>>,
    slugs: Mutex<std::collections::HashSet<String>>,
    stopped: Mutex<HashMap<String, String>>,
}

impl AgentBook {
    pub fn get(&self, key: &str) -> Option<Arc<Agent>> {
        lock(&self.open).get(key).cloned()
    }

    pub fn all(&self) -> Vec<Arc<Agent>> {
        lock(&self.open).values().cloned().collect()
    }

    /// Opens an agent, or returns the open one with that key when the spec is compatible.
    pub fn open(&self, run: &Arc<Run>, req: OpenRequest) -> Result<Arc<Agent>, String> {
        if req.key.trim().is_empty() {
            return Err("agent spec needs a non-empty `key`".into());
        }
        if let Some(why) = lock(&self.stopped).get(&req.key) {
            return Err(format!("agent {} was stopped ({why}); its key cannot be opened again in this run", req.key));
        }
        let runtime = resolve_runtime(run, &req.runtime)?;
        let mut open = lock(&self.open);
        if let Some(existing) = open.get(&req.key) {
            let differs = if existing.runtime != runtime {
                Some("runtime")
            } else if existing.request.cwd != req.cwd {
                Some("cwd")
            } else if existing.request.instructions != req.instructions {
                Some("instructions")
            } else if existing.request.sandbox != req.sandbox {
                Some("sandbox")
            } else {
                None
            };
            return match differs {
                Some(f) => Err(format!("agent {} is already open with different {f}", req.key)),
                None => Ok(existing.clone()),
            };
        }
        harness::check_available(&runtime.harness).map_err(|e| format!("agent {}: {e}", req.key))?;
        let sandbox = run
            .sandboxes
            .choose(run, &req.key, req.sandbox.as_ref(), &runtime.harness)
            .map_err(|e| format!("agent {}: {e}", req.key))?;
        run.scheduler.admit_agent()?;
        let info = AgentInfo {
            key: req.key.clone(),
            instructions: req.instructions.clone(),
            model: runtime.model.clone().unwrap_or_else(|| harness::default_model(&runtime.harness)),
            effort: runtime.effort.clone(),
            labels: req.labels.clone(),
        };
        let responder = match &runtime.responder {
            Some(path) => Some(run.responder(path)?),
            None => None,
        };
        let (session, endpoint) = self.session_for(run, &req, &runtime, &info, responder, sandbox.as_ref())?;
        // Every harness reports through this wrapper: its texts reach the engine scrubbed of secrets.
        let session = harness::scrubbed::Scrubbed::wrap(session, run.secrets.clone());
        if let Some(s) = sandbox.filter(|_| crate::sandbox::confinement(&runtime.harness) != Confinement::Wrapped) {
            run.sandboxes.seated_in_process(run, &s, &req.key, &runtime.harness);
        }
        let key = req.key.clone();
        let agent = Arc::new(Agent {
            key: req.key.clone(),
            endpoint,
            runtime,
            request: req,
            info: Mutex::new(info),
            session: tokio::sync::Mutex::new(session),
            runs: AtomicU64::new(0),
            message_ops: AtomicU64::new(0),
            busy: Default::default(),
            ops: Mutex::new(HashMap::new()),
            closed: Mutex::new(None),
            messenger: Arc::new(crate::messaging::AgentMessenger { run: Arc::downgrade(run), key: key.clone() }),
        });
        open.insert(agent.key.clone(), agent.clone());
        drop(open);
        run.progress.agents_open.fetch_add(1, Ordering::Relaxed);
        run.records.event(
            "agent-opened",
            &serde_json::json!({
                "agent": agent.key, "harness": agent.harness(), "model": agent.model(),
                "effort": agent.effort(), "labels": agent.request.labels,
            }),
        );
        Ok(agent)
    }

    /// Ends an agent; its key is never opened again in this run. False when it was not open.
    pub fn stop(&self, run: &Run, key: &str, reason: &str) -> bool {
        let Some(agent) = lock(&self.open).remove(key) else {
            return false;
        };
        lock(&self.stopped).insert(key.to_string(), reason.to_string());
        agent.close(&format!("stopped: {reason}"));
        run.router.fail_asks_to(run, key, &format!("{key} stopped: {reason}"), true);
        run.progress.agents_closed.fetch_add(1, Ordering::Relaxed);
        run.records.event("agent-stopped", &serde_json::json!({ "agent": key, "reason": reason }));
        true
    }

    /// Forks `parent` into a new agent on a copy of its session.
    pub fn fork(
        &self,
        run: &Arc<Run>,
        parent: &Agent,
        key: String,
        instructions: Option<String>,
        effort: Option<String>,
    ) -> Result<Arc<Agent>, String> {
        if lock(&self.open).contains_key(&key) || lock(&self.stopped).contains_key(&key) {
            return Err(format!("cannot fork into {key}: an agent with that key was already opened in this run"));
        }
        run.scheduler.admit_agent()?;
        let mut info = parent.info();
        info.key = key.clone();
        if instructions.is_some() {
            info.instructions = instructions.clone();
        }
        if effort.is_some() {
            info.effort = effort;
        }
        let session = {
            let guard = parent
                .session
                .try_lock()
                .map_err(|_| format!("cannot fork {} while it is running an operation", parent.key))?;
            guard.fork(info.clone()).map_err(|e| format!("harness {} cannot fork: {e}", parent.harness()))?
        };
        let endpoint = session.endpoint();
        let mut request = parent.request.clone();
        request.key = key.clone();
        request.instructions = info.instructions.clone();
        let agent = Arc::new(Agent {
            key: key.clone(),
            endpoint,
            runtime: parent.runtime.clone(),
            request,
            info: Mutex::new(info),
            session: tokio::sync::Mutex::new(session),
            runs: AtomicU64::new(0),
            message_ops: AtomicU64::new(0),
            busy: Default::default(),
            ops: Mutex::new(HashMap::new()),
            closed: Mutex::new(None),
            messenger: Arc::new(crate::messaging::AgentMessenger { run: Arc::downgrade(run), key: key.clone() }),
        });
        lock(&self.open).insert(key.clone(), agent.clone());
        run.progress.agents_open.fetch_add(1, Ordering::Relaxed);
        run.records.event("agent-opened", &serde_json::json!({ "agent": key, "forked_from": parent.key, "harness": agent.harness(), "model": agent.model() }));
        Ok(agent)
    }
}

fn resolve_runtime(run: &Run, choice: &RuntimeChoice) -> Result<RuntimeConfig, String> {
    let (alias, effort) = match choice {
        RuntimeChoice::Inline(r) => return Ok((**r).clone()),
        RuntimeChoice::Default => (run.default_runtime.clone(), None),
        RuntimeChoice::Alias { alias, effort } => (alias.clone(), effort.clone()),
    };
    let mut r = run.config.runtime(&alias).map_err(|e| e.to_string())?;
    if effort.is_some() {
        r.effort = effort;
    }
    Ok(r)
}

impl Agent {
    /// Changes model or effort for later turns (a settings operation, queued behind running turns).
    pub fn set(&self, run: &Run, model: Option<String>, effort: Option<String>) -> Result<(), String> {
        if let Some(why) = self.closed() {
            return Err(format!("agent {} is closed: {why}", self.key));
        }
        run.rt.block_on(async {
            let mut session = self.session.lock().await;
            session.set(model.as_deref(), effort.as_deref())
        })?;
        let mut info = lock(&self.info);
        if let Some(m) = &model {
            info.model = m.clone();
        }
        if effort.is_some() {
            info.effort = effort.clone();
        }
        run.records.event("agent-set", &serde_json::json!({ "agent": self.key, "model": model, "effort": effort }));
        Ok(())
    }

    /// Replaces the session's history with a summary (a compaction operation) and returns it.
    pub fn compact(
        &self,
        run: &Run,
        prompt: &str,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Result<String, op::OpError> {
        if let Some(why) = self.closed() {
            return Err(op::OpError::Invalid(format!("agent {} is closed: {why}", self.key)));
        }
        let summary = run.rt.block_on(async {
            tokio::select! {
                biased;
                _ = cancel.cancelled() => Err(op::OpError::Terminated(run.stop_reason())),
                r = async {
                    let mut session = self.session.lock().await;
                    session.compact(prompt).await
                } => r.map_err(op::OpError::Invalid),
            }
        })?;
        run.records.event("agent-compacted", &serde_json::json!({ "agent": self.key, "summary_chars": summary.len() }));
        Ok(summary)
    }
}
