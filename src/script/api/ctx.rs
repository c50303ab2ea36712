//! `ctx` facts and the small calls: `run_id`, `attempt`, `cwd`, `deadline`, `budget`, `log`,
//! `warn`, `usage`, `spent`, `sleep`, `stop`, and `ctx.messages` (not built yet: it says so).

use super::doc::def;
use super::{script_err, terminated, AgentHandle, Agents, BadArg, Ctx, Messages, RResult};
use crate::run::{scope, StopCause};
use crate::script::convert::{to_dynamic, to_json};
use rhai::{Dynamic, Engine, EvalAltResult, Map, NativeCallContext, INT};
use std::time::Duration;

pub fn register(engine: &mut Engine) {
    // The run's facts read as properties and as calls alike: `ctx.run_id` and `ctx.run_id()`.
    for form in ["get run_id(ctx)", "run_id(ctx)"] {
        def(engine, form, RUN_ID, |c: &mut Ctx| c.0.run.id.clone());
    }
    for form in ["get attempt(ctx)", "attempt(ctx)"] {
        def(engine, form, ATTEMPT, |c: &mut Ctx| c.0.run.attempt as INT);
    }
    for form in ["get cwd(ctx)", "cwd(ctx)"] {
        def(engine, form, CWD, |c: &mut Ctx| c.0.run.cwd.display().to_string());
    }
    for form in ["get deadline(ctx)", "deadline(ctx)"] {
        def(engine, form, DEADLINE, |c: &mut Ctx| match c.0.run.deadline {
            Some(d) => Dynamic::from(d.unix_ms() as INT),
            None => Dynamic::UNIT,
        });
    }
    for form in ["get budget(ctx)", "budget(ctx)"] {
        def(engine, form, BUDGET, budget);
    }
    for form in ["get usage(ctx)", "usage(ctx)"] {
        def(engine, form, USAGE, |c: &mut Ctx| -> rhai::Array { c.0.run.usage().iter().map(to_dynamic).collect() });
    }
    for form in ["get spent(ctx)", "spent(ctx)"] {
        def(engine, form, SPENT, spent);
    }
    def(
        engine,
        "get agents(ctx)",
        "The run's agents: `ctx.agents.open(spec)`, `get(key)`, `stop(key)`.",
        |c: &mut Ctx| Agents(c.0.clone()),
    );
    def(engine, "get messages(ctx)", "Message routes between agents: `ctx.messages.allow(route)`.", |c: &mut Ctx| {
        Messages(c.0.clone())
    });
    def(engine, "log(ctx, text)", LOG, |c: &mut Ctx, text: &str| c.0.run.log("info", text, &serde_json::Value::Null));
    def(engine, "log(ctx, text, fields)", LOG, |nc: NativeCallContext, c: &mut Ctx, text: &str, fields: Map| {
        log_fields(&nc, c, "info", text, fields)
    });
    def(engine, "warn(ctx, text)", WARN, |c: &mut Ctx, text: &str| c.0.run.log("warn", text, &serde_json::Value::Null));
    def(engine, "warn(ctx, text, fields)", WARN, |nc: NativeCallContext, c: &mut Ctx, text: &str, fields: Map| {
        log_fields(&nc, c, "warn", text, fields)
    });
    def(engine, "sleep(ctx, ms)", SLEEP, sleep);
    def(engine, "stop(ctx, reason)", STOP, |nc: NativeCallContext, c: &mut Ctx, reason: &str| stop(&nc, c, reason));
    def(engine, "stop(ctx)", STOP, |nc: NativeCallContext, c: &mut Ctx| stop(&nc, c, "stopped by the workflow"));
    def(engine, "allow(messages, route)", ALLOW, allow);
}

const RUN_ID: &str = "The run's id (a UUID): its folder is `.awf/runs/<run_id>`.";
const ATTEMPT: &str = "This attempt's number: 1 for the first run, 2 after one `awf runs resume`, and so on.";
const CWD: &str = "The folder the run works in (absolute): agents open there unless their spec names a `cwd`.";
const DEADLINE: &str = "The run's deadline as Unix milliseconds, or `()` when the run has none.";
const BUDGET: &str = "The run's budget, or `()` when it has none:
`#{ usd, tokens, remaining_usd, remaining_tokens }` (a limit not set is `()`). Spend is summed over
every attempt of the run.";
const USAGE: &str = "Every operation record so far (this attempt's and earlier ones'), as maps like the
lines of `turns.jsonl`.";
const SPENT: &str = "What the whole run has spent, every attempt included: `#{ tokens, cost_usd }`.";
const LOG: &str = "Writes `text` to the run's log (`events.jsonl`) and the live view; `fields` is a map
recorded with it.";
const WARN: &str = "Like `log`, at warning level.";
const SLEEP: &str = "Waits `ms` milliseconds; cancelled with the run, its branch or its deadline.";
const STOP: &str = "Ends the run on purpose: status `stopped` (not failed), the reason recorded. Cannot be
caught with `try`.";
const ALLOW: &str = "Grants a message route between two agents and returns its id. `route` is
`#{ from, to, purpose, max_messages }` (one way) or `#{ between: [a, b], purpose, max_messages }`
(both ways); `from`, `to` and `between` take agent handles, `purpose` is shown to the agents, and
`max_messages` caps the route (default 20). A route made inside a stage closes when the stage ends.";

fn spent(c: &mut Ctx) -> Map {
    let (tokens, usd) = c.0.run.scheduler.spent();
    let mut m = Map::new();
    m.insert("tokens".into(), (tokens as INT).into());
    m.insert("cost_usd".into(), crate::accounting::micro(usd).into());
    m
}

/// An agent handle of this run, or why the value is not one.
fn route_end(run: &std::sync::Arc<super::ScriptRun>, v: &Dynamic, field: &str) -> Result<String, BadArg> {
    let Some(h) = v.clone().try_cast::<AgentHandle>() else {
        return Err(format!(
            "`{field}` must be an agent handle (the value ctx.agents.open returned), not a {}",
            v.type_name().rsplit("::").next().unwrap_or("value")
        )
        .into());
    };
    if !std::sync::Arc::ptr_eq(&h.host, run) {
        return Err(format!("`{field}`: agent {} belongs to another run", h.agent.key).into());
    }
    match run.agents.get(&h.agent.key) {
        Some(a) if std::sync::Arc::ptr_eq(&a, &h.agent) && a.closed().is_none() => Ok(h.agent.key.clone()),
        _ => Err(format!("`{field}`: agent {} is not open in this run (stopped or closed)", h.agent.key).into()),
    }
}

/// `ctx.messages.allow(#{ from, to, purpose, max_messages })` or `#{ between: [a, b], ... }`.
fn allow(nc: NativeCallContext, m: &mut Messages, route: Map) -> RResult<INT> {
    let run = &m.0;
    let f = super::Fields { map: &route, what: "route" };
    let parsed = (|| -> Result<crate::messaging::Route, BadArg> {
        f.check_known(&["from", "to", "between", "purpose", "max_messages"])?;
        let purpose = f
            .string("purpose")?
            .filter(|p| !p.trim().is_empty())
            .ok_or("a route needs a `purpose` (shown to the agents)")?;
        // Every route has a cap, so that no two agents can talk forever.
        let max = match f.int("max_messages")? {
            Some(n) if n < 1 => return Err(format!("`max_messages` must be at least 1, got {n}").into()),
            Some(n) => Some(n as u32),
            None => Some(crate::messaging::DEFAULT_MAX_MESSAGES),
        };
        let (a, b, both) = match (f.get("between"), f.get("from"), f.get("to")) {
            (Some(pair), None, None) => {
                let pair = pair
                    .clone()
                    .into_array()
                    .map_err(|_| "`between` must be an array of two agent handles".to_string())?;
                if pair.len() != 2 {
                    return Err(format!("`between` must name two agents, got {}", pair.len()).into());
                }
                (route_end(run, &pair[0], "between[0]")?, route_end(run, &pair[1], "between[1]")?, true)
            }
            (None, Some(from), Some(to)) => (route_end(run, from, "from")?, route_end(run, to, "to")?, false),
            _ => return Err("give `from` and `to`, or `between: [a, b]`".into()),
        };
        if a == b {
            return Err(format!("a route needs two different agents, got {a} twice").into());
        }
        let stage = scope::current().and_then(|fr| fr.stage.clone());
        Ok(crate::messaging::Route { id: 0, a, b, both, purpose, max, sent: 0, stage, open: true })
    })();
    let route = parsed.map_err(|e| script_err(&nc, format!("ctx.messages.allow: {e}")))?;
    Ok(run.router.allow(&run.run, route) as INT)
}

fn budget(c: &mut Ctx) -> Dynamic {
    let limits = &c.0.run.scheduler.limits;
    if limits.budget_usd.is_none() && limits.budget_tokens.is_none() {
        return Dynamic::UNIT;
    }
    let (tokens, usd) = c.0.run.scheduler.spent();
    let mut m = Map::new();
    let opt_f = |v: Option<f64>| v.map(Dynamic::from).unwrap_or(Dynamic::UNIT);
    let opt_i = |v: Option<u64>| v.map(|n| Dynamic::from(n as INT)).unwrap_or(Dynamic::UNIT);
    m.insert("usd".into(), opt_f(limits.budget_usd));
    m.insert("tokens".into(), opt_i(limits.budget_tokens));
    m.insert("remaining_usd".into(), opt_f(limits.budget_usd.map(|b| crate::accounting::micro((b - usd).max(0.0)))));
    m.insert("remaining_tokens".into(), opt_i(limits.budget_tokens.map(|b| b.saturating_sub(tokens))));
    Dynamic::from_map(m)
}

fn log_fields(nc: &NativeCallContext, c: &mut Ctx, level: &str, text: &str, fields: Map) -> RResult<()> {
    let fields =
        to_json(&Dynamic::from_map(fields)).map_err(|e| script_err(nc, format!("ctx.{level}: fields: {e}")))?;
    c.0.run.log(level, text, &fields);
    Ok(())
}

fn sleep(nc: NativeCallContext, c: &mut Ctx, ms: INT) -> RResult<()> {
    if ms < 0 {
        return Err(script_err(&nc, format!("ctx.sleep: milliseconds must not be negative, got {ms}")));
    }
    let Some(frame) = scope::current() else {
        return Err(script_err(&nc, "ctx.sleep called outside a run"));
    };
    let deadline = frame.deadline_at();
    let woke = c.0.run.rt.block_on(async {
        let until_deadline = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at.instant().into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = frame.cancel.cancelled() => false,
            _ = until_deadline => false,
            _ = tokio::time::sleep(Duration::from_millis(ms as u64)) => true,
        }
    });
    if woke {
        return Ok(());
    }
    let reason = crate::script::engine::interruption().map(|d| d.to_string()).unwrap_or_else(|| "cancelled".into());
    Err(terminated(&nc, reason))
}

fn stop(nc: &NativeCallContext, c: &mut Ctx, reason: &str) -> RResult<()> {
    c.0.run.stop_with(StopCause::Stopped(reason.to_string()));
    let mut m = Map::new();
    m.insert("stopped".into(), reason.into());
    Err(EvalAltResult::ErrorTerminated(Dynamic::from_map(m), nc.call_position()).into())
}
