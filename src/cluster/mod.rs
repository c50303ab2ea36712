//! Runs' agent operations on NATS JetStream, **the only module that names async-nats**. On one
//! machine nothing here is used. `options.rs` the servers, credentials and TLS of a connection
//! (credentials masked wherever a URL is shown); `connect.rs` reaches the servers (a bounded wait,
//! a clear error) and makes or checks the streams and the bucket (their schema version), retried
//! while a cluster elects; `wire.rs` the messages;
//! `remote.rs` the owner's side (`script run --nats`): each agent operation published to the ops
//! work-queue stream, its answer taken from a reply subject and journalled in the bucket with
//! create-only writes; `worker.rs` (`awf worker`): operations taken as slots free up and run by a
//! local run of its own (`shadow.rs`) through the same pipeline and harnesses as any run;
//! `sessions.rs` stores agents' sessions after each turn for another worker to take over.

mod admit;
mod affinity;
pub mod connect;
pub mod error;
pub mod key;
mod lease;
mod options;
pub mod remote;
pub mod runs;
pub mod seal;
mod sessions;
mod shadow;
mod store;
pub mod wire;
pub mod worker;

pub use connect::{connect, Cluster, Options};
pub use error::ClusterError;
pub use key::ClusterKey;
pub use sessions::key as session_key;

/// Where the cluster's lines for the operator go (the CLI passes stderr): this layer never prints.
pub type Report = std::sync::Arc<dyn Fn(String) + Send + Sync>;

/// The schema of what awf keeps on the server (streams, bucket, messages). A stream made by
/// another schema is refused with the fix.
pub const SCHEMA: &str = "2";
/// The work-queue stream of agent operations; subjects `awf.ops.<harness>`.
pub const OPS_STREAM: &str = "AWF_OPS";
/// The work-queue stream of whole runs (`awf runs submit`).
pub const RUNS_STREAM: &str = "AWF_RUNS";
/// The key-value bucket of runs' journals and workers' heartbeats.
pub const JOURNAL_BUCKET: &str = "AWF_JOURNAL";

/// The object store of agents' sessions, for another worker to take an agent over.
pub const SESSIONS_BUCKET: &str = "AWF_SESSIONS";

/// The subject operations of a harness are published on, for run `run` (its hash last: a run's
/// operations are purged by it when the run ends).
pub fn ops_subject(harness: crate::config::HarnessKind, run: &str) -> String {
    format!("awf.ops.{}.{}", harness.as_str(), hashed(run))
}

/// The filter of every run's operations of a harness on the shared subjects.
pub fn ops_filter(harness: crate::config::HarnessKind) -> String {
    format!("awf.ops.{}.*", harness.as_str())
}

/// A bucket key for a run's answered operation: run ids and op ids may hold characters keys may
/// not, so both are hashed (xxh3-128, hex).
pub fn op_key(run: &str, agent: &str, op_id: &str) -> String {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(agent.as_bytes());
    h.update(&[0]);
    h.update(op_id.as_bytes());
    format!("op.{}.{:032x}", hashed(run), h.digest128())
}

pub fn hashed(text: &str) -> String {
    format!("{:032x}", xxhash_rust::xxh3::xxh3_128(text.as_bytes()))
}
