//! `ctx` facts and the small calls: `run_id`, `attempt`, `cwd`, `deadline`, `budget`, `log`,
//! `warn`, `usage`, `spent`, `sleep`, `stop`, and `ctx.messages` (not built yet: it says so).

use super::{script_err, terminated, AgentHandle, Agents, Ctx, Messages, RResult};
use crate::run::{scope, StopCause};
use crate::script::convert::{to_dynamic, to_json};
use rhai::{Dynamic, Engine, EvalAltResult, Map, NativeCallContext, INT};
use std::time::Duration;

pub fn register(engine: &mut Engine) {
    engine
        .register_get("run_id", |c: &mut Ctx| c.0.run.id.clone())
        .register_get("attempt", |c: &mut Ctx| c.0.run.attempt as INT)
        .register_get("cwd", |c: &mut Ctx| c.0.run.cwd.display().to_string())
        .register_get("deadline", |c: &mut Ctx| match c.0.run.deadline {
            Some(d) => Dynamic::from(d.unix_ms() as INT),
            None => Dynamic::UNIT,
        })
        .register_get("agents", |c: &mut Ctx| Agents(c.0.clone()))
        .register_get("messages", |c: &mut Ctx| Messages(c.0.clone()))
        .register_get("budget", budget)
        .register_fn("log", |c: &mut Ctx, text: &str| c.0.run.log("info", text, &serde_json::Value::Null))
        .register_fn("log", |nc: NativeCallContext, c: &mut Ctx, text: &str, fields: Map| {
            log_fields(&nc, c, "info", text, fields)
        })
        .register_fn("warn", |c: &mut Ctx, text: &str| c.0.run.log("warn", text, &serde_json::Value::Null))
        .register_fn("warn", |nc: NativeCallContext, c: &mut Ctx, text: &str, fields: Map| {
            log_fields(&nc, c, "warn", text, fields)
        })
        .register_fn("usage", |c: &mut Ctx| -> rhai::Array { c.0.run.usage().iter().map(to_dynamic).collect() })
        .register_fn("spent", |c: &mut Ctx| {
            let (tokens, usd) = c.0.run.scheduler.spent();
            let mut m = Map::new();
            m.insert("tokens".into(), (tokens as INT).into());
            m.insert("cost_usd".into(), crate::accounting::micro(usd).into());
            m
        })
        .register_fn("sleep", sleep)
        .register_fn("stop", |nc: NativeCallContext, c: &mut Ctx, reason: &str| stop(&nc, c, reason))
        .register_fn("stop", |nc: NativeCallContext, c: &mut Ctx| stop(&nc, c, "stopped by the workflow"))
        .register_fn("allow", allow);
}

/// An agent handle of this run, or why the value is not one.
fn route_end(run: &std::sync::Arc<super::ScriptRun>, v: &Dynamic, field: &str) -> Result<String, String> {
    let Some(h) = v.clone().try_cast::<AgentHandle>() else {
        return Err(format!(
            "`{field}` must be an agent handle (the value ctx.agents.open returned), not a {}",
            v.type_name().rsplit("::").next().unwrap_or("value")
        ));
    };
    if !std::sync::Arc::ptr_eq(&h.host, run) {
        return Err(format!("`{field}`: agent {} belongs to another run", h.agent.key));
    }
    match run.agents.get(&h.agent.key) {
        Some(a) if std::sync::Arc::ptr_eq(&a, &h.agent) && a.closed().is_none() => Ok(h.agent.key.clone()),
        _ => Err(format!("`{field}`: agent {} is not open in this run (stopped or closed)", h.agent.key)),
    }
}

/// `ctx.messages.allow(#{ from, to, purpose, max_messages })` or `#{ between: [a, b], ... }`.
fn allow(nc: NativeCallContext, m: &mut Messages, route: Map) -> RResult<INT> {
    let run = &m.0;
    let f = super::Fields { map: &route, what: "route" };
    let parsed = (|| -> Result<crate::messaging::Route, String> {
        f.check_known(&["from", "to", "between", "purpose", "max_messages"])?;
        let purpose = f
            .string("purpose")?
            .filter(|p| !p.trim().is_empty())
            .ok_or("a route needs a `purpose` (shown to the agents)")?;
        // Every route has a cap, so that no two agents can talk forever.
        let max = match f.int("max_messages")? {
            Some(n) if n < 1 => return Err(format!("`max_messages` must be at least 1, got {n}")),
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
                    return Err(format!("`between` must name two agents, got {}", pair.len()));
                }
                (route_end(run, &pair[0], "between[0]")?, route_end(run, &pair[1], "between[1]")?, true)
            }
            (None, Some(from), Some(to)) => (route_end(run, from, "from")?, route_end(run, to, "to")?, false),
            _ => return Err("give `from` and `to`, or `between: [a, b]`".into()),
        };
        if a == b {
            return Err(format!("a route needs two different agents, got {a} twice"));
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
