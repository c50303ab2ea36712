//! The answer channel every harness shares: JSON Schema validation, result slots, the protocol
//! text appended to prompts, the control-plane frames, the one dispatcher of their commands, and
//! the socket server that serves them to program agents.

pub mod dispatch;
pub mod messenger;
pub mod peer;
pub mod prompt;
pub mod protocol;
pub mod schema;
pub mod server;
pub mod slot;
