//! The statuses a run, a stage and an operation end in, who made a decision and from what, as
//! records write them, and `Recorded`: a status as read back, kept as written when this version
//! does not know it.

use serde::{Deserialize, Serialize};

/// A run's (or one attempt's) status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunStatus {
    /// Waiting for a slot (`awf serve`; a background council, for one of the machine's pool).
    Queued,
    Running,
    /// Running, parked on a checkpoint until the operator answers (`awf runs answer`).
    Waiting,
    Succeeded,
    /// The workflow failed (exit 1).
    Failed,
    /// `ctx.stop` ended it (exit 3).
    Stopped,
    /// Ctrl-C, `awf runs stop`, the API, or the run's deadline (exit 4).
    Cancelled,
    /// Recorded `running`, but its process is gone.
    Interrupted,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Queued => "queued",
            RunStatus::Running => "running",
            RunStatus::Waiting => "waiting",
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::Stopped => "stopped",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Interrupted => "interrupted",
        }
    }

    /// Whether the run is over (nothing more will happen to it in this attempt).
    pub fn is_final(self) -> bool {
        !matches!(self, RunStatus::Queued | RunStatus::Running | RunStatus::Waiting)
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a stage ended, as `stages.jsonl` records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StageStatus {
    Succeeded,
    Failed,
    /// The run was stopped while the stage ran.
    Stopped,
    /// An earlier attempt's value was used; the stage did not run again.
    Reused,
}

impl StageStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            StageStatus::Succeeded => "succeeded",
            StageStatus::Failed => "failed",
            StageStatus::Stopped => "stopped",
            StageStatus::Reused => "reused",
        }
    }

    /// Whether a later attempt may reuse the stage's value.
    pub fn reusable(self) -> bool {
        matches!(self, StageStatus::Succeeded | StageStatus::Reused)
    }
}

/// How an operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutcomeKind {
    Answered,
    Unanswered,
    Blocked,
    TimedOut,
    Failed,
    Cancelled,
}

impl OutcomeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeKind::Answered => "answered",
            OutcomeKind::Unanswered => "unanswered",
            OutcomeKind::Blocked => "blocked",
            OutcomeKind::TimedOut => "timed-out",
            OutcomeKind::Failed => "failed",
            OutcomeKind::Cancelled => "cancelled",
        }
    }
}

/// Who made a decision's choice (`ctx.decisions.decide`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DecidedBy {
    /// The decision model, at or above the confidence floor.
    Model,
    /// The operator, asked at a checkpoint (`fallback: "operator"`).
    Operator,
    /// The spec's `fallback: "default:<option>"`.
    Default,
}

impl DecidedBy {
    pub fn as_str(self) -> &'static str {
        match self {
            DecidedBy::Model => "model",
            DecidedBy::Operator => "operator",
            DecidedBy::Default => "default",
        }
    }
}

/// Where a decision's distribution over its options came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DecisionSource {
    /// The log-probabilities of the tokens where the model wrote its choice.
    Logprobs,
    /// The model's own `confidence` for its choice (the rest spread evenly over the others), when
    /// its reply came without log-probabilities.
    Claimed,
    /// Its reply came with log-probabilities that do not yield the choice it wrote (a choice or
    /// key spelled with escapes, tokens of another text): no distribution, and never the claim.
    LogprobsUnread,
    /// The model gave no valid answer: no distribution.
    None,
}

impl DecisionSource {
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionSource::Logprobs => "logprobs",
            DecisionSource::Claimed => "claimed",
            DecisionSource::LogprobsUnread => "logprobs-unread",
            DecisionSource::None => "none",
        }
    }
}

/// A value as read back from a record: known to this version, or kept as it was written (a newer
/// awf's status, say), so that a reader shows it rather than fail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Recorded<T> {
    Known(T),
    Other(String),
}

impl<T> From<T> for Recorded<T> {
    fn from(known: T) -> Recorded<T> {
        Recorded::Known(known)
    }
}

impl<T: Copy> Recorded<T> {
    /// The value, when this version knows it.
    pub fn known(&self) -> Option<T> {
        match self {
            Recorded::Known(t) => Some(*t),
            Recorded::Other(_) => None,
        }
    }
}

/// A status's name as records write it.
pub trait Named: Copy {
    fn name(self) -> &'static str;
}

impl Named for RunStatus {
    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl Named for StageStatus {
    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl Named for OutcomeKind {
    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl Named for DecidedBy {
    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl Named for DecisionSource {
    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl<T: Named> Recorded<T> {
    /// As written.
    pub fn as_str(&self) -> &str {
        match self {
            Recorded::Known(s) => s.name(),
            Recorded::Other(s) => s,
        }
    }
}
