//! Message operations: an idle agent that receives a message is woken for a turn that shows it
//! the messages held for it. The operation belongs to the stage that granted the route (or to the
//! run), which does not end until it settles.

use super::op::Settled;
use super::{Agent, Outcome, OutcomeKind};
use crate::accounting::CostSource;
use crate::control::slot::ResultSlot;
use crate::harness::{TurnEnd, TurnInput, TurnKind};
use crate::record::now_iso;
use crate::run::Run;
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;

/// Starts a message operation for `agent` in the background. The caller has counted it with the
/// router (`waking`); it is uncounted when it ends.
pub fn wake(run: Arc<Run>, agent: Arc<Agent>, stage: Option<Arc<str>>) {
    let rt = run.rt.clone();
    rt.spawn(async move {
        agent.enter();
        message_turns(&run, &agent, &stage).await;
        agent.leave(&run);
        run.router.woke(&stage);
    });
}

async fn message_turns(run: &Arc<Run>, agent: &Arc<Agent>, stage: &Option<Arc<str>>) {
    let mut session = agent.session.lock().await;
    while run.router.has_held(&agent.key) && agent.closed().is_none() && !run.root.is_cancelled() {
        if let Some(why) = run.scheduler.budget_exhausted() {
            run.budget_exhausted_once(&why);
            run.router.fail_asks_to(run, &agent.key, &why, true);
            // No operation can start again: the held messages would wake the agent forever.
            run.router.drop_held(run, &agent.key, &why);
            return;
        }
        // An asker keeps its operation slot while it waits for the reply: a message operation
        // that answers an ask runs on that slot, else with every slot held by askers (always, with
        // --max-concurrency 1) no reply could ever come.
        let _permit = if run.router.holds_ask(&agent.key) { None } else { Some(run.scheduler.acquire().await) };
        let k = agent.next_message_op();
        let op_id = format!("{}#m{k}", agent.key);
        let started = Instant::now();
        let started_at = now_iso();
        let model = agent.model();
        run.records.event(
            "op-started",
            &json!({ "agent": agent.key, "op_id": op_id, "stage": stage.as_deref(), "kind": "message" }),
        );
        let schema = match run.schemas.compile(&json!(true)) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!("the always-true schema did not compile: {e}");
                return;
            }
        };
        let slot = Arc::new(ResultSlot::new(op_id.clone(), schema));
        let launcher = agent.launcher();
        let held = run.router.take_held(run, &agent.key);
        let routes = run.router.routes_of(&agent.key);
        let shown = format!(
            "You have new messages from other agents. Read them and act: reply where asked, message others if useful.\n\n{}",
            crate::messaging::context_text(&launcher, &routes, &agent.key, &held)
        );
        let input = TurnInput {
            op_id: op_id.clone(),
            prompt: shown.clone(),
            shown,
            nudge: 0,
            n: k,
            slot: slot.clone(),
            deadline_unix_ms: run.deadline_unix_ms,
            kind: TurnKind::Message,
            messages: held,
            messenger: Some(agent.messenger()),
        };
        if let Some(e) = &agent.endpoint {
            e.open_op(&op_id, slot.clone(), "the run's deadline".into(), run.deadline);
        }
        let report = tokio::select! {
            biased;
            _ = run.root.cancelled() => None,
            r = session.turn(input) => Some(r),
        };
        if let Some(e) = &agent.endpoint {
            e.settle_op(&op_id, "the message operation ended");
        }
        let (kind, reason, usage, cost_source, simulated) = match report {
            None => (OutcomeKind::Cancelled, Some(run.stop_reason()), Default::default(), CostSource::Simulated, false),
            Some(r) => {
                let (kind, reason) = match r.end {
                    TurnEnd::Ended => (OutcomeKind::Answered, None),
                    TurnEnd::Failed(why) => (OutcomeKind::Failed, Some(why)),
                    TurnEnd::Blocked(why) => (OutcomeKind::Blocked, Some(why)),
                };
                (kind, reason, r.usage, r.cost_source, r.simulated)
            }
        };
        // Message operations are paid for like any other: priced unless the harness says.
        let (usage, cost_source) = super::op::priced(run, &model, usage, cost_source, simulated);
        let outcome = Outcome {
            kind,
            value: None,
            reason,
            op_id: op_id.clone(),
            usage,
            duration_ms: started.elapsed().as_millis() as u64,
            cost_source,
            simulated,
        };
        run.settle(&Settled {
            agent,
            outcome: &outcome,
            stage: stage.as_deref(),
            label: None,
            turn_hash: "",
            model: &model,
            started_at: &started_at,
            rejections: 0,
            kind: "message",
        });
        let why = match kind {
            OutcomeKind::Answered => format!("{} ended its turn without replying", agent.key),
            _ => format!(
                "{}'s message operation {}: {}",
                agent.key,
                kind.as_str(),
                outcome.reason.as_deref().unwrap_or("")
            ),
        };
        run.router.fail_asks_to(run, &agent.key, &why, false);
        if kind == OutcomeKind::Failed {
            agent.close_with(
                run,
                &format!("its message operation {op_id} failed: {}", outcome.reason.as_deref().unwrap_or("")),
            );
            return;
        }
        if kind == OutcomeKind::Cancelled {
            return;
        }
    }
}
