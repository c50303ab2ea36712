//! The harness boundary's scrubber: every session is wrapped in `Scrubbed`, so that whatever text a
//! harness reports (a turn's failure or block reason, a compaction or fork error) has the run's
//! secrets redacted before the engine records, returns or prints it.

use super::{AgentInfo, BoxFuture, HarnessError, Session, TurnEnd, TurnInput, TurnReport};
use crate::redact::Redactor;
use std::sync::Arc;

pub struct Scrubbed {
    inner: Box<dyn Session>,
    redactor: Arc<Redactor>,
}

impl Scrubbed {
    pub fn wrap(inner: Box<dyn Session>, redactor: Arc<Redactor>) -> Box<dyn Session> {
        Box::new(Scrubbed { inner, redactor })
    }
}

impl Session for Scrubbed {
    fn answer_mode(&self) -> crate::control::prompt::AnswerMode {
        self.inner.answer_mode()
    }

    fn caller_probe(&self) -> Option<crate::harness::cli::caller::CallerProbe> {
        self.inner.caller_probe()
    }

    fn session_ref(&self) -> Option<crate::harness::SessionRef> {
        self.inner.session_ref()
    }

    fn export(&self) -> Option<super::SessionExport> {
        self.inner.export()
    }

    fn import(&mut self, session: super::SessionExport) -> Result<(), HarnessError> {
        self.inner.import(session).map_err(|why| why.scrubbed(&self.redactor))
    }

    fn turn(&mut self, input: TurnInput) -> BoxFuture<'_, TurnReport> {
        Box::pin(async move {
            let mut report = self.inner.turn(input).await;
            report.end = match report.end {
                TurnEnd::Failed(why) => TurnEnd::Failed(self.redactor.scrub(&why)),
                TurnEnd::Blocked(why) => TurnEnd::Blocked(self.redactor.scrub(&why)),
                TurnEnd::Ended => TurnEnd::Ended,
            };
            report
        })
    }

    fn fork(&self, info: AgentInfo) -> Result<Box<dyn Session>, HarnessError> {
        match self.inner.fork(info) {
            Ok(s) => Ok(Scrubbed::wrap(s, self.redactor.clone())),
            Err(why) => Err(why.scrubbed(&self.redactor)),
        }
    }

    fn compact(&mut self, prompt: &str) -> BoxFuture<'_, super::Compaction> {
        let prompt = prompt.to_string();
        Box::pin(async move {
            let mut c = self.inner.compact(&prompt).await;
            c.summary = c.summary.map_err(|why| why.scrubbed(&self.redactor));
            c
        })
    }

    fn set(&mut self, model: Option<&str>, effort: Option<&str>) -> Result<(), HarnessError> {
        self.inner.set(model, effort).map_err(|why| why.scrubbed(&self.redactor))
    }

    fn endpoint(&self) -> Option<Arc<crate::control::server::Endpoint>> {
        self.inner.endpoint()
    }
}
