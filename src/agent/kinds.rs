//! What each kind of operation does inside the pipeline (`op::execute`), and the calls that start
//! them: a turn (`a.run`/`a.turn`/`a.ask`), a decision model's turn (started in `decide.rs`), a
//! compaction, a fork, a settings change. A message operation's are in `message.rs`.

use super::op::{execute, open_slot, remember, turn_hash, turn_parts, Op, OpError};
use super::supervise::{supervise, Nudge, OpPlan, Settle};
use super::{lock, Agent, AgentBook};
use crate::accounting::{CostSource, Usage};
use crate::control::slot::ResultSlot;
use crate::harness::{AgentInfo, Session};
use crate::run::deadline::Deadline;
use crate::run::schema::Schema;
use crate::run::scope::Frame;
use crate::run::{Event, Outcome, OutcomeKind, Replay, Run};
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `a.run(turn)`, parsed.
pub struct Turn {
    pub prompt: String,
    pub schema: Schema,
    pub id: Option<String>,
    pub label: Option<String>,
    pub timeout_ms: Option<u64>,
    pub deadline_ms: Option<i64>,
    pub nudge: Nudge,
}

/// What an operation does inside the pipeline.
pub(super) enum Body<'a> {
    Turn(&'a Turn),
    /// A decision model's turn (`agent/decide.rs`): a turn whose reply's log-probabilities are kept.
    Decision(&'a Turn),
    Message,
    Compact(&'a str),
    Fork(AgentInfo),
    Set {
        model: Option<&'a str>,
        effort: Option<&'a str>,
    },
}

/// How an operation's body ended.
pub(super) struct Done {
    pub kind: OutcomeKind,
    pub value: Option<Value>,
    pub reason: Option<String>,
    pub usage: Usage,
    pub cost_source: CostSource,
    pub simulated: bool,
    /// A fork's new session.
    pub forked: Option<Box<dyn Session>>,
    /// The token log-probabilities of the reply that answered (`ResultSlot::logprobs`).
    pub logprobs: Option<Value>,
}

impl Done {
    fn answered(value: Option<Value>) -> Done {
        Done::of(OutcomeKind::Answered, value, None)
    }

    pub(super) fn of(kind: OutcomeKind, value: Option<Value>, reason: Option<String>) -> Done {
        Done {
            kind,
            value,
            reason,
            usage: Usage::default(),
            cost_source: CostSource::Simulated,
            simulated: false,
            forked: None,
            logprobs: None,
        }
    }
}

impl Body<'_> {
    /// The `kind` field of the operation's records.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Body::Turn(_) => "turn",
            Body::Decision(_) => "decision",
            Body::Message => "message",
            Body::Compact(_) => "compact",
            Body::Fork(_) => "fork",
            Body::Set { .. } => "set",
        }
    }

    /// The slot answers are submitted to: a turn's validates against its schema; a message
    /// operation's takes anything (it asks for no result); the others have none.
    pub fn slot(&self, run: &Run, op: &Op<'_>) -> Option<Arc<ResultSlot>> {
        match self {
            Body::Turn(t) | Body::Decision(t) => Some(Arc::new(ResultSlot::new(op.op_id.clone(), t.schema.clone()))),
            Body::Message => open_slot(run, &op.op_id, &json!(true)),
            _ => None,
        }
    }

    /// A turn's prompt, as the workflow wrote it.
    pub fn prompt(&self) -> Option<&str> {
        match self {
            Body::Turn(t) | Body::Decision(t) => Some(&t.prompt),
            _ => None,
        }
    }

    /// Whether an accepted answer is journalled (what resume replays): turns.
    pub fn journals(&self) -> bool {
        matches!(self, Body::Turn(_))
    }

    /// Whether a failed or timed-out operation closes its agent: a turn's does, a message
    /// operation's too unless the budget stopped it; a compaction, fork or settings change that
    /// failed leaves the agent as it was.
    pub fn closes_on_failure(&self, budget: bool) -> bool {
        match self {
            Body::Turn(_) | Body::Decision(_) => true,
            Body::Message => !budget,
            _ => false,
        }
    }

    /// Whether the operation leaves a `turns.jsonl` line and counts in the accounts: every kind
    /// but a settings change (no harness call, nothing spent; its record is `agent-set`).
    pub fn records_turn(&self) -> bool {
        !matches!(self, Body::Set { .. })
    }

    /// What the operation is called in the reason its agent closed with.
    pub fn noun(&self) -> &'static str {
        match self {
            Body::Message => "message operation",
            _ => "operation",
        }
    }

    /// Whether the asks a failed operation leaves unanswered fail before its agent closes.
    pub fn asks_fail_first(&self) -> bool {
        matches!(self, Body::Message)
    }

    /// Why asks the agent was shown during the operation fail, when it ends without replying.
    pub fn unanswered_asks(&self, agent: &Agent, o: &Outcome) -> Option<String> {
        match self {
            Body::Turn(_) => Some(format!("{} ended its turn without replying", agent.key)),
            Body::Message if o.kind == OutcomeKind::Answered => {
                Some(format!("{} ended its turn without replying", agent.key))
            }
            Body::Message => Some(format!(
                "{}'s message operation {}: {}",
                agent.key,
                o.kind.as_str(),
                o.reason.as_deref().unwrap_or("")
            )),
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

/// The next number of an operation that is not a turn or a message (compaction, fork, set).
fn next_other(agent: &Agent) -> u64 {
    agent.other_ops.fetch_add(1, Ordering::SeqCst) + 1
}

fn other_op<'a>(agent: &Agent, tag: &str) -> Op<'a> {
    let n = next_other(agent);
    Op {
        op_id: format!("{}#{tag}{n}", agent.key),
        n,
        label: None,
        hash: String::new(),
        parts: String::new(),
        own_deadline: None,
        started: Instant::now(),
        answers_ask: false,
        meter: Arc::default(),
    }
}

fn closed(agent: &Agent) -> Result<(), OpError> {
    match agent.closed() {
        Some(why) => Err(OpError::Invalid(format!("agent {} is closed: {why}", agent.key))),
        None => Ok(()),
    }
}

/// Runs one turn of `agent` under `frame`, blocking the calling (script) thread until it settles.
pub fn run(book: &Arc<AgentBook>, agent: &Arc<Agent>, turn: Turn, frame: &Frame) -> Result<Outcome, OpError> {
    let run = &book.run;
    let n = agent.runs.fetch_add(1, Ordering::SeqCst) + 1;
    if let (None, Some(stage)) = (&turn.id, frame.stage.as_deref()) {
        // A later attempt that reuses this stage counts its agents' op ids on past these turns.
        run.count_stage_run(stage, &agent.key);
    }
    let op_id = turn.id.clone().unwrap_or_else(|| format!("{}#{n}", agent.key));
    let hash = turn_hash(&turn);
    let parts = turn_parts(&turn);
    if let Some((h, outcome)) = lock(&agent.ops).get(&op_id) {
        return if *h == hash {
            Ok(outcome.clone())
        } else {
            Err(OpError::Invalid(format!(
                "op id {op_id} was already used with a different turn; give this turn another id"
            )))
        };
    }
    closed(agent)?;
    // A later attempt of the run replays what the journal says was answered: no second turn, no
    // second spend.
    match run.replay(&agent.key, &op_id, &hash, &parts, frame.stage.as_deref()) {
        Replay::Same(recorded) => {
            if let Ok(outcome) = serde_json::from_value::<Outcome>(recorded) {
                run.records.event(&Event::OpReplayed {
                    agent: &agent.key,
                    op_id: &op_id,
                    stage: frame.stage.as_deref(),
                });
                if turn.id.is_some() {
                    remember(agent, &op_id, &hash, &outcome);
                }
                return Ok(outcome);
            }
        }
        Replay::Changed(why) => run.records.event(&Event::OpRerun { agent: &agent.key, op_id: &op_id, why: &why }),
        Replay::None => {}
    }
    let started = Instant::now();
    let own_deadline = Deadline::earliest(
        turn.timeout_ms.map(|ms| Deadline::after(Duration::from_millis(ms))),
        turn.deadline_ms.map(Deadline::at_unix_ms),
    );
    let op = Op {
        op_id: op_id.clone(),
        n,
        label: turn.label.as_deref(),
        hash: hash.clone(),
        parts,
        own_deadline,
        started,
        answers_ask: false,
        meter: Arc::default(),
    };
    let result = run.rt.block_on(execute(book, agent, op, Body::Turn(&turn), frame)).map(|r| r.outcome);
    // A turn that closed its agent (it failed, or the agent was stopped while it ran) leaves
    // what the agent left in its worktree committed on its branch.
    if agent.closed().is_some() {
        book.worktrees.close(run, &agent.key, !agent.stopped.is_cancelled());
    }
    // Only explicit ids can recur within a run (default ids count up), so only they are kept for
    // the same-id-same-outcome rule.
    if let (Ok(outcome), Some(_)) = (&result, &turn.id) {
        remember(agent, &op_id, &hash, outcome);
    }
    result
}

/// Replaces the session's history with a summary (a compaction operation) and returns it.
pub fn compact(book: &Arc<AgentBook>, agent: &Arc<Agent>, prompt: &str, frame: &Frame) -> Result<String, OpError> {
    closed(agent)?;
    let op = other_op(agent, "compact-");
    let outcome = book.run.rt.block_on(execute(book, agent, op, Body::Compact(prompt), frame))?.outcome;
    match (outcome.kind, outcome.value) {
        (OutcomeKind::Answered, Some(Value::String(summary))) => {
            book.run.records.event(&Event::AgentCompacted {
                agent: &agent.key,
                op_id: &outcome.op_id,
                summary_chars: summary.len(),
            });
            Ok(summary)
        }
        (kind, _) => Err(OpError::Invalid(outcome.reason.unwrap_or_else(|| format!("compaction {}", kind.as_str())))),
    }
}

/// Forks `parent` into a new agent `key` on a copy of its session (a fork operation, queued
/// behind the parent's running operations).
pub fn fork(
    book: &Arc<AgentBook>,
    parent: &Arc<Agent>,
    key: String,
    instructions: Option<String>,
    effort: Option<String>,
    frame: &Frame,
) -> Result<Arc<Agent>, OpError> {
    closed(parent)?;
    if !book.key_free(&key) {
        return Err(OpError::Invalid(super::book::KeyTaken(key).to_string()));
    }
    if book.worktrees.path_of(&parent.key).is_some() {
        return Err(OpError::Invalid(format!(
            "cannot fork {}: it works in a git worktree of its own, which a fork would share (not built); open another agent with isolation: \"worktree\" instead",
            parent.key
        )));
    }
    book.run.scheduler.admit_agent()?;
    let mut info = parent.info();
    info.key = key;
    if instructions.is_some() {
        info.instructions = instructions;
    }
    if effort.is_some() {
        info.effort = effort;
    }
    let op = other_op(parent, "fork-");
    let ran = book.run.rt.block_on(execute(book, parent, op, Body::Fork(info.clone()), frame))?;
    let outcome = ran.outcome;
    match ran.forked {
        Some(s) => book.add_fork(parent, info, s).map_err(|e| OpError::Invalid(e.to_string())),
        None => Err(OpError::Invalid(outcome.reason.unwrap_or_else(|| "the fork failed".into()))),
    }
}

/// Changes model or effort for later turns (a settings operation, queued behind running turns).
pub fn set(
    book: &Arc<AgentBook>,
    agent: &Arc<Agent>,
    model: Option<String>,
    effort: Option<String>,
    frame: &Frame,
) -> Result<(), OpError> {
    closed(agent)?;
    let op = other_op(agent, "set-");
    let body = Body::Set { model: model.as_deref(), effort: effort.as_deref() };
    let outcome = book.run.rt.block_on(execute(book, agent, op, body, frame))?.outcome;
    if outcome.kind != OutcomeKind::Answered {
        return Err(OpError::Invalid(outcome.reason.unwrap_or_else(|| "the settings change failed".into())));
    }
    {
        let mut info = lock(&agent.info);
        if let Some(m) = &model {
            info.model = m.clone();
        }
        if effort.is_some() {
            info.effort = effort.clone();
        }
    }
    book.run.records.event(&Event::AgentSet { agent: &agent.key, model: model.as_deref(), effort: effort.as_deref() });
    Ok(())
}
