//! The one way a run is put together: a run request (its spec, id, caller and parent) and the
//! capabilities its host is given are turned into a started host (`start`: folder, `run.json`,
//! links), which `run` drives to its recorded end while it holds its admission. `script run`,
//! `council run`, `runs resume`, a worker's runs and shadow runs, and councils convened from a turn
//! all come through here; they keep only what is theirs (printing, HTTP, NATS).

use super::{drive, Host, Output, RunEnd, Script};
use crate::control::convene::Convener;
use crate::harness::Responder;
use crate::run::caller::Caller;
use crate::run::RunSpec;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Makes the convener of one run's agents.
pub type ConvenerFactory = fn(&Arc<Host>) -> Arc<dyn Convener>;

/// What a run's host may do, given when it is built (never read from a process-wide static).
#[derive(Clone, Copy)]
pub struct Capabilities {
    /// Loads a fake runtime's responder script.
    pub responders: fn(&Path) -> Result<Arc<dyn Responder>, crate::harness::ResponderError>,
    /// Makes the convener its granted agents convene councils through; `None`: `wf council` is
    /// refused.
    pub convener: Option<ConvenerFactory>,
    /// How its background councils are admitted.
    pub councils: CouncilPool,
}

impl Capabilities {
    /// What a run holding `admission` may do: a run on a slot of the machine's pool runs its
    /// background councils on that slot.
    pub fn holding(self, admission: &Admission) -> Capabilities {
        match admission {
            Admission::Pool(_) => Capabilities { councils: CouncilPool::AtOnce, ..self },
            _ => self,
        }
    }
}

/// How a run's background councils start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CouncilPool {
    /// Each waits for a slot of the machine's background pool (`host::pool`), as `--detach` does.
    Machine,
    /// At once: the run holds a slot of the pool already and waits for its councils (else with
    /// every slot held by such runs none could ever end), or no pool is wanted.
    AtOnce,
}

/// How a run was let start: what it holds until it ends. The wait for it is the caller's (a
/// queue it prints about, an HTTP queue, a NATS fetch).
pub enum Admission {
    /// No queue.
    AtOnce,
    /// A slot of the machine's background pool (a `--detach`ed run, a background council).
    Pool(crate::host::pool::Slot),
    /// A place within `awf serve --max-runs`: serve's queue counts it and gives it to the next
    /// run once this one has ended.
    RunLimit,
    /// One of a worker's `--slots`.
    WorkerSlot(tokio::sync::OwnedSemaphorePermit),
}

/// The run a child run belongs to: its `run.json` names it (`parent`), at `depth`.
pub struct Parent {
    pub link: Value,
    pub depth: u32,
}

/// A run to start.
pub struct Request {
    pub spec: RunSpec,
    /// The run id to use (a background run, a worker's run); `None`: a new one.
    pub id: Option<String>,
    /// The calling session recorded in `run.json`.
    pub caller: Option<Caller>,
    pub parent: Option<Parent>,
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("cannot create the run folder: {0}")]
    Folder(std::io::Error),
    #[error("cannot record the caller in run.json: {0}")]
    Caller(std::io::Error),
}

/// Starts the run: its folder, `run.json` and `run-started`, its books and control socket, then
/// its caller and parent link. A parent link that cannot be written is logged, not fatal.
pub fn start(req: Request, rt: tokio::runtime::Handle, caps: Capabilities) -> Result<Arc<Host>, LaunchError> {
    let host = Host::open(req.spec, req.id, rt, caps).map_err(LaunchError::Folder)?;
    if let Some(c) = req.caller {
        host.run.set_caller(c).map_err(LaunchError::Caller)?;
    }
    if let Some(p) = req.parent {
        if let Err(e) = host.run.link_parent(p.link, p.depth) {
            tracing::warn!("cannot link child run {} to its parent: {e}", host.run.id);
        }
    }
    Ok(host)
}

/// Drives a started run to its recorded end, holding `admission` until then.
///
/// # Cancel safety
/// Dropping the future leaves the run unfinished (no `result.json`); callers await it to the end.
pub async fn run(
    host: Arc<Host>,
    admission: Admission,
    script: &dyn Script,
    args: Value,
    deadline: Option<Duration>,
    output: Output,
) -> RunEnd {
    let end = drive(host, script, args, deadline, output).await;
    drop(admission);
    end
}

/// `start`, then `run`: a run whose caller adds nothing between (serve, a council).
pub async fn launch(
    req: Request,
    caps: Capabilities,
    admission: Admission,
    script: &dyn Script,
    args: Value,
    output: Output,
) -> Result<RunEnd, LaunchError> {
    let deadline = req.spec.deadline;
    let host = start(req, tokio::runtime::Handle::current(), caps.holding(&admission))?;
    Ok(run(host, admission, script, args, deadline, output).await)
}
