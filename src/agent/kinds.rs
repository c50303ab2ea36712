//! What each kind of operation does inside the pipeline (`op::execute`): a turn, a decision
//! model's turn, a compaction, a fork, a settings change; a message operation's is `message.rs`'s.
//! The calls that start them are `start.rs`'s (and `decide.rs`'s for a decision).

use super::operation::{Body, Done, Op};
use super::supervise::{supervise, OpPlan, Settle};
use super::{Agent, AgentBook};
use crate::control::slot::ResultSlot;
use crate::harness::Session;
use crate::run::deadline::Deadline;
use crate::run::{OutcomeKind, Run};
use serde_json::{json, Value};
use std::sync::Arc;

impl Body<'_> {
    /// The slot answers are submitted to: a turn's validates against its schema; a message
    /// operation's takes anything (it asks for no result); the others have none.
    pub fn slot(&self, run: &Run, op: &Op<'_>) -> Option<Arc<ResultSlot>> {
        match self {
            Body::Turn(t) | Body::Decision(t) => Some(Arc::new(ResultSlot::new(op.op_id.clone(), t.schema.clone()))),
            Body::Message => open_slot(run, &op.op_id, &json!(true)),
            _ => None,
        }
    }

    /// Runs the body on the agent's session (the pipeline holds its queue and a permit).
    pub async fn run(
        &self,
        session: &mut dyn Session,
        book: &Arc<AgentBook>,
        agent: &Arc<Agent>,
        op: &Op<'_>,
        slot: Option<Arc<ResultSlot>>,
        deadline: Option<Deadline>,
    ) -> Done {
        let meter = op.meter.clone();
        match self {
            Body::Turn(turn) | Body::Decision(turn) => {
                let Some(slot) = slot else { return Done::of(OutcomeKind::Failed, None, Some("no slot".into())) };
                let answered = slot.clone();
                let launcher = agent.launcher();
                let plan = OpPlan {
                    op_id: &op.op_id,
                    agent,
                    prompt: &turn.prompt,
                    n: op.n,
                    launcher: &launcher,
                    nudge: &turn.nudge,
                    slot,
                    deadline,
                    meter,
                };
                let s = supervise(session, plan, book).await;
                let (kind, value, reason) = match s.settle {
                    Settle::Answered(v) => (OutcomeKind::Answered, Some(v), None),
                    Settle::Unanswered(r) => (OutcomeKind::Unanswered, None, Some(r)),
                    Settle::Failed(r) => (OutcomeKind::Failed, None, Some(r)),
                    Settle::Blocked(r) => (OutcomeKind::Blocked, None, Some(r)),
                };
                Done {
                    kind,
                    value,
                    reason,
                    usage: s.usage,
                    cost_source: s.cost_source,
                    simulated: s.simulated,
                    forked: None,
                    logprobs: matches!(self, Body::Decision(_)).then(|| answered.logprobs()).flatten(),
                }
            }
            Body::Message => {
                let Some(slot) = slot else { return Done::of(OutcomeKind::Failed, None, Some("no slot".into())) };
                super::message::message(session, book, agent, op, slot, deadline).await
            }
            Body::Compact(prompt) => {
                let c = session.compact(prompt).await;
                let done = match c.summary {
                    Ok(summary) => Done::answered(Some(Value::String(summary))),
                    Err(why) => Done::of(OutcomeKind::Failed, None, Some(why.to_string())),
                };
                Done { usage: c.usage, cost_source: c.cost_source, simulated: c.simulated, ..done }
            }
            Body::Fork(info) => match session.fork(info.clone()) {
                Ok(s) => Done { forked: Some(s), ..Done::answered(None) },
                Err(why) => {
                    Done::of(OutcomeKind::Failed, None, Some(format!("harness {} cannot fork: {why}", agent.harness())))
                }
            },
            Body::Set { model, effort } => match session.set(*model, *effort) {
                Ok(()) => Done::answered(None),
                Err(why) => Done::of(OutcomeKind::Failed, None, Some(why.to_string())),
            },
        }
    }
}

/// An empty slot for an operation whose answer nobody validates (message operations).
pub(super) fn open_slot(run: &Run, op_id: &str, schema: &serde_json::Value) -> Option<Arc<ResultSlot>> {
    match run.schemas.compile(schema) {
        Ok(s) => Some(Arc::new(ResultSlot::new(op_id.to_string(), s))),
        Err(e) => {
            tracing::error!("the schema {schema} did not compile: {e}");
            None
        }
    }
}
