//! The statuses a run and a stage end in, as records write them.

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
