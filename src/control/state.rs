//! An agent's control state, as the dispatcher and the commands it hands on (`convene.rs`,
//! `operator.rs`) read it: its open operations and their deadlines and meters, where its events go,
//! how it answers and messages, and how a refusal is recorded.

use super::messenger::Messenger;
use super::prompt::AnswerMode;
use super::protocol::{exit, Response};
use super::slot::ResultSlot;
use crate::accounting::Usage;
use crate::run::deadline::Deadline;
use crate::run::Event;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Records an event for the run.
pub type EventSink = Arc<dyn Fn(&Event<'_>) + Send + Sync>;

/// How long `waiting` holds nudges off when no `--timeout` is given.
pub(super) const DEFAULT_WAIT: Duration = Duration::from_secs(600);

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Values behind these locks are replaced whole; a poisoned lock still holds a valid one.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One open operation, as the control plane sees it.
pub struct OpControl {
    pub slot: Arc<ResultSlot>,
    pub answered: Notify,
    /// When its answer was accepted.
    pub(super) answered_at: std::sync::OnceLock<Instant>,
    pub(super) waiting: Mutex<Option<(Instant, String)>>,
    pub(super) usage: Mutex<Usage>,
    pub(super) deadline: Option<Deadline>,
    /// Cancelled when the operation settles: what it started (a council) stops with it.
    pub(super) ended: tokio_util::sync::CancellationToken,
    /// The operation's meter: what its councils spent is billed on it.
    pub(super) meter: Arc<crate::accounting::Meter>,
    /// How many times it asked the operator (`wf ask-operator`): the asks' keys count on it.
    pub(super) asks: std::sync::atomic::AtomicU64,
}

impl OpControl {
    /// When the agent's acknowledged wait ends, if it is still running.
    pub fn waiting_until(&self) -> Option<Instant> {
        lock(&self.waiting).as_ref().map(|(at, _)| *at).filter(|at| *at > Instant::now())
    }

    pub fn usage(&self) -> Usage {
        *lock(&self.usage)
    }

    /// When its answer was accepted, once it was.
    pub fn answered_at(&self) -> Option<Instant> {
        self.answered_at.get().copied()
    }
}

/// An agent's control state: what every channel's commands act on.
pub struct Control {
    pub(super) key: String,
    ops: Mutex<HashMap<String, Arc<OpControl>>>,
    settled: Mutex<HashMap<String, String>>,
    current: Mutex<Option<String>>,
    events: EventSink,
    messenger: Option<Arc<dyn Messenger>>,
    /// How the agent answers: a rejection tells it what to do next in those terms.
    pub(super) mode: AnswerMode,
}

impl Control {
    /// The control state of agent `key`; without a messenger, message commands are refused.
    pub fn new(key: &str, events: EventSink, messenger: Option<Arc<dyn Messenger>>) -> Control {
        Control {
            key: key.to_string(),
            ops: Mutex::new(HashMap::new()),
            settled: Mutex::new(HashMap::new()),
            current: Mutex::new(None),
            events,
            messenger,
            mode: AnswerMode::Launcher,
        }
    }

    /// This control state for an agent that answers in `mode` (the launcher's unless told).
    pub fn answering(mut self, mode: AnswerMode) -> Control {
        self.mode = mode;
        self
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    /// Opens a turn's operation with its deadline (which `waiting` answers quote); it stays
    /// reachable until `settle_op`.
    pub fn open_turn(
        &self,
        op_id: &str,
        slot: Arc<ResultSlot>,
        deadline: Option<Deadline>,
        meter: Arc<crate::accounting::Meter>,
    ) -> Arc<OpControl> {
        let op = Arc::new(OpControl {
            slot,
            answered: Notify::new(),
            answered_at: std::sync::OnceLock::new(),
            waiting: Mutex::new(None),
            usage: Mutex::new(Usage::default()),
            deadline,
            ended: tokio_util::sync::CancellationToken::new(),
            meter,
            asks: Default::default(),
        });
        lock(&self.ops).insert(op_id.to_string(), op.clone());
        *lock(&self.current) = Some(op_id.to_string());
        op
    }

    /// Closes an operation; later commands for it are told why.
    pub fn settle_op(&self, op_id: &str, why: &str) {
        if let Some(o) = lock(&self.ops).remove(op_id) {
            o.ended.cancel();
        }
        lock(&self.settled).insert(op_id.to_string(), why.to_string());
        let mut current = lock(&self.current);
        if current.as_deref() == Some(op_id) {
            *current = None;
        }
    }

    /// Records an event for the run.
    pub fn event(&self, event: &Event<'_>) {
        (self.events)(event)
    }

    /// Refuses a command (`frame`, what was asked), recording why as a `control-refused` event.
    pub fn refuse(&self, why: String, frame: Value) -> Response {
        self.refuse_from(why, frame, None)
    }

    /// Refuses a caller; `pid` is the caller's process when it is not one of the agent's.
    pub fn refuse_from(&self, why: String, frame: Value, pid: Option<i32>) -> Response {
        self.event(&Event::ControlRefused { agent: &self.key, why: &why, frame: &frame, pid });
        Response::new(exit::REFUSED, why)
    }

    /// The running operation's id.
    pub(super) fn current_id(&self) -> Option<String> {
        lock(&self.current).clone()
    }

    pub(super) fn current(&self) -> Option<Arc<OpControl>> {
        let current = lock(&self.current).clone()?;
        lock(&self.ops).get(&current).cloned()
    }

    pub(super) fn op(&self, op: &str) -> Result<Arc<OpControl>, Response> {
        if let Some(o) = lock(&self.ops).get(op) {
            return Ok(o.clone());
        }
        if let Some(why) = lock(&self.settled).get(op) {
            return Err(Response::new(
                exit::REFUSED,
                format!("op {op} is already settled ({why}); nothing more is accepted for it"),
            ));
        }
        Err(self.refuse(
            format!("unknown op {op}: agent {} has no such operation (use the op id from your prompt)", self.key),
            json!({ "op": op }),
        ))
    }

    pub(super) fn messenger(&self, cmd: &str) -> Result<&dyn Messenger, Response> {
        match &self.messenger {
            Some(m) => Ok(m.as_ref()),
            None => Err(self.refuse("refused: this turn cannot message other agents".into(), json!({ "cmd": cmd }))),
        }
    }
}
