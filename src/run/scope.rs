//! Scopes: the cancellation token, deadline, stage and progress group that work on a thread runs
//! under. A script thread and every parallel worker carry one in a thread-local, so the engine's
//! progress hook and every blocking host call see the innermost scope without being told.

use super::deadline::Deadline;
use std::cell::RefCell;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Which limit a deadline comes from, so the right error is raised when it passes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeadlineKind {
    Run,
    Parallel(Option<String>),
}

/// A scope's deadline and where it comes from.
#[derive(Debug, Clone)]
pub struct ScopeDeadline {
    pub at: Deadline,
    pub kind: DeadlineKind,
}

/// One scope. Children get child tokens, so cancelling a scope cancels everything under it.
#[derive(Debug, Clone)]
pub struct Frame {
    pub cancel: CancellationToken,
    pub deadline: Option<ScopeDeadline>,
    pub stage: Option<Arc<str>>,
    pub group: Option<Arc<str>>,
}

impl Frame {
    pub fn root(cancel: CancellationToken, deadline: Option<Deadline>) -> Frame {
        Frame {
            cancel,
            deadline: deadline.map(|at| ScopeDeadline { at, kind: DeadlineKind::Run }),
            stage: None,
            group: None,
        }
    }

    /// The earlier of this frame's deadline and `other`.
    pub fn tighten(&self, at: Option<Deadline>, kind: DeadlineKind) -> Option<ScopeDeadline> {
        match (&self.deadline, at) {
            (Some(d), Some(at)) if d.at <= at => Some(d.clone()),
            (_, Some(at)) => Some(ScopeDeadline { at, kind }),
            (d, None) => d.clone(),
        }
    }

    /// The deadline that has passed, if any.
    pub fn expired(&self) -> Option<&ScopeDeadline> {
        self.deadline.as_ref().filter(|d| d.at.passed())
    }

    /// When this scope's work must settle, if ever.
    pub fn deadline_at(&self) -> Option<Deadline> {
        self.deadline.as_ref().map(|d| d.at)
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<Frame>>> = const { RefCell::new(None) };
}

/// The innermost frame on this thread, if any.
pub fn current() -> Option<Arc<Frame>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Makes `frame` current until the guard drops, then restores the previous one.
pub fn enter(frame: Arc<Frame>) -> FrameGuard {
    let previous = CURRENT.with(|c| c.borrow_mut().replace(frame));
    FrameGuard { previous }
}

pub struct FrameGuard {
    previous: Option<Arc<Frame>>,
}

impl Drop for FrameGuard {
    fn drop(&mut self) {
        let previous = self.previous.take();
        CURRENT.with(|c| *c.borrow_mut() = previous);
    }
}
