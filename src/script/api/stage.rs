//! `ctx.stage(name, fn)` and `ctx.stage(name, #{ result, summary }, fn)`: one use of a name per
//! run, no nesting, the value validated and recorded, failures recorded with their message.

use super::doc::def;
use super::{script_err, Ctx, Fields, RResult, ScriptRun};
use crate::run::scope::{self, Frame};
use crate::run::stages::StageEnd;
use crate::run::{StageStatus, StopCause};
use crate::script::convert::{has_json_type, to_json, to_json_text};
use crate::script::render;
use rhai::{Dynamic, FnPtr, Map, NativeCallContext};
use serde_json::value::RawValue;
use std::sync::Arc;

pub fn register(engine: &mut rhai::Engine) {
    def(engine, "stage(ctx, name, body)", STAGE, |nc: NativeCallContext, c: &mut Ctx, name: &str, f: FnPtr| {
        stage(&nc, &c.0, name, Map::new(), f)
    });
    def(
        engine,
        "stage(ctx, name, options, body)",
        STAGE,
        |nc: NativeCallContext, c: &mut Ctx, name: &str, opts: Map, f: FnPtr| stage(&nc, &c.0, name, opts, f),
    );
}

const STAGE: &str =
    "Runs `body` as a named, recorded stage (`stages/<name>.json`). Without options the body must return
nothing. `options`: `result` (a JSON Schema the body's value must match: the value is validated,
recorded and returned, and a resumed run reuses it without running the body again), `summary` (a
closure `|value| \"...\"` for the live view). A name is used once per run; stages may run inside
parallel branches but not inside another stage. An error in the body cancels what it started, is
recorded with the stage (`failed`) and propagates.";

/// Why a stage's routes were not waited for to the end: the script unwinds (uncatchable).
#[derive(Debug, thiserror::Error)]
enum Unsettled {
    /// The run stops: its stop reason.
    #[error("{0}")]
    Stopped(String),
    #[error("deadline exceeded while the stage's messages settled")]
    Deadline,
}

/// Waits for the stage's routes to fall quiet, unless the stage is cancelled or its deadline passes.
fn settle_routes(host: &ScriptRun, name: &str, frame: &Frame) -> Result<(), Unsettled> {
    let run = &host.run;
    let stage: Option<Arc<str>> = Some(Arc::from(name));
    let deadline = frame.deadline_at();
    run.rt.block_on(async {
        let until = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at.instant().into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = frame.cancel.cancelled() => Err(Unsettled::Stopped(run.stop_reason())),
            _ = until => Err(Unsettled::Deadline),
            _ = host.router.settle(&stage) => Ok(()),
        }
    })
}

fn stage(nc: &NativeCallContext, host: &Arc<ScriptRun>, name: &str, opts: Map, f: FnPtr) -> RResult<Dynamic> {
    let run = &host.run;
    let fields = Fields { map: &opts, what: "stage options" };
    fields.check_known(&["result", "summary"]).map_err(|e| script_err(nc, format!("ctx.stage(\"{name}\"): {e}")))?;
    let (schema, types) = match fields.get("result") {
        None => (None, None),
        Some(v) => {
            let json = to_json(v).map_err(|e| script_err(nc, format!("ctx.stage(\"{name}\"): `result`: {e}")))?;
            let compiled = run
                .schemas
                .compile(&json)
                .map_err(|e| script_err(nc, format!("ctx.stage(\"{name}\"): `result` is {e}")))?;
            (Some(compiled), type_only(&json))
        }
    };
    let summary = match fields.get("summary") {
        None => None,
        Some(v) => Some(v.clone().try_cast::<FnPtr>().ok_or_else(|| {
            script_err(nc, format!("ctx.stage(\"{name}\"): `summary` must be a closure |value| \"...\""))
        })?),
    };
    let parent = scope::current().ok_or_else(|| script_err(nc, "ctx.stage called outside a run"))?;
    if let Some(outer) = &parent.stage {
        return Err(script_err(nc, format!("stage `{name}` cannot start inside stage `{outer}`: stages do not nest")));
    }
    run.stages.claim(name).map_err(|e| script_err(nc, e.to_string()))?;
    // A later attempt reuses what an earlier one recorded: the function does not run again; unless
    // the script changed so that the recorded value no longer fits the stage's result schema.
    let recorded = run.reused_stage(name).filter(|(value, summary)| {
        let misfit: Vec<String> =
            schema.as_ref().map(|s| s.violations(value).iter().map(|v| v.to_string()).collect()).unwrap_or_default();
        if !misfit.is_empty() {
            let which = if summary.as_deref() == Some(crate::run::resume::GIVEN) {
                "the value given with --values does not fit"
            } else {
                "its recorded value no longer fits"
            };
            run.log(
                "warn",
                &format!("stage `{name}`: {which} its result schema ({}); it runs again", misfit.join("; ")),
                &serde_json::Value::Null,
            );
        }
        misfit.is_empty()
    });
    if let Some((value, summary)) = recorded {
        let runs = run.stage_runs(name);
        host.agents.skip_runs(&runs);
        let text = serde_json::value::to_raw_value(value).ok();
        let reuse = StageEnd {
            name,
            attempt: run.attempt,
            status: StageStatus::Reused,
            value: text.as_deref(),
            summary: summary.as_deref(),
            reason: None,
            runs: &runs,
        };
        run.stages.end(&run.records, reuse);
        return Ok(if schema.is_some() { crate::script::convert::to_dynamic(value) } else { Dynamic::UNIT });
    }
    run.records.event(&crate::run::Event::StageStarted { name });
    run.progress.stage_started(name);
    let frame = Arc::new(Frame {
        cancel: parent.cancel.child_token(),
        deadline: parent.deadline.clone(),
        stage: Some(Arc::from(name)),
        group: parent.group.clone(),
    });
    let result = {
        let _in_stage = scope::enter(frame.clone());
        f.call_within_context::<Dynamic>(nc, ())
    };
    // A stage ends only when its routes carry nothing more: message operations settled, every
    // answer owed given or failed. Then its routes close.
    let result = match result {
        Ok(v) => settle_routes(host, name, &frame).map(|_| v).map_err(|why| super::terminated(nc, why.to_string())),
        Err(e) => Err(e),
    };
    host.router.close_stage(run, name);
    run.progress.stage_ended(name);
    let end = |status: StageStatus, value: Option<&RawValue>, summary: Option<&str>, reason: Option<&str>| {
        let runs = run.stage_runs(name);
        run.stages
            .end(&run.records, StageEnd { name, attempt: run.attempt, status, value, summary, reason, runs: &runs });
    };
    let value = match result {
        Ok(v) => v,
        Err(e) => {
            frame.cancel.cancel();
            let status = match run.stop_cause() {
                Some(StopCause::Stopped(_)) => StageStatus::Stopped,
                _ => StageStatus::Failed,
            };
            run.stages.note_failure(name);
            end(status, None, None, Some(&render::message(&e)));
            return Err(e);
        }
    };
    let fail = |why: String| {
        run.stages.note_failure(name);
        end(StageStatus::Failed, None, None, Some(&why));
        script_err(nc, why)
    };
    let Some(schema) = schema else {
        if !value.is_unit() {
            return Err(fail(format!(
                "stage `{name}` returned a value ({}) but has no result schema: give it #{{ result: schema }} to record and return the value, or end its closure with () (in Rhai a block's last statement is its value, even after a semicolon)",
                value.type_name()
            )));
        }
        end(StageStatus::Succeeded, None, None, None);
        return Ok(Dynamic::UNIT);
    };
    // A schema that asks only for a type is checked on the value itself, and the value written
    // as JSON text straight from it; any other is validated on a JSON copy of the value.
    let typed = types.as_ref().is_some_and(|t| t.iter().any(|ty| has_json_type(&value, ty)));
    let text = match typed.then(|| to_json_text(&value)).flatten() {
        Some(text) => text,
        None => {
            let json =
                to_json(&value).map_err(|e| fail(format!("stage `{name}` returned a value that is not JSON: {e}")))?;
            let violations = schema.violations(&json);
            if !violations.is_empty() {
                let list: Vec<String> = violations.iter().map(|v| v.to_string()).collect();
                return Err(fail(format!(
                    "stage `{name}` returned a value that does not match its result schema: {}",
                    list.join("; ")
                )));
            }
            serde_json::value::to_raw_value(&json)
                .map_err(|e| fail(format!("stage `{name}` returned a value that is not JSON: {e}")))?
        }
    };
    let summary_text = match summary {
        None => None,
        Some(s) => Some(
            s.call_within_context::<Dynamic>(nc, (value.clone(),))
                .map_err(|e| fail(format!("stage `{name}`: summary failed: {}", render::message(&e))))?
                .to_string(),
        ),
    };
    end(StageStatus::Succeeded, Some(&text), summary_text.as_deref(), None);
    Ok(value)
}

/// The JSON types a schema asks for when it asks for nothing else (`#{ type: "array" }`, with a
/// title or description at most).
fn type_only(schema: &serde_json::Value) -> Option<Vec<String>> {
    let map = schema.as_object()?;
    if map.keys().any(|k| !matches!(k.as_str(), "type" | "title" | "description" | "$comment")) {
        return None;
    }
    match map.get("type")? {
        serde_json::Value::String(t) => Some(vec![t.clone()]),
        serde_json::Value::Array(list) => list.iter().map(|t| t.as_str().map(String::from)).collect(),
        _ => None,
    }
}
