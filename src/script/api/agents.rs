//! `ctx.agents.open/get/stop` and the `Agent` handle: `run`, `ask`, `fork`, `set`, `compact`,
//! `stop`, and its read-only facts. Script maps are parsed here into the agent module's types.

use super::doc::def;
use super::{script_err, terminated, AgentHandle, Agents, BadArg, Fields, RResult};
use crate::agent::operation::{OpError, Turn};
use crate::agent::start as op;
use crate::agent::supervise::Nudge;
use crate::agent::{OpenRequest, Outcome, RuntimeChoice};
use crate::config::RuntimeConfig;
use crate::control::convene::Grant;
use crate::control::prompt::DEFAULT_NUDGE;
use crate::run::schema::SchemaError;
use crate::run::scope;
use crate::script::convert::{to_dynamic, to_json};
use rhai::{Dynamic, Engine, Map, NativeCallContext, INT};
use std::path::PathBuf;

pub fn register(engine: &mut Engine) {
    def(engine, "open(agents, spec)", OPEN, open);
    def(engine, "get(agents, key)", "The open agent with this key, or `()`.", |a: &mut Agents, key: &str| {
        match a.0.agents.get(key) {
            Some(agent) => Dynamic::from(AgentHandle { host: a.0.clone(), agent }),
            None => Dynamic::UNIT,
        }
    });
    def(engine, "stop(agents, key)", STOP, |a: &mut Agents, key: &str| a.0.agents.stop(key, "stopped by the workflow"));
    def(engine, "stop(agents, key, reason)", STOP, |a: &mut Agents, key: &str, reason: &str| {
        a.0.agents.stop(key, reason)
    });
    // An agent's facts read as properties and as calls alike: `a.model` and `a.model()`.
    for form in ["get key(agent)", "key(agent)"] {
        def(engine, form, "The agent's key, unique in the run.", |h: &mut AgentHandle| h.agent.key.clone());
    }
    for form in ["get harness(agent)", "harness(agent)"] {
        def(
            engine,
            form,
            "The harness it runs on: `claude`, `codex`, `pi`, `openai`, `anthropic`, `command` or `fake`.",
            |h: &mut AgentHandle| h.agent.harness().to_string(),
        );
    }
    for form in ["get model(agent)", "model(agent)"] {
        def(
            engine,
            form,
            "The model it runs (as configured; empty when the harness picks its own).",
            |h: &mut AgentHandle| h.agent.model(),
        );
    }
    for form in ["get effort(agent)", "effort(agent)"] {
        def(engine, form, "Its reasoning effort, or `()`.", |h: &mut AgentHandle| {
            h.agent.effort().map(Dynamic::from).unwrap_or(Dynamic::UNIT)
        });
    }
    for form in ["get usage(agent)", "usage(agent)"] {
        def(engine, form, AGENT_USAGE, |h: &mut AgentHandle| {
            tally_map(&h.host.run.scheduler.agent_tally(&h.agent.key))
        });
    }
    // `turn` is `run` under a name no workflow's `fn run(args)` shadows.
    for name in ["turn", "run"] {
        def(engine, &format!("{name}(agent, turn)"), TURN, run);
        def(
            engine,
            &format!("{name}(agent, prompt)"),
            TURN_PROMPT,
            move |nc: NativeCallContext, h: &mut AgentHandle, prompt: &str| {
                let mut turn = Map::new();
                turn.insert("prompt".into(), prompt.into());
                do_run(&nc, h, &turn, name).map(|o| outcome_map(&o))
            },
        );
    }
    def(engine, "ask(agent, prompt)", ASK, |nc: NativeCallContext, h: &mut AgentHandle, prompt: &str| {
        ask(&nc, h, prompt, None)
    });
    def(
        engine,
        "ask(agent, prompt, schema)",
        ASK,
        |nc: NativeCallContext, h: &mut AgentHandle, prompt: &str, schema: Map| {
            ask(&nc, h, prompt, Some(Dynamic::from_map(schema)))
        },
    );
    def(engine, "stop(agent)", AGENT_STOP, |h: &mut AgentHandle| {
        h.host.agents.stop(&h.agent.key, "stopped by the workflow")
    });
    def(engine, "stop(agent, reason)", AGENT_STOP, |h: &mut AgentHandle, reason: &str| {
        h.host.agents.stop(&h.agent.key, reason)
    });
    def(engine, "fork(agent, options)", FORK, fork);
    def(engine, "set(agent, options)", SET, set);
    def(engine, "compact(agent, options)", COMPACT, compact);
    def(engine, "compact(agent)", COMPACT, |nc: NativeCallContext, h: &mut AgentHandle| compact(nc, h, Map::new()));
}

const OPEN: &str = "Opens an agent (or returns the one open under this key with the same spec) and returns its handle.
`spec`: `key` (required, unique in the run); `runtime`: an alias from `awf.toml` (`\"claude\"`),
`#{ alias, effort }`, or an inline runtime `#{ harness, model, effort, ... }` (a program:
`#{ harness: \"command\", command: [\"python3\", \"agent.py\"] }`), default: the configured default
runtime; `instructions` (its system prompt); `cwd`; `sandbox` (a name from `[sandboxes]`, an inline
policy, or a handle from `ctx.sandboxes.open`); `labels` (a map shown in records); `timeout_ms` or
`deadline` (Unix ms) for each of its operations; `councils` (`true`, or a list of strategy names: the councils it may convene from its
turns, none by default); `skills` (a list of skill folders, each holding `SKILL.md`, relative to
the script's folder: copied into a `claude` or `pi` agent's home, where its CLI loads them and no
others; other harnesses refuse them); `operator` (`true`: it may ask the operator from its turns,
with `wf ask-operator` or the `wf_ask_operator` tool; `false` by default); `isolation` (`\"worktree\"`:
it works in a git worktree of its own, on branch `awf/<run>/<key>`, its `cwd` relative to it;
default: the run's `--isolation`) and `keep` (`\"on-failure\"` or `\"always\"`: its worktree is kept
when it closes; default: removed, its branch kept); `placement` (`\"pane\"`: a `claude`, `codex` or
`pi` agent runs interactively in a tmux pane of the run's session, which `awf runs attach` shows;
default `\"headless\"`) with `layout` (`#{ beside: \"<agent key>\", split: \"right\" }` or `\"below\"`:
its pane goes beside that agent's; one that cannot be honoured goes elsewhere, with the reason
recorded) and `keep_pane` (`\"always\"` or `\"on-failure\"`: its pane is left running for the
operator when the run ends; default `\"never\"`). Opening a key again with a different runtime,
cwd, instructions, sandbox, skills, isolation or placement is an error.";
const STOP: &str = "Stops the agent with this key: its running operation settles `cancelled`, its process ends.
Returns whether an agent was open under the key.";
const AGENT_USAGE: &str =
    "What all of this agent's operations spent (turns, message operations, compactions, and the councils
they convened, whose operations count among its `operations`):
`#{ operations, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, tokens, cost_usd }`.";
const TURN: &str = "Runs one turn and returns its outcome map (`run` is the same call; in a script that defines its
own `fn run`, write `turn`). `turn`: `prompt` (required); `schema` (a JSON Schema map the answer must
match; default `#{ type: \"string\" }`, so a turn that wants an object must say so); `id` (default
`\"<key>#<n>\"`: the same id with the same turn returns the recorded outcome without a second turn);
`label`; `timeout_ms` or `deadline`; `nudge` (`false`, or `#{ prompt, max }`).
The outcome: `#{ kind, ok, value, reason, op_id, usage, simulated }`, where `kind` is `answered`,
`failed`, `blocked`, `unanswered`, `timed-out` or `cancelled`, `ok` is `kind == \"answered\"`, and
`usage` is `#{ input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd,
duration_ms }`. A `timed-out` or `failed` operation closes the agent.";
const TURN_PROMPT: &str = "Shorthand for `turn(#{ prompt })`: a turn whose answer is a string.";
const ASK: &str = "Runs one turn and returns its value (default schema: a string). When the turn is not answered it
throws a catchable error map `#{ message, kind, reason, op_id, outcome }`.";
const AGENT_STOP: &str = "Stops this agent: its running operation settles `cancelled`. Returns whether it was open.";
const FORK: &str = "A new agent on a copy of this one's conversation. `options`: `key` (required), `instructions`,
`effort`. A harness that cannot fork is an error naming it.";
const SET: &str = "Changes the model or effort for the agent's next operations. `options`: `model`, `effort`.";
const COMPACT: &str = "Asks the agent to summarise its conversation and continues from the summary; returns the
summary. `options`: `prompt` (default: \"Summarise the conversation so far.\"). Billed like a turn.";

fn open(nc: NativeCallContext, a: &mut Agents, spec: Map) -> RResult<AgentHandle> {
    let req = parse_spec(&spec).map_err(|e| script_err(&nc, format!("ctx.agents.open: {e}")))?;
    let agent = a.0.agents.open(req).map_err(|e| super::open_err(&nc, e))?;
    Ok(AgentHandle { host: a.0.clone(), agent })
}

pub(super) fn parse_spec(spec: &Map) -> Result<OpenRequest, BadArg> {
    let f = Fields { map: spec, what: "agent spec" };
    f.check_known(&[
        "key",
        "runtime",
        "instructions",
        "cwd",
        "sandbox",
        "labels",
        "timeout_ms",
        "deadline",
        "councils",
        "skills",
        "operator",
        "isolation",
        "keep",
        "placement",
        "layout",
        "keep_pane",
    ])?;
    let key = f.string("key")?.ok_or("agent spec needs `key` (a string unique in the run)")?;
    let runtime = match f.get("runtime") {
        None => RuntimeChoice::Default,
        Some(v) if v.is_string() => RuntimeChoice::Alias { alias: v.to_string(), effort: None },
        Some(v) if v.is_map() => parse_runtime_map(&v.clone().cast::<Map>())?,
        Some(v) => return Err(format!("`runtime` must be an alias string or a map, got {}", v.type_name()).into()),
    };
    let labels = match f.get("labels") {
        None => serde_json::Value::Null,
        Some(v) => to_json(v).map_err(|source| BadArg::NotJson { field: "labels", source })?,
    };
    let sandbox = f.get("sandbox").map(super::sandboxes::asked).transpose()?;
    let (timeout_ms, deadline_ms) = f.timeout()?;
    Ok(OpenRequest {
        key,
        runtime,
        instructions: f.string("instructions")?,
        cwd: f.string("cwd")?.map(PathBuf::from),
        sandbox: sandbox.map(Box::new),
        labels,
        timeout_ms,
        deadline_ms,
        councils: parse_councils(f.get("councils").cloned())?,
        skills: parse_skills(f.get("skills"))?,
        fork_caller: None,
        operator: match f.get("operator") {
            None => false,
            Some(v) => v.as_bool().map_err(|t| format!("`operator` must be true or false, got {t}"))?,
        },
        isolation: f.string("isolation")?.map(|s| crate::worktree::Isolation::parse(&s)).transpose()?,
        keep: f.string("keep")?.map(|s| crate::worktree::Keep::parse(&s)).transpose()?.unwrap_or_default(),
        pane: parse_pane(&f)?.map(Box::new),
    })
}

/// `placement`, `layout` and `keep_pane`: `None` for a headless agent.
fn parse_pane(f: &Fields) -> Result<Option<crate::pane::spec::PaneSpec>, BadArg> {
    use crate::pane::spec::{KeepPane, Layout, PaneSpec, Placement, SpecError, Split};
    let placement = f.string("placement")?.map(|p| Placement::parse(&p)).transpose()?.unwrap_or_default();
    let layout = match f.get("layout") {
        None => None,
        Some(v) if v.is_map() => {
            let m = v.clone().cast::<Map>();
            let lf = Fields { map: &m, what: "layout" };
            lf.check_known(&["beside", "split"])?;
            let split = lf.string("split")?.map(|s| Split::parse(&s)).transpose()?.unwrap_or_default();
            Some(Layout { beside: lf.string("beside")?, split })
        }
        Some(v) => {
            return Err(BadArg::Said(format!("`layout` must be a map #{{ beside, split }}, got {}", v.type_name())))
        }
    };
    let keep = f.string("keep_pane")?.map(|k| KeepPane::parse(&k)).transpose()?;
    if placement == Placement::Headless {
        if layout.is_some() {
            return Err(SpecError::NotInPane("layout").into());
        }
        if keep.is_some() {
            return Err(SpecError::NotInPane("keep_pane").into());
        }
        return Ok(None);
    }
    Ok(Some(PaneSpec { layout: layout.unwrap_or_default(), keep: keep.unwrap_or_default() }))
}

/// `skills`: a list of skill folder paths (strings).
fn parse_skills(v: Option<&Dynamic>) -> Result<Vec<PathBuf>, BadArg> {
    let Some(v) = v else { return Ok(Vec::new()) };
    if !v.is_array() {
        return Err(format!("`skills` must be a list of skill folder paths, got {}", v.type_name()).into());
    }
    let mut out = Vec::new();
    for item in v.clone().cast::<rhai::Array>() {
        match item.into_immutable_string() {
            Ok(s) if !s.trim().is_empty() => out.push(PathBuf::from(s.trim())),
            _ => return Err("`skills` must list skill folder paths (non-empty strings)".into()),
        }
    }
    Ok(out)
}

/// `councils`: `true` (every strategy in the catalog), `false`, or a list of strategy names.
fn parse_councils(v: Option<Dynamic>) -> Result<Grant, BadArg> {
    let Some(v) = v else { return Ok(Grant::None) };
    if let Ok(b) = v.as_bool() {
        return Ok(if b { Grant::All } else { Grant::None });
    }
    if v.is_array() {
        let mut names = Vec::new();
        for item in v.clone().cast::<rhai::Array>() {
            match item.into_immutable_string() {
                Ok(s) if !s.trim().is_empty() => names.push(s.trim().to_string()),
                _ => return Err("`councils` must list strategy names (strings)".into()),
            }
        }
        return Ok(if names.is_empty() { Grant::None } else { Grant::Named(names) });
    }
    Err(format!("`councils` must be true, false or a list of strategy names, got {}", v.type_name()).into())
}

fn parse_runtime_map(m: &Map) -> Result<RuntimeChoice, BadArg> {
    let f = Fields { map: m, what: "runtime" };
    if let Some(alias) = f.string("alias")? {
        f.check_known(&["alias", "effort"]).map_err(|e| format!("{e}; an alias takes only `effort` beside it"))?;
        return Ok(RuntimeChoice::Alias { alias, effort: f.string("effort")? });
    }
    if f.get("harness").is_none() {
        return Err("runtime map needs `alias` or `harness`".into());
    }
    let json = to_json(&Dynamic::from_map(m.clone())).map_err(|e| BadArg::Said(e.to_string()))?;
    serde_json::from_value::<RuntimeConfig>(json)
        .map(|r| RuntimeChoice::Inline(Box::new(r)))
        .map_err(|e| BadArg::Said(format!("runtime: {e}")))
}

fn parse_turn(h: &AgentHandle, turn: &Map) -> Result<Turn, BadArg> {
    let f = Fields { map: turn, what: "turn" };
    f.check_known(&["prompt", "schema", "id", "label", "timeout_ms", "deadline", "nudge"])?;
    let prompt = f.string("prompt")?.ok_or("turn needs `prompt` (a string)")?;
    let schema = match f.get("schema") {
        None => h.host.run.schemas.compile(&serde_json::json!({ "type": "string" })).map_err(BadArg::from),
        Some(v) => h.host.run.schemas.by_fingerprint(crate::script::convert::fingerprint(v), || to_json(v)).map_err(
            |e| match e {
                SchemaError::NotJson(e) => BadArg::Said(format!("`schema`: {e}")),
                SchemaError::Invalid(e) => BadArg::Said(format!("`schema` is {e}")),
            },
        ),
    }?;
    let (timeout_ms, deadline_ms) = f.timeout()?;
    let nudge = match f.get("nudge") {
        None => Nudge { text: DEFAULT_NUDGE.into(), max: h.host.run.scheduler.limits.nudges },
        Some(v) if v.as_bool() == Ok(false) => Nudge { text: DEFAULT_NUDGE.into(), max: 0 },
        Some(v) if v.is_map() => {
            let m = v.clone().cast::<Map>();
            let nf = Fields { map: &m, what: "nudge" };
            nf.check_known(&["prompt", "max"])?;
            Nudge {
                text: nf.string("prompt")?.unwrap_or_else(|| DEFAULT_NUDGE.into()),
                max: nf.positive("max")?.map(|n| n as u32).unwrap_or(h.host.run.scheduler.limits.nudges),
            }
        }
        Some(v) => return Err(format!("`nudge` must be false or #{{ prompt, max }}, got {}", v.type_name()).into()),
    };
    Ok(Turn { prompt, schema, id: f.string("id")?, label: f.string("label")?, timeout_ms, deadline_ms, nudge })
}

/// Runs one turn; `method` (`run`, `turn`, `ask`) names the call in errors.
fn do_run(nc: &NativeCallContext, h: &AgentHandle, turn: &Map, method: &str) -> RResult<Outcome> {
    let turn = parse_turn(h, turn).map_err(|e| script_err(nc, format!("{}.{method}: {e}", h.agent.key)))?;
    let Some(frame) = scope::current() else {
        return Err(script_err(nc, "agent operations can only run inside a run"));
    };
    op::run(&h.host.agents, &h.agent, turn, &frame).map_err(|e| op_err(nc, e))
}

/// An operation's error as the script sees it: a catchable error, or a termination.
fn op_err(nc: &NativeCallContext, e: OpError) -> Box<rhai::EvalAltResult> {
    match e {
        OpError::Invalid(m) => script_err(nc, m),
        OpError::Limit(l) => script_err(nc, l.to_string()),
        OpError::Terminated(r) => terminated(nc, r),
    }
}

fn run(nc: NativeCallContext, h: &mut AgentHandle, turn: Map) -> RResult<Map> {
    do_run(&nc, h, &turn, nc.fn_name()).map(|o| outcome_map(&o))
}

fn ask(nc: &NativeCallContext, h: &mut AgentHandle, prompt: &str, schema: Option<Dynamic>) -> RResult<Dynamic> {
    let mut turn = Map::new();
    turn.insert("prompt".into(), prompt.into());
    if let Some(s) = schema {
        turn.insert("schema".into(), s);
    }
    let outcome = do_run(nc, h, &turn, "ask")?;
    match &outcome.value {
        Some(v) if outcome.kind == crate::agent::OutcomeKind::Answered => Ok(to_dynamic(v)),
        _ => {
            let mut err = Map::new();
            let message = format!(
                "agent {} did not answer ({}): {}",
                h.agent.key,
                outcome.kind.as_str(),
                outcome.reason.as_deref().unwrap_or("no reason given")
            );
            err.insert("message".into(), message.into());
            err.insert("kind".into(), outcome.kind.as_str().into());
            err.insert("reason".into(), outcome.reason.clone().map(Dynamic::from).unwrap_or(Dynamic::UNIT));
            err.insert("op_id".into(), outcome.op_id.clone().into());
            err.insert("outcome".into(), Dynamic::from_map(outcome_map(&outcome)));
            Err(rhai::EvalAltResult::ErrorRuntime(Dynamic::from_map(err), nc.call_position()).into())
        }
    }
}

/// What an agent's operations spent: `#{ operations, input_tokens, output_tokens,
/// cache_read_tokens, cache_write_tokens, tokens, cost_usd }`.
fn tally_map(t: &crate::accounting::Tally) -> Map {
    let mut m = Map::new();
    for (k, v) in [
        ("operations", t.operations),
        ("input_tokens", t.input_tokens),
        ("output_tokens", t.output_tokens),
        ("cache_read_tokens", t.cache_read_tokens),
        ("cache_write_tokens", t.cache_write_tokens),
        ("tokens", t.tokens),
    ] {
        m.insert(k.into(), (v as INT).into());
    }
    m.insert("cost_usd".into(), crate::accounting::micro(t.cost_usd).into());
    m
}

/// The outcome map scripts get: `#{ kind, ok, value, reason, op_id, usage, simulated }`.
pub fn outcome_map(o: &Outcome) -> Map {
    let mut m = Map::new();
    m.insert("kind".into(), o.kind.as_str().into());
    m.insert("ok".into(), (o.kind == crate::agent::OutcomeKind::Answered).into());
    m.insert("value".into(), o.value.as_ref().map(to_dynamic).unwrap_or(Dynamic::UNIT));
    m.insert("reason".into(), o.reason.clone().map(Dynamic::from).unwrap_or(Dynamic::UNIT));
    m.insert("op_id".into(), o.op_id.clone().into());
    let mut u = Map::new();
    u.insert("input_tokens".into(), (o.usage.input_tokens as INT).into());
    u.insert("output_tokens".into(), (o.usage.output_tokens as INT).into());
    u.insert("cache_read_tokens".into(), (o.usage.cache_read_tokens as INT).into());
    u.insert("cache_write_tokens".into(), (o.usage.cache_write_tokens as INT).into());
    u.insert("cost_usd".into(), crate::accounting::micro(o.usage.cost_usd).into());
    u.insert("duration_ms".into(), (o.duration_ms as INT).into());
    m.insert("usage".into(), u.into());
    m.insert("simulated".into(), o.simulated.into());
    m
}

fn fork(nc: NativeCallContext, h: &mut AgentHandle, opts: Map) -> RResult<AgentHandle> {
    let f = Fields { map: &opts, what: "fork" };
    let parsed = (|| -> Result<_, BadArg> {
        f.check_known(&["key", "instructions", "effort"])?;
        let key = f.string("key")?.ok_or("fork needs `key`")?;
        Ok((key, f.string("instructions")?, f.string("effort")?))
    })();
    let (key, instructions, effort) = parsed.map_err(|e| script_err(&nc, format!("{}.fork: {e}", h.agent.key)))?;
    let Some(frame) = scope::current() else {
        return Err(script_err(&nc, "agent operations can only run inside a run"));
    };
    let agent = op::fork(&h.host.agents, &h.agent, key, instructions, effort, &frame).map_err(|e| op_err(&nc, e))?;
    Ok(AgentHandle { host: h.host.clone(), agent })
}

fn set(nc: NativeCallContext, h: &mut AgentHandle, opts: Map) -> RResult<()> {
    let f = Fields { map: &opts, what: "set" };
    let parsed = (|| -> Result<_, BadArg> {
        f.check_known(&["model", "effort"])?;
        Ok((f.string("model")?, f.string("effort")?))
    })();
    let (model, effort) = parsed.map_err(|e| script_err(&nc, format!("{}.set: {e}", h.agent.key)))?;
    let Some(frame) = scope::current() else {
        return Err(script_err(&nc, "agent operations can only run inside a run"));
    };
    op::set(&h.host.agents, &h.agent, model, effort, &frame).map_err(|e| op_err(&nc, e))
}

fn compact(nc: NativeCallContext, h: &mut AgentHandle, opts: Map) -> RResult<String> {
    let f = Fields { map: &opts, what: "compact" };
    let prompt = (|| -> Result<_, BadArg> {
        f.check_known(&["prompt"])?;
        Ok(f.string("prompt")?.unwrap_or_else(|| "Summarise the conversation so far.".into()))
    })()
    .map_err(|e| script_err(&nc, format!("{}.compact: {e}", h.agent.key)))?;
    let Some(frame) = scope::current() else {
        return Err(script_err(&nc, "agent operations can only run inside a run"));
    };
    op::compact(&h.host.agents, &h.agent, &prompt, &frame).map_err(|e| op_err(&nc, e))
}
