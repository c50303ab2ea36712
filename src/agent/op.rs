//! The one operation pipeline. Every operation on an agent (a turn, a message operation, a
//! compaction, a fork, a settings change: an `OpKind`) goes the same way: its op id, the replay and
//! same-id rules (turns), the closed-agent and cancellation checks, the agent's queue (its session
//! lock), the scheduler (a concurrency permit and the budget), deadlines and cancellation, then the
//! records (`op-started`, `turns.jsonl`, the journal, `op-settled`, the accounts). `kinds.rs` holds
//! what each kind does inside, `start.rs` the calls that start them (the op id and replay rules).

use super::operation::{Body, Done, Op, OpError, Ran};
use super::{Agent, AgentBook};
use crate::accounting::{CostSource, Usage};
use crate::config::HarnessKind;
use crate::record::now_iso;
use crate::run::deadline::Deadline;
use crate::run::scope::{DeadlineKind, Frame};
use crate::run::{Event, Outcome, OutcomeKind, Run, Settled};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How the pipeline ended an operation, before it is recorded.
enum End {
    Done(Done),
    Budget(crate::run::scheduler::LimitReached),
    TimedOut,
    ScopeDeadline,
    Cancelled,
    /// The workflow stopped the agent while the operation ran.
    AgentStopped,
}

/// Runs one operation of `agent` under `frame` to its settled outcome and records it. Returns the
/// outcome and what else the operation left (`Ran`).
pub(super) async fn execute(
    book: &Arc<AgentBook>,
    agent: &Arc<Agent>,
    op: Op<'_>,
    body: Body<'_>,
    frame: &Frame,
) -> Result<Ran, OpError> {
    let run = &book.run;
    if frame.cancel.is_cancelled() {
        return Err(OpError::Terminated(run.stop_reason()));
    }
    let kind = body.kind_name();
    agent.enter();
    let started_at = now_iso();
    let model = agent.model();
    let prompt = body.prompt().map(|p| run.secrets.scrub(cut(p, PROMPT_KEPT)));
    run.records.event(&Event::OpStarted {
        agent: &agent.key,
        op_id: &op.op_id,
        kind,
        stage: frame.stage.as_deref(),
        label: op.label,
        n: op.n,
        prompt: prompt.as_deref(),
    });
    let slot = body.slot(run, &op);
    if let Some(slot) = &slot {
        slot.record_rejections_with(rejection_record(run, &agent.key, &op.op_id));
    }
    // An answer from an agent's process is journalled the moment it is accepted, before the agent
    // hears `accepted`: a crash after that never runs the operation again. The fake harness
    // settles at once and is journalled when it settles.
    if let (Some(slot), true) = (&slot, body.journals() && agent.harness() != HarnessKind::Fake) {
        let place = (frame.stage.as_deref().map(String::from), op.parts.clone());
        slot.record_with(accepted_journal(run, &agent.key, &op.op_id, &op.hash, place, op.started));
    }
    let agent_deadline = Deadline::earliest(
        agent.request.timeout_ms.map(|ms| Deadline::after(Duration::from_millis(ms))),
        agent.request.deadline_ms.map(Deadline::at_unix_ms),
    );
    let own_deadline = Deadline::earliest(op.own_deadline, agent_deadline);
    let scope_deadline = frame.deadline_at();
    let deadline = Deadline::earliest(own_deadline, scope_deadline);
    let meter = op.meter.clone();

    let work = async {
        let mut session = agent.session.lock().await;
        let _permit = if op.answers_ask { None } else { Some(run.scheduler.acquire().await) };
        let admission = match run.scheduler.admit(!op.answers_ask).await {
            Ok(a) => a,
            Err(why) => return (End::Budget(why), None, None),
        };
        run.progress.agent_working(true);
        let done = body.run(&mut **session, book, agent, &op, slot.clone(), deadline).await;
        run.progress.agent_working(false);
        (End::Done(done), Some(admission), session.session_ref())
    };
    let (end, admission, session_ref) = tokio::select! {
        biased;
        _ = frame.cancel.cancelled() => (End::Cancelled, None, None),
        _ = agent.stopped.cancelled() => (End::AgentStopped, None, None),
        _ = Deadline::sleep(scope_deadline) => (End::ScopeDeadline, None, None),
        _ = Deadline::sleep(own_deadline) => (End::TimedOut, None, None),
        end = work => end,
    };

    // The work future is dropped by now: whatever its harness spent is on the meter.
    let mut usage = meter.total();
    let mut cost_source = if usage == Usage::default() { CostSource::Simulated } else { CostSource::Priced };
    // A fake operation spends nothing real, however it ends.
    let mut simulated = agent.harness() == HarnessKind::Fake;
    let mut terminated = None;
    let mut forked = None;
    let mut logprobs = None;
    let mut budget = false;
    let (outcome_kind, value, reason) = match end {
        End::Done(d) => {
            usage = d.usage;
            cost_source = d.cost_source;
            simulated |= d.simulated;
            forked = d.forked;
            logprobs = d.logprobs;
            (d.kind, d.value, d.reason)
        }
        End::Budget(why) => {
            run.budget_exhausted_once(&why);
            budget = true;
            (OutcomeKind::Failed, None, Some(why.to_string()))
        }
        End::TimedOut => {
            let why = format!("the operation passed its deadline after {} ms", op.started.elapsed().as_millis());
            (OutcomeKind::TimedOut, None, Some(why))
        }
        End::ScopeDeadline => {
            let why = match frame.deadline.as_ref().map(|d| &d.kind) {
                Some(DeadlineKind::Parallel(_)) => "parallel deadline exceeded",
                _ => "run deadline exceeded",
            };
            terminated = Some(why.to_string());
            (OutcomeKind::TimedOut, None, Some(why.to_string()))
        }
        End::AgentStopped => {
            let why = agent.closed().unwrap_or_else(|| "the agent was stopped".into());
            (OutcomeKind::Cancelled, None, Some(why))
        }
        End::Cancelled => {
            let why = run.stop_reason();
            terminated = Some(why.clone());
            (OutcomeKind::Cancelled, None, Some(why))
        }
    };
    if let Some(slot) = &slot {
        if outcome_kind != OutcomeKind::Answered {
            slot.close(reason.clone().unwrap_or_default());
        }
    }
    if let (Some(e), Some(_)) = (&agent.endpoint, &slot) {
        e.settle_op(&op.op_id, outcome_kind.as_str());
    }
    (usage, cost_source) = priced(run, &model, usage, cost_source, simulated);
    // Councils the operation convened were priced in their own runs; one that settles after
    // this is billed on a line of its own.
    let (convened, councils) = meter.close_convened();
    usage.add(&convened);
    let outcome = Outcome {
        kind: outcome_kind,
        value,
        reason,
        op_id: op.op_id.clone(),
        usage,
        duration_ms: op.started.elapsed().as_millis() as u64,
        cost_source,
        simulated,
    };
    let settled = Settled {
        attempt: run.attempt,
        agent: &agent.key,
        harness: agent.harness().as_str(),
        outcome: &outcome,
        stage: frame.stage.as_deref(),
        label: op.label,
        turn_hash: &op.hash,
        turn_parts: &op.parts,
        model: &model,
        started_at: &started_at,
        rejections: slot.as_ref().map(|s| s.rejections()).unwrap_or(0),
        kind,
        session: session_ref.as_ref(),
        councils: Some(&councils),
    };
    if body.records_turn() {
        run.settle(&settled, admission);
    }
    let closes = body.closes_on_failure(budget) && matches!(outcome_kind, OutcomeKind::Failed | OutcomeKind::TimedOut);
    let why_closed = || {
        format!(
            "its {} {} {}: {}",
            body.noun(),
            op.op_id,
            outcome_kind.as_str(),
            outcome.reason.as_deref().unwrap_or("")
        )
    };
    let close = || agent.close_with(book, &why_closed());
    // Asks this agent was shown during the operation and left unanswered fail now. A failed turn
    // closes the agent first (its asks fail with that reason); a message operation's asks fail with
    // what became of the operation, but the agent is closed before any asker learns of it (an asker
    // told first could reach it again while it still looked open).
    let asks = body.unanswered_asks(agent, &outcome);
    match (closes, body.asks_fail_first()) {
        (true, false) => close(),
        (true, true) => agent.mark_closed(book, &why_closed()),
        (false, _) => {}
    }
    if let Some(why) = asks {
        book.router.fail_asks_to(run, &agent.key, &why, false);
    }
    if closes && body.asks_fail_first() {
        // What asks are left fail with the reason it closed.
        close();
    }
    agent.leave(book);
    match terminated {
        Some(why) => Err(OpError::Terminated(why)),
        None => Ok(Ran { outcome, forked, logprobs }),
    }
}

/// Writes an operation's journal line when its answer is accepted (`settled: false`; its usage
/// comes with the line written when it settles, which readers keep as the last).
fn accepted_journal(
    run: &Arc<Run>,
    agent: &str,
    op_id: &str,
    hash: &str,
    (stage, parts): (Option<String>, String),
    started: Instant,
) -> crate::control::slot::OnAccept {
    let attempt = run.attempt;
    let (run, agent, op_id, hash) = (Arc::downgrade(run), agent.to_string(), op_id.to_string(), hash.to_string());
    Box::new(move |value| {
        let outcome = Outcome {
            kind: OutcomeKind::Answered,
            value: Some(value.clone()),
            reason: None,
            op_id: op_id.clone(),
            usage: Usage::default(),
            duration_ms: started.elapsed().as_millis() as u64,
            cost_source: CostSource::Unpriced,
            simulated: false,
        };
        let line = crate::run::outcome::JournalLine {
            attempt,
            agent: &agent,
            op_id: &op_id,
            turn_hash: &hash,
            turn_parts: &parts,
            stage: stage.as_deref(),
            settled: false,
            outcome: &outcome,
        };
        let text = serde_json::to_string(&line).unwrap_or_default();
        match run.upgrade() {
            Some(run) => run.records.durable_line(crate::record::Stream::Journal, &text),
            // The run is gone: nothing can be recorded, and the closed channel says so.
            None => tokio::sync::oneshot::channel().1,
        }
    })
}

/// How much of a turn's prompt `op-started` keeps, and of a rejected answer `op-rejected`.
const PROMPT_KEPT: usize = 64 * 1024;
const ANSWER_KEPT: usize = 4 * 1024;

/// The first `max` bytes of `text`, cut at a character boundary.
fn cut(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Writes an `op-rejected` event for each rejected submission: its errors and what was submitted,
/// scrubbed of the run's secrets.
fn rejection_record(run: &Arc<Run>, agent: &str, op_id: &str) -> crate::control::slot::OnReject {
    let (run, agent, op_id) = (Arc::downgrade(run), agent.to_string(), op_id.to_string());
    Box::new(move |answer, errors| {
        let Some(run) = run.upgrade() else { return };
        let errors: Vec<String> = errors.iter().map(|e| run.secrets.scrub(&e.to_string())).collect();
        let kept = run.secrets.scrub(cut(answer, ANSWER_KEPT));
        run.records.event(&Event::OpRejected {
            agent: &agent,
            op_id: &op_id,
            errors: &errors,
            answer: &kept,
            bytes: answer.len(),
        });
    })
}

/// Prices an operation's tokens unless the harness reported its own cost or nothing was spent.
fn priced(run: &Run, model: &str, mut usage: Usage, source: CostSource, simulated: bool) -> (Usage, CostSource) {
    if source.reported() || simulated {
        return (usage, source);
    }
    match crate::accounting::price_tokens(run.price(model), &usage) {
        Some(cost) => {
            usage.cost_usd = cost;
            let source = if source == CostSource::SessionPriced { source } else { CostSource::Priced };
            (usage, source)
        }
        None => (usage, CostSource::Unpriced),
    }
}
