//! Councils convened from inside a turn, run as child runs: the call checked (grant aside: the
//! agent's messenger checks that) against the depth limit and the strategy's META before anything
//! opens; then a run of its own in the same runs folder, linked both ways (its `run.json` names the
//! parent run, op and agent; the parent lists it and records `child-run-started/ended`), with a
//! budget of what the parent has left and a deadline no later than the calling operation's,
//! stopped when that operation ends. What it spent is returned to be billed to the caller.

use crate::accounting::Usage;
use crate::control::convene::{Call, Convened, Convener, Grant};
use crate::control::messenger::MessageError;
use crate::host::{drive, Host, Output, RunEnd};
use crate::run::deadline::Deadline;
use crate::run::{BoxFuture, Event, Limits, RunSpec, RunStatus, StopCause};
use serde_json::{json, Map, Value};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// How deep councils may nest when `[limits] council_depth` does not say.
pub const DEFAULT_DEPTH: u32 = 2;

/// The convener of one run's agents.
pub struct ChildConvener {
    parent: Weak<Host>,
    /// The background councils its agents started.
    background: Arc<super::background::Councils>,
}

/// The factory `host::child::install` takes.
pub fn factory(host: &Arc<Host>) -> Arc<dyn Convener> {
    Arc::new(ChildConvener { parent: Arc::downgrade(host), background: Arc::default() })
}

fn refused(why: String) -> MessageError {
    MessageError::Refused(why)
}

impl Convener for ChildConvener {
    fn check_grant(&self, grant: &Grant) -> Result<(), String> {
        let Grant::Named(names) = grant else { return Ok(()) };
        let Some(host) = self.parent.upgrade() else { return Ok(()) };
        let catalog: Vec<String> = super::discover(&host.run.cwd).into_iter().map(|s| s.name).collect();
        match names.iter().find(|n| !catalog.contains(n)) {
            Some(n) => Err(format!("`councils` names \"{n}\", which is not in the catalog ({})", catalog.join(", "))),
            None => Ok(()),
        }
    }

    fn catalog(&self, grant: &Grant) -> Vec<String> {
        let Some(host) = self.parent.upgrade() else { return Vec::new() };
        super::discover(&host.run.cwd).iter().filter(|s| grant.allows(&s.name)).map(super::catalog_line).collect()
    }

    fn convene(&self, call: Call) -> BoxFuture<'static, Result<Convened, MessageError>> {
        let started = self.parent.upgrade().ok_or_else(|| refused("refused: the run has ended".into())).and_then(|p| {
            let child = start(&p, &call, None)?;
            Ok((p, child))
        });
        Box::pin(async move {
            let (parent, (child, program, input, deadline)) = started?;
            let stopper = child.clone();
            // A caller that stops waiting (its turn dropped mid-call) stops the council too.
            let mut guard = StopOnDrop(Some((parent.clone(), child.clone())));
            let task =
                parent.run.rt.spawn(async move { drive(child, &*program, input, deadline, Output::Strategy).await });
            tokio::pin!(task);
            let end = tokio::select! {
                end = &mut task => end,
                _ = call.ended.cancelled() => {
                    stopper.run.stop_with(StopCause::Cancelled("the operation that convened it ended".into()));
                    task.await
                }
                _ = parent.run.root.cancelled() => {
                    stopper.run.stop_with(StopCause::Cancelled(parent.run.stop_reason()));
                    task.await
                }
            };
            let settled = match end {
                Ok(end) => Ok(settled(&parent, &call, &stopper.run.id, end)),
                Err(e) => Err(MessageError::Failed(format!("council {} failed: {e}", call.name))),
            };
            guard.0 = None;
            parent.run.child_ended();
            settled
        })
    }

    fn convene_background(&self, call: Call) -> BoxFuture<'static, Result<Value, MessageError>> {
        match self.parent.upgrade() {
            Some(parent) => super::background::launch(parent, self.background.clone(), call),
            None => Box::pin(async { Err(refused("refused: the run has ended".into())) }),
        }
    }

    fn join(
        &self,
        agent: &str,
        ids: Vec<String>,
        deadline: Option<Deadline>,
    ) -> BoxFuture<'static, Result<Vec<Value>, MessageError>> {
        let councils = self.background.clone();
        let parent = self.parent.clone();
        let agent = agent.to_string();
        Box::pin(async move { councils.join(parent, &agent, ids, deadline).await })
    }
}

/// Stops a child run still running when the future waiting for it is dropped (parent, child).
struct StopOnDrop(Option<(Arc<Host>, Arc<Host>)>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let Some((parent, child)) = self.0.take() {
            child.run.stop_with(StopCause::Cancelled("the operation that convened it ended".into()));
            parent.run.child_ended();
        }
    }
}

/// A child run started: its host, the strategy's program, its input and its deadline.
pub(super) type Started = (Arc<Host>, Arc<crate::script::Program>, Value, Option<Duration>);

/// The child run started: checked, its folder made and linked. Refusals name the problem.
/// `reserved`: a background council's budget, set aside in the parent (else what is left).
pub(super) fn start(
    parent: &Arc<Host>,
    call: &Call,
    reserved: Option<(Option<u64>, Option<f64>)>,
) -> Result<Started, MessageError> {
    let run = &parent.run;
    let name = &call.name;
    let limit = run.config.limits.council_depth.unwrap_or(DEFAULT_DEPTH);
    let depth = run.depth() + 1;
    if depth > limit {
        return Err(refused(format!(
            "refused: council {name} would nest {depth} deep, past the limit of {limit} ([limits] council_depth)"
        )));
    }
    let strategy = super::find(&run.cwd, name).map_err(|e| refused(format!("refused: {e}")))?;
    if let Some(e) = &strategy.error {
        return Err(refused(format!("refused: {e}")));
    }
    let (budget_tokens, budget_usd) = reserved.unwrap_or_else(|| left(run, &call.spent));
    if let Some(why) = exhausted(budget_tokens, budget_usd) {
        return Err(MessageError::Failed(format!("council {name} not started: {why}")));
    }
    let mut input = input(parent, &strategy, &call.params).map_err(|e| refused(format!("refused: {e}")))?;
    // The strategy plans its rounds within what the parent has left, as `council run` does.
    input["limits"]["budget_tokens"] = json!(budget_tokens.unwrap_or(0));
    let program = super::registry::compile(&run.cwd, name).map_err(|e| refused(format!("refused: {e}")))?;
    let deadline = Deadline::earliest(call.deadline, run.deadline).map(|d| d.remaining());
    let limits = Limits { budget_tokens, budget_usd, ..run.scheduler.limits.clone() };
    let runs_dir = run.dir().parent().map(|p| p.to_path_buf()).unwrap_or_else(|| run.cwd.join(".awf/runs"));
    let spec = RunSpec {
        script: program.path.clone(),
        script_sha256: program.sha256.clone(),
        cwd: run.cwd.clone(),
        runs_dir,
        args: input.clone(),
        meta: program.meta.clone(),
        config: run.config.clone(),
        limits,
        deadline,
        default_runtime: run.default_runtime.clone(),
        sandbox: None,
        resume: None,
    };
    let child = Host::start(spec, None, run.rt.clone(), Box::new(crate::script::load_responder))
        .map_err(|e| MessageError::Failed(format!("council {name}: cannot create its run folder: {e}")))?;
    let link = json!({ "run": run.id, "op": call.op_id, "agent": call.agent, "strategy": name });
    if let Err(e) = child.run.link_parent(link, depth) {
        tracing::warn!("cannot link child run {} to its parent: {e}", child.run.id);
    }
    // The calling agent's CLI session is the council's caller (`ctx.agents.fork_caller`).
    if let Some(mut caller) = parent.agents.get(&call.agent).and_then(|a| a.calling_session()) {
        caller.run = Some(run.id.clone());
        caller.agent = Some(call.agent.clone());
        if let Err(e) = child.run.set_caller(caller) {
            tracing::warn!("cannot record the caller of child run {}: {e}", child.run.id);
        }
    }
    child.run.stop_when_budget_spent();
    run.add_child(&child.run.id);
    run.records.event(&Event::ChildRunStarted {
        run_id: &child.run.id,
        agent: &call.agent,
        op_id: &call.op_id,
        strategy: name,
        background: reserved.is_some(),
    });
    Ok((child, Arc::new(program), input, deadline))
}

/// What the parent has left of each budget, less what the calling operation reported so far.
fn left(run: &crate::run::Run, spent: &Usage) -> (Option<u64>, Option<f64>) {
    let (tokens, usd) = run.scheduler.left();
    (tokens.map(|t| t.saturating_sub(spent.tokens())), usd.map(|u| (u - spent.cost_usd).max(0.0)))
}

fn exhausted(tokens: Option<u64>, usd: Option<f64>) -> Option<String> {
    if tokens == Some(0) {
        return Some("the run's token budget is spent (--budget-tokens)".into());
    }
    if usd.is_some_and(|u| u <= 0.0) {
        return Some("the run's USD budget is spent (--budget-usd)".into());
    }
    None
}

/// The strategy's input from what the agent gave: `task` (required), `team` or `roster`, and
/// every other key a param, checked and coerced against META.
fn input(parent: &Host, strategy: &super::Strategy, given: &Value) -> Result<Value, String> {
    let name = &strategy.name;
    let mut params = given.as_object().cloned().unwrap_or_default();
    let task = match params.remove("task") {
        Some(Value::String(t)) if !t.trim().is_empty() => t,
        _ => return Err(format!("council {name} needs `task` (the task, question or goal, as text)")),
    };
    let team = params.remove("team");
    let roster = params.remove("roster");
    let params: Map<String, Value> = super::check_call(strategy, &params)?;
    let mut input = json!({ "task": task, "params": params, "limits": { "budget_tokens": 0, "max_children": 0 } });
    match (team, roster) {
        (Some(_), Some(_)) => return Err(format!("council {name}: give `team` or `roster`, not both")),
        (Some(Value::String(team)), None) => {
            let (teams, _) = super::teams(&parent.run.cwd);
            if !teams.contains_key(&team) {
                let known: Vec<&String> = teams.keys().collect();
                return Err(format!("council {name}: unknown team \"{team}\" (known: {known:?})"));
            }
            input["team"] = json!(team);
        }
        (Some(other), None) => return Err(format!("council {name}: `team` must be a team's name, got {other}")),
        (None, Some(roster)) => {
            if !roster.is_array() {
                return Err(format!("council {name}: `roster` must be a list of members, got {roster}"));
            }
            super::check_roster(&roster)?;
            input["roster"] = roster;
        }
        (None, None) => {}
    }
    Ok(input)
}

/// The child's end recorded in the parent, and what the agent gets back.
pub(super) fn settled(parent: &Host, call: &Call, run_id: &str, end: RunEnd) -> Convened {
    let totals = &end.result.accounting.totals;
    let usage = Usage {
        input_tokens: totals.input_tokens,
        output_tokens: totals.output_tokens,
        cache_read_tokens: totals.cache_read_tokens,
        cache_write_tokens: totals.cache_write_tokens,
        cost_usd: totals.cost_usd,
    };
    let ok = end.status == RunStatus::Succeeded;
    let error = end.error.clone().unwrap_or_else(|| format!("the council ended {}", end.status));
    parent.run.records.event(&Event::ChildRunEnded {
        run_id,
        agent: &call.agent,
        op_id: &call.op_id,
        status: end.status,
        error: (!ok).then_some(error.as_str()),
        tokens: usage.tokens(),
        cost_usd: usage.cost_usd,
    });
    let output = match end.value.as_ref().and_then(|v| v.get("output")) {
        Some(Value::String(s)) if ok => s.clone(),
        Some(other) if ok => other.to_string(),
        _ => error,
    };
    Convened {
        run_id: run_id.to_string(),
        ok,
        output,
        result: serde_json::to_value(&end.result).unwrap_or_default(),
        usage,
    }
}
