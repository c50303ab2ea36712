//! The run core, the bottom layer every book builds on: a run's identity and folder, config, the
//! tokio handle, the root scope (cancellation and deadline), the stop cause, the records, the
//! scheduler (limits, budgets, accounts), schemas, stages, progress, and what a resumed attempt
//! replays. It owns no book: agents, routes and sandboxes live above it and receive it.

pub mod caller;
pub mod checkpoint;
pub mod children;
pub mod deadline;
pub mod event;
pub mod leftovers;
pub mod limits;
pub mod outcome;
pub mod progress;
#[cfg(test)]
mod record_tests;
pub mod resume;
pub mod scheduler;
pub mod schema;
pub mod scope;
pub mod stages;

use crate::accounting::Price;
use crate::config::Config;
use crate::record::{self, Recorder, Stream};
use schema::SchemaCache;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

pub use crate::record::status::{RunStatus, StageStatus};
pub use event::Event;
pub use outcome::{Outcome, OutcomeKind, Settled};
pub use scheduler::Limits;

/// A boxed future, as the trait objects between the layers return them.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// `result.json`, written by `finish` and read back by every reader of a run folder.
pub use crate::record::docs::ResultDoc;

/// What a resumed attempt makes of an operation the journal may hold.
pub enum Replay {
    /// Answered before with the same turn at the same place: its recorded outcome (the entry is
    /// used up: it answers no other operation of this attempt).
    Same(Value),
    /// Answered before, but the turn or its place is not the same now: it runs again, and why.
    Changed(String),
    None,
}

/// Why a run ended before its script returned.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "kind", content = "reason", rename_all = "kebab-case")]
pub enum StopCause {
    /// `ctx.stop(reason)`: status `stopped`, exit 3.
    Stopped(String),
    /// Ctrl-C or `awf runs stop`: status `cancelled`, exit 4.
    Cancelled(String),
    /// The run's `--deadline` passed: status `cancelled`, exit 4.
    Deadline,
}

/// The `turns.jsonl` kind of a line that bills a council on its own (not on its calling turn).
pub const COUNCIL_KIND: &str = "council";

/// How long a finishing run waits for its child runs to settle: their stop grace and a margin.
const CHILD_GRACE: std::time::Duration = std::time::Duration::from_secs(7);

/// Everything needed to start a run.
pub struct RunSpec {
    pub script: PathBuf,
    pub script_sha256: String,
    pub cwd: PathBuf,
    pub runs_dir: PathBuf,
    pub args: Value,
    pub meta: Value,
    pub config: Config,
    pub limits: Limits,
    pub deadline: Option<Duration>,
    pub default_runtime: String,
    /// `--sandbox NAME`: the sandbox every agent of the run is seated in.
    pub sandbox: Option<crate::sandbox::Named>,
    /// A new attempt of an earlier run (`awf runs resume`).
    pub resume: Option<resume::Resume>,
    /// `--isolation`: how agents whose spec says none work (`run.json` `isolation`, kept for
    /// later attempts).
    pub isolation: crate::worktree::Isolation,
}

pub struct Run {
    pub id: String,
    pub attempt: u32,
    /// Stages this attempt reuses: name → (value, summary).
    replay_stages: HashMap<String, (Value, Option<String>)>,
    /// Answered operations on record: (agent, op id) → (turn hash, outcome).
    replay_ops: Mutex<HashMap<(String, String), resume::Journaled>>,
    /// Turns each agent started in each stage of this attempt (default ids), and those of the
    /// stages it reuses, so that op ids count on through reused stages.
    replay_stage_runs: HashMap<String, std::collections::BTreeMap<String, u64>>,
    stage_runs: Mutex<HashMap<String, std::collections::BTreeMap<String, u64>>>,
    /// Questions for the operator: open now, and answered by earlier attempts.
    pub checkpoints: checkpoint::Checkpoints,
    pub cwd: PathBuf,
    pub script: PathBuf,
    pub config: Config,
    pub default_runtime: String,
    pub rt: tokio::runtime::Handle,
    pub root: CancellationToken,
    /// The run's deadline (`--deadline`), for this attempt.
    pub deadline: Option<deadline::Deadline>,
    pub records: Recorder,
    pub scheduler: scheduler::Scheduler,
    pub schemas: SchemaCache,
    pub stages: stages::StageBook,
    pub progress: progress::Progress,
    /// The run's secret values: text from harnesses is scrubbed of them before it is recorded.
    pub secrets: Arc<crate::redact::Redactor>,
    pub started: Instant,
    started_at: String,
    run_doc: Mutex<Value>,
    stop: Mutex<Option<StopCause>>,
    simulated: AtomicBool,
    budget_warned: AtomicBool,
    /// Models warned about having no price (once each per attempt).
    unpriced_warned: Mutex<std::collections::HashSet<String>>,
    /// The run's lock, held by this attempt until it finishes (or its process dies).
    lock: Mutex<Option<record::lock::RunLock>>,
    /// How many runs above this one convened it (0: a run started by a command).
    depth: std::sync::atomic::AtomicU32,
    /// The child runs its agents convened: which still run, which are billed.
    children: children::Children,
    /// A council convened from a turn stops once its budget is spent.
    stop_on_budget: AtomicBool,
    /// Background councils (`wf council --background`): (still running, started in this attempt).
    background: Mutex<(usize, usize)>,
    background_changed: tokio::sync::Notify,
    /// The calling session (`run.json` `caller`), kept by every later attempt.
    caller: Mutex<Option<caller::Caller>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Values behind these locks are replaced or appended whole; a poisoned lock is still usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Run {
    /// Creates the run folder, writes `run.json` and the `run-started` event. A new run takes
    /// `new_id` (the caller names it: `awf serve` names a run when it is queued); a resumed run
    /// keeps its own.
    pub fn start_with_id(mut spec: RunSpec, new_id: String, rt: tokio::runtime::Handle) -> std::io::Result<Arc<Run>> {
        let started_at = record::now_iso();
        let (id, dir, attempt, run_doc) = match &mut spec.resume {
            None => {
                let id = new_id;
                let doc = json!({
                    "v": record::FORMAT_VERSION, "id": id, "script": spec.script.display().to_string(),
                    "script_sha256": spec.script_sha256, "cwd": spec.cwd.display().to_string(),
                    "args": spec.args, "meta": spec.meta, "limits": spec.limits,
                    "attempts": [{ "n": 1, "started_at": started_at, "finished_at": null, "status": RunStatus::Running,
                                   "from_stage": null, "script_sha256": spec.script_sha256 }],
                });
                let mut doc = doc;
                if spec.isolation != crate::worktree::Isolation::None {
                    doc["isolation"] = json!(spec.isolation);
                }
                (id.clone(), spec.runs_dir.join(&id), 1, doc)
            }
            Some(r) => {
                let mut doc = r.run_doc.clone();
                // The limits apply to every later attempt too, unless a resume sets new ones.
                doc["limits"] = json!(spec.limits);
                if spec.isolation != crate::worktree::Isolation::None {
                    doc["isolation"] = json!(spec.isolation);
                }
                // What an earlier attempt was waiting for is asked again, if this one gets there.
                if let Some(m) = doc.as_object_mut() {
                    m.remove("waiting");
                }
                if let Some(a) = doc["attempts"].as_array_mut() {
                    // This attempt holds the run's lock: any other still `running` on record died.
                    let live = [RunStatus::Running.as_str(), RunStatus::Waiting.as_str()];
                    for earlier in a.iter_mut().filter(|e| live.iter().any(|s| e["status"] == *s)) {
                        earlier["status"] = json!(RunStatus::Interrupted);
                    }
                    a.push(json!({ "n": r.attempt, "started_at": started_at, "finished_at": null, "status": RunStatus::Running,
                                   "from_stage": r.from_stage, "script_sha256": spec.script_sha256 }));
                }
                (r.run_id.clone(), r.dir.clone(), r.attempt, doc)
            }
        };
        // A resumed attempt took the lock before reading the records; a new run takes it here.
        let run_lock = match spec.resume.as_mut().and_then(|r| r.lock.take()) {
            Some(l) => l,
            None => {
                record::private::create_dir(&dir)?;
                record::lock::RunLock::acquire(&dir, &id).map_err(std::io::Error::other)?
            }
        };
        // A crash may have cut the last line of a record short: cut it off before appending.
        let healed = if spec.resume.is_some() { record::heal(&dir)? } else { Vec::new() };
        let records = Recorder::create(&dir, attempt)?;
        for (file, bytes) in &healed {
            records.event(&Event::RecordsHealed { file, bytes: *bytes });
        }
        records.write_document("run.json", &run_doc)?;
        let deadline = spec.deadline.map(deadline::Deadline::after);
        records.event(&Event::RunStarted {
            run_id: &id,
            script: &spec.script.display().to_string(),
            attempt,
            limits: &spec.limits,
        });
        if spec.resume.is_some() {
            let killed = leftovers::end(&dir, &id);
            if !killed.is_empty() {
                records.event(&Event::LeftoversKilled { pids: &killed });
            }
        }
        let (replay, mut prior) = match spec.resume {
            Some(r) => ((r.stages, r.journal, r.checkpoints, r.stage_runs), (r.spent, r.simulated)),
            None => Default::default(),
        };
        // Every attempt has its line in the accounts, one that spent nothing too.
        prior.0.by_attempt.entry(attempt).or_default();
        let simulated = prior.1;
        let vars = std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
        let secrets = Arc::new(crate::redact::Redactor::new(&spec.config, vars));
        let caller = serde_json::from_value(run_doc["caller"].clone()).ok();
        Ok(Arc::new(Run {
            id,
            attempt,
            replay_stages: replay.0,
            replay_ops: Mutex::new(replay.1),
            replay_stage_runs: replay.3,
            stage_runs: Mutex::default(),
            checkpoints: checkpoint::Checkpoints::new(replay.2),
            cwd: spec.cwd,
            script: spec.script,
            config: spec.config,
            default_runtime: spec.default_runtime,
            rt,
            root: CancellationToken::new(),
            deadline,
            records,
            scheduler: scheduler::Scheduler::new(spec.limits, prior.0),
            schemas: SchemaCache::default(),
            stages: stages::StageBook::default(),
            progress: progress::Progress::default(),
            secrets,
            started: Instant::now(),
            started_at,
            run_doc: Mutex::new(run_doc),
            stop: Mutex::new(None),
            simulated: AtomicBool::new(simulated),
            budget_warned: AtomicBool::new(false),
            unpriced_warned: Mutex::new(std::collections::HashSet::new()),
            lock: Mutex::new(Some(run_lock)),
            depth: Default::default(),
            children: Default::default(),
            stop_on_budget: AtomicBool::new(false),
            background: Mutex::new((0, 0)),
            background_changed: tokio::sync::Notify::new(),
            caller: Mutex::new(caller),
        }))
    }

    pub fn dir(&self) -> &Path {
        self.records.dir()
    }

    /// Makes this run a child run: `run.json` names its parent (`run`, `op`, `agent`), and its
    /// depth is one more than the parent's.
    pub fn link_parent(&self, parent: Value, depth: u32) -> std::io::Result<()> {
        self.depth.store(depth, Ordering::SeqCst);
        let mut doc = lock(&self.run_doc);
        doc["parent"] = parent;
        doc["depth"] = json!(depth);
        self.records.write_document("run.json", &*doc)
    }

    /// A field of `run.json` as last written (`null` when absent).
    pub fn doc_field(&self, field: &str) -> Value {
        lock(&self.run_doc).get(field).cloned().unwrap_or(Value::Null)
    }

    /// Sets a field of `run.json` that a book above the run core keeps (`worktrees`).
    pub fn set_doc_field(&self, field: &str, value: Value) -> std::io::Result<()> {
        let mut doc = lock(&self.run_doc);
        doc[field] = value;
        self.records.write_document("run.json", &*doc)
    }

    pub fn depth(&self) -> u32 {
        self.depth.load(Ordering::SeqCst)
    }

    /// Makes the run stop (status `stopped`, the budget's reason) as soon as an operation is
    /// refused for the budget, rather than go on without it.
    pub fn stop_when_budget_spent(&self) {
        self.stop_on_budget.store(true, Ordering::SeqCst);
    }

    /// Records this attempt's status in `run.json` while it has not ended: a background council
    /// waiting for a slot of the machine's pool is `queued`, then `running`.
    pub fn mark_attempt(&self, status: RunStatus) -> std::io::Result<()> {
        let mut doc = lock(&self.run_doc);
        if let Some(a) = doc["attempts"].as_array_mut().and_then(|a| a.last_mut()) {
            a["status"] = json!(status);
        }
        self.records.write_document("run.json", &*doc)
    }

    /// The recorded value and summary of a stage this attempt reuses.
    pub fn reused_stage(&self, name: &str) -> Option<&(Value, Option<String>)> {
        self.replay_stages.get(name)
    }

    /// What the journal says of this agent's op id asked in `stage`: replay its outcome (the same
    /// turn at the same place, used up by this call), run it again (and why), or nothing on record.
    pub fn replay(&self, agent: &str, op_id: &str, turn_hash: &str, parts: &str, stage: Option<&str>) -> Replay {
        let mut ops = lock(&self.replay_ops);
        let key = (agent.to_string(), op_id.to_string());
        let Some(entry) = ops.get(&key) else { return Replay::None };
        if let Some(recorded) = &entry.stage {
            if recorded.as_deref() != stage {
                let place = |s: Option<&str>| s.map_or("outside any stage".to_string(), |s| format!("in stage `{s}`"));
                return Replay::Changed(format!(
                    "it was answered {}, and this turn is {}",
                    place(recorded.as_deref()),
                    place(stage)
                ));
            }
        }
        if entry.turn_hash != turn_hash {
            return Replay::Changed(resume::what_changed(entry.parts.as_deref(), parts));
        }
        match ops.remove(&key) {
            Some(e) => Replay::Same(e.outcome),
            None => Replay::None,
        }
    }

    /// Counts a turn (default id) `agent` started in `stage`.
    pub fn count_stage_run(&self, stage: &str, agent: &str) {
        let mut stages = lock(&self.stage_runs);
        // The stage's key is copied only when its first turn is counted.
        let runs = match stages.get_mut(stage) {
            Some(runs) => runs,
            None => stages.entry(stage.to_string()).or_default(),
        };
        *runs.entry(agent.to_string()).or_default() += 1;
    }

    /// The turns each agent started in `stage`: this attempt's, or, for a stage it reuses, those
    /// on record.
    pub fn stage_runs(&self, stage: &str) -> std::collections::BTreeMap<String, u64> {
        match lock(&self.stage_runs).get(stage) {
            Some(runs) => runs.clone(),
            None => self.replay_stage_runs.get(stage).cloned().unwrap_or_default(),
        }
    }

    /// Ends the run early; the first cause stands. Cancels every scope.
    pub fn stop_with(&self, cause: StopCause) {
        {
            let mut stop = lock(&self.stop);
            if stop.is_none() {
                self.records.event(&Event::RunStopping { cause: &cause });
                *stop = Some(cause);
            }
        }
        self.root.cancel();
    }

    pub fn stop_cause(&self) -> Option<StopCause> {
        lock(&self.stop).clone()
    }

    /// A short reason for work cut short by the run ending.
    pub fn stop_reason(&self) -> String {
        match self.stop_cause() {
            Some(StopCause::Stopped(r)) => format!("run stopped: {r}"),
            Some(StopCause::Cancelled(r)) => format!("run cancelled: {r}"),
            Some(StopCause::Deadline) => "run deadline exceeded".into(),
            None => "cancelled".into(),
        }
    }

    pub fn simulated(&self) -> bool {
        self.simulated.load(Ordering::Relaxed)
    }

    /// The price of a model: config `[prices]` first, then the built-in table.
    pub fn price(&self, model: &str) -> Option<Price> {
        self.config.prices.get(model).copied().or_else(|| crate::accounting::builtin_price(model))
    }

    /// Logs once that the budget is exhausted.
    pub fn budget_exhausted_once(&self, why: &scheduler::LimitReached) {
        let why = why.to_string();
        if !self.budget_warned.swap(true, Ordering::SeqCst) {
            self.log("warn", &format!("{why}; no new operation will start"), &Value::Null);
            self.records.event(&Event::BudgetExhausted { reason: &why });
        }
        if self.stop_on_budget.load(Ordering::SeqCst) {
            self.stop_with(StopCause::Stopped(why));
        }
    }

    /// A log line: recorded as an event and shown in the live view.
    pub fn log(&self, level: &str, text: &str, fields: &Value) {
        self.records.event(&Event::Log { level, text, fields });
        self.progress.line(level, text);
    }

    /// Records a settled operation everywhere it belongs; its spend enters the accounts through
    /// its admission (which releases what the budget set aside for it).
    pub fn settle(&self, s: &Settled<'_>, admission: Option<scheduler::Admission<'_>>) {
        self.records.line(Stream::Turns, &s.turn_record());
        if let Some(j) = s.journal_record() {
            self.records.line(Stream::Journal, &j);
        }
        let o = s.outcome;
        self.records.event(&Event::OpSettled {
            agent: s.agent,
            op_id: &o.op_id,
            outcome: o.kind.as_str(),
            reason: o.reason.as_deref(),
            tokens: o.usage.tokens(),
            cost_usd: o.usage.cost_usd,
        });
        let unpriced = o.cost_source == crate::accounting::CostSource::Unpriced && o.usage.tokens() > 0;
        let spent = crate::accounting::Spent {
            agent: s.agent,
            stage: s.stage,
            // A council's own line ran no model of its own: its models are in `councils`.
            model: (s.kind != COUNCIL_KIND).then_some(s.model),
            attempt: self.attempt,
            usage: &o.usage,
            unpriced,
            councils: s.councils,
        };
        match admission {
            Some(a) => a.settle(&spent),
            None => self.scheduler.record(&spent),
        }
        if unpriced && lock(&self.unpriced_warned).insert(s.model.to_string()) {
            self.records.event(&Event::ModelUnpriced { model: s.model, harness: s.harness });
            self.progress.line(
                "warn",
                &format!(
                    "model `{}` ({}) has no price: its tokens are counted at $0; add [prices.\"{}\"] to awf.toml",
                    s.model, s.harness, s.model
                ),
            );
        }
        if s.outcome.simulated {
            self.simulated.store(true, Ordering::Relaxed);
        }
        self.progress.ops_settled.fetch_add(1, Ordering::Relaxed);
    }

    /// Every operation record so far (`ctx.usage()`).
    /// Read back from `turns.jsonl` (every attempt's): the records are the one copy.
    pub fn usage(&self) -> Vec<Value> {
        self.records.flush(false);
        record::read_jsonl(&self.dir().join("turns.jsonl")).unwrap_or_default()
    }

    /// Writes `result.json` (with the books' own summaries: `sandboxes`, `decisions`, `panes`), completes
    /// `run.json`, closes the records and releases the run's lock.
    pub fn finish(
        &self,
        status: RunStatus,
        value: Option<&Value>,
        error: Option<&str>,
        ended_in: Option<&str>,
        (sandboxes, decisions, panes): (Value, Vec<Value>, Value),
    ) -> ResultDoc {
        self.close_children(CHILD_GRACE);
        let finished_at = record::now_iso();
        let result = ResultDoc {
            v: record::FORMAT_VERSION,
            run_id: self.id.clone(),
            status: status.into(),
            value: value.cloned(),
            error: error.map(String::from),
            ended_in: ended_in.map(String::from),
            stages: self.stages.summary(),
            accounting: self.scheduler.accounts(),
            simulated: self.simulated(),
            sandboxes,
            panes,
            started_at: self.started_at.clone(),
            finished_at: finished_at.clone(),
            duration_ms: self.started.elapsed().as_millis() as u64,
            children: self.children.ids(),
            decisions,
        };
        self.records.event(&Event::RunFinished { status, error });
        self.records.flush(true);
        if let Err(e) = self.records.write_document("result.json", &result) {
            tracing::error!("cannot write result.json: {e}");
        }
        let mut doc = lock(&self.run_doc);
        if let Some(a) = doc["attempts"].as_array_mut().and_then(|a| a.last_mut()) {
            a["finished_at"] = json!(finished_at);
            a["status"] = json!(status);
        }
        if let Some(m) = doc.as_object_mut() {
            m.remove("waiting");
        }
        if let Err(e) = self.records.write_document("run.json", &*doc) {
            tracing::error!("cannot write run.json: {e}");
        }
        self.records.close();
        drop(doc);
        // The attempt is over: another may start.
        lock(&self.lock).take();
        result
    }
}
