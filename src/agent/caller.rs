//! `ctx.agents.fork_caller(spec)` in the book: an agent of the run whose first turn forks the
//! run's calling session, or the reason it cannot be (no caller, another harness, no session).

use super::error::Unforkable;
use super::{Agent, AgentBook, OpenError, OpenRequest};
use std::sync::Arc;

impl AgentBook {
    /// Opens `req` as a fork of the run's caller: `Ok(Err(why))` when the caller cannot be forked
    /// into it; `Err` for a spec that cannot open at all.
    pub fn fork_caller(&self, mut req: OpenRequest) -> Result<Result<Arc<Agent>, Unforkable>, OpenError> {
        if !self.key_free(&req.key) {
            return Err(OpenError::Refused(format!(
                "agent {}: the key is already open in this run (a caller's fork needs a new key)",
                req.key
            )));
        }
        let Some(caller) = self.run.caller() else {
            return Ok(Err(Unforkable::NoCaller));
        };
        let runtime = self.runtime(&req.runtime)?;
        if runtime.harness != caller.harness {
            let (caller, agent, runtime) = (caller.harness, req.key.clone(), runtime.harness);
            return Ok(Err(Unforkable::OtherHarness { caller, agent, runtime }));
        }
        let fork = match crate::harness::cli::caller::locate(&caller) {
            Ok(f) => f,
            Err(why) => return Ok(Err(why.into())),
        };
        req.fork_caller = Some(Box::new(fork));
        self.open(req).map(Ok)
    }
}
