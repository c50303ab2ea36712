//! Councils convened from inside a turn, run as child runs: the call checked (grant aside: the
//! agent's messenger checks that) against the depth limit and the strategy's META before anything
//! opens; then a run of its own in the same runs folder, linked both ways (its `run.json` names the
//! parent run, op and agent; the parent lists it and records `child-run-started/ended`), with a
//! budget of what the parent has left and a deadline no later than the calling operation's,
//! stopped when that operation ends. What it spent is returned to be billed to the caller.

use super::CallError;
use crate::accounting::Usage;
use crate::control::convene::{Call, Convened, Convener, Grant, NotInCatalog};
use crate::control::messenger::MessageError;
use crate::host::launch::{self, Admission, Capabilities, CouncilPool, Parent, Request};
use crate::host::{Host, Output, RunEnd};
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

/// Makes the convener of a run's agents (`Capabilities::convener`).
pub fn factory(host: &Arc<Host>) -> Arc<dyn Convener> {
    Arc::new(ChildConvener { parent: Arc::downgrade(host), background: Arc::default() })
}

/// What a run launched by awf may do: load responder scripts, let its granted agents convene
/// councils (`wf council`), whose background ones are admitted as `councils` says.
pub fn capabilities(councils: CouncilPool) -> Capabilities {
    Capabilities { responders: crate::script::load_responder, convener: Some(factory), councils }
}

fn refused(why: String) -> MessageError {
    MessageError::Refused(why)
}

impl Convener for ChildConvener {
    fn check_grant(&self, grant: &Grant) -> Result<(), NotInCatalog> {
        let Grant::Named(names) = grant else { return Ok(()) };
        let Some(host) = self.parent.upgrade() else { return Ok(()) };
        let catalog: Vec<String> = super::discover(&host.run.cwd).into_iter().map(|s| s.name).collect();
        match names.iter().find(|n| !catalog.contains(n)) {
            Some(n) => Err(NotInCatalog { name: n.clone(), catalog: catalog.join(", ") }),
            None => Ok(()),
        }
    }

    fn catalog(&self, grant: &Grant) -> Vec<String> {
        let Some(host) = self.parent.upgrade() else { return Vec::new() };
        super::discover(&host.run.cwd).iter().filter(|s| grant.allows(&s.name)).map(super::catalog_line).collect()
    }

    fn convene(&self, call: Call) -> BoxFuture<'static, Result<Convened, MessageError>> {
        let started = self.parent.upgrade().ok_or_else(|| refused("the run has ended".into())).and_then(|p| {
            let child = start(&p, &call, None)?;
            Ok((p, child))
        });
        Box::pin(async move {
            let (parent, (child, program, input, deadline)) = started?;
            // A caller that stops waiting (its turn dropped mid-call) stops the council too; the
            // council still settles, and is billed, on a task of its own.
            let mut guard = StopOnDrop(Some(child.clone()));
            let (tx, rx) = tokio::sync::oneshot::channel();
            let started_at = crate::record::now_iso();
            let rt = parent.run.rt.clone();
            rt.spawn(async move {
                let id = child.run.id.clone();
                let stopper = child.clone();
                let task = parent.run.rt.spawn(async move {
                    launch::run(child, Admission::AtOnce, &*program, input, deadline, Output::Strategy).await
                });
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
                let convened = match end {
                    Ok(end) => Ok(settled(&parent, &call, &id, end)),
                    Err(e) => Err(format!("council {} failed: {e}", call.name)),
                };
                let c = convened.as_ref().map_or_else(|why| unsettled(&stopper.run, why), clone_convened);
                bill(&parent.run, &call, &c, &started_at, true);
                parent.run.child_ended(&id);
                let _ = tx.send(convened.map_err(MessageError::Failed));
            });
            let end = rx.await.unwrap_or_else(|_| Err(MessageError::Failed("the council's task ended early".into())));
            guard.0 = None;
            end
        })
    }

    fn convene_background(&self, call: Call) -> BoxFuture<'static, Result<Value, MessageError>> {
        match self.parent.upgrade() {
            Some(parent) => super::background::launch(parent, self.background.clone(), call),
            None => Box::pin(async { Err(refused("the run has ended".into())) }),
        }
    }

    fn join(
        &self,
        agent: &str,
        ids: Vec<String>,
        deadline: Option<Deadline>,
    ) -> BoxFuture<'static, Result<Vec<crate::control::convene::Settled>, MessageError>> {
        let councils = self.background.clone();
        let parent = self.parent.clone();
        let agent = agent.to_string();
        Box::pin(async move { councils.join(parent, &agent, ids, deadline).await })
    }

    fn list(&self, agent: &str) -> Vec<Value> {
        self.background.list(agent)
    }

    fn active(&self, agent: &str) -> Vec<(String, String)> {
        self.background.active(agent)
    }

    fn cancel(&self, agent: &str, id: &str) -> Result<Value, MessageError> {
        self.background.cancel(agent, id)
    }
}

/// Stops a child run still running when the future waiting for it is dropped.
struct StopOnDrop(Option<Arc<Host>>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let Some(child) = self.0.take() {
            child.run.stop_with(StopCause::Cancelled("the operation that convened it ended".into()));
        }
    }
}

fn clone_convened(c: &Convened) -> Convened {
    Convened {
        run_id: c.run_id.clone(),
        ok: c.ok,
        output: c.output.clone(),
        result: c.result.clone(),
        usage: c.usage,
        by_model: c.by_model.clone(),
    }
}

/// A child run that ended without settling (its task failed): what it spent so far.
pub(super) fn unsettled(child: &crate::run::Run, why: &str) -> Convened {
    let accounts = child.scheduler.accounts();
    Convened {
        run_id: child.id.clone(),
        ok: false,
        output: why.to_string(),
        result: None,
        usage: accounts.totals.usage(),
        by_model: accounts.by_model,
    }
}

/// Bills a settled council's spend to its agent, once: on the calling operation's meter while
/// that operation is open (`on_op`: a council from a turn), else on a `council` line of its own.
/// Nothing when the parent already billed it (it closed while the council ran).
pub(super) fn bill(run: &crate::run::Run, call: &Call, c: &Convened, started_at: &str, on_op: bool) {
    if !run.claim_child_bill(&c.run_id) {
        return;
    }
    if on_op && call.meter.add_convened(&c.usage, &c.by_model) {
        return;
    }
    let simulated = c.result.as_ref().is_some_and(|r| r.simulated);
    let late = on_op.then(|| format!("settled after the operation that convened it ({})", call.op_id));
    let reason = match (c.ok, late) {
        (true, None) => None,
        (true, Some(late)) => Some(late),
        (false, None) => Some(c.output.clone()),
        (false, Some(late)) => Some(format!("{late}: {}", c.output)),
    };
    run.bill_council(&crate::run::children::Bill {
        run_id: &c.run_id,
        agent: &call.agent,
        strategy: &call.name,
        ok: c.ok,
        reason,
        usage: c.usage,
        by_model: &c.by_model,
        duration_ms: c.result.as_ref().map_or(0, |r| r.duration_ms),
        simulated,
        started_at,
    });
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
            "council {name} would nest {depth} deep, past the limit of {limit} ([limits] council_depth)"
        )));
    }
    let strategy = super::find(&run.cwd, name).map_err(|e| refused(e.to_string()))?;
    if let Some(e) = &strategy.error {
        return Err(refused(e.to_string()));
    }
    let (budget_tokens, budget_usd) = reserved.unwrap_or_else(|| left(run, &call.spent));
    if let Some(why) = exhausted(budget_tokens, budget_usd) {
        return Err(MessageError::Failed(format!("council {name} not started: {why}")));
    }
    let mut input = input(parent, &strategy, &call.params).map_err(|e| refused(e.to_string()))?;
    // The strategy plans its rounds within what the parent has left, as `council run` does.
    input["limits"]["budget_tokens"] = json!(budget_tokens.unwrap_or(0));
    let program = super::registry::compile(&run.cwd, name).map_err(|e| refused(e.to_string()))?;
    let deadline = Deadline::earliest(call.deadline, run.deadline).map(|d| d.remaining());
    let limits = Limits { budget_tokens, budget_usd, ..run.scheduler.limits.clone() };
    let runs_dir = run
        .dir()
        .parent()
        .map(|p| p.to_path_buf())
        .unwrap_or_else(|| crate::record::runs_dir(&run.cwd, None, run.config.runs_dir.as_deref()));
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
        isolation: Default::default(),
    };
    let link = json!({ "run": run.id, "op": call.op_id, "agent": call.agent, "strategy": name });
    let req = Request { spec, id: None, caller: None, parent: Some(Parent { link, depth }) };
    let child = launch::start(req, run.rt.clone(), parent.caps)
        .map_err(|e| MessageError::Failed(format!("council {name}: {e}")))?;
    // The calling agent's CLI session is the council's caller (`ctx.agents.fork_caller`).
    if let Some(mut caller) = parent.agents.get(&call.agent).and_then(|a| a.calling_session()) {
        caller.run = Some(run.id.clone());
        caller.agent = Some(call.agent.clone());
        if let Err(e) = child.run.set_caller(caller) {
            tracing::warn!("cannot record the caller of child run {}: {e}", child.run.id);
        }
    }
    child.run.stop_when_budget_spent();
    run.add_child(&child.run, &call.agent, name);
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
fn input(parent: &Host, strategy: &super::Strategy, given: &Value) -> Result<Value, CallError> {
    let name = &strategy.name;
    let mut params = given.as_object().cloned().unwrap_or_default();
    let task = match params.remove("task") {
        Some(Value::String(t)) if !t.trim().is_empty() => t,
        _ => return Err(CallError::NoTask(name.clone())),
    };
    let team = params.remove("team");
    let roster = params.remove("roster");
    let params: Map<String, Value> = super::check_call(strategy, &params)?;
    let mut input = json!({ "task": task, "params": params, "limits": { "budget_tokens": 0, "max_children": 0 } });
    match (team, roster) {
        (Some(_), Some(_)) => return Err(CallError::TeamAndRoster(name.clone())),
        (Some(Value::String(team)), None) => {
            let (teams, _) = super::teams(&parent.run.cwd);
            if !teams.contains_key(&team) {
                let known: Vec<&String> = teams.keys().collect();
                return Err(CallError::UnknownTeam { strategy: name.clone(), team, known: format!("{known:?}") });
            }
            input["team"] = json!(team);
        }
        (Some(got), None) => return Err(CallError::TeamNotAName { strategy: name.clone(), got }),
        (None, Some(roster)) => {
            if !roster.is_array() {
                return Err(CallError::RosterNotAList { strategy: name.clone(), got: roster });
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
        by_model: end.result.accounting.by_model.clone(),
        result: Some(end.result.clone()),
        usage,
    }
}
