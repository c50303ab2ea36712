//! What an agent may do with messages, as harnesses and the control socket see it: send, ask,
//! reply, read the inbox. Implemented by `messaging`; this trait keeps the answer channel free of
//! the router's internals.

use crate::run::BoxFuture;
use std::time::Instant;

/// A message held for an agent, as its inbox shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Held {
    pub n: u64,
    pub from: String,
    pub text: String,
    pub asks: bool,
}

pub trait Messenger: Send + Sync {
    /// Sends over a granted route; the message number, or why it was refused.
    fn send(&self, to: &str, text: &str) -> Result<u64, String>;
    /// Sends and waits for the reply, until `deadline` at most.
    fn ask(&self, to: &str, text: &str, deadline: Option<Instant>) -> BoxFuture<'static, Result<String, String>>;
    /// Answers message `n`, which must have asked this agent.
    fn reply(&self, n: u64, text: &str) -> Result<(), String>;
    /// The messages held for this agent; reading them delivers them.
    fn inbox(&self) -> Vec<Held>;
}
