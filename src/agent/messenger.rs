//! An agent's side of the router, as its control socket and its harness use it: send, ask, reply
//! and read the inbox, each as this agent.

use super::AgentBook;
use crate::control::messenger::{Held, Messenger};
use crate::run::BoxFuture;
use std::sync::{Arc, Weak};
use std::time::Instant;
use tokio::sync::oneshot;

/// One agent's view of the router.
pub struct AgentMessenger {
    pub(super) book: Weak<AgentBook>,
    pub(super) key: String,
}

impl AgentMessenger {
    fn book(&self) -> Result<Arc<AgentBook>, String> {
        self.book.upgrade().ok_or_else(|| "refused: the run has ended".to_string())
    }
}

impl Messenger for AgentMessenger {
    fn send(&self, to: &str, text: &str) -> Result<u64, String> {
        let book = self.book()?;
        book.router.send(&book.run, &*book, &self.key, to, text, None)
    }

    fn ask(&self, to: &str, text: &str, deadline: Option<Instant>) -> BoxFuture<'static, Result<String, String>> {
        let (tx, rx) = oneshot::channel();
        let sent = self.book().and_then(|book| {
            book.router.send(&book.run, &*book, &self.key, to, text, Some(tx)).map(|n| (n, book.run.root.clone()))
        });
        let to = to.to_string();
        Box::pin(async move {
            let (n, stop) = sent?;
            let until = async {
                match deadline {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                r = rx => r.unwrap_or_else(|_| Err(format!("{to} never replied to message {n}"))),
                _ = until => Err(format!("no reply from {to} to message {n} before your operation's deadline")),
                _ = stop.cancelled() => Err("the run was stopped".into()),
            }
        })
    }

    fn reply(&self, n: u64, text: &str) -> Result<(), String> {
        let book = self.book()?;
        book.router.reply(&book.run, &self.key, n, text)
    }

    fn inbox(&self) -> Vec<Held> {
        match self.book.upgrade() {
            Some(book) => book.router.take_held(&book.run, &self.key),
            None => Vec::new(),
        }
    }
}
