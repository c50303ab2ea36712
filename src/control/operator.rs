//! `wf ask-operator` (the agent side of an operator checkpoint): the `ask-operator` command as the
//! dispatcher carries it out. The agent's turn waits, the run parked `waiting`, until the operator
//! answers (`awf runs answer`) or the operation's deadline passes; the answer is printed as JSON.
//! Each ask is keyed by the agent, its operation and a count, so a resumed run replays it.

use super::dispatch::Control;
use super::messenger::MessageError;
use super::protocol::{exit, Response};
use crate::run::deadline::Deadline;
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use tokio_util::sync::CancellationToken;

/// A question from an agent's running operation.
pub struct OperatorCall {
    /// `<agent>/<op id>/ask-<n>`: the checkpoint's key.
    pub key: String,
    pub agent: String,
    pub question: String,
    pub schema: Value,
    /// The operation's deadline: the wait ends with it.
    pub deadline: Option<Deadline>,
    /// Cancelled when the operation ends or is cancelled.
    pub ended: CancellationToken,
}

/// Asks the operator for the agent's running operation.
pub(super) async fn dispatch(control: &Control, question: String, schema: Option<String>) -> Response {
    let frame = json!({ "cmd": "ask-operator" });
    let m = match control.messenger("ask-operator") {
        Ok(m) => m,
        Err(r) => return r,
    };
    let (Some(op), Some(op_id)) = (control.current(), control.current_id()) else {
        return control.refuse("ask-operator refused: this agent has no operation running".into(), frame);
    };
    if question.trim().is_empty() {
        return Response::new(exit::REFUSED, "ask-operator: the question must not be empty");
    }
    let schema = match schema.as_deref().map(serde_json::from_str::<Value>) {
        None => json!({ "type": "string" }),
        Some(Ok(s)) => s,
        Some(Err(e)) => return Response::new(exit::REFUSED, format!("ask-operator: --schema is not JSON: {e}")),
    };
    let n = op.asks.fetch_add(1, Ordering::SeqCst) + 1;
    let call = OperatorCall {
        key: format!("{}/{op_id}/ask-{n}", control.key()),
        agent: control.key().to_string(),
        question,
        schema,
        deadline: op.deadline,
        ended: op.ended.clone(),
    };
    match m.ask_operator(call).await {
        Ok(answer) => Response::new(exit::OK, answer.to_string()),
        Err(MessageError::Refused(why)) => control.refuse(why, frame),
        Err(MessageError::Failed(why)) => Response::new(exit::REFUSED, why),
    }
}
