//! The host: what a running script acts on (the run core, its agents and its router, put
//! together), and `drive`, the one way a run goes from start to its recorded end, which
//! `script run`, `council run`, `runs resume` and `serve` all call. The script itself is passed in
//! through the `Script` trait, so this layer never names the script host.

pub mod control;
pub mod drive;
pub mod exit;
pub mod launch;
pub mod pool;

use crate::agent::seating::SandboxBook;
use crate::agent::AgentBook;
use crate::harness::ResponderLoader;
use crate::messaging::Router;
use crate::run::{Run, RunSpec};
use serde_json::Value;
use std::sync::Arc;

pub use drive::{drive, settle, wait, Failure, FailureKind, Output, RunEnd, Script, ScriptEnd};

/// A run with its books: the run core, the agents, the router.
pub struct Host {
    pub run: Arc<Run>,
    pub agents: Arc<AgentBook>,
    pub router: Arc<Router>,
    /// The run's control socket (`control.sock`): how other processes stop it.
    pub control: control::Control,
    /// What it may do (convene councils, take slots of the machine's pool).
    pub caps: launch::Capabilities,
    /// The decisions it asks (`ctx.decisions.decide`), and those on record.
    pub decisions: crate::decision::DecisionBook,
}

impl Host {
    /// Starts a run (its folder, `run.json`, `run-started`) with a new id, or a resumed run with
    /// its own, opens its books and its control socket. Only `launch::start` calls it.
    fn open(
        mut spec: RunSpec,
        new_id: Option<String>,
        rt: tokio::runtime::Handle,
        caps: launch::Capabilities,
    ) -> std::io::Result<Arc<Host>> {
        let responders: ResponderLoader = Box::new(caps.responders);
        let run_level = spec.sandbox.take();
        let isolation = spec.isolation;
        let id = new_id.unwrap_or_else(crate::record::new_run_id);
        let recorded = spec.resume.as_mut().map(|r| std::mem::take(&mut r.decisions)).unwrap_or_default();
        let decisions = crate::decision::DecisionBook::new(recorded);
        let run = Run::start_with_id(spec, id, rt)?;
        let router = Arc::new(Router::default());
        let responders = crate::agent::Responders::new(responders);
        let agents = AgentBook::new(run.clone(), router.clone(), SandboxBook::new(run_level), responders);
        let recorded = serde_json::from_value(run.doc_field("isolation")).unwrap_or_default();
        agents.worktrees.start(&run, if isolation == Default::default() { recorded } else { isolation });
        let (control, listener) = control::Control::bind(run.dir());
        let host = Arc::new(Host { run, agents, router, control, caps, decisions });
        if let Some(listener) = listener {
            control::Control::serve(&host, listener);
        }
        if let Some(factory) = caps.convener {
            host.agents.set_convener(factory(&host));
        }
        Ok(host)
    }

    /// Settles what the books still hold (messages never delivered, asks still owed), then writes
    /// `result.json` and completes `run.json`.
    pub fn finish(
        &self,
        status: crate::run::RunStatus,
        value: Option<&Value>,
        error: Option<&str>,
        ended_in: Option<&str>,
    ) -> crate::run::ResultDoc {
        self.control.close();
        self.router.finish(&self.run);
        let decisions = self.decisions.summary().iter().filter_map(|d| serde_json::to_value(d).ok()).collect();
        self.run.finish(status, value, error, ended_in, (self.agents.sandboxes.summary(), decisions))
    }
}
