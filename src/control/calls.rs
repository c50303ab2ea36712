//! What an agent's turn asks of the layers above the answer channel, as the `Messenger` carries
//! it: a council to convene (`Call`), the council that ran (`Convened`) or settled in the
//! background (`Settled`), a question for the
//! operator (`OperatorCall`). Plain data, shared by `convene.rs`, `operator.rs` and `messenger.rs`.

use crate::accounting::Usage;
use crate::run::deadline::Deadline;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// A council asked for by an agent's running operation.
pub struct Call {
    /// The calling agent's key and operation.
    pub agent: String,
    pub op_id: String,
    pub name: String,
    /// The params as the agent gave them (a JSON object).
    pub params: Value,
    /// The calling operation's deadline: the council's is never later.
    pub deadline: Option<Deadline>,
    /// What the calling operation reported spending so far: not yet in the run's accounts, it is
    /// taken from what the council may spend.
    pub spent: Usage,
    /// Cancelled when the calling operation ends or is cancelled: the council is stopped.
    pub ended: CancellationToken,
    /// The calling operation's meter: a council that settles while the operation is open is
    /// billed on it (and so on the operation's line); one that settles later, on a line of its own.
    pub meter: std::sync::Arc<crate::accounting::Meter>,
}

/// A council that ran (whatever its status).
pub struct Convened {
    pub run_id: String,
    /// Whether the council succeeded.
    pub ok: bool,
    /// Its `output` text, or why it failed.
    pub output: String,
    /// Its `result.json`; `None` when it ended without one (its task failed).
    pub result: Option<crate::record::docs::ResultDoc>,
    /// Everything it spent: billed to the calling agent.
    pub usage: Usage,
    /// What it spent by the model that spent it (its `by_model`).
    pub by_model: std::collections::BTreeMap<String, crate::accounting::Tally>,
}

/// A question from an agent's running operation.
pub struct OperatorCall {
    /// `<agent>/<op id>/ask-<n>`: the checkpoint's key.
    pub key: String,
    pub agent: String,
    pub question: String,
    pub schema: Value,
    /// The operation's deadline: the wait ends with it.
    pub deadline: Option<Deadline>,
    /// Cancelled when the operation ends or is cancelled.
    pub ended: CancellationToken,
}

/// A background council once settled, as its agent gets it (`wf council --wait` prints these, a
/// waking message says them). Fields in the order they print.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Settled {
    pub ok: bool,
    /// Its `output` text, or why it failed.
    pub output: String,
    pub run_id: String,
    pub status: crate::run::RunStatus,
    pub strategy: String,
}
