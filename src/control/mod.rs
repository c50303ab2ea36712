//! The answer channel every harness shares: JSON Schema validation, result slots, and the protocol
//! text appended to prompts. The socket server and `awf wf` come with the protocol issue.

pub mod messenger;
pub mod peer;
pub mod prompt;
pub mod protocol;
pub mod schema;
pub mod server;
pub mod slot;
