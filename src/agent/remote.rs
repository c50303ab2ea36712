//! Agents whose operations run elsewhere: the hook through which a layer above (`cluster`) gives
//! a run's agent book the sessions of its agents, so that this layer never names it. Installed
//! once per run (`AgentBook::set_remote`); every agent opened afterwards gets its session from it,
//! and its operations still go through the one pipeline (`op::execute`) here.

use super::OpenRequest;
use crate::config::RuntimeConfig;
use crate::harness::{AgentInfo, Session};

/// What an agent with `isolation: "worktree"` gets when its session comes from a `Remote`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteWorktrees {
    /// Refused: its turns run on a worker, where no worktree of this checkout is.
    Refused,
    /// Checked (a repository with a commit is there) and named, never added: nothing runs in it
    /// (a plan; its merges are reported, not made).
    Planned,
}

/// Opens the session of an agent whose turns run on another machine.
pub trait Remote: Send + Sync {
    /// The session, or why this agent cannot run there (a configuration error of the run).
    fn session(
        &self,
        req: &OpenRequest,
        runtime: &RuntimeConfig,
        info: &AgentInfo,
    ) -> Result<Box<dyn Session>, super::OpenError>;

    /// What a worktree agent gets here.
    fn worktrees(&self) -> RemoteWorktrees {
        RemoteWorktrees::Refused
    }

    /// Whether an agent with `placement: "pane"` is accepted (it then runs here as the `Remote`
    /// says, with no pane: a plan); refused by default, as on workers, which have no pane to show.
    fn panes(&self) -> bool {
        false
    }
}
