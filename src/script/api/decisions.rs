//! `ctx.decisions.decide(spec)`: a closed question to the decision model `[decisions]`
//! configures, with a confidence floor and a fallback, journalled (the `decision` module does the
//! work); `ctx.decisions.configured`: whether there is one.

use super::doc::def;
use super::{script_err, terminated, BadArg, Ctx, Fields, RResult, ScriptRun};
use crate::decision::spec::{Choice, Fallback, Spec, SpecError};
use crate::decision::DecideError;
use crate::run::scope;
use crate::script::convert::{to_dynamic, to_json};
use rhai::{Dynamic, Engine, Map, NativeCallContext};
use std::sync::Arc;

/// `ctx.decisions`.
#[derive(Clone)]
pub struct Decisions(pub Arc<ScriptRun>);

pub fn register(engine: &mut Engine) {
    engine.register_type_with_name::<Decisions>("Decisions");
    def(
        engine,
        "get decisions(ctx)",
        "Closed questions to the decision model: `ctx.decisions.decide(spec)`, `ctx.decisions.configured`.",
        |c: &mut Ctx| Decisions(c.0.clone()),
    );
    def(engine, "decide(decisions, spec)", DECIDE, decide);
    for form in ["get configured(decisions)", "configured(decisions)"] {
        def(engine, form, CONFIGURED, |d: &mut Decisions| d.0.run.config.decisions.is_some());
    }
}

const DECIDE: &str = "Asks the decision model (`[decisions]` in `awf.toml`) a closed question and
returns `#{ key, choice, confidence, distribution, decided_by, model, reason, source,
model_choice, replayed }`. `spec`: `key` (required; once per attempt), `question` (required),
`options` (a list of ids, or of `#{ id, doc }` maps), `state` (any value: shown to the model as
fenced, untrusted data), `min_confidence` (0..1, default 0), `fallback` (`\"operator\"`: a
checkpoint asks the person, showing the model's pick and confidence; `\"default:<option>\"`;
`\"fail\"`, the default: a catchable error) and `timeout_ms` (how long the model has; none by
default). Under the floor, when the model gives no valid option within the run's nudges, or when
it has not answered within `timeout_ms`, the fallback decides (`no_answer` then says why the model
gave none). `confidence` is the model's probability of `choice`, `distribution` every option's;
`source` says where they came from: `logprobs` (an `openai` server that returns log-probabilities,
read at the tokens of the choice), `logprobs-unread` (it returned some that do not yield the
choice written: confidence 0 and the fallback decides, never on the claim), `claimed` (no
log-probabilities came: the model's own `confidence`, the rest spread evenly) or `none` (no
valid answer). `decided_by`: `model`, `operator` or `default`. Billed like a turn under the agent
`decisions`; a resumed run replays a decision with the same key, question and options.";
const CONFIGURED: &str = "Whether a decision model is configured (`[decisions]`): `decide` is refused without one.";

fn decide(nc: NativeCallContext, d: &mut Decisions, spec: Map) -> RResult<Map> {
    let host = &d.0;
    let spec = parse(&spec).map_err(|e| script_err(&nc, format!("ctx.decisions.decide: {e}")))?;
    let Some(frame) = scope::current() else {
        return Err(script_err(&nc, "ctx.decisions.decide called outside a run"));
    };
    let site = site(&nc, &host.run.script);
    match crate::decision::decide(&host.decisions, &host.agents, &spec, &site, &frame) {
        Ok(record) => Ok(to_dynamic(&record.script_value()).try_cast::<Map>().unwrap_or_default()),
        Err(DecideError::Terminated(why)) => {
            let reason = crate::script::engine::interruption().map(|d| d.to_string()).unwrap_or(why);
            Err(terminated(&nc, reason))
        }
        Err(e @ (DecideError::NotConfigured { .. } | DecideError::Config(_))) => {
            let what = format!("ctx.decisions.decide `{}`: {e}", spec.key);
            Err(super::open_err(&nc, crate::agent::OpenError::Config(what)))
        }
        Err(e @ DecideError::Spec(_)) => Err(script_err(&nc, format!("ctx.decisions.decide: {e}"))),
        Err(e) => Err(script_err(&nc, format!("ctx.decisions.decide `{}`: {e}", spec.key))),
    }
}

/// Where the call is: `file:line:col`.
fn site(nc: &NativeCallContext, script: &std::path::Path) -> String {
    let pos = nc.call_position();
    let file = match nc.call_source() {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => script.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "script".into()),
    };
    format!("{file}:{}:{}", pos.line().unwrap_or(0), pos.position().unwrap_or(0))
}

/// The spec map as a `Spec` (its types checked here, the rest by `Spec::validate`).
fn parse(spec: &Map) -> Result<Spec, SpecError> {
    let field = SpecError::Field;
    let arg = |e: BadArg| SpecError::Field(e.to_string());
    let f = Fields { map: spec, what: "spec" };
    f.check_known(&["key", "question", "options", "state", "min_confidence", "fallback", "timeout_ms"]).map_err(arg)?;
    let key = f.string("key").map_err(arg)?.ok_or(SpecError::EmptyKey)?;
    let question = f.string("question").map_err(arg)?.ok_or(SpecError::EmptyQuestion)?;
    let options = match f.get("options") {
        None => Vec::new(),
        Some(v) if v.is_array() => v.clone().cast::<rhai::Array>().iter().map(option).collect::<Result<_, _>>()?,
        Some(v) => return Err(field(format!("`options` must be a list, got {}", v.type_name()))),
    };
    let state = f.get("state").map(|v| to_json(v).map_err(|e| field(format!("`state`: {e}")))).transpose()?;
    let min_confidence = match f.get("min_confidence") {
        None => 0.0,
        Some(v) => match (v.as_float(), v.as_int()) {
            (Ok(x), _) => x,
            (_, Ok(n)) => n as f64,
            _ => return Err(field(format!("`min_confidence` must be a number from 0 to 1, got {}", v.type_name()))),
        },
    };
    let fallback = match f.string("fallback").map_err(arg)? {
        None => Fallback::Fail,
        Some(text) => Fallback::parse(&text)?,
    };
    let timeout_ms = match f.int("timeout_ms").map_err(arg)? {
        Some(ms) if ms <= 0 => return Err(SpecError::Timeout(ms)),
        ms => ms.map(|ms| ms as u64),
    };
    Ok(Spec { key, question, options, state, min_confidence, fallback, timeout_ms })
}

/// One option: an id string, or `#{ id, doc }`.
fn option(v: &Dynamic) -> Result<Choice, SpecError> {
    if v.is_string() {
        return Ok(Choice { id: v.to_string(), doc: None });
    }
    let bad = || SpecError::Field(format!("an option must be an id string or #{{ id, doc }}, got {}", v.type_name()));
    let map = v.clone().try_cast::<Map>().ok_or_else(bad)?;
    let arg = |e: BadArg| SpecError::Field(e.to_string());
    let f = Fields { map: &map, what: "option" };
    f.check_known(&["id", "doc"]).map_err(arg)?;
    let id = f.string("id").map_err(arg)?.ok_or_else(bad)?;
    Ok(Choice { id, doc: f.string("doc").map_err(arg)? })
}
