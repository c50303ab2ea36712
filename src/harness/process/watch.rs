//! The watch over a turn's process: a state machine from its start to the moment nothing more is
//! waited for. It moves on what happens (a line of stdout, the exit) and on its clocks (the stall
//! clock, an answer's or a final event's grace, the bound on waiting for an exit or for the rest
//! of the output), and writes each step to the op log. An accepted answer is looked for at every
//! wake and at least every `ANSWER_GRACE`, not waited for: its grace is counted from when it was
//! accepted, so it ends on time, and a turn that exits soon after answering (the common case) is
//! woken once, by its exit, not also by its answer.

use super::{LineHandler, ANSWER_GRACE, DRAIN};
use crate::control::server::{Endpoint, OpControl};
use crate::harness::spawn::{Child, Group};
use crate::record::agent_files::OpLog;
use serde_json::json;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedReceiver;

/// Where the process is in its life.
#[derive(Debug, Clone, Copy)]
enum State {
    /// Running: the stall clock runs until an answer comes; once an answer or the final event
    /// came, `release` is when its group is killed.
    Running { release: Option<Release> },
    /// Its group was killed at `at` (released or stalled): waiting for it to exit, `DRAIN` at most.
    Killed { at: Instant },
    /// It exited at `at`: its lines are read until stdout closes, `DRAIN` at most.
    Draining { at: Instant },
    /// Nothing more to wait for.
    Over,
}

#[derive(Debug, Clone, Copy)]
struct Release {
    at: Instant,
    why: Why,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Why {
    Answered,
    FinalEvent,
}

/// What woke the watch.
enum Happened {
    Line(Option<String>),
    Exited(Option<ExitStatus>),
    Timer,
}

/// The process's state and what was seen of it.
pub(super) struct Watch<'a> {
    state: State,
    answered: bool,
    /// When the answer was last looked for.
    looked: Instant,
    final_event: bool,
    pub(super) stalled: bool,
    pub(super) status: Option<ExitStatus>,
    /// Lines of stdout handed to the handler.
    pub(super) lines: u64,
    stall: Duration,
    final_grace: Duration,
    /// When the process's output last arrived.
    activity: Arc<Mutex<Instant>>,
    endpoint: &'a Endpoint,
    pub(super) group: Group,
}

impl<'a> Watch<'a> {
    pub(super) fn new(
        group: Group,
        endpoint: &'a Endpoint,
        activity: Arc<Mutex<Instant>>,
        stall: Duration,
        final_grace: Duration,
    ) -> Watch<'a> {
        Watch {
            state: State::Running { release: None },
            answered: false,
            looked: Instant::now(),
            final_event: false,
            stalled: false,
            status: None,
            lines: 0,
            stall,
            final_grace,
            activity,
            endpoint,
            group,
        }
    }

    /// Watches the process until nothing more is waited for: it exited (and, when its lines are
    /// read, its stdout closed), or it outlived the kill of its group.
    pub(super) async fn watch(
        &mut self,
        child: &mut Child,
        op: Option<&OpControl>,
        lines: &mut Option<UnboundedReceiver<String>>,
        handler: &mut Option<&mut LineHandler<'_>>,
        log: &mut OpLog,
    ) {
        self.look_for_answer(op, log);
        while let Some(wake) = self.wake_at(op.is_some()) {
            let waits = matches!(self.state, State::Running { .. } | State::Killed { .. });
            let happened = tokio::select! {
                line = next_line(lines), if lines.is_some() => Happened::Line(line),
                status = child.wait(), if waits => Happened::Exited(status.ok()),
                _ = tokio::time::sleep_until(wake.into()) => Happened::Timer,
            };
            let now = Instant::now();
            // An answer counts before the stall clock does, and its grace from its acceptance.
            self.look_for_answer(op, log);
            match happened {
                Happened::Line(Some(line)) => self.line(&line, handler, now),
                Happened::Line(None) => {
                    *lines = None;
                    if let State::Draining { .. } = self.state {
                        self.state = State::Over;
                    }
                }
                Happened::Exited(status) => {
                    self.status = status;
                    self.state = if lines.is_some() { State::Draining { at: now } } else { State::Over };
                }
                Happened::Timer => self.on_timer(now, log),
            }
        }
    }

    /// Notes an answer accepted since the last look: its grace runs from its acceptance.
    fn look_for_answer(&mut self, op: Option<&OpControl>, log: &mut OpLog) {
        self.looked = Instant::now();
        if self.answered {
            return;
        }
        if let Some(at) = op.and_then(OpControl::answered_at) {
            self.answered = true;
            log.event("answered", json!({}));
            self.release_at(at + ANSWER_GRACE, Why::Answered);
        }
    }

    /// Hands a line of stdout to the handler; the program's final event starts its grace.
    pub(super) fn line(&mut self, line: &str, handler: &mut Option<&mut LineHandler<'_>>, now: Instant) {
        self.lines += 1;
        let is_final = handler.as_mut().is_some_and(|h| h(line));
        if is_final && !self.final_event {
            self.final_event = true;
            self.release_at(now + self.final_grace, Why::FinalEvent);
        }
    }

    /// When the watch must look again without being woken: a release, the stall clock, the next
    /// look for an answer (while one is awaited), the end of a wait for the exit or for the rest
    /// of the output. `None` when it is over.
    fn wake_at(&self, awaits_answer: bool) -> Option<Instant> {
        match self.state {
            State::Running { release } => {
                let unanswered = awaits_answer && !self.answered;
                let stall = (!self.answered).then(|| self.last_activity() + self.stall);
                let look = unanswered.then(|| self.looked + ANSWER_GRACE);
                release.map(|r| r.at).into_iter().chain(stall).chain(look).min()
            }
            State::Killed { at } | State::Draining { at } => Some(at + DRAIN),
            State::Over => None,
        }
    }

    fn on_timer(&mut self, now: Instant, log: &mut OpLog) {
        match self.state {
            State::Running { release: Some(r) } if r.at <= now => {
                let grace = if r.why == Why::Answered { ANSWER_GRACE } else { self.final_grace };
                if !grace.is_zero() {
                    let why = if r.why == Why::Answered { "answered" } else { "final event" };
                    log.event("released", json!({ "after_ms": grace.as_millis() as u64, "why": why }));
                }
                self.kill(now);
            }
            State::Running { .. } if !self.answered && self.last_activity() + self.stall <= now => {
                log.event("stalled", json!({ "stall_ms": self.stall.as_millis() as u64 }));
                self.stalled = true;
                self.kill(now);
            }
            // A process that outlives the kill of its group left it: it is not waited for.
            State::Killed { at } | State::Draining { at } if at + DRAIN <= now => self.state = State::Over,
            _ => {}
        }
    }

    /// Kills the process group, to wait for the process to exit.
    fn kill(&mut self, at: Instant) {
        self.group.kill();
        self.state = State::Killed { at };
    }

    /// Releases the process at `at` for `why`, unless an earlier release is set.
    fn release_at(&mut self, at: Instant, why: Why) {
        if let State::Running { release } = &mut self.state {
            if release.is_none_or(|r| at < r.at) {
                *release = Some(Release { at, why });
            }
        }
    }

    /// When the process last showed life: output, or a frame on the agent's socket.
    fn last_activity(&self) -> Instant {
        (*self.activity.lock().unwrap_or_else(|p| p.into_inner())).max(self.endpoint.last_activity())
    }
}

async fn next_line(lines: &mut Option<UnboundedReceiver<String>>) -> Option<String> {
    match lines {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}
