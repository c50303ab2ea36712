//! What a message operation does inside the pipeline: the agent is shown the messages held for
//! it with its routes, in a turn that asks for no result. An idle agent is woken for them by
//! `start::wake_for_messages`.

use super::operation::{Done, Op};
use super::{Agent, AgentBook};
use crate::control::prompt::AnswerMode;
use crate::control::slot::ResultSlot;
use crate::harness::{Session, TurnEnd, TurnInput, TurnKind};
use crate::run::deadline::Deadline;
use crate::run::OutcomeKind;
use std::sync::Arc;

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
