//! A decision model's turn (`ctx.decisions.decide`, the `decision` module): one turn of a one-off
//! agent opened on the decision model's runtime, a fresh session for every decision so that no
//! decision sees another's conversation. It goes through the one operation pipeline, so a
//! decision is permitted, budgeted, timed, cancelled and billed like any turn (`turns.jsonl` kind
//! `decision`, `by_agent` under the agent's key); it also returns the log-probabilities of the
//! reply that answered, when the runtime asked for them and the server sent them.

use super::fingerprint::{turn_hash, turn_parts};
use super::op::execute;
use super::operation::{Body, Op, OpError, Turn};
use super::{AgentBook, OpenError, OpenRequest, RuntimeChoice};
use crate::config::RuntimeConfig;
use crate::run::deadline::Deadline;
use crate::run::scope::Frame;
use crate::run::Outcome;
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the decision model's turn gave.
#[derive(Debug)]
pub struct Answered {
    pub outcome: Outcome,
    /// The chat-completions `logprobs.content` of the reply that answered, when there are any.
    pub logprobs: Option<Value>,
    /// The model the turn ran on.
    pub model: String,
}

/// Why the decision model's turn did not settle.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    /// Its agent could not be opened (the runtime, its key, its responder...).
    #[error(transparent)]
    Open(#[from] OpenError),
    /// The turn was refused or cut short by its scope.
    #[error(transparent)]
    Op(#[from] OpError),
}

/// One decision asked of the model.
pub struct Ask<'a> {
    /// The agent's key in the records (`decisions`).
    pub agent: &'a str,
    /// The operation's id (`decisions#<decision key>`).
    pub op_id: String,
    pub label: &'a str,
    /// The runtime as chosen (a name is what workers are told, under `--nats`)...
    pub choice: RuntimeChoice,
    /// ...and as it runs here.
    pub runtime: RuntimeConfig,
    pub turn: Turn,
    /// Whether this is the attempt's first decision: its agent is announced (`agent-opened`)
    /// once, so the live view shows one row for every decision.
    pub first: bool,
}

/// Runs the decision model's turn under `frame`, blocking the calling (script) thread until it
/// settles.
pub fn ask(book: &Arc<AgentBook>, ask: Ask<'_>, frame: &Frame) -> Result<Answered, AskError> {
    let run = &book.run;
    let req = OpenRequest {
        key: ask.agent.to_string(),
        runtime: ask.choice,
        instructions: None,
        cwd: None,
        sandbox: None,
        labels: Value::Null,
        timeout_ms: None,
        deadline_ms: None,
        councils: Default::default(),
        skills: Vec::new(),
        fork_caller: None,
        operator: false,
        isolation: None,
        keep: Default::default(),
        pane: None,
    };
    let agent = book.open_detached(req, ask.runtime)?;
    if ask.first {
        agent.announce(run);
    }
    let op = Op {
        op_id: ask.op_id,
        n: 1,
        label: Some(ask.label),
        hash: turn_hash(&ask.turn),
        parts: turn_parts(&ask.turn),
        own_deadline: ask.turn.timeout_ms.map(|ms| Deadline::after(Duration::from_millis(ms))),
        started: Instant::now(),
        answers_ask: false,
        meter: Arc::default(),
    };
    let ran = run.rt.block_on(execute(book, &agent, op, Body::Decision(&ask.turn), frame))?;
    Ok(Answered { outcome: ran.outcome, logprobs: ran.logprobs, model: agent.model() })
}
