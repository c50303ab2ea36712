//! The answer channel every harness shares: result slots (answers read strictly and validated
//! against the op's schema), the protocol text appended to prompts, the control-plane frames, the
//! one dispatcher of their commands, an agent's socket and who may use it, and the messenger an
//! agent sends, asks and replies through.

pub mod calls;
pub mod convene;
pub mod dispatch;
pub mod messenger;
pub mod namespace;
pub mod operator;
pub mod peer;
pub mod prompt;
pub mod protocol;
pub mod server;
pub mod slot;
pub mod state;
pub mod strict;
