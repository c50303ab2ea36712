//! Logical agents: opening with the compatibility rules, the per-agent operation queue, outcomes,
//! deterministic op ids, and closing. `op` runs one operation; `supervise` nudges it to an answer.

pub mod message_op;
pub mod op;
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

    /// A folder name under `agents/` for `key`, unique in the run (`-2`, `-3`, ... on clashes).
    fn claim_slug(&self, key: &str) -> String {
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

    /// Starts the harness session (and for `command`, the control socket and launcher).
    fn session_for(
        &self,
        run: &Arc<Run>,
        req: &OpenRequest,
        runtime: &RuntimeConfig,
        info: &AgentInfo,
        responder: Option<Arc<dyn harness::Responder>>,
        sandbox: Option<&crate::sandbox::Chosen>,
    ) -> Result<SessionParts, String> {
        if runtime.harness == "fake" {
            return Ok((Box::new(harness::fake::FakeSession::new(info.clone(), responder)), None));
        }
        let slug = self.claim_slug(&req.key);
        let dir = crate::record::agent_files::agent_dir(run.dir(), &slug);
        let awf =
            std::env::current_exe().map_err(|e| format!("cannot find the awf executable for the launcher: {e}"))?;
        let weak = Arc::downgrade(run);
        let events: crate::control::server::EventSink = Arc::new(move |ty: &str, data: Value| {
            if let Some(r) = weak.upgrade() {
                r.records.event(ty, &data);
            }
        });
        if matches!(runtime.harness.as_str(), "openai" | "anthropic") {
            let cfg = http_config(run, &req.key, runtime)?;
            let session = harness::http::HttpSession::new(info.clone(), cfg, dir.join("history.json"), events)
                .map_err(|e| format!("agent {}: {e}", req.key))?;
            return Ok((Box::new(session), None));
        }
        let argv = runtime.command.clone().unwrap_or_default();
        let endpoint = {
            let _rt = run.rt.enter();
            let messenger: Arc<dyn crate::control::messenger::Messenger> =
                Arc::new(crate::messaging::AgentMessenger { run: Arc::downgrade(run), key: req.key.clone() });
            Endpoint::open(&dir, &req.key, &awf, events, messenger)
                .map_err(|e| format!("agent {}: cannot open its control socket in {}: {e}", req.key, dir.display()))?
        };
        let endpoint = Arc::new(endpoint);
        let cwd = match &req.cwd {
            Some(c) if c.is_absolute() => c.clone(),
            Some(c) => run.cwd.join(c),
            None => run.cwd.clone(),
        };
        let cli = harness::cli::is_cli(&runtime.harness);
        let cli_program = run.config.harnesses.get(&runtime.harness).and_then(|h| h.command.clone());
        // A CLI agent is seated by its program (its home is the seat's home, `agents/<slug>/home`).
        let seated_program = match (cli, &cli_program) {
            (false, _) => argv.clone(),
            (true, Some(p)) => vec![p.clone()],
            (true, None) => vec![runtime.harness.clone()],
        };
        let sandbox = match sandbox {
            Some(chosen) => {
                let place = crate::sandbox::seat::Placement {
                    program: &seated_program,
                    cwd: &cwd,
                    workspace: &cwd,
                    control: &dir,
                    socket: &endpoint.socket,
                    run_dir: run.dir(),
                    awf: &awf,
                };
                Some(run.sandboxes.seat(run, chosen, place).map_err(|e| format!("agent {}: {e}", req.key))?)
            }
            None => None,
        };
        if cli {
            let cfg = harness::cli::CliConfig::from_runtime(runtime, cli_program, run.scheduler.limits.stall_timeout);
            let opener = cli_endpoint_opener(run, awf);
            let session =
                harness::cli::CliSession::open(&runtime.harness, info.clone(), cfg, cwd, dir, endpoint.clone(), opener)
                    .map_err(|e| format!("agent {}: {e}", req.key))?;
            if let Some(s) = &sandbox {
                run.sandboxes.seated(run, s, &req.key, &runtime.harness);
            }
            return Ok((Box::new(session.sandboxed(sandbox)), Some(endpoint)));
        }
        let session = harness::command::CommandSession::new(
            info.clone(),
            argv,
            cwd,
            dir,
            endpoint.clone(),
            run.scheduler.limits.stall_timeout,
        )
        .map_err(|e| format!("agent {}: {e}", req.key))?;
        if let Some(s) = &sandbox {
            run.sandboxes.seated(run, s, &req.key, &runtime.harness);
        }
        Ok((Box::new(session.sandboxed(sandbox)), Some(endpoint)))
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

/// An HTTP harness's settings: base URL (runtime, then its `env`, then the process environment,
/// then the public API), the API key (from the environment only), the answer mode.
fn http_config(run: &Run, key: &str, runtime: &RuntimeConfig) -> Result<harness::http::HttpConfig, String> {
    use harness::http::{Api, HttpConfig};
    let target = harness::http::Target::of(runtime);
    let (api, base_url, key_var, api_key, default_model) =
        (target.api, target.base_url, target.key_var, target.api_key, target.default_model);
    if api_key.is_none() && !target.local {
        return Err(format!(
            "agent {key}: the {} harness needs an API key in ${key_var} for {base_url} (set it, or name another variable with api_key_env)",
            runtime.harness
        ));
    }
    let structured = match runtime.answer.as_deref() {
        None | Some("tools") => false,
        Some("structured") if api == Api::OpenAi => true,
        Some("structured") => {
            return Err(format!(
                "agent {key}: answer = \"structured\" is for the openai harness; anthropic answers with tools"
            ))
        }
        Some(other) => return Err(format!("agent {key}: answer must be \"tools\" or \"structured\", not \"{other}\"")),
    };
    Ok(HttpConfig {
        api,
        base_url,
        model: runtime.model.clone().unwrap_or_else(|| default_model.to_string()),
        effort: runtime.effort.clone(),
        api_key,
        structured,
        max_tokens: runtime.max_tokens.unwrap_or(4096),
        stall: run.scheduler.limits.stall_timeout,
    })
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

/// Opens the control folder and socket of an agent forked from a CLI agent (a fork answers
/// through a launcher of its own), and seats it in its parent's sandbox when there is one.
fn cli_endpoint_opener(run: &Arc<Run>, awf: PathBuf) -> harness::cli::EndpointOpener {
    let weak = Arc::downgrade(run);
    Arc::new(move |key: &str, parent: Option<(&crate::sandbox::Sandbox, &str)>| {
        let run = weak.upgrade().ok_or("the run has ended")?;
        let slug = run.agents.claim_slug(key);
        let dir = crate::record::agent_files::agent_dir(run.dir(), &slug);
        let events_run = Arc::downgrade(&run);
        let events: crate::control::server::EventSink = Arc::new(move |ty: &str, data: Value| {
            if let Some(r) = events_run.upgrade() {
                r.records.event(ty, &data);
            }
        });
        let messenger: Arc<dyn crate::control::messenger::Messenger> =
            Arc::new(crate::messaging::AgentMessenger { run: Arc::downgrade(&run), key: key.to_string() });
        let _rt = run.rt.enter();
        let endpoint = Endpoint::open(&dir, key, &awf, events, messenger)
            .map_err(|e| format!("agent {key}: cannot open its control socket in {}: {e}", dir.display()))?;
        let sandbox = match parent {
            Some((p, harness)) => {
                let s = p.reseat(&dir, &endpoint.socket).map_err(|e| format!("agent {key}: {e}"))?;
                run.sandboxes.seated(&run, &s, key, harness);
                Some(s)
            }
            None => None,
        };
        Ok((dir, Arc::new(endpoint), sandbox))
    })
}
