//! The messages between a run's owner and the workers, as JSON: an operation (the agent's spec
//! and the turn), the notice that a worker took it, and its settled outcome.

use crate::config::RuntimeConfig;
use crate::run::Outcome;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::PathBuf;

/// The version of these messages; a worker refuses an operation of another.
pub const WIRE: u32 = 1;

/// An agent, as a worker opens it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentSpec {
    pub key: String,
    pub runtime: RuntimeConfig,
    pub instructions: Option<String>,
    /// The folder it works in (the owner's, made absolute).
    pub cwd: PathBuf,
    pub sandbox: Option<Value>,
    pub labels: Value,
    /// Its skill folders, absolute (a worker on another machine needs the same paths).
    #[serde(default)]
    pub skills: Vec<PathBuf>,
}

/// One turn of an agent: what `a.run(turn)` asked, run to its settled outcome by a worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpRequest {
    pub v: u32,
    /// The owner's run id and attempt.
    pub run: String,
    pub attempt: u32,
    pub agent: AgentSpec,
    pub op_id: String,
    pub prompt: String,
    pub schema: Value,
    pub nudge_text: String,
    pub max_nudges: u32,
    /// What is left of the operation's time when it was sent.
    pub timeout_ms: Option<u64>,
    /// The subject the outcome goes to.
    pub reply: String,
    /// The key the owner journals the answer under in the bucket.
    pub journal_key: String,
}

/// What a worker sends on the reply subject.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Reply {
    /// A worker took the operation and is running it.
    Taken { worker: String },
    /// The operation settled on a worker.
    Settled { worker: String, outcome: Outcome },
}
