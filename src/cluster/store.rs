//! The bucket's two kinds of entry per operation, both sealed and written create-only so that the
//! first valid one stands: `res.<run>.<op>` (a worker's settled outcome: a redelivered operation
//! is answered from it, never run again, and an owner whose reply was lost finds it there) and
//! `op.<run>.<op>` (the owner's journal of an answer it accepted). An entry whose seal does not
//! open for that operation (a forger wrote first) does not count: it is replaced. Requests are
//! retried while a cluster elects leaders.

use super::error::ClusterError;
use super::key::ClusterKey;
use super::seal::{self, Kind, Place};
use async_nats::jetstream::kv;
use serde::de::DeserializeOwned;
use std::time::{Duration, Instant};

/// How long a bucket request is retried before its error is reported.
const RETRY_FOR: Duration = Duration::from_secs(30);

/// The result key of an operation whose journal key is `journal_key`.
pub fn result_key(journal_key: &str) -> String {
    format!("res.{}", journal_key.strip_prefix("op.").unwrap_or(journal_key))
}

/// The body of a sealed entry of `kind` for the operation at `place` (any attempt), if one is
/// there and opens. A failed read, or an entry that does not open, counts as none.
pub async fn read<T: DeserializeOwned>(
    store: &kv::Store,
    key: &str,
    cluster_key: &ClusterKey,
    kind: Kind,
    place: &Place,
) -> Option<T> {
    let bytes = store.get(key).await.ok()??;
    opened(&bytes, cluster_key, kind, place)
}

fn opened<T: DeserializeOwned>(bytes: &[u8], cluster_key: &ClusterKey, kind: Kind, place: &Place) -> Option<T> {
    let env = seal::open::<T>(cluster_key, bytes, kind).ok()?;
    env.place.same_op(place).then_some(env.body)
}

/// How a create-first write went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// This entry is the first.
    Created,
    /// A valid entry was there first: it stands.
    Found,
    /// An entry that did not open for this operation was there: this one replaced it.
    Replaced,
}

/// Writes the sealed `entry` under `key` unless a valid entry of `kind` for `place` is there:
/// returns the body that stands and how.
pub async fn create_first<T: DeserializeOwned>(
    store: &kv::Store,
    key: &str,
    entry: Vec<u8>,
    cluster_key: &ClusterKey,
    kind: Kind,
    place: &Place,
) -> Result<(T, Written), ClusterError> {
    let mine = || {
        opened::<T>(&entry, cluster_key, kind, place)
            .ok_or_else(|| ClusterError::nats(format!("cannot write {key} in the bucket"), "the entry does not open"))
    };
    let start = Instant::now();
    loop {
        let attempt = match store.create(key, entry.clone().into()).await {
            Ok(_) => return Ok((mine()?, Written::Created)),
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => match store.entry(key).await {
                Ok(Some(found)) => match opened::<T>(&found.value, cluster_key, kind, place) {
                    Some(first) => return Ok((first, Written::Found)),
                    None => match store.update(key, entry.clone().into(), found.revision).await {
                        Ok(_) => return Ok((mine()?, Written::Replaced)),
                        Err(e) => e.to_string(),
                    },
                },
                Ok(None) => "the entry went while it was read".to_string(),
                Err(e) => e.to_string(),
            },
            Err(e) => e.to_string(),
        };
        if start.elapsed() >= RETRY_FOR {
            return Err(ClusterError::nats(format!("cannot write {key} in the bucket"), attempt));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Retries `step` for up to `RETRY_FOR` (a cluster may be electing a leader); its last error.
pub async fn retried<T, E: std::fmt::Display, F, Fut>(mut step: F) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let start = Instant::now();
    loop {
        match step().await {
            Ok(v) => return Ok(v),
            Err(e) if start.elapsed() >= RETRY_FOR => return Err(e),
            Err(e) => tracing::debug!("retrying: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
