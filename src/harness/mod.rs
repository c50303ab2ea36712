//! The harness boundary: what a turn is given, what it reports, and the sessions each harness
//! keeps per agent. One file per harness (`cli/` and `http/` hold the CLI and HTTP ones).

pub mod cli;
pub mod command;
pub mod error;
pub mod fake;
pub mod http;
pub mod net;
pub(crate) mod process;
pub mod scrubbed;
pub mod spawn;

use crate::accounting::{CostSource, Meter, Usage};
use crate::control::prompt::AnswerMode;
use crate::control::slot::ResultSlot;
use serde_json::Value;
use std::sync::Arc;

pub use crate::run::BoxFuture;
pub use error::HarnessError;

/// What a harness needs to know about the agent it serves.
#[derive(Debug, Clone)]
pub struct AgentInfo {
    pub key: String,
    pub instructions: Option<String>,
    pub model: String,
    pub effort: Option<String>,
    pub labels: Value,
}

/// One turn of an operation: the first one, or a check-in after an unanswered one.
pub struct TurnInput {
    pub op_id: String,
    /// The script's prompt, as written.
    pub prompt: String,
    /// What the agent is shown: the prompt (or the nudge) with the answer instructions.
    pub shown: String,
    /// 0 for the first turn, k for the k-th nudge.
    pub nudge: u32,
    /// The operation's check-in text, as the script gave it (a remote session sends it on).
    pub nudge_text: String,
    /// The nudge limit. Rejections count against it: a harness that retries within a turn (the
    /// HTTP ones) stops once `nudge` plus the slot's rejections passes it.
    pub max_nudges: u32,
    /// The operation's running spend: a harness adds each reply's usage as soon as it has it.
    pub meter: Arc<Meter>,
    /// The agent's n-th `run` (1-based).
    pub n: u64,
    pub slot: Arc<ResultSlot>,
    /// When the operation must settle, if it has a deadline.
    pub deadline: Option<crate::run::deadline::Deadline>,
    pub kind: TurnKind,
    /// Messages from other agents shown in this turn (already in `shown`).
    pub messages: Vec<crate::control::messenger::Held>,
    /// How this agent sends, asks and replies.
    pub messenger: Option<Arc<dyn crate::control::messenger::Messenger>>,
}

impl TurnInput {
    /// Whether the agent may be asked again after a rejection within this turn: rejections count
    /// against the nudge limit, and an answer rejected twice is not asked for again.
    pub fn may_retry(&self) -> bool {
        self.nudge + self.slot.rejections() <= self.max_nudges && !self.slot.stuck()
    }
}

/// Whether a turn serves an operation with a result, or wakes an agent for its messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnKind {
    Turn,
    Message,
}

/// How a turn ended, judged by the harness's events.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEnd {
    /// The turn finished; whether it answered is read from the slot.
    Ended,
    Failed(String),
    Blocked(String),
}

/// How a compaction went: the summary or why there is none, and what it spent (a model call is
/// billed like a turn, even one that failed).
#[derive(Debug)]
pub struct Compaction {
    pub summary: Result<String, HarnessError>,
    pub usage: Usage,
    pub cost_source: CostSource,
    pub simulated: bool,
}

impl Compaction {
    /// A compaction that spent nothing: refused, or answered in process.
    pub fn free(summary: Result<String, HarnessError>, simulated: bool) -> Compaction {
        let cost_source = if simulated { CostSource::Simulated } else { CostSource::Priced };
        Compaction { summary, usage: Usage::default(), cost_source, simulated }
    }
}

/// What a turn reports back to supervision.
#[derive(Debug, Clone)]
pub struct TurnReport {
    pub end: TurnEnd,
    pub usage: Usage,
    pub cost_source: CostSource,
    pub simulated: bool,
}

pub use crate::run::outcome::SessionRef;

/// What of a session another machine needs to take the agent over (see `Session::export`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum SessionExport {
    /// An HTTP agent's message history, as `agents/<slug>/history.json` holds it.
    History { messages: Value },
    /// A CLI agent's home (its files, `cli/carry.rs`) and the CLI's session id to resume.
    Home { session: String, files: Value },
    /// A session that cannot be carried (too large): whatever was stored before is dropped.
    Unstorable { why: String },
}

/// One agent's session with its harness. Operations on it run one at a time.
pub trait Session: Send {
    /// The harness session the last operation ran in, when the harness has one of its own.
    fn session_ref(&self) -> Option<SessionRef> {
        None
    }

    /// What tells, at any time (during a turn too), the CLI session this agent is in: a council it
    /// convenes knows its caller by it. `None` for harnesses without sessions of their own.
    fn caller_probe(&self) -> Option<cli::caller::CallerProbe> {
        None
    }

    /// How this session's agent answers a turn: what its prompt, nudges and rejections say.
    fn answer_mode(&self) -> AnswerMode {
        AnswerMode::Launcher
    }

    /// Runs one turn. Cancel safety: dropping the future abandons the turn; the harness must leave
    /// nothing running afterwards.
    fn turn(&mut self, input: TurnInput) -> BoxFuture<'_, TurnReport>;

    /// A new session on a copy of this one's history, or why this harness cannot fork.
    fn fork(&self, info: AgentInfo) -> Result<Box<dyn Session>, HarnessError>;

    /// Replaces the history with a summary: the summary (or why not), and what it spent.
    fn compact(&mut self, prompt: &str) -> BoxFuture<'_, Compaction>;

    /// The session's state for another machine to take the agent over; `None` for harnesses
    /// whose sessions are not carried over.
    fn export(&self) -> Option<SessionExport> {
        None
    }

    /// Takes over a session `export` gave, before the first turn.
    fn import(&mut self, _session: SessionExport) -> Result<(), HarnessError> {
        Err(HarnessError::Cannot("this harness cannot take over a stored session".into()))
    }

    /// Changes the model or effort for later turns.
    fn set(&mut self, model: Option<&str>, effort: Option<&str>) -> Result<(), HarnessError>;

    /// The control endpoint this session answers through, when it has one of its own (a forked
    /// CLI session gets a new one).
    fn endpoint(&self) -> Option<Arc<crate::control::server::Endpoint>> {
        None
    }
}

/// Why a responder script gave no answer, or could not be loaded: the script host's own error,
/// whose type this module does not know (it never names the scripting engine).
pub type ResponderError = Box<dyn std::error::Error + Send + Sync>;

/// Answers a fake agent's turns from a user script. Implemented by the script host, so that this
/// module never names the scripting engine: it sees only JSON.
pub trait Responder: Send + Sync {
    fn respond(&self, turn: &Value) -> Result<Value, ResponderError>;
}

/// Loads a fake responder script (the script host supplies it).
pub type ResponderLoader = Box<dyn Fn(&std::path::Path) -> Result<Arc<dyn Responder>, ResponderError> + Send + Sync>;
