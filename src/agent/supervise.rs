//! Supervision of one operation's turns: the first turn, then check-in turns ("nudges") while the
//! agent ends without an answer, up to the limit (rejections count against it); failures and
//! blocks as the harness reports them. The answer instructions are written for the session's
//! answer mode.

use super::AgentBook;
use crate::accounting::{CostSource, Meter, Usage};
use crate::control::prompt::{self, Answering};
use crate::control::slot::{ResultSlot, MAX_REPEATS};
use crate::harness::{Session, TurnEnd, TurnInput};
use serde_json::Value;
use std::sync::Arc;

/// How supervision ended, before deadlines and cancellation are considered.
pub enum Settle {
    Answered(Value),
    Unanswered(String),
    Failed(String),
    Blocked(String),
}

pub struct Supervised {
    pub settle: Settle,
    pub usage: Usage,
    pub cost_source: CostSource,
    pub simulated: bool,
}

pub struct Nudge {
    pub text: String,
    pub max: u32,
}

pub struct OpPlan<'a> {
    pub op_id: &'a str,
    pub agent: &'a std::sync::Arc<crate::agent::Agent>,
    pub prompt: &'a str,
    pub n: u64,
    pub launcher: &'a str,
    pub nudge: &'a Nudge,
    pub slot: Arc<ResultSlot>,
    pub deadline: Option<crate::run::deadline::Deadline>,
    pub meter: Arc<Meter>,
}

/// Drives turns until the slot holds an answer, the harness fails, or the nudges run out.
/// Rejections count against the nudge limit, and an answer rejected twice ends the operation.
/// Cancel safety: dropping the future drops the running turn, which the harness cleans up.
pub async fn supervise(session: &mut dyn Session, plan: OpPlan<'_>, book: &AgentBook) -> Supervised {
    let run = &book.run;
    let schema = plan.slot.schema().clone();
    let mode = session.answer_mode();
    let how = Answering { mode, launcher: plan.launcher, op_id: plan.op_id };
    let mut out = Supervised {
        settle: Settle::Unanswered(String::new()),
        usage: Usage::default(),
        cost_source: CostSource::Simulated,
        simulated: false,
    };
    let mut nudged = 0;
    for k in 0..=plan.nudge.max {
        nudged = k;
        let key = &plan.agent.key;
        let body = if k == 0 {
            prompt::with_answer_instructions(plan.prompt, &how, &schema.value, &schema.text)
        } else {
            run.records.event(&crate::run::Event::OpNudged { agent: key, op_id: plan.op_id, nudge: k });
            prompt::nudge_text(&plan.nudge.text, &how, &schema.value, &schema.text)
        };
        // Routes and held messages are shown with every turn, check-ins included.
        let replies = matches!(mode, prompt::AnswerMode::Reply { .. });
        let held = book.router.take_held_for(run, key, !replies);
        let routes = book.router.routes_of(key);
        if replies {
            say_routes_unusable(run, &book.router, key, &routes);
        }
        let mut context = crate::messaging::context_text(mode, plan.launcher, &routes, key, &held);
        context.push_str(&councils_text(book, &plan.agent.key, &plan.agent.request.councils, mode, plan.launcher));
        if plan.agent.request.operator {
            context.push_str(&crate::control::operator::operator_text(mode, plan.launcher));
        }
        let shown = if context.is_empty() { body } else { format!("{context}{body}") };
        let report = session
            .turn(TurnInput {
                op_id: plan.op_id.to_string(),
                prompt: plan.prompt.to_string(),
                shown,
                nudge: k,
                nudge_text: plan.nudge.text.clone(),
                max_nudges: plan.nudge.max,
                meter: plan.meter.clone(),
                n: plan.n,
                slot: plan.slot.clone(),
                deadline: plan.deadline,
                kind: crate::harness::TurnKind::Turn,
                messages: held,
                messenger: Some(plan.agent.messenger()),
            })
            .await;
        out.usage.add(&report.usage);
        out.cost_source = report.cost_source;
        out.simulated |= report.simulated;
        if let Some(v) = plan.slot.answer() {
            out.settle = Settle::Answered(v);
            return out;
        }
        match report.end {
            // A request that failed after rejections (a conversation grown past the model's
            // context by them) is reported by the rejection that caused it.
            TurnEnd::Failed(why) => {
                out.settle = Settle::Failed(match plan.slot.last_rejection() {
                    Some(last) => format!("the answer was rejected ({last}); then the turn failed: {why}"),
                    None => why,
                });
                return out;
            }
            TurnEnd::Blocked(why) => {
                out.settle = Settle::Blocked(why);
                return out;
            }
            TurnEnd::Ended => {}
        }
        if k + plan.slot.rejections() >= plan.nudge.max || plan.slot.stuck() {
            break;
        }
    }
    let rejected = plan.slot.rejections();
    let last = plan.slot.last_rejection().unwrap_or_default();
    out.settle = Settle::Unanswered(if plan.slot.stuck() {
        format!("no accepted answer: the same answer was rejected {MAX_REPEATS} times (the last rejection: {last})")
    } else if rejected > 0 {
        format!("no accepted answer after {nudged} nudges and {rejected} rejected answers (the last: {last})")
    } else {
        format!("no answer after {} nudges", plan.nudge.max)
    });
    out
}

/// What an agent granted councils is told about convening them; empty without a grant.
fn councils_text(
    book: &super::AgentBook,
    key: &str,
    grant: &crate::control::convene::Grant,
    mode: crate::control::prompt::AnswerMode,
    launcher: &str,
) -> String {
    if *grant == crate::control::convene::Grant::None {
        return String::new();
    }
    let Some(convener) = book.convener() else { return String::new() };
    let catalog = convener.catalog(grant);
    let mut text = crate::control::convene::council_text(mode, launcher, &catalog);
    text.push_str(&crate::control::convene::active_text(&convener.active(key)));
    text
}

/// Logs, once per route, that agent `key` answers in structured mode and so cannot send on the
/// routes it was granted: its prompt does not offer them (a message to it still reaches it).
fn say_routes_unusable(
    run: &crate::run::Run,
    router: &crate::messaging::Router,
    key: &str,
    routes: &[crate::messaging::Route],
) {
    for r in routes {
        let Some(peer) = r.peer_of(key) else { continue };
        if router.first_notice(key, r.id) {
            run.log(
                "warn",
                &format!(
                    "{key} cannot message {peer} ({}): it answers in structured mode (its reply is its answer, with no tools), so the route is not offered to it; messages to it still reach it. Give its runtime answer = \"tools\" for an agent that messages",
                    r.purpose
                ),
                &serde_json::json!({ "agent": key, "route": r.id, "peer": peer }),
            );
        }
    }
}
