//! Messages between agents: routes granted by the workflow, messages held for working agents and
//! shown with their next turn or check-in, idle agents woken in a message operation (and an agent
//! that goes idle with a question still unseen, since its asker waits), asks waiting for replies,
//! and stages that end only when their routes carry nothing more; what a stage's end leaves held
//! is recorded undelivered.

mod prompt;

pub use prompt::context_text;

use crate::control::messenger::{Held, InboxStatus};
use crate::run::{Event, Run};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{oneshot, Notify};

/// The messages a route carries when the workflow names no `max_messages`.
pub const DEFAULT_MAX_MESSAGES: u32 = 20;

/// How the router sees an agent: the agent layer implements this, so that messaging never names it.
pub trait Directory: Send + Sync {
    /// Whether agent `key` can take messages, and whether it is working.
    fn presence(&self, key: &str) -> Presence;
    /// Wakes the idle agent `key` in a message operation owned by `stage`, already counted with
    /// [`Router::waking`]; the operation calls [`Router::woke`] when it ends.
    fn wake(&self, key: &str, stage: Option<Arc<str>>);
}

/// An agent as a sender sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    /// Never opened, stopped or closed: a message to it is refused.
    Gone,
    Idle,
    /// Running or queued operations: a message is held for its next turn.
    Busy,
}

/// A permission for agents to message each other.
#[derive(Debug, Clone)]
pub struct Route {
    pub id: u64,
    /// The ends: messages go from `a` to `b`, and back too when `both` is set.
    pub a: String,
    pub b: String,
    pub both: bool,
    pub purpose: String,
    pub max: Option<u32>,
    pub sent: u32,
    pub stage: Option<Arc<str>>,
    pub open: bool,
}

impl Route {
    fn carries(&self, from: &str, to: &str) -> bool {
        self.open && ((self.a == from && self.b == to) || (self.both && self.b == from && self.a == to))
    }

    /// The other end for `me`, if `me` may send on this route.
    pub fn peer_of(&self, me: &str) -> Option<&str> {
        if !self.open {
            return None;
        }
        if self.a == me {
            Some(&self.b)
        } else if self.both && self.b == me {
            Some(&self.a)
        } else {
            None
        }
    }

    pub fn remaining(&self) -> Option<u32> {
        self.max.map(|m| m.saturating_sub(self.sent))
    }
}

struct Message {
    n: u64,
    route: u64,
    from: String,
    to: String,
    text: String,
    asks: bool,
    stage: Option<Arc<str>>,
    /// Posted by the engine (a background council's output): it wakes its agent once idle.
    wakes: bool,
}

struct Owed {
    asker: String,
    to: String,
    stage: Option<Arc<str>>,
    reply: oneshot::Sender<Result<String, Unanswered>>,
    /// Set once the asked agent has been shown the question.
    shown: bool,
}

#[derive(Default)]
struct Inner {
    routes: Vec<Route>,
    next_n: u64,
    held: HashMap<String, Vec<Message>>,
    /// What each agent was delivered, for `wf inbox` (questions it still owes, `--all`).
    delivered: HashMap<String, Vec<Held>>,
    owed: HashMap<u64, Owed>,
    /// Message operations in flight, by owning stage (`None`: the run).
    waking: HashMap<Option<Arc<str>>, usize>,
    /// (agent, route) pairs already logged as a route the agent cannot send on (`first_notice`).
    noticed: Vec<(String, u64)>,
}

/// Why the router refused a message or a reply, before anything was sent; its text is the reason
/// alone (the agent sees it as `refused: ` and the reason, through `MessageError::Refused`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteRefusal {
    #[error("no route from {from} to {to} (your routes go to: {have})")]
    NoRoute { from: String, to: String, have: String },
    #[error("the route from {from} to {to} allows {max} message{} and all were sent", if *max == 1 { "" } else { "s" })]
    Spent { from: String, to: String, max: u32 },
    #[error("{0} is not open (stopped or closed)")]
    NotOpen(String),
    #[error("message {0} did not ask you")]
    NotAsked(u64),
    #[error("message {0} is not waiting for a reply")]
    NotWaiting(u64),
    #[error("nobody waits for a reply to message {n} any more ({asker} stopped waiting: its operation ended or passed its deadline)")]
    NobodyWaits { n: u64, asker: String },
}

/// Why an agent that asked got no reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unanswered {
    /// The asked agent's turn ended without replying, or it stopped or failed: the engine's words.
    #[error("{0}")]
    Failed(String),
    #[error("stage {stage} ended before {to} replied to message {n}")]
    StageEnded { stage: String, to: String, n: u64 },
    #[error("the run ended before {to} replied to message {n}")]
    RunEnded { to: String, n: u64 },
    #[error("{to} never replied to message {n}")]
    Dropped { to: String, n: u64 },
    #[error("no reply from {to} to message {n} before your operation's deadline")]
    Deadline { to: String, n: u64 },
    #[error("the run was stopped")]
    Stopped,
}

impl From<RouteRefusal> for crate::control::messenger::MessageError {
    fn from(r: RouteRefusal) -> Self {
        crate::control::messenger::MessageError::Refused(r.to_string())
    }
}

/// The run's message router.
#[derive(Default)]
pub struct Router {
    inner: Mutex<Inner>,
    quiet: Notify,
}

/// Records a held message that will never be shown, with why.
fn undelivered(run: &Run, m: &Message, why: &str) {
    run.records.event(&Event::MessageUndelivered {
        n: m.n,
        from: &m.from,
        to: &m.to,
        bytes: m.text.len(),
        reason: Some(why),
    });
}

fn lock(m: &Mutex<Inner>) -> std::sync::MutexGuard<'_, Inner> {
    // Every update below is completed before the lock is released; a poisoned lock is consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Holds `m` for its addressee, and wakes the addressee when it is idle (counting a message
/// operation of `m`'s stage), after releasing `inner`.
fn hold(mut inner: std::sync::MutexGuard<'_, Inner>, agents: &dyn Directory, presence: Presence, m: Message) {
    let (to, stage) = (m.to.clone(), m.stage.clone());
    inner.held.entry(to.clone()).or_default().push(m);
    let idle = presence == Presence::Idle;
    if idle {
        *inner.waking.entry(stage.clone()).or_default() += 1;
    }
    drop(inner);
    if idle {
        agents.wake(&to, stage);
    }
}

impl Router {
    /// Grants a route; `stage` is the stage it was granted in (it closes with it).
    pub fn allow(&self, run: &Run, mut route: Route) -> u64 {
        let mut inner = lock(&self.inner);
        route.id = inner.routes.len() as u64 + 1;
        let id = route.id;
        run.records.event(&Event::RouteGranted {
            route: id,
            from: &route.a,
            to: &route.b,
            both: route.both,
            purpose: &route.purpose,
            max_messages: route.max,
            stage: route.stage.as_deref(),
        });
        inner.routes.push(route);
        id
    }

    /// The routes `key` may send on, for its prompt.
    /// True the first time it is asked for `key` and `route`: whatever is said about the pair is
    /// said once.
    pub fn first_notice(&self, key: &str, route: u64) -> bool {
        let mut inner = lock(&self.inner);
        let pair = (key.to_string(), route);
        if inner.noticed.contains(&pair) {
            return false;
        }
        inner.noticed.push(pair);
        true
    }

    pub fn routes_of(&self, key: &str) -> Vec<Route> {
        lock(&self.inner).routes.iter().filter(|r| r.peer_of(key).is_some()).cloned().collect()
    }

    /// Takes the messages held for `key`, marking them delivered.
    pub fn take_held(&self, run: &Run, key: &str) -> Vec<Held> {
        self.take_held_for(run, key, true)
    }

    /// As [`Router::take_held`]; with `can_reply` false (a turn whose reply is its answer, which
    /// cannot send one) a question stays held, unseen, so that `key` is woken for it in a message
    /// operation (which has the tools to reply) once it goes idle.
    pub fn take_held_for(&self, run: &Run, key: &str, can_reply: bool) -> Vec<Held> {
        let mut inner = lock(&self.inner);
        let mut msgs = inner.held.remove(key).unwrap_or_default();
        if !can_reply {
            let (asks, rest): (Vec<Message>, Vec<Message>) = msgs.into_iter().partition(|m| m.asks);
            if !asks.is_empty() {
                inner.held.insert(key.to_string(), asks);
            }
            msgs = rest;
        }
        for m in &msgs {
            if let Some(o) = inner.owed.get_mut(&m.n) {
                o.shown = true;
            }
            run.records.event(&Event::MessageDelivered {
                n: m.n,
                route: m.route,
                from: &m.from,
                to: &m.to,
                bytes: m.text.len(),
            });
        }
        let taken: Vec<Held> = msgs
            .into_iter()
            .map(|m| Held { n: m.n, from: m.from, text: m.text, asks: m.asks, status: InboxStatus::New })
            .collect();
        // Only an agent that was delivered something gets an entry: a run of 10,000 agents that
        // message nobody keeps no 10,000 empty lists.
        if !taken.is_empty() {
            inner.delivered.entry(key.to_string()).or_default().extend(taken.iter().cloned());
        }
        taken
    }

    /// `key`'s inbox: the messages held for it (now delivered), then the questions it was shown
    /// before that still await its reply; with `all`, every message it was ever delivered.
    pub fn inbox(&self, run: &Run, key: &str, all: bool) -> Vec<Held> {
        let new = self.take_held(run, key);
        let inner = lock(&self.inner);
        let fresh: std::collections::HashSet<u64> = new.iter().map(|m| m.n).collect();
        let earlier = inner.delivered.get(key).into_iter().flatten().filter(|m| !fresh.contains(&m.n));
        let status = |m: &Held| match (m.asks, inner.owed.contains_key(&m.n)) {
            (true, true) => InboxStatus::AwaitsReply,
            (true, false) => InboxStatus::Closed,
            (false, _) => InboxStatus::Read,
        };
        let mut out: Vec<Held> = earlier
            .filter(|m| all || status(m) == InboxStatus::AwaitsReply)
            .map(|m| Held { status: status(m), ..m.clone() })
            .collect();
        out.extend(new);
        out
    }

    /// Drops the messages held for `key`, which it can never be shown (`why`), recording each as
    /// undelivered. Left held, they would wake it again as soon as its operation ended.
    pub fn drop_held(&self, run: &Run, key: &str, why: &str) {
        let msgs = lock(&self.inner).held.remove(key).unwrap_or_default();
        for m in msgs {
            undelivered(run, &m, why);
        }
    }

    pub fn has_held(&self, key: &str) -> bool {
        lock(&self.inner).held.get(key).is_some_and(|v| !v.is_empty())
    }

    /// Whether a message held for `key` asks for a reply.
    pub fn holds_ask(&self, key: &str) -> bool {
        lock(&self.inner).held.get(key).is_some_and(|v| v.iter().any(|m| m.asks))
    }

    /// The stage owning the oldest question (or posted message) held for `key`, when one is held:
    /// an agent that goes idle is woken for it, since its asker waits (or the engine said it
    /// wakes). Other messages wait for its next turn.
    pub fn held_ask_stage(&self, key: &str) -> Option<Option<Arc<str>>> {
        lock(&self.inner).held.get(key).and_then(|v| v.iter().find(|m| m.asks || m.wakes)).map(|m| m.stage.clone())
    }

    /// Holds `text` for `to` from `from` over no route: the engine's own message (a background
    /// council's output). It wakes `to` once: now when it is idle, else when it goes idle, unless
    /// a turn or check-in shows it first. The message number, or why it cannot be delivered.
    pub fn post(
        &self,
        run: &Run,
        agents: &dyn Directory,
        from: &str,
        to: &str,
        text: &str,
    ) -> Result<u64, RouteRefusal> {
        let presence = agents.presence(to);
        if presence == Presence::Gone {
            return Err(RouteRefusal::NotOpen(to.to_string()));
        }
        let mut inner = lock(&self.inner);
        inner.next_n += 1;
        let n = inner.next_n;
        run.records.event(&Event::MessageSent { n, route: 0, from, to, bytes: text.len(), asks: false });
        let m = Message {
            n,
            route: 0,
            from: from.into(),
            to: to.into(),
            text: text.into(),
            asks: false,
            stage: None,
            wakes: true,
        };
        hold(inner, agents, presence, m);
        Ok(n)
    }

    /// Takes back message `n` held for `to` if it was not shown yet, recording why; whether it was.
    pub fn withdraw(&self, run: &Run, to: &str, n: u64, why: &str) -> bool {
        let mut inner = lock(&self.inner);
        let Some(msgs) = inner.held.get_mut(to) else { return false };
        let Some(i) = msgs.iter().position(|m| m.n == n) else { return false };
        let m = msgs.remove(i);
        drop(inner);
        undelivered(run, &m, why);
        true
    }

    /// Sends `text` from `from` to `to` over a granted route, holding it for `to` and waking it when
    /// it is idle; with `ask`, the reply is sent there. The message number, or why it was refused.
    pub fn send(
        &self,
        run: &Run,
        agents: &dyn Directory,
        from: &str,
        to: &str,
        text: &str,
        ask: Option<oneshot::Sender<Result<String, Unanswered>>>,
    ) -> Result<u64, RouteRefusal> {
        let presence = agents.presence(to);
        let mut inner = lock(&self.inner);
        let Some(route) = inner.routes.iter_mut().find(|r| r.carries(from, to)) else {
            let mine: Vec<String> = inner.routes.iter().filter_map(|r| r.peer_of(from).map(String::from)).collect();
            let have = if mine.is_empty() { "none".to_string() } else { mine.join(", ") };
            return Err(RouteRefusal::NoRoute { from: from.into(), to: to.into(), have });
        };
        if route.remaining() == Some(0) {
            return Err(RouteRefusal::Spent { from: from.into(), to: to.into(), max: route.max.unwrap_or(0) });
        }
        if presence == Presence::Gone {
            return Err(RouteRefusal::NotOpen(to.into()));
        }
        route.sent += 1;
        let (route_id, stage) = (route.id, route.stage.clone());
        inner.next_n += 1;
        let n = inner.next_n;
        run.records.event(&Event::MessageSent { n, route: route_id, from, to, bytes: text.len(), asks: ask.is_some() });
        let asks = ask.is_some();
        if let Some(reply) = ask {
            inner.owed.insert(n, Owed { asker: from.into(), to: to.into(), stage: stage.clone(), reply, shown: false });
        }
        run.progress.messages_sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let m = Message {
            n,
            route: route_id,
            from: from.into(),
            to: to.into(),
            text: text.into(),
            asks,
            stage,
            wakes: false,
        };
        hold(inner, agents, presence, m);
        Ok(n)
    }

    /// A message operation owned by `stage` ended.
    pub fn woke(&self, stage: &Option<Arc<str>>) {
        let mut inner = lock(&self.inner);
        if let Some(c) = inner.waking.get_mut(stage) {
            *c = c.saturating_sub(1);
        }
        drop(inner);
        self.quiet.notify_waiters();
    }

    /// Counts a message operation started for held messages (not by a send).
    pub fn waking(&self, stage: &Option<Arc<str>>) {
        *lock(&self.inner).waking.entry(stage.clone()).or_default() += 1;
    }

    /// Answers message `n`, which must have asked `from`.
    pub fn reply(&self, run: &Run, from: &str, n: u64, text: &str) -> Result<(), RouteRefusal> {
        let mut inner = lock(&self.inner);
        match inner.owed.get(&n) {
            Some(o) if o.to == from => {}
            Some(_) => return Err(RouteRefusal::NotAsked(n)),
            None => return Err(RouteRefusal::NotWaiting(n)),
        }
        let Some(owed) = inner.owed.remove(&n) else {
            return Err(RouteRefusal::NotWaiting(n));
        };
        let delivered = owed.reply.send(Ok(text.to_string())).is_ok();
        drop(inner);
        self.quiet.notify_waiters();
        if !delivered {
            return Err(RouteRefusal::NobodyWaits { n, asker: owed.asker });
        }
        run.records.event(&Event::MessageReplied { n, from, to: &owed.asker, bytes: text.len() });
        Ok(())
    }

    /// Fails every ask `key` was shown and has not answered (its turn ended), or all asks to it
    /// when `all` (it stopped or failed).
    pub fn fail_asks_to(&self, run: &Run, key: &str, why: &str, all: bool) {
        let mut inner = lock(&self.inner);
        let ns: Vec<u64> =
            inner.owed.iter().filter(|(_, o)| o.to == key && (all || o.shown)).map(|(n, _)| *n).collect();
        for n in ns {
            if let Some(o) = inner.owed.remove(&n) {
                run.records.event(&Event::MessageAskFailed { n, to: key, asker: &o.asker, why });
                let _ = o.reply.send(Err(Unanswered::Failed(why.to_string())));
            }
        }
        drop(inner);
        self.quiet.notify_waiters();
    }

    /// Whether the routes of `stage` still carry something: a message operation running or an
    /// answer owed.
    fn busy(&self, stage: &Option<Arc<str>>) -> bool {
        let inner = lock(&self.inner);
        inner.waking.get(stage).copied().unwrap_or(0) > 0 || inner.owed.values().any(|o| &o.stage == stage)
    }

    /// Waits until `stage`'s routes carry nothing more. Cancel safety: dropping it waits no more.
    pub async fn settle(&self, stage: &Option<Arc<str>>) {
        loop {
            let notified = self.quiet.notified();
            if !self.busy(stage) {
                return;
            }
            notified.await;
        }
    }

    /// Closes the routes granted in `stage`. What they still hold belongs to the stage and ends
    /// with it: a message held for an agent that had no turn or check-in since is recorded
    /// undelivered, and an answer still owed (the stage was cut short) fails.
    pub fn close_stage(&self, run: &Run, stage: &str) {
        let mut inner = lock(&self.inner);
        for r in inner.routes.iter_mut().filter(|r| r.open && r.stage.as_deref() == Some(stage)) {
            r.open = false;
            run.records.event(&Event::RouteClosed { route: r.id, stage: Some(stage) });
        }
        let of_stage = |s: &Option<Arc<str>>| s.as_deref() == Some(stage);
        for msgs in inner.held.values_mut() {
            for m in msgs.iter().filter(|m| of_stage(&m.stage)) {
                undelivered(run, m, &format!("stage {stage} ended before {} had another turn", m.to));
            }
            msgs.retain(|m| !of_stage(&m.stage));
        }
        inner.held.retain(|_, msgs| !msgs.is_empty());
        let owed: Vec<u64> = inner.owed.iter().filter(|(_, o)| of_stage(&o.stage)).map(|(n, _)| *n).collect();
        for n in owed {
            if let Some(o) = inner.owed.remove(&n) {
                let why = Unanswered::StageEnded { stage: stage.to_string(), to: o.to.clone(), n };
                run.records.event(&Event::MessageAskFailed { n, to: &o.to, asker: &o.asker, why: &why.to_string() });
                let _ = o.reply.send(Err(why));
            }
        }
        drop(inner);
        self.quiet.notify_waiters();
    }

    /// At the run's end: records what was never delivered and fails the asks still owed.
    pub fn finish(&self, run: &Run) {
        let mut inner = lock(&self.inner);
        // Routes granted outside any stage close with the run.
        for r in inner.routes.iter_mut().filter(|r| r.open) {
            r.open = false;
            run.records.event(&Event::RouteClosed { route: r.id, stage: r.stage.as_deref() });
        }
        for (_, msgs) in inner.held.drain() {
            for m in msgs {
                undelivered(run, &m, &format!("the run ended before {} had another turn", m.to));
            }
        }
        for (n, o) in inner.owed.drain() {
            let why = Unanswered::RunEnded { to: o.to.clone(), n };
            run.records.event(&Event::MessageAskFailed { n, to: &o.to, asker: &o.asker, why: &why.to_string() });
            let _ = o.reply.send(Err(why));
        }
    }
}
