//! A plan before spending: the workflow runs as `script run` would, as a real run in a throwaway
//! runs folder, but every agent answers from the fake harness (`session.rs`: no program, CLI or
//! HTTP request is started) while keeping its runtime and model; what it did (stages, agents,
//! operations, the widest parallel step) and what each operation was sent are turned into a
//! spend range by model (`estimate.rs`), narrowed by what earlier runs of the script really spent
//! (`history.rs`). Checkpoints are answered with their schema's example; a run that does not end
//! within the bound is cut there, and the plan says where.

pub mod estimate;
pub mod history;
pub mod render;
pub mod session;

use crate::host::launch::{self, Admission, CouncilPool, Request};
use crate::host::{Output, Script};
use crate::record::events::EventRecord;
use crate::run::{RunSpec, RunStatus, StopCause};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a plan run may take before it is cut (a script that waits on a message that never
/// comes, or sleeps), unless the run's own deadline is shorter.
pub const DEFAULT_BOUND: Duration = Duration::from_secs(30);

/// How a range was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Basis {
    /// From the prompts' sizes, the harness's overhead and the output bound.
    Estimate,
    /// From what earlier runs of the script spent per operation of this model.
    History,
    /// Some models from history, some estimated.
    Mixed,
    /// Nothing spends tokens (fake and command agents only, or no operation).
    Nothing,
}

/// One model's part of the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelPlan {
    pub harness: String,
    pub agents: u64,
    pub operations: u64,
    pub tokens: [u64; 2],
    /// `None`: the model has no price.
    pub usd: Option<[f64; 2]>,
    pub basis: Basis,
}

/// An agent the plan opened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentPlan {
    pub key: String,
    pub harness: String,
    pub model: String,
    pub operations: u64,
}

/// Where a plan run stopped short of its end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Cut {
    /// It was still running at the bound: it waits on something the fake never gives.
    Bound { after_ms: u64, stage: Option<String> },
    /// The script failed on the fake answers.
    Failed { error: String, stage: Option<String> },
    /// The script stopped itself (`ctx.stop`).
    Stopped { reason: String },
}

/// The plan of one workflow run; a run made after one records it as `plan.json` (read back with
/// `read`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub script: String,
    /// Always true: control flow that depends on answers went the way the fake answers took.
    pub one_path: bool,
    pub agents: u64,
    pub operations: u64,
    /// Operations by kind (`turn`, `message`, `compact`, ...).
    #[serde(default)]
    pub operation_kinds: BTreeMap<String, u64>,
    /// Stage names, in the order they started.
    pub stages: Vec<String>,
    /// The most operations a `ctx.parallel` step had in flight at once.
    pub widest: u64,
    pub tokens: [u64; 2],
    /// What the priced models cost; unpriced ones are counted at 0 and listed in `unpriced`.
    pub usd: [f64; 2],
    pub by_model: BTreeMap<String, ModelPlan>,
    pub agent_list: Vec<AgentPlan>,
    pub unpriced: Vec<String>,
    pub basis: Basis,
    /// The earlier runs whose spend narrowed the range.
    pub history_runs: Vec<String>,
    /// Checkpoints answered with their schema's example.
    pub checkpoints: Vec<String>,
    pub cut: Option<Cut>,
    /// How long planning took.
    pub plan_ms: u64,
}

/// The plan a run recorded before it started (`plan.json`), when it has one.
pub fn read(run_dir: &std::path::Path) -> Option<Plan> {
    crate::record::docs::read(&run_dir.join(PLAN_FILE)).ok().flatten()
}

/// Where a run keeps the plan made before it started.
pub const PLAN_FILE: &str = "plan.json";

/// Why there is no plan.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("cannot make the plan's throwaway runs folder: {0}")]
    Scratch(std::io::Error),
    #[error(transparent)]
    Launch(#[from] launch::LaunchError),
    /// What `script run` refuses once the run is under way (an unknown runtime alias as an agent
    /// opens, ...): the run's exit code and its rendered error, printed the same way.
    #[error("{rendered}")]
    Refused { code: i32, rendered: String },
}

/// Plans `script` with `spec` (as `script::prepare` made it for a run) and `args`, checked
/// already, whose result is read as `output` says (a strategy's `ok: false` fails it). `bound`
/// cuts a run that does not end.
///
/// # Cancel safety
/// Dropping the future leaves the throwaway run unfinished; its folder is removed.
pub async fn make(
    mut spec: RunSpec,
    script: &dyn Script,
    args: Value,
    output: Output,
    bound: Duration,
) -> Result<Plan, PlanError> {
    let started = Instant::now();
    let seen = history::observed(&spec.runs_dir, &spec.script);
    let shown = spec.script.display().to_string();
    let scratch = crate::record::scratch::Scratch::new().map_err(PlanError::Scratch)?;
    spec.runs_dir = scratch.path().to_path_buf();
    // The plan measures what would be spent: a budget would cut it short of the real path.
    spec.limits.budget_usd = None;
    spec.limits.budget_tokens = None;
    // Nothing is seated: no sandbox is made for agents that start nothing.
    spec.sandbox = None;
    spec.resume = None;
    // A throwaway run sends no traces.
    spec.config.telemetry.off = true;
    let deadline = Some(spec.deadline.map_or(bound, |d| d.min(bound)));
    spec.deadline = deadline;
    let caps = crate::council::child::capabilities(CouncilPool::AtOnce);
    let req = Request { spec, id: None, caller: None, parent: None };
    let host = launch::start(req, tokio::runtime::Handle::current(), caps)?;
    let measures = Arc::new(session::Measures::default());
    host.agents.set_remote(Arc::new(session::PlanRemote::new(&host.run, measures.clone())));
    let answered = Arc::new(std::sync::Mutex::new(Vec::new()));
    let answering = tokio::spawn(answer_checkpoints(host.run.clone(), answered.clone()));
    let end = launch::run(host.clone(), Admission::AtOnce, script, args, deadline, output).await;
    answering.abort();
    let checkpoints = answered.lock().unwrap_or_else(|p| p.into_inner()).clone();
    if end.code == crate::host::exit::USAGE {
        let rendered = end.rendered.or(end.error).unwrap_or_default();
        return Err(PlanError::Refused { code: end.code, rendered });
    }
    let cut = match end.status {
        RunStatus::Succeeded => None,
        RunStatus::Stopped => Some(Cut::Stopped { reason: end.error.unwrap_or_default() }),
        _ if host.run.stop_cause() == Some(StopCause::Deadline) || end.status == RunStatus::Cancelled => {
            Some(Cut::Bound { after_ms: started.elapsed().as_millis() as u64, stage: end.result.ended_in.clone() })
        }
        _ => Some(Cut::Failed { error: end.error.unwrap_or_default(), stage: end.result.ended_in.clone() }),
    };
    let dir = host.run.dir().to_path_buf();
    let price = |m: &str| host.run.price(m);
    let mut plan = assemble(&dir, &measures.all(), &seen, &price);
    plan.script = shown;
    plan.checkpoints = checkpoints;
    plan.cut = cut;
    plan.plan_ms = started.elapsed().as_millis() as u64;
    drop(host);
    drop(scratch);
    Ok(plan)
}

/// Answers each checkpoint the plan run opens with its schema's example, noting its key in
/// `answered`, until aborted.
async fn answer_checkpoints(run: Arc<crate::run::Run>, answered: Arc<std::sync::Mutex<Vec<String>>>) {
    // The run core has no notice for a checkpoint opening; a plan run is short, so it is looked
    // for often.
    let mut tick = tokio::time::interval(Duration::from_millis(5));
    loop {
        tick.tick().await;
        for open in run.waiting() {
            let value = crate::run::schema::example_value(&open.schema, "planned");
            if run.answer_checkpoint(Some(&open.key), value).await.is_ok() {
                answered.lock().unwrap_or_else(|p| p.into_inner()).push(open.key);
            }
        }
    }
}

/// The plan from a plan run's folder (`turns.jsonl`, `events.jsonl`), its measured operations,
/// what earlier runs spent and the price table.
pub fn assemble(
    dir: &std::path::Path,
    measured: &[session::Measured],
    seen: &history::Observed,
    price: &dyn Fn(&str) -> Option<crate::accounting::Price>,
) -> Plan {
    let turns = crate::record::lines::turns(dir).unwrap_or_default();
    let events = crate::record::events::read(dir).unwrap_or_default();
    let mut stages = Vec::new();
    let mut widest = 0u64;
    let mut agent_list: Vec<AgentPlan> = Vec::new();
    for e in &events {
        match &e.event {
            EventRecord::StageStarted { name } if !stages.contains(name) => stages.push(name.clone()),
            EventRecord::ParallelStarted { concurrency, .. } => widest = widest.max(*concurrency as u64),
            EventRecord::AgentOpened { agent, harness, model } => agent_list.push(AgentPlan {
                key: agent.clone(),
                harness: harness.clone(),
                model: model.clone(),
                operations: 0,
            }),
            _ => {}
        }
    }
    agent_list.sort_by(|a, b| a.key.cmp(&b.key));
    let ops: Vec<_> = turns.iter().filter(|t| t.kind != crate::run::COUNCIL_KIND).collect();
    for t in &ops {
        if let Some(a) = agent_list.iter_mut().find(|a| a.key == t.agent) {
            a.operations += 1;
        }
    }
    let mut operation_kinds = BTreeMap::new();
    for t in &ops {
        *operation_kinds.entry(t.kind.clone()).or_insert(0) += 1;
    }
    if widest == 0 && !ops.is_empty() {
        widest = 1;
    }
    let mut by_model: BTreeMap<String, ModelPlan> = BTreeMap::new();
    for a in &agent_list {
        let m = by_model.entry(a.model.clone()).or_insert_with(|| ModelPlan {
            harness: a.harness.clone(),
            agents: 0,
            operations: 0,
            tokens: [0, 0],
            usd: Some([0.0, 0.0]),
            basis: Basis::Estimate,
        });
        m.agents += 1;
        m.operations += a.operations;
    }
    let mut unpriced = Vec::new();
    for (model, m) in by_model.iter_mut() {
        let mine: Vec<_> = measured.iter().filter(|x| &x.seat.model == model).collect();
        let mut low = crate::accounting::Usage::default();
        let mut high = low;
        for x in &mine {
            let (l, h) = estimate::range(x);
            low.add(&l);
            high.add(&h);
        }
        m.tokens = [low.tokens(), high.tokens()];
        m.usd = estimate::priced(price(model), &(low, high)).map(|(l, h)| [l, h]);
        if !estimate::spends(&m.harness) {
            m.basis = Basis::Nothing;
        } else if let Some(h) = seen.by_model.get(model) {
            m.basis = Basis::History;
            let n = m.operations;
            m.tokens = [n * h.tokens.0, n * h.tokens.1];
            // Spend that had no price (a price added since) is priced by the estimate instead.
            m.usd = h.usd.map(|(lo, hi)| [n as f64 * lo, n as f64 * hi]).or(m.usd);
        }
        m.usd = m.usd.map(|[l, h]| [crate::accounting::micro(l), crate::accounting::micro(h)]);
        if m.usd.is_none() && m.basis != Basis::Nothing {
            unpriced.push(model.clone());
        }
    }
    let sum = |f: &dyn Fn(&ModelPlan) -> [f64; 2]| {
        by_model.values().map(f).fold([0.0, 0.0], |a, b| [a[0] + b[0], a[1] + b[1]])
    };
    let usd = sum(&|m| m.usd.unwrap_or([0.0, 0.0]));
    let tokens = by_model.values().fold([0, 0], |a, m| [a[0] + m.tokens[0], a[1] + m.tokens[1]]);
    let kinds: Vec<Basis> = by_model.values().map(|m| m.basis).filter(|b| *b != Basis::Nothing).collect();
    let basis = if kinds.is_empty() {
        Basis::Nothing
    } else if kinds.iter().all(|b| *b == Basis::History) {
        Basis::History
    } else if kinds.contains(&Basis::History) {
        Basis::Mixed
    } else {
        Basis::Estimate
    };
    let history_runs = if kinds.contains(&Basis::History) { seen.runs.clone() } else { Vec::new() };
    Plan {
        script: String::new(),
        one_path: true,
        agents: agent_list.len() as u64,
        operations: ops.len() as u64,
        operation_kinds,
        stages,
        widest,
        tokens,
        usd: [crate::accounting::micro(usd[0]), crate::accounting::micro(usd[1])],
        by_model,
        agent_list,
        unpriced,
        basis,
        history_runs,
        checkpoints: Vec::new(),
        cut: None,
        plan_ms: 0,
    }
}
