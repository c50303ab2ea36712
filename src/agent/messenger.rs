//! An agent's side of the router, as its control socket and its harness use it: send, ask, reply
//! and read the inbox, each as this agent; and its questions to the operator (`wf ask-operator`).

use super::AgentBook;
use crate::control::convene::{Call, Convened, Convener, Grant};
use crate::control::messenger::{Held, MessageError, Messenger};
use crate::control::operator::OperatorCall;
use crate::messaging::Unanswered;
use crate::run::checkpoint::{Asked, Question, Waited};
use crate::run::BoxFuture;
use std::sync::{Arc, Weak};
use tokio::sync::oneshot;

/// One agent's view of the router.
pub struct AgentMessenger {
    pub(super) book: Weak<AgentBook>,
    pub(super) key: String,
}

fn ended() -> MessageError {
    MessageError::Refused("the run has ended".into())
}

impl AgentMessenger {
    fn book(&self) -> Result<Arc<AgentBook>, MessageError> {
        self.book.upgrade().ok_or_else(ended)
    }

    /// The run's convener, when this agent was granted council `name`; else why not.
    fn granted(&self, name: &str) -> Result<Arc<dyn Convener>, MessageError> {
        let book = self.book()?;
        let granted = book.get(&self.key).map(|a| a.request.councils.clone()).unwrap_or_default();
        if !granted.allows(name) {
            let why = match granted {
                Grant::None => format!("agent {} was granted no councils (agent spec `councils`)", self.key),
                _ => format!("agent {} was not granted council \"{name}\" (agent spec `councils`)", self.key),
            };
            return Err(MessageError::Refused(why));
        }
        book.convener().ok_or_else(cannot)
    }
}

fn cannot() -> MessageError {
    MessageError::Refused("this run cannot convene councils".into())
}

impl Messenger for AgentMessenger {
    fn send(&self, to: &str, text: &str) -> Result<u64, MessageError> {
        let book = self.book()?;
        book.router.send(&book.run, &*book, &self.key, to, text, None).map_err(MessageError::from)
    }

    fn ask(
        &self,
        to: &str,
        text: &str,
        deadline: Option<crate::run::deadline::Deadline>,
    ) -> BoxFuture<'static, Result<String, MessageError>> {
        let (tx, rx) = oneshot::channel();
        let sent = self.book().and_then(|book| {
            let n = book.router.send(&book.run, &*book, &self.key, to, text, Some(tx)).map_err(MessageError::from)?;
            Ok((n, book.run.root.clone()))
        });
        let to = to.to_string();
        Box::pin(async move {
            let (n, stop) = sent?;
            let until = async {
                match deadline {
                    Some(at) => tokio::time::sleep_until(at.instant().into()).await,
                    None => std::future::pending().await,
                }
            };
            let replied = tokio::select! {
                r = rx => r.unwrap_or(Err(Unanswered::Dropped { to, n })),
                _ = until => Err(Unanswered::Deadline { to, n }),
                _ = stop.cancelled() => Err(Unanswered::Stopped),
            };
            replied.map_err(|e| MessageError::Failed(e.to_string()))
        })
    }

    fn reply(&self, n: u64, text: &str) -> Result<(), MessageError> {
        let book = self.book()?;
        book.router.reply(&book.run, &self.key, n, text).map_err(MessageError::from)
    }

    fn may_convene(&self) -> bool {
        let book = self.book.upgrade();
        book.and_then(|b| b.get(&self.key)).is_some_and(|a| a.request.councils != Grant::None)
    }

    fn convene(&self, call: Call) -> BoxFuture<'static, Result<Convened, MessageError>> {
        match self.granted(&call.name) {
            Ok(convener) => convener.convene(call),
            Err(e) => Box::pin(async move { Err(e) }),
        }
    }

    fn may_ask_operator(&self) -> bool {
        let book = self.book.upgrade();
        book.and_then(|b| b.get(&self.key)).is_some_and(|a| a.request.operator)
    }

    fn ask_operator(&self, call: OperatorCall) -> BoxFuture<'static, Result<serde_json::Value, MessageError>> {
        let book = self.book();
        let granted = self.may_ask_operator();
        Box::pin(async move {
            let run = book?.run.clone();
            if !granted {
                return Err(MessageError::Refused(format!(
                    "agent {} may not ask the operator: open it with operator: true",
                    call.agent
                )));
            }
            let schema = run
                .schemas
                .compile(&call.schema)
                .map_err(|e| MessageError::Refused(format!("ask-operator: --schema is {e}")))?;
            let question = Question {
                key: call.key.clone(),
                question: &call.question,
                schema,
                timeout_ms: None,
                agent: Some(&call.agent),
            };
            let rx = match run.ask_operator(question).map_err(|e| MessageError::Refused(e.to_string()))? {
                Asked::Replayed(v) => return Ok(v),
                Asked::Waiting(rx) => rx,
            };
            let waited = tokio::select! {
                w = run.wait_for_operator(&call.key, rx, None, call.deadline, &call.ended) => w,
                _ = run.root.cancelled() => {
                    run.checkpoint_abandoned(&call.key);
                    Waited::Cancelled
                }
            };
            match waited {
                Waited::Answer(v) => Ok(v),
                Waited::TimedOut | Waited::Cancelled => Err(MessageError::Failed(format!(
                    "no answer from the operator to `{}`: the operation ended or its deadline passed first",
                    call.question
                ))),
            }
        })
    }

    fn convene_background(&self, call: Call) -> BoxFuture<'static, Result<serde_json::Value, MessageError>> {
        match self.granted(&call.name) {
            Ok(convener) => convener.convene_background(call),
            Err(e) => Box::pin(async move { Err(e) }),
        }
    }

    fn join_councils(
        &self,
        ids: Vec<String>,
        deadline: Option<crate::run::deadline::Deadline>,
    ) -> BoxFuture<'static, Result<Vec<crate::control::convene::Settled>, MessageError>> {
        match self.book().and_then(|b| b.convener().ok_or_else(cannot)) {
            Ok(convener) => convener.join(&self.key, ids, deadline),
            Err(e) => Box::pin(async move { Err(e) }),
        }
    }

    fn list_councils(&self) -> Vec<serde_json::Value> {
        self.book().ok().and_then(|b| b.convener()).map(|c| c.list(&self.key)).unwrap_or_default()
    }

    fn cancel_council(&self, id: &str) -> Result<serde_json::Value, MessageError> {
        self.book().and_then(|b| b.convener().ok_or_else(cannot))?.cancel(&self.key, id)
    }

    fn inbox(&self, all: bool) -> Vec<Held> {
        match self.book.upgrade() {
            Some(book) => book.router.inbox(&book.run, &self.key, all),
            None => Vec::new(),
        }
    }
}
