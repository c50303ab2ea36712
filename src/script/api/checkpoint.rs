//! `ctx.checkpoint(question, schema[, options])`: the workflow asks its operator and waits, the
//! run parked `waiting`, for an answer valid against `schema` (`awf runs answer`); an answer an
//! earlier attempt got is replayed from the journal.

use super::doc::def;
use super::{script_err, terminated, BadArg, Ctx, Fields, RResult};
use crate::run::checkpoint::{Asked, Question, Waited};
use crate::run::deadline::Deadline;
use crate::run::scope;
use crate::script::convert::{fingerprint, to_dynamic, to_json};
use rhai::{Dynamic, Engine, Map, NativeCallContext};
use std::time::Duration;

pub fn register(engine: &mut Engine) {
    def(
        engine,
        "checkpoint(ctx, question, schema)",
        CHECKPOINT,
        |nc: NativeCallContext, c: &mut Ctx, q: &str, s: Dynamic| checkpoint(&nc, c, q, &s, &Map::new()),
    );
    def(
        engine,
        "checkpoint(ctx, question, schema, options)",
        CHECKPOINT,
        |nc: NativeCallContext, c: &mut Ctx, q: &str, s: Dynamic, options: Map| checkpoint(&nc, c, q, &s, &options),
    );
}

const CHECKPOINT: &str = "Asks the operator `question` and waits for an answer valid against `schema` (a JSON
Schema map), which it returns. The run is `waiting` meanwhile; `awf runs answer RUN --json VALUE`
answers (also `POST /runs/{id}/answer` and the MCP tool `run_answer`). `options`: `timeout_ms` (no
answer in time: a catchable error saying so) and `key` (default `checkpoint-N`, counted per attempt;
give one inside `ctx.parallel`). An answered checkpoint is replayed by a resumed run, never asked again.";

fn checkpoint(
    nc: &NativeCallContext,
    c: &mut Ctx,
    question: &str,
    schema: &Dynamic,
    options: &Map,
) -> RResult<Dynamic> {
    let run = &c.0.run;
    let f = Fields { map: options, what: "ctx.checkpoint options" };
    let parsed = (|| -> Result<(String, Option<u64>), BadArg> {
        f.check_known(&["timeout_ms", "key"])?;
        if question.trim().is_empty() {
            return Err("the question must not be empty".into());
        }
        let key = match f.string("key")? {
            Some(k) if k.trim().is_empty() => return Err("`key` must not be empty".into()),
            Some(k) => k,
            None => run.next_checkpoint_key(),
        };
        Ok((key, f.positive("timeout_ms")?))
    })();
    let (key, timeout_ms) = parsed.map_err(|e| script_err(nc, format!("ctx.checkpoint: {e}")))?;
    let schema = run
        .schemas
        .by_fingerprint(fingerprint(schema), || to_json(schema))
        .map_err(|e| script_err(nc, format!("ctx.checkpoint: `schema` is {e}")))?;
    let Some(frame) = scope::current() else {
        return Err(script_err(nc, "ctx.checkpoint called outside a run"));
    };
    let asked = run.ask_operator(Question { key: key.clone(), question, schema, timeout_ms, agent: None });
    let rx = match asked.map_err(|e| script_err(nc, format!("ctx.checkpoint: {e}")))? {
        Asked::Replayed(v) => return Ok(to_dynamic(&v)),
        Asked::Waiting(rx) => rx,
    };
    let timeout = timeout_ms.map(|ms| Deadline::after(Duration::from_millis(ms)));
    let waited = run.rt.block_on(run.wait_for_operator(&key, rx, timeout, frame.deadline_at(), &frame.cancel));
    match waited {
        Waited::Answer(v) => Ok(to_dynamic(&v)),
        Waited::TimedOut => Err(script_err(
            nc,
            format!(
                "ctx.checkpoint `{key}` timed out after {} ms with no answer from the operator: {question}",
                timeout_ms.unwrap_or_default()
            ),
        )),
        Waited::Cancelled => {
            let reason =
                crate::script::engine::interruption().map(|d| d.to_string()).unwrap_or_else(|| "cancelled".into());
            Err(terminated(nc, reason))
        }
    }
}
