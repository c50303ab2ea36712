//! Message operations: an idle agent woken for the messages held for it (in the background,
//! owned by the route's stage, more while a question is held), and what one does inside the
//! pipeline: the agent is shown the messages with its routes, in a turn that asks for no result.

use super::kinds::{Body, Done};
use super::op::{execute, Op};
use super::{Agent, AgentBook};
use crate::control::prompt::AnswerMode;
use crate::control::slot::ResultSlot;
use crate::harness::{Session, TurnEnd, TurnInput, TurnKind};
use crate::run::deadline::Deadline;
use crate::run::scope::Frame;
use crate::run::OutcomeKind;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// One message operation: the agent is shown the messages held for it, with its routes.
pub(super) async fn message(
    session: &mut dyn Session,
    book: &Arc<AgentBook>,
    agent: &Arc<Agent>,
    op: &Op<'_>,
    slot: Arc<ResultSlot>,
    deadline: Option<Deadline>,
) -> Done {
    let run = &book.run;
    let launcher = agent.launcher();
    // A message operation offers a model its `wf_*` tools even in structured mode.
    let mode = match session.answer_mode() {
        AnswerMode::Launcher => AnswerMode::Launcher,
        _ => AnswerMode::Tool,
    };
    let held = book.router.take_held(run, &agent.key);
    if held.is_empty() {
        // A turn that got the agent's session first showed them: nothing is left to pay for, and
        // the record says why no harness was called.
        let why = "nothing to show: a turn of the agent was shown the messages first";
        return Done::of(OutcomeKind::Answered, None, Some(why.into()));
    }
    let routes = book.router.routes_of(&agent.key);
    let shown = format!(
        "You have new messages from other agents. Read them and act: reply where asked, message others if useful.\n\n{}",
        crate::messaging::context_text(mode, &launcher, &routes, &agent.key, &held)
    );
    if let Some(e) = &agent.endpoint {
        e.open_turn(&op.op_id, slot.clone(), deadline, op.meter.clone());
    }
    let input = TurnInput {
        op_id: op.op_id.clone(),
        prompt: shown.clone(),
        shown,
        nudge: 0,
        nudge_text: String::new(),
        max_nudges: 0,
        meter: op.meter.clone(),
        n: op.n,
        slot,
        deadline,
        kind: TurnKind::Message,
        messages: held,
        messenger: Some(agent.messenger()),
    };
    let r = session.turn(input).await;
    let (kind, reason) = match r.end {
        TurnEnd::Ended => (OutcomeKind::Answered, None),
        TurnEnd::Failed(why) => (OutcomeKind::Failed, Some(why)),
        TurnEnd::Blocked(why) => (OutcomeKind::Blocked, Some(why)),
    };
    let (usage, cost_source, simulated) = (r.usage, r.cost_source, r.simulated);
    Done { kind, value: None, reason, usage, cost_source, simulated, forked: None, logprobs: None }
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
