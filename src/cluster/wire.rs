//! The messages between a run's owner and the workers, as JSON bodies of sealed envelopes
//! (`seal.rs`): an operation (the agent's spec by runtime name, and the turn), the notice that a
//! worker took it, its settled outcome, and how long each stands. Nothing here carries a program,
//! a key variable, an environment or a server URL: a worker resolves the runtime in its own config.

use crate::config::{HarnessKind, RuntimeConfig};
use crate::run::Outcome;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

/// How long an operation with no deadline may wait in the queue before workers refuse it.
pub const OP_TTL: Duration = Duration::from_secs(24 * 3600);
/// How long a reply stands (the owner is waiting for it).
pub const REPLY_TTL: Duration = Duration::from_secs(3600);
/// How long a queued run may wait for a worker.
pub const RUN_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// How long what the bucket and the object store keep stands (outcomes, journal, sessions).
pub const KEPT_TTL: Duration = Duration::from_secs(30 * 24 * 3600);

/// Unix milliseconds `ttl` from now.
pub fn expires_in(ttl: Duration) -> u64 {
    super::seal::now_ms() + ttl.as_millis() as u64
}

/// The runtime of an agent, as a worker is told it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum RuntimeRef {
    /// A runtime of awf.toml by its alias: each worker resolves it in its own awf.toml (program,
    /// args, env, base_url, key variable, responder). `model` and `effort` are the agent's.
    Named { alias: String, harness: HarnessKind, model: Option<String>, effort: Option<String> },
    /// A runtime the script wrote inline: run only by workers started with
    /// `--allow-inline-runtimes`, and never with `env`, `api_key_env`, `args` or `base_url`.
    Inline { runtime: Box<RuntimeConfig> },
}

impl RuntimeRef {
    pub fn harness(&self) -> HarnessKind {
        match self {
            RuntimeRef::Named { harness, .. } => *harness,
            RuntimeRef::Inline { runtime } => runtime.harness,
        }
    }
}

/// The fields of an inline runtime that would let a message choose what a worker sends where or
/// which of its secrets it uses; an inline runtime with any of them never travels.
pub fn forbidden_inline_fields(r: &RuntimeConfig) -> Vec<&'static str> {
    let mut out = Vec::new();
    if r.env.is_some() {
        out.push("env");
    }
    if r.api_key_env.is_some() {
        out.push("api_key_env");
    }
    if r.args.is_some() {
        out.push("args");
    }
    if r.base_url.is_some() {
        out.push("base_url");
    }
    out
}

/// An agent, as a worker opens it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentSpec {
    pub key: String,
    pub runtime: RuntimeRef,
    pub instructions: Option<String>,
    /// The folder it works in (the owner's, made absolute): a worker serves only its roots.
    pub cwd: PathBuf,
    /// A sandbox name (the worker's `[sandboxes]`) or an inline policy; none means the worker's
    /// floor.
    pub sandbox: Option<Value>,
    pub labels: Value,
    /// Its skill folders, absolute (a worker on another machine needs the same paths).
    #[serde(default)]
    pub skills: Vec<PathBuf>,
}

/// One turn of an agent: what `a.run(turn)` asked, run to its settled outcome by a worker. Its
/// run, attempt and op id are in the sealed envelope's place as well, and must agree.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpRequest {
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

impl OpRequest {
    pub fn place(&self) -> super::seal::Place {
        super::seal::Place::op(&self.run, self.attempt, &self.agent.key, &self.op_id)
    }
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

/// An outcome kept in the bucket: a worker's (`res.*`) or the owner's journal (`op.*`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Kept {
    pub worker: String,
    pub outcome: Outcome,
}
