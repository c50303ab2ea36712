//! The calls that start operations: a turn (`a.run`/`a.turn`/`a.ask`), a compaction, a fork, a
//! settings change, each through the one pipeline (`op::execute`), blocking the script's thread
//! until it settles; and the message operations an idle agent is woken for, in the background.

use super::error::KeyTaken;
use super::fingerprint::{turn_hash, turn_parts};
use super::op::execute;
use super::operation::{Body, Op, OpError, Turn};
use super::{lock, Agent, AgentBook};
use crate::run::deadline::Deadline;
use crate::run::scope::Frame;
use crate::run::{Event, Outcome, OutcomeKind, Replay};
use serde_json::Value;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Keeps a turn's outcome for the same-id-same-outcome rule.
pub(super) fn remember(agent: &Agent, op_id: &str, hash: &str, outcome: &Outcome) {
    lock(&agent.ops).insert(op_id.to_string(), (hash.to_string(), outcome.clone()));
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
        return Err(OpError::Invalid(KeyTaken(key).to_string()));
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

/// Starts message operations for `agent` in the background: one for the messages held for it,
/// then more while a question is held (messages sent while an operation runs otherwise wait for
/// the agent's next turn). The caller has counted it with the router (`waking`); it is uncounted
/// when done.
pub fn wake_for_messages(book: Arc<AgentBook>, agent: Arc<Agent>, stage: Option<Arc<str>>) {
    let rt = book.run.rt.clone();
    rt.spawn(async move {
        // Counted busy for the whole round, so that messages arriving meanwhile are held for it.
        agent.enter();
        message_round(&book, &agent, &stage).await;
        agent.leave(&book);
        book.router.woke(&stage);
    });
}

async fn message_round(book: &Arc<AgentBook>, agent: &Arc<Agent>, stage: &Option<Arc<str>>) {
    let (run, router) = (&book.run, &book.router);
    let mut frame = Frame::root(run.root.clone(), run.deadline);
    frame.stage = stage.clone();
    let mut more = router.has_held(&agent.key);
    while more && agent.closed().is_none() && !run.root.is_cancelled() {
        if let Some(limit) = run.scheduler.budget_exhausted() {
            run.budget_exhausted_once(&limit);
            let why = limit.to_string();
            router.fail_asks_to(run, &agent.key, &why, true);
            // No operation can start again: the held messages would wake the agent forever.
            router.drop_held(run, &agent.key, &why);
            return;
        }
        let k = agent.message_ops.fetch_add(1, Ordering::SeqCst) + 1;
        let op = Op {
            op_id: format!("{}#m{k}", agent.key),
            n: k,
            label: None,
            hash: String::new(),
            parts: String::new(),
            own_deadline: None,
            started: Instant::now(),
            // An asker keeps its operation slot while it waits for the reply: a message operation
            // that answers an ask runs on that slot, else with every slot held by askers (always,
            // with --max-concurrency 1) no reply could ever come.
            answers_ask: router.holds_ask(&agent.key),
            meter: Arc::default(),
        };
        match execute(book, agent, op, Body::Message, &frame).await.map(|r| r.outcome) {
            Ok(o) if matches!(o.kind, OutcomeKind::Answered | OutcomeKind::Blocked) => {}
            _ => return,
        }
        // What came while it ran waits for its next turn, unless someone waits for an answer.
        more = router.holds_ask(&agent.key);
    }
}
