//! One operation from call to record: the op id and its replay rule, the closed-agent and budget
//! checks, the queue and the scheduler, deadlines and cancellation, then the settled records.

use super::supervise::{supervise, Nudge, OpPlan, Settle};
use super::{lock, Agent, Outcome, OutcomeKind};
use crate::accounting::{CostSource, Usage};
use crate::control::schema::Schema;
use crate::control::slot::ResultSlot;
use crate::record::now_iso;
use crate::run::scope::{DeadlineKind, Frame};
use crate::run::Run;
use serde_json::json;
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

/// Why an operation call did not return an outcome.
#[derive(Debug)]
pub enum OpError {
    /// The call itself is wrong (a reused id, a closed agent): a script error.
    Invalid(String),
    /// The enclosing scope was cancelled or passed its deadline: the script must unwind.
    Terminated(String),
}

/// A stable fingerprint of what a turn asks (prompt, schema, nudge): an op id used again must
/// ask the same; resume matches journal entries by it. xxh3-128: fast, and stable across versions.
fn turn_hash(turn: &Turn) -> String {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(turn.prompt.as_bytes());
    h.update(&[0]);
    h.update(turn.schema.text.as_bytes());
    h.update(&[0]);
    h.update(turn.nudge.text.as_bytes());
    h.update(&turn.nudge.max.to_le_bytes());
    format!("{:032x}", h.digest128())
}

/// Converts a unix-ms deadline to an `Instant` (already passed deadlines become now).
pub fn instant_of(unix_ms: i64) -> Instant {
    let now = crate::record::now_unix_ms();
    Instant::now() + Duration::from_millis((unix_ms - now).max(0) as u64)
}

fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// Runs one turn of `agent` under `frame`, blocking the calling (script) thread until it settles.
pub fn run(run: &Arc<Run>, agent: &Arc<Agent>, turn: Turn, frame: &Frame) -> Result<Outcome, OpError> {
    let n = agent.next_run();
    let op_id = turn.id.clone().unwrap_or_else(|| format!("{}#{n}", agent.key));
    let hash = turn_hash(&turn);
    if let Some((h, outcome)) = lock(&agent.ops).get(&op_id) {
        return if *h == hash {
            Ok(outcome.clone())
        } else {
            Err(OpError::Invalid(format!(
                "op id {op_id} was already used with a different turn; give this turn another id"
            )))
        };
    }
    if let Some(why) = agent.closed() {
        return Err(OpError::Invalid(format!("agent {} is closed: {why}", agent.key)));
    }
    // A later attempt of the run replays what the journal says was answered: no second turn, no
    // second spend.
    if let Some(recorded) = run.replayed_op(&agent.key, &op_id, &hash) {
        if let Ok(outcome) = serde_json::from_value::<Outcome>(recorded.clone()) {
            run.records
                .event("op-replayed", &json!({ "agent": agent.key, "op_id": op_id, "stage": frame.stage.as_deref() }));
            if turn.id.is_some() {
                lock(&agent.ops).insert(op_id, (hash, outcome.clone()));
            }
            return Ok(outcome);
        }
    }
    if frame.cancel.is_cancelled() {
        return Err(OpError::Terminated(run.stop_reason()));
    }
    agent.enter();
    let started = Instant::now();
    let started_at = now_iso();
    let model = agent.model();
    run.records.event(
        "op-started",
        &json!({ "agent": agent.key, "op_id": op_id, "stage": frame.stage.as_deref(), "label": turn.label, "n": n }),
    );
    let slot = Arc::new(ResultSlot::new(op_id.clone(), turn.schema.clone()));
    // An answer from an agent's process is journalled the moment it is accepted, before the agent
    // hears `accepted`: a crash after that never runs the operation again. The fake harness
    // settles at once and is journalled when it settles.
    if agent.harness() != "fake" {
        slot.record_with(accepted_journal(run, &agent.key, &op_id, &hash, started));
    }
    let own_deadline = earliest(
        earliest(turn.timeout_ms.map(|ms| started + Duration::from_millis(ms)), turn.deadline_ms.map(instant_of)),
        earliest(
            agent.request.timeout_ms.map(|ms| started + Duration::from_millis(ms)),
            agent.request.deadline_ms.map(instant_of),
        ),
    );
    let scope_deadline = frame.deadline.as_ref().map(|d| d.at);
    let deadline_unix_ms = earliest(own_deadline, scope_deadline)
        .map(|at| crate::record::now_unix_ms() + at.saturating_duration_since(Instant::now()).as_millis() as i64);
    let launcher = agent.launcher();

    enum End {
        Done(super::supervise::Supervised),
        Budget(String),
        TimedOut,
        ScopeDeadline,
        Cancelled,
    }
    let end = run.rt.block_on(async {
        let work = async {
            let mut session = agent.session.lock().await;
            let _permit = run.scheduler.acquire().await;
            if let Some(why) = run.scheduler.budget_exhausted() {
                return End::Budget(why);
            }
            run.progress.agent_working(true);
            let plan = OpPlan {
                op_id: &op_id,
                agent,
                prompt: &turn.prompt,
                n,
                launcher: &launcher,
                nudge: &turn.nudge,
                slot: slot.clone(),
                deadline_unix_ms,
            };
            let done = supervise(&mut **session, plan, run).await;
            run.progress.agent_working(false);
            End::Done(done)
        };
        tokio::select! {
            biased;
            _ = frame.cancel.cancelled() => End::Cancelled,
            _ = sleep_until(scope_deadline) => End::ScopeDeadline,
            _ = sleep_until(own_deadline) => End::TimedOut,
            end = work => end,
        }
    });

    let mut usage = Usage::default();
    let mut cost_source = CostSource::Simulated;
    // A fake turn spends nothing real, however it ends.
    let mut simulated = agent.harness() == "fake";
    let mut terminated = None;
    let (kind, value, reason) = match end {
        End::Done(s) => {
            usage = s.usage;
            cost_source = s.cost_source;
            simulated |= s.simulated;
            match s.settle {
                Settle::Answered(v) => (OutcomeKind::Answered, Some(v), None),
                Settle::Unanswered(r) => (OutcomeKind::Unanswered, None, Some(r)),
                Settle::Failed(r) => (OutcomeKind::Failed, None, Some(r)),
                Settle::Blocked(r) => (OutcomeKind::Blocked, None, Some(r)),
            }
        }
        End::Budget(why) => {
            run.budget_exhausted_once(&why);
            (OutcomeKind::Failed, None, Some(why))
        }
        End::TimedOut => {
            let why = format!("the operation passed its deadline after {} ms", started.elapsed().as_millis());
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
        End::Cancelled => {
            let why = run.stop_reason();
            terminated = Some(why.clone());
            (OutcomeKind::Cancelled, None, Some(why))
        }
    };
    if kind != OutcomeKind::Answered {
        slot.close(reason.clone().unwrap_or_default());
    }
    if let Some(e) = &agent.endpoint {
        e.settle_op(&op_id, kind.as_str());
    }

    (usage, cost_source) = priced(run, &model, usage, cost_source, simulated);
    let outcome = Outcome {
        kind,
        value,
        reason,
        op_id: op_id.clone(),
        usage,
        duration_ms: started.elapsed().as_millis() as u64,
        cost_source,
        simulated,
    };
    let settled = Settled {
        agent,
        outcome: &outcome,
        stage: frame.stage.as_deref(),
        label: turn.label.as_deref(),
        turn_hash: &hash,
        model: &model,
        started_at: &started_at,
        rejections: slot.rejections(),
        kind: "turn",
    };
    run.settle(&settled);
    if matches!(kind, OutcomeKind::Failed | OutcomeKind::TimedOut) {
        let why = format!("its operation {op_id} {}: {}", kind.as_str(), outcome.reason.as_deref().unwrap_or(""));
        agent.close_with(run, &why);
    }
    // Asks this agent was shown during the operation and left unanswered fail now (after a
    // failure closed the agent, they already failed with its reason).
    run.router.fail_asks_to(run, &agent.key, &format!("{} ended its turn without replying", agent.key), false);
    // Only explicit ids can recur within a run (default ids count up), so only they are kept for
    // the same-id-same-outcome rule.
    if turn.id.is_some() {
        lock(&agent.ops).insert(op_id, (hash, outcome.clone()));
    }
    agent.leave(run);
    match terminated {
        Some(why) => Err(OpError::Terminated(why)),
        None => Ok(outcome),
    }
}

/// Writes an operation's journal line when its answer is accepted (`settled: false`; its usage
/// comes with the line written when it settles, which readers keep as the last).
fn accepted_journal(
    run: &Arc<Run>,
    agent: &str,
    op_id: &str,
    hash: &str,
    started: Instant,
) -> crate::control::slot::OnAccept {
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
        let line = JournalLine { agent: &agent, op_id: &op_id, turn_hash: &hash, settled: false, outcome: &outcome };
        let text = serde_json::to_string(&line).unwrap_or_default();
        match run.upgrade() {
            Some(run) => run.records.durable_line(crate::record::Stream::Journal, &text),
            // The run is gone: nothing can be recorded, and the closed channel says so.
            None => tokio::sync::oneshot::channel().1,
        }
    })
}

/// Prices a turn's tokens unless the harness reported its own cost or nothing was spent (fake).
pub(super) fn priced(
    run: &Run,
    model: &str,
    mut usage: Usage,
    source: CostSource,
    simulated: bool,
) -> (Usage, CostSource) {
    if source == CostSource::Harness || simulated {
        return (usage, source);
    }
    match crate::accounting::price_tokens(run.price(model), &usage) {
        Some(cost) => {
            usage.cost_usd = cost;
            (usage, CostSource::Priced)
        }
        None => (usage, CostSource::Unpriced),
    }
}

/// A settled operation, as the records need it.
pub struct Settled<'a> {
    pub agent: &'a Agent,
    pub outcome: &'a Outcome,
    pub stage: Option<&'a str>,
    pub label: Option<&'a str>,
    pub turn_hash: &'a str,
    pub model: &'a str,
    pub started_at: &'a str,
    pub rejections: u32,
    /// `turn` for a `run`, `message` for a message operation.
    pub kind: &'a str,
}

impl Settled<'_> {
    /// The `turns.jsonl` line.
    pub fn turn_line(&self) -> String {
        let (a, o, u) = (self.agent, self.outcome, &self.outcome.usage);
        let line = TurnLine {
            agent: &a.key,
            op_id: &o.op_id,
            kind: self.kind,
            outcome: o.kind.as_str(),
            reason: o.reason.as_deref(),
            stage: self.stage,
            label: self.label,
            harness: a.harness(),
            model: self.model,
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cache_read_tokens: u.cache_read_tokens,
            cache_write_tokens: u.cache_write_tokens,
            tokens: u.tokens(),
            cost_usd: u.cost_usd,
            cost_source: o.cost_source,
            simulated: o.simulated,
            rejections: self.rejections,
            duration_ms: o.duration_ms,
            delivered_at: self.started_at,
            settled_at: &now_iso(),
            sessions: &[],
        };
        serde_json::to_string(&line).unwrap_or_default()
    }

    /// The `journal.jsonl` line, for answered operations only.
    pub fn journal_line(&self) -> Option<String> {
        (self.outcome.kind == OutcomeKind::Answered).then(|| {
            let line = JournalLine {
                agent: &self.agent.key,
                op_id: &self.outcome.op_id,
                turn_hash: self.turn_hash,
                settled: true,
                outcome: self.outcome,
            };
            serde_json::to_string(&line).unwrap_or_default()
        })
    }
}

/// One `turns.jsonl` line. Serialised straight from borrowed fields: no JSON tree is built.
#[derive(serde::Serialize)]
struct TurnLine<'a> {
    agent: &'a str,
    op_id: &'a str,
    kind: &'a str,
    outcome: &'a str,
    reason: Option<&'a str>,
    stage: Option<&'a str>,
    label: Option<&'a str>,
    harness: &'a str,
    model: &'a str,
    input_tokens: u64,
    output_tokens: u64,
    cache_read_tokens: u64,
    cache_write_tokens: u64,
    tokens: u64,
    cost_usd: f64,
    cost_source: CostSource,
    simulated: bool,
    rejections: u32,
    duration_ms: u64,
    delivered_at: &'a str,
    settled_at: &'a str,
    sessions: &'a [String],
}

/// One `journal.jsonl` line: written when an answer is accepted (`settled: false`) and again when
/// the operation settles; readers keep an op's last line.
#[derive(serde::Serialize)]
struct JournalLine<'a> {
    agent: &'a str,
    op_id: &'a str,
    turn_hash: &'a str,
    settled: bool,
    outcome: &'a Outcome,
}
