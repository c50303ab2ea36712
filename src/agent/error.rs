//! Why an agent could not be opened (`OpenError`, whose `is_config` decides a failing run's exit
//! code: 2 for what the configuration gets wrong, 1 for the rest), why its sandbox is refused
//! (`SandboxRefused`), why a workflow's sandbox handle is (`HandleError`), and why the run's caller
//! cannot be forked (`Unforkable`). Each keeps its source.

use crate::config::{ConfigError, HarnessKind};
use crate::harness::cli::caller::ForkError;
use crate::harness::cli::skills::SkillError;
use crate::harness::{HarnessError, ResponderError};
use crate::run::scheduler::LimitReached;
use crate::sandbox::policy::PolicyError;
use crate::sandbox::SandboxError;
use std::path::PathBuf;

/// Why an agent could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Its runtime does not resolve in awf.toml.
    #[error(transparent)]
    Runtime(#[from] ConfigError),
    /// Its harness session cannot start as configured (a setting, a program, its own files).
    #[error(transparent)]
    Harness(#[from] HarnessError),
    #[error("agent {agent}: {source}")]
    Skills { agent: String, source: SkillError },
    /// A council grant naming a strategy the catalog does not have.
    #[error("agent {agent}: {source}")]
    Grant { agent: String, source: crate::control::convene::NotInCatalog },
    /// Its worktree cannot be added.
    #[error("agent {agent}: {source}")]
    Worktree { agent: String, source: crate::worktree::Error },
    /// Its sandbox cannot be seated for it (its paths, bubblewrap).
    #[error("agent {agent}: {source}")]
    Seat { agent: String, source: SandboxError },
    #[error("cannot find the awf executable for the launcher: {0}")]
    Launcher(#[source] std::io::Error),
    /// Anything else the configuration or the agent's runtime gets wrong, said whole (a grant a
    /// worker cannot honour, a cwd outside its worktree).
    #[error("{0}")]
    Config(String),
    /// Its pane (`placement: "pane"`) is refused or cannot be made.
    #[error("agent {agent}: {source}")]
    Pane { agent: String, source: super::panes::PaneOpenError },
    /// The run's `--max-agents`.
    #[error(transparent)]
    Limit(#[from] LimitReached),
    /// The sandbox it asked for is refused (unknown, clashing, cannot be made here).
    #[error("agent {agent}: {source}")]
    Sandbox { agent: String, source: SandboxRefused },
    /// Its fake responder script is missing or does not load.
    #[error("{0}")]
    Responder(ResponderError),
    /// The spec or the run's state says no: said whole (an empty key, a stopped key, a key open
    /// with another spec).
    #[error("{0}")]
    Refused(String),
}

impl OpenError {
    /// Whether the configuration caused it: a run failing on it exits 2 (`host::exit::USAGE`).
    pub fn is_config(&self) -> bool {
        match self {
            OpenError::Runtime(_)
            | OpenError::Harness(_)
            | OpenError::Skills { .. }
            | OpenError::Grant { .. }
            | OpenError::Worktree { .. }
            | OpenError::Seat { .. }
            | OpenError::Launcher(_)
            | OpenError::Pane { .. }
            | OpenError::Config(_) => true,
            OpenError::Limit(_) | OpenError::Sandbox { .. } | OpenError::Responder(_) | OpenError::Refused(_) => false,
        }
    }
}

/// Why the sandbox an agent asked for is refused.
#[derive(Debug, thiserror::Error)]
pub enum SandboxRefused {
    /// A name `[sandboxes]` does not have.
    #[error(transparent)]
    Unknown(#[from] ConfigError),
    #[error(transparent)]
    Inline(#[from] PolicyError),
    #[error(
        "`sandbox` must be a name from [sandboxes] in awf.toml, a policy map, or a handle from ctx.sandboxes.open"
    )]
    NotASandbox,
    #[error(transparent)]
    Handle(#[from] HandleError),
    /// The run seats every agent in its own sandbox (`--sandbox`).
    #[error("asks for sandbox `{asked}`, but this run seats every agent in sandbox `{run}` (--sandbox {run}); drop `sandbox` from its spec or name `{run}`")]
    RunLevel { asked: String, run: String },
    /// A listed network for a harness that runs inside awf, where nothing can be confined.
    #[error("sandbox `{name}` lists its network, which means nothing to the `{harness}` harness: it runs inside awf, where no sandbox applies; give it a sandbox without `network`, or none")]
    NetworkInProcess { name: String, harness: HarnessKind },
    #[error(transparent)]
    Unmade(#[from] SandboxError),
}

/// Why a workflow's sandbox handle, or a sandbox it opens, is refused.
#[derive(Debug, thiserror::Error)]
pub enum HandleError {
    #[error("the sandbox handle `{name}` belongs to run {of}, not this one ({run}); open the sandbox in this run with ctx.sandboxes.open")]
    OtherRun { name: String, of: String, run: String },
    #[error("no sandbox `{0}` was opened in this run")]
    NotOpened(String),
    #[error("sandbox `{name}` is closed ({why}); open another with ctx.sandboxes.open")]
    Closed { name: String, why: String },
    #[error("a sandbox named `{0}` was already opened in this run; give each its own name")]
    NameTaken(String),
    #[error("`name` must not be empty")]
    NoName,
    #[error(
        "this run seats every agent in sandbox `{run}` (--sandbox {run}), so a workflow cannot open sandbox `{name}`"
    )]
    RunLevel { run: String, name: String },
    #[error(transparent)]
    Unmade(#[from] SandboxError),
    /// A handle is this machine's: an agent on a cluster worker cannot be seated in it.
    #[error("sandbox `{0}` was opened by this run's workflow on this machine; an agent on a cluster worker takes a sandbox name or an inline policy")]
    Abroad(String),
}

/// Why the run's calling session cannot be forked into an agent.
#[derive(Debug, thiserror::Error)]
pub enum Unforkable {
    #[error("this run has no caller: start it with `awf script run --caller HARNESS:SESSION`, or convene it with `wf council` from a claude or pi agent")]
    NoCaller,
    #[error("the caller's session is a {caller} session and agent {agent} would run on {runtime}: a session forks only into its own harness")]
    OtherHarness { caller: HarnessKind, agent: String, runtime: HarnessKind },
    #[error(transparent)]
    Locate(#[from] ForkError),
}

/// A fake responder script not found beside the script or in the working folder.
#[derive(Debug, thiserror::Error)]
#[error("fake responder {} not found (looked beside the script and in {})", path.display(), cwd.display())]
pub struct NoResponder {
    pub path: PathBuf,
    pub cwd: PathBuf,
}

/// A fork into a key the run already opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot fork into {0}: an agent with that key was already opened in this run")]
pub struct KeyTaken(pub String);
