//! Background councils (`wf council --background`, the `wf_council` tool's `background: true`):
//! a child run started as a council from a turn is (the same checks, folder and links), that
//! outlives the calling operation. Its budget is what the parent has left, set aside in the
//! parent's scheduler until it settles; its deadline is the parent run's; it is `queued` in its
//! `run.json` until it has a slot of the machine's background pool (the one `--detach` uses,
//! `host::pool`, unless the run's capabilities say it runs at once), and it is stopped only with the parent run. When it
//! settles, its spend is billed to its agent once (a `turns.jsonl` line of kind `council`) and its
//! output goes to the agent once: to a `wf council --wait` that joined it, else in a message that
//! wakes the agent (`council-settled` says which).

use super::child::{bill, settled, start, unsettled};
use crate::control::convene::Settled;
use crate::control::convene::{Call, Convened};
use crate::control::messenger::MessageError;
use crate::host::launch::{self, Admission, CouncilPool};
use crate::host::{Host, Output};
use crate::run::deadline::Deadline;
use crate::run::scheduler::Spend;
use crate::run::{BoxFuture, Event, RunStatus, StopCause};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// How long the receipt waits for a slot before it says `queued`.
const QUICK: Duration = Duration::from_millis(200);

/// The background councils of one run, by child run id.
#[derive(Default)]
pub struct Councils {
    inner: Mutex<HashMap<String, Entry>>,
    changed: tokio::sync::Notify,
}

struct Entry {
    agent: String,
    strategy: String,
    /// The child run, while it runs: its spend so far, and its stop.
    child: Weak<Host>,
    /// What it spent, once settled (tokens, USD).
    spent: (u64, f64),
    /// Once settled: what its agent gets; and its status.
    output: Option<Settled>,
    status: RunStatus,
    /// A `wf council --wait` joined it: the output goes there, not in a message.
    joined: bool,
    /// The message carrying its output, while a `--wait` may still take it back.
    message: Option<u64>,
    /// Settled while a wait had joined it: `council-settled` is recorded when the wait returns
    /// its output, or gives up and it goes in a message after all.
    unrecorded: bool,
    /// A wait took its message back: if that wait gives up, the message is sent again.
    withdrawn: bool,
}

/// How much of the time left a `--wait` leaves its operation to act on its failure: a quarter,
/// at most this.
const WAIT_MARGIN: Duration = Duration::from_secs(10);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Entries are updated whole under the lock; a poisoned lock still holds valid ones.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Starts a background council for `call`: checked and linked as a council from a turn is, its
/// budget set aside; the receipt says `running` when it had a slot at once, else `queued`.
pub(super) fn launch(
    parent: Arc<Host>,
    councils: Arc<Councils>,
    call: Call,
) -> BoxFuture<'static, Result<Value, MessageError>> {
    let run = parent.run.clone();
    let reserved = run.scheduler.reserve_left(Spend { tokens: call.spent.tokens(), usd: call.spent.cost_usd });
    let (child, program, input, _) = match start(&parent, &call, Some(reserved)) {
        Ok(s) => s,
        Err(e) => {
            run.scheduler.release_reserved(reserved.0, reserved.1);
            return Box::pin(async move { Err(e) });
        }
    };
    let id = child.run.id.clone();
    if let Err(e) = child.run.mark_attempt(RunStatus::Queued) {
        tracing::warn!("cannot mark child run {id} queued: {e}");
    }
    let entry = Entry {
        agent: call.agent.clone(),
        strategy: call.name.clone(),
        child: Arc::downgrade(&child),
        spent: (0, 0.0),
        output: None,
        status: RunStatus::Queued,
        joined: false,
        message: None,
        unrecorded: false,
        withdrawn: false,
    };
    lock(&councils.inner).insert(id.clone(), entry);
    run.background_started();
    let (admitted, receipt) = tokio::sync::oneshot::channel();
    let started_at = crate::record::now_iso();
    let run_id = id.clone();
    run.rt.clone().spawn(async move {
        let child_run = child.run.clone();
        let end = run_child(&parent, child, program, input, (admitted, &councils)).await;
        run.scheduler.release_reserved(reserved.0, reserved.1);
        let (convened, status) = match end {
            Ok(end) => {
                let status = end.status;
                (settled(&parent, &call, &run_id, end), status)
            }
            Err(why) => (unsettled(&child_run, &format!("council {} failed: {why}", call.name)), RunStatus::Failed),
        };
        bill(&run, &call, &convened, &started_at, false);
        councils.settle(&parent, &call, &convened, status);
        run.child_ended(&run_id);
        run.background_ended();
    });
    Box::pin(async move {
        let status = tokio::time::timeout(QUICK, receipt).await.ok().and_then(Result::ok).unwrap_or("queued");
        Ok(json!({ "run_id": id, "status": status, "note": "you will be woken once with its output" }))
    })
}

/// Runs the child: a slot of the machine's pool first (`queued` until then; the parent's stop ends
/// the wait), then the strategy, stopped with the parent run.
async fn run_child(
    parent: &Arc<Host>,
    child: Arc<Host>,
    program: Arc<crate::script::Program>,
    input: Value,
    (admitted, councils): (tokio::sync::oneshot::Sender<&'static str>, &Councils),
) -> Result<crate::host::RunEnd, tokio::task::JoinError> {
    let prun = &parent.run;
    let admission = match parent.caps.councils {
        CouncilPool::Machine => {
            let slots = prun.config.limits.background.unwrap_or(crate::host::pool::DEFAULT_SLOTS);
            tokio::select! {
                slot = crate::host::pool::admit(&child.run.id, slots) => match slot {
                    Ok(slot) => Admission::Pool(slot),
                    Err(why) => {
                        prun.log("warn", &format!("council {}: no slot of the background pool ({why}); it runs without one", child.run.id), &Value::Null);
                        Admission::AtOnce
                    }
                },
                _ = prun.root.cancelled() => {
                    child.run.stop_with(StopCause::Cancelled(prun.stop_reason()));
                    Admission::AtOnce
                }
                // Cancelled while queued (`wf council --cancel`): it starts only to end at once.
                _ = child.run.root.cancelled() => Admission::AtOnce,
            }
        }
        CouncilPool::AtOnce => Admission::AtOnce,
    };
    let _ = admitted.send("running");
    if let Some(e) = lock(&councils.inner).get_mut(&child.run.id) {
        e.status = RunStatus::Running;
    }
    if let Err(e) = child.run.mark_attempt(RunStatus::Running) {
        tracing::warn!("cannot mark child run {} running: {e}", child.run.id);
    }
    // The parent run's deadline, as it stands now that the council starts.
    let deadline = prun.deadline.map(Deadline::remaining);
    let stopper = child.clone();
    let task =
        prun.rt.spawn(async move { launch::run(child, admission, &*program, input, deadline, Output::Strategy).await });
    tokio::pin!(task);
    let end = tokio::select! {
        end = &mut task => end,
        _ = prun.root.cancelled() => {
            stopper.run.stop_with(StopCause::Cancelled(prun.stop_reason()));
            task.await
        }
    };
    end
}

/// Sends a settled council's output to its agent in a message that wakes it, unless the run is
/// stopping: the delivery and the message's number.
fn deliver(parent: &Host, e: &mut Entry) -> (&'static str, Option<u64>) {
    let Some(o) = &e.output else { return ("none", None) };
    if parent.run.root.is_cancelled() {
        return ("none", None);
    }
    let (name, id, said) = (&e.strategy, &o.run_id, &o.output);
    let text = if o.ok {
        format!("Council {name} (run {id}), which you started in the background, finished. Its output:\n{said}")
    } else {
        format!("Council {name} (run {id}), which you started in the background, failed: {said}")
    };
    match parent.router.post(&parent.run, &*parent.agents, &format!("council {name}"), &e.agent, &text) {
        Ok(n) => {
            e.message = Some(n);
            ("message", Some(n))
        }
        Err(_) => ("none", None),
    }
}

fn record(parent: &Host, id: &str, e: &Entry, delivery: &str, message: Option<u64>) {
    parent.run.records.event(&Event::CouncilSettled {
        run_id: id,
        agent: &e.agent,
        strategy: &e.strategy,
        status: e.status,
        delivery,
        message,
    });
}

impl Councils {
    /// A council settled: its output kept for `--wait`, and sent to its agent in a message that
    /// wakes it unless a `--wait` joined it or the run is stopping.
    fn settle(&self, parent: &Host, call: &Call, c: &Convened, status: RunStatus) {
        let output = Settled {
            ok: c.ok,
            output: c.output.clone(),
            run_id: c.run_id.clone(),
            status,
            strategy: call.name.clone(),
        };
        let mut inner = lock(&self.inner);
        let Some(e) = inner.get_mut(&c.run_id) else { return };
        e.output = Some(output);
        e.status = status;
        e.spent = (c.usage.tokens(), c.usage.cost_usd);
        if e.joined {
            e.unrecorded = true;
        } else {
            let (delivery, message) = deliver(parent, e);
            record(parent, &c.run_id, e, delivery, message);
        }
        drop(inner);
        self.changed.notify_waiters();
    }

    /// `wf council --wait`: waits until every council in `ids` (each started by `agent`) settled,
    /// or a little before `deadline` (so that the operation can act on it); their outputs, in
    /// order. The messages that would carry them are taken back, and sent again if it gives up.
    pub(super) async fn join(
        &self,
        parent: Weak<Host>,
        agent: &str,
        ids: Vec<String>,
        deadline: Option<Deadline>,
    ) -> Result<Vec<Settled>, MessageError> {
        let parent = parent.upgrade().ok_or_else(|| MessageError::Refused("the run has ended".into()))?;
        let deadline = deadline.map(|d| {
            let left = d.remaining();
            Deadline::after(left - (left / 4).min(WAIT_MARGIN))
        });
        let taken: Vec<u64> = {
            let mut inner = lock(&self.inner);
            let foreign = ids.iter().find(|id| inner.get(*id).is_none_or(|e| e.agent != agent));
            if let Some(id) = foreign {
                return Err(MessageError::Refused(format!(
                    "{id} is not a background council started by {agent} (wf council --background)"
                )));
            }
            let mut taken = Vec::new();
            for id in &ids {
                if let Some(e) = inner.get_mut(id) {
                    e.joined = true;
                    if let Some(n) = e.message.take() {
                        e.withdrawn = true;
                        taken.push(n);
                    }
                }
            }
            taken
        };
        for n in taken {
            parent.router.withdraw(&parent.run, agent, n, "a wf council --wait took the council's output");
        }
        let mut guard = Unjoin { councils: self, parent: &parent, ids: &ids, done: false };
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let outputs = {
                let mut inner = lock(&self.inner);
                let outputs: Option<Vec<Settled>> =
                    ids.iter().map(|id| inner.get(id).and_then(|e| e.output.clone())).collect();
                if outputs.is_some() {
                    for id in &ids {
                        if let Some(e) = inner.get_mut(id) {
                            if std::mem::take(&mut e.unrecorded) {
                                record(&parent, id, e, "wait", None);
                            }
                            e.withdrawn = false;
                        }
                    }
                }
                outputs
            };
            if let Some(outputs) = outputs {
                guard.done = true;
                return Ok(outputs);
            }
            tokio::select! {
                _ = changed => {}
                _ = Deadline::sleep(deadline) => {
                    return Err(MessageError::Failed(format!(
                        "council --wait: not every council in {} settled before your operation's deadline; those still running will wake you",
                        ids.join(" ")
                    )));
                }
                _ = parent.run.root.cancelled() => return Err(MessageError::Failed(format!(
                    "council --wait: {}; the councils still running are stopped with it",
                    parent.run.stop_reason()
                ))),
            }
        }
    }
}

impl Councils {
    /// `wf council --list`: the background councils `agent` started, oldest first: `run_id`,
    /// `strategy`, `status` (`queued`, `running`, or how it settled), `spent` (`tokens`,
    /// `cost_usd`, so far while it runs).
    pub(super) fn list(&self, agent: &str) -> Vec<Value> {
        let inner = lock(&self.inner);
        let mut mine: Vec<(&String, &Entry)> = inner.iter().filter(|(_, e)| e.agent == agent).collect();
        mine.sort_by(|a, b| a.0.cmp(b.0));
        mine.into_iter()
            .map(|(id, e)| {
                let running = e.child.upgrade().filter(|_| e.output.is_none());
                let (tokens, usd) = running.map_or(e.spent, |c| c.run.scheduler.spent());
                let status = e.status.as_str();
                json!({ "run_id": id, "strategy": e.strategy, "status": status,
                        "spent": { "tokens": tokens, "cost_usd": usd } })
            })
            .collect()
    }

    /// The background councils of `agent` still running: what its turns' prompts say.
    pub(super) fn active(&self, agent: &str) -> Vec<(String, String)> {
        let inner = lock(&self.inner);
        let mut mine: Vec<(String, String)> = inner
            .iter()
            .filter(|(_, e)| e.agent == agent && e.output.is_none())
            .map(|(id, e)| (id.clone(), e.strategy.clone()))
            .collect();
        mine.sort();
        mine
    }

    /// `wf council --cancel ID`: stops a background council `agent` started. It settles
    /// `cancelled`, billed what it spent, and its output (saying so) wakes the agent as any would.
    pub(super) fn cancel(&self, agent: &str, id: &str) -> Result<Value, MessageError> {
        let inner = lock(&self.inner);
        let Some(e) = inner.get(id).filter(|e| e.agent == agent) else {
            return Err(MessageError::Refused(format!(
                "{id} is not a background council started by {agent} (wf council --list shows yours)"
            )));
        };
        if e.output.is_some() {
            return Err(MessageError::Refused(format!("council {id} has already settled ({})", e.status.as_str())));
        }
        if let Some(child) = e.child.upgrade() {
            child.run.stop_with(StopCause::Cancelled(format!("cancelled by agent {agent} (wf council --cancel)")));
        }
        Ok(json!({ "run_id": id, "status": "cancelling",
                   "note": "it stops now; you will be woken once with what it had, status cancelled" }))
    }
}

/// Councils a `--wait` joined and then stopped waiting for (its deadline, its operation's end, the
/// run's stop): those still running wake their agent after all, and those that settled meanwhile
/// (or whose message it took back) go to their agent in a message now, as a normal wake.
struct Unjoin<'a> {
    councils: &'a Councils,
    parent: &'a Host,
    ids: &'a [String],
    done: bool,
}

impl Drop for Unjoin<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut inner = lock(&self.councils.inner);
        for id in self.ids {
            let Some(e) = inner.get_mut(id) else { continue };
            e.joined = false;
            if e.output.is_some() && (e.unrecorded || e.withdrawn) {
                let (delivery, message) = deliver(self.parent, e);
                if std::mem::take(&mut e.unrecorded) {
                    record(self.parent, id, e, delivery, message);
                }
                e.withdrawn = false;
            }
        }
    }
}
