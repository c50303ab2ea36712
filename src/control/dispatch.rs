//! The one control dispatcher: an agent's control state (its open operations, where its events go,
//! how it messages) and the handling of a `Command` against it. The socket server and the HTTP
//! harnesses' `wf_*` tools both call [`dispatch`], so a command gets the same `Response` and leaves
//! the same events (`op-submission`, `op-waiting`, `control-refused`) whichever way it came.

use super::messenger::{MessageError, Messenger};
use super::prompt::AnswerMode;
use super::protocol::{exit, Command, Response};
use super::slot::{ResultSlot, Submission};
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
const DEFAULT_WAIT: Duration = Duration::from_secs(600);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Values behind these locks are replaced whole; a poisoned lock still holds a valid one.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One open operation, as the control plane sees it.
pub struct OpControl {
    pub slot: Arc<ResultSlot>,
    pub answered: Notify,
    /// When its answer was accepted.
    answered_at: std::sync::OnceLock<Instant>,
    waiting: Mutex<Option<(Instant, String)>>,
    usage: Mutex<Usage>,
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
    key: String,
    ops: Mutex<HashMap<String, Arc<OpControl>>>,
    settled: Mutex<HashMap<String, String>>,
    current: Mutex<Option<String>>,
    events: EventSink,
    messenger: Option<Arc<dyn Messenger>>,
    /// How the agent answers: a rejection tells it what to do next in those terms.
    mode: AnswerMode,
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

    fn op(&self, op: &str) -> Result<Arc<OpControl>, Response> {
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

/// Carries out `cmd` for the agent whose control state is `control`: the answer it gets, and the
/// events it leaves. An accepted answer is in the records before this returns.
pub async fn dispatch(control: &Control, cmd: Command) -> Response {
    match cmd {
        Command::Result { op, json } => {
            let o = match control.op(&op) {
                Ok(o) => o,
                Err(r) => return r,
            };
            let sub = o.slot.submit_text_recorded(&json).await;
            let verdict = match &sub {
                Submission::Accepted => "accepted",
                Submission::Rejected(_) => "rejected",
                Submission::Closed(_) => "closed",
            };
            control.event(&Event::OpSubmission {
                agent: &control.key,
                op_id: &op,
                accepted: sub == Submission::Accepted,
                verdict,
                bytes: json.len(),
            });
            if sub == Submission::Accepted {
                let _ = o.answered_at.set(Instant::now());
                o.answered.notify_waiters();
                o.answered.notify_one();
            }
            Response::new(sub.exit_code(), sub.text_for(control.mode))
        }
        Command::Waiting { op, reason, timeout_ms } => {
            let o = match control.op(&op) {
                Ok(o) => o,
                Err(r) => return r,
            };
            let wait = timeout_ms.map(Duration::from_millis).unwrap_or(DEFAULT_WAIT);
            *lock(&o.waiting) = Some((Instant::now() + wait, reason.clone()));
            control.event(&Event::OpWaiting {
                agent: &control.key,
                op_id: &op,
                reason: &reason,
                timeout_ms: wait.as_millis() as u64,
            });
            let text = format!(
                "waiting acknowledged: no check-in for {}s; this does not extend the deadline ({})",
                wait.as_secs(),
                match o.deadline {
                    Some(d) => format!("deadline in {} s", d.remaining().as_secs()),
                    None => "no deadline".into(),
                }
            );
            Response::new(exit::OK, text)
        }
        Command::Usage { input, output, cost_usd } => match control.current() {
            None => {
                control.refuse("usage refused: this agent has no operation running".into(), json!({ "cmd": "usage" }))
            }
            Some(o) => {
                let mut u = lock(&o.usage);
                u.input_tokens += input;
                u.output_tokens += output;
                if let Some(c) = cost_usd {
                    u.cost_usd += c;
                }
                Response::new(exit::OK, "usage recorded")
            }
        },
        Command::Send { to, text } => match control.messenger("send").map(|m| m.send(&to, &text)) {
            Err(r) => r,
            Ok(Ok(n)) => Response::new(exit::OK, format!("sent #{n}")),
            Ok(Err(e)) => control.refuse(e.to_string(), json!({ "cmd": "send", "to": to })),
        },
        Command::Ask { to, text } => {
            let m = match control.messenger("ask") {
                Ok(m) => m,
                Err(r) => return r,
            };
            let deadline = control.current().and_then(|o| o.deadline);
            match m.ask(&to, &text, deadline).await {
                Ok(reply) => Response::new(exit::OK, reply),
                Err(e @ MessageError::Refused(_)) => control.refuse(e.to_string(), json!({ "cmd": "ask", "to": to })),
                Err(MessageError::Failed(why)) => Response::new(exit::REFUSED, format!("ask failed: {why}")),
            }
        }
        Command::Reply { n, text } => match control.messenger("reply").map(|m| m.reply(n, &text)) {
            Err(r) => r,
            Ok(Ok(())) => Response::new(exit::OK, format!("replied to #{n}")),
            Ok(Err(e)) => control.refuse(e.to_string(), json!({ "cmd": "reply", "n": n })),
        },
        Command::AskOperator { question, schema } => super::operator::dispatch(control, question, schema).await,
        Command::Council { name, params, json, background } => {
            super::convene::dispatch(control, name, &params, json, background).await
        }
        Command::CouncilWait { ids } => super::convene::wait(control, ids).await,
        Command::CouncilList => super::convene::list(control),
        Command::CouncilCancel { id } => super::convene::cancel(control, id),
        Command::Inbox { json, all } => match control.messenger("inbox") {
            Err(r) => r,
            Ok(m) => Response::new(exit::OK, inbox_text(&m.inbox(all), json)),
        },
    }
}

/// The inbox as `wf inbox` prints it: one JSON object a line, or each message under its number.
fn inbox_text(held: &[super::messenger::Held], json: bool) -> String {
    if json {
        return held.iter().filter_map(|m| serde_json::to_string(m).ok()).collect::<Vec<_>>().join("\n");
    }
    if held.is_empty() {
        return "no messages".to_string();
    }
    use super::messenger::InboxStatus;
    let shown: Vec<String> = held
        .iter()
        .map(|m| {
            let note = match (m.status, m.asks) {
                (InboxStatus::New | InboxStatus::AwaitsReply, true) => " (asks for a reply: wf reply N)",
                (InboxStatus::Closed, true) => " (a question, closed)",
                (InboxStatus::Read, _) => " (read before)",
                _ => "",
            };
            format!("#{} from {}{note}:\n{}", m.n, m.from, m.text)
        })
        .collect();
    shown.join("\n")
}
