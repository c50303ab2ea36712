//! What an agent may do with messages, as harnesses and the control socket see it: send, ask,
//! reply, read the inbox. Implemented by `messaging`; this trait keeps the answer channel free of
//! the router's internals.

use crate::run::BoxFuture;

/// A message for an agent, as its inbox shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Held {
    pub n: u64,
    pub from: String,
    pub text: String,
    pub asks: bool,
    pub status: InboxStatus,
}

/// Where a message in an inbox stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum InboxStatus {
    /// Not shown to the agent before this read.
    New,
    /// Shown before (in a prompt or an earlier read), and its asker still waits for the reply.
    AwaitsReply,
    /// Shown before; nothing owed.
    Read,
    /// A question the agent answered, or one whose asker stopped waiting.
    Closed,
}

/// Why a message command did not go through; the text is what the agent is told.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MessageError {
    /// Refused before anything was sent (no such route, the route spent, the recipient closed, a
    /// reply to a message that did not ask): recorded as a `control-refused` event. It holds the
    /// reason alone; its text says `refused: ` before it.
    #[error("refused: {0}")]
    Refused(String),
    /// Sent, but no reply came (the deadline passed, the run stopped or ended).
    #[error("{0}")]
    Failed(String),
}

pub trait Messenger: Send + Sync {
    /// Sends over a granted route; the message number, or why it was refused.
    fn send(&self, to: &str, text: &str) -> Result<u64, MessageError>;
    /// Sends and waits for the reply, until `deadline` at most.
    fn ask(
        &self,
        to: &str,
        text: &str,
        deadline: Option<crate::run::deadline::Deadline>,
    ) -> BoxFuture<'static, Result<String, MessageError>>;
    /// Answers message `n`, which must have asked this agent.
    fn reply(&self, n: u64, text: &str) -> Result<(), MessageError>;
    /// The messages held for this agent (reading them delivers them) and the questions it was
    /// shown that still await its reply; with `all`, every message it was ever delivered.
    fn inbox(&self, all: bool) -> Vec<Held>;
    /// Whether this agent was granted any council.
    fn may_convene(&self) -> bool {
        false
    }
    /// Runs a council this agent was granted, as a child run, to its end.
    fn convene(&self, call: super::calls::Call) -> BoxFuture<'static, Result<super::calls::Convened, MessageError>> {
        let why = format!("agent {} cannot convene councils here", call.agent);
        Box::pin(async move { Err(MessageError::Refused(why)) })
    }
    /// Whether this agent was granted asking the operator (agent spec `operator: true`).
    fn may_ask_operator(&self) -> bool {
        false
    }
    /// Asks the run's operator and waits for the answer (valid against the call's schema).
    fn ask_operator(
        &self,
        call: super::calls::OperatorCall,
    ) -> BoxFuture<'static, Result<serde_json::Value, MessageError>> {
        let why = format!("agent {} cannot ask the operator here", call.agent);
        Box::pin(async move { Err(MessageError::Refused(why)) })
    }
    /// Starts a council this agent was granted in the background: its receipt, at once.
    fn convene_background(
        &self,
        call: super::calls::Call,
    ) -> BoxFuture<'static, Result<serde_json::Value, MessageError>> {
        let why = format!("agent {} cannot convene councils here", call.agent);
        Box::pin(async move { Err(MessageError::Refused(why)) })
    }
    /// Waits (until `deadline` at most) for background councils this agent started: their outputs.
    fn join_councils(
        &self,
        ids: Vec<String>,
        deadline: Option<crate::run::deadline::Deadline>,
    ) -> BoxFuture<'static, Result<Vec<super::calls::Settled>, MessageError>> {
        let _ = (ids, deadline);
        Box::pin(async move { Err(MessageError::Refused("this agent started no background councils".into())) })
    }
    /// The background councils this agent started (`wf council --list`).
    fn list_councils(&self) -> Vec<serde_json::Value> {
        Vec::new()
    }
    /// Stops one of them (`wf council --cancel`).
    fn cancel_council(&self, id: &str) -> Result<serde_json::Value, MessageError> {
        Err(MessageError::Refused(format!("{id} is not a background council started by this agent")))
    }
}
