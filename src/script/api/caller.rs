//! `ctx.agents.caller()` and `ctx.agents.fork_caller(spec)`: the run's calling session as a
//! read-only handle (a turn on it is refused: the session is the operator's), and a new agent whose
//! first turn forks it. A fork that cannot be made is `()`, its reason logged.

use super::doc::def;
use super::{script_err, AgentHandle, Agents, RResult};
use crate::run::caller::Caller;
use rhai::{Dynamic, Engine, Map, NativeCallContext};
use serde_json::json;

/// The run's calling session, as scripts see it.
#[derive(Clone)]
pub struct CallerHandle(pub Caller);

/// What a turn on the caller is told.
pub const REFUSED: &str = "the caller's session belongs to the operator: fork it with ctx.agents.fork_caller(spec)";

pub fn register(engine: &mut Engine) {
    engine.register_type_with_name::<CallerHandle>("Caller");
    def(engine, "caller(agents)", CALLER, |a: &mut Agents| match a.0.run.caller() {
        Some(c) => Dynamic::from(CallerHandle(c)),
        None => Dynamic::UNIT,
    });
    def(engine, "fork_caller(agents, spec)", FORK_CALLER, fork_caller);
    let opt = |v: Option<String>| v.map(Dynamic::from).unwrap_or(Dynamic::UNIT);
    for form in ["get harness(caller)", "harness(caller)"] {
        def(engine, form, "The caller's harness: `claude`, `codex` or `pi`.", |c: &mut CallerHandle| {
            c.0.harness.to_string()
        });
    }
    for form in ["get session(caller)", "session(caller)"] {
        def(engine, form, "The caller's session id, or `()` when it had none yet.", move |c: &mut CallerHandle| {
            opt(c.0.session.clone())
        });
    }
    for form in ["get home(caller)", "home(caller)"] {
        def(
            engine,
            form,
            "The CLI home its session is kept in, or `()` for the operator's own.",
            move |c: &mut CallerHandle| opt(c.0.home.as_ref().map(|h| h.display().to_string())),
        );
    }
    for form in ["get parent_run(caller)", "parent_run(caller)"] {
        def(
            engine,
            form,
            "For a council convened from a turn: the parent run's id, else `()`.",
            move |c: &mut CallerHandle| opt(c.0.run.clone()),
        );
    }
    for form in ["get agent(caller)", "agent(caller)"] {
        def(
            engine,
            form,
            "For a council convened from a turn: the calling agent's key, else `()`.",
            move |c: &mut CallerHandle| opt(c.0.agent.clone()),
        );
    }
    // A turn on the caller is refused, however it is asked for.
    for name in ["turn", "run", "ask"] {
        def(engine, &format!("{name}(caller, turn)"), TURN, |nc: NativeCallContext, _c: &mut CallerHandle, _t: Map| {
            refuse(&nc)
        });
        def(
            engine,
            &format!("{name}(caller, prompt)"),
            TURN,
            |nc: NativeCallContext, _c: &mut CallerHandle, _p: &str| refuse(&nc),
        );
    }
}

const CALLER: &str = "The run's calling session (`awf script run --caller HARNESS:SESSION`, or the agent that convened
this council with `wf council`), or `()` when the run has none. Facts: `harness`, `session`, `home`,
and for a council convened from a turn `parent_run` and `agent`. A turn on it is refused: fork it with
`ctx.agents.fork_caller(spec)`.";
const FORK_CALLER: &str = "Opens a new agent (`spec` as for `open`, with a new key) whose first turn forks the caller's
session: it starts with the caller's whole conversation (claude and pi). Returns `()` when the
caller cannot be forked into it (no caller, no session yet, another harness than the caller's,
a codex caller), and logs the reason as a warning.";
const TURN: &str =
    "Refused: the caller's session belongs to the operator. Fork it with `ctx.agents.fork_caller(spec)`.";

fn refuse(nc: &NativeCallContext) -> RResult<Dynamic> {
    Err(script_err(nc, REFUSED))
}

fn fork_caller(nc: NativeCallContext, a: &mut Agents, spec: Map) -> RResult<Dynamic> {
    let req = super::agents::parse_spec(&spec).map_err(|e| script_err(&nc, format!("ctx.agents.fork_caller: {e}")))?;
    let key = req.key.clone();
    match a.0.agents.fork_caller(req).map_err(|e| super::open_err(&nc, e))? {
        Ok(agent) => Ok(Dynamic::from(AgentHandle { host: a.0.clone(), agent })),
        Err(why) => {
            let text = format!("ctx.agents.fork_caller: agent {key} not opened: {why}");
            a.0.run.log("warn", &text, &json!({ "agent": key, "reason": why.to_string() }));
            Ok(Dynamic::UNIT)
        }
    }
}
