//! The bucket's two kinds of entry per operation, both written create-only so that the first
//! stands: `res.<run>.<op>` (a worker's settled outcome: a redelivered operation is answered from
//! it, never run again, and an owner whose reply was lost finds it there) and `op.<run>.<op>` (the
//! owner's journal of an answer it accepted). Requests are retried while a cluster elects leaders.

use async_nats::jetstream::kv;
use serde_json::Value;
use std::time::{Duration, Instant};

/// How long a bucket request is retried before its error is reported.
const RETRY_FOR: Duration = Duration::from_secs(30);

/// The result key of an operation whose journal key is `journal_key`.
pub fn result_key(journal_key: &str) -> String {
    format!("res.{}", journal_key.strip_prefix("op.").unwrap_or(journal_key))
}

/// The entry under `key`, if there is one (a failed read counts as none).
pub async fn read(store: &kv::Store, key: &str) -> Option<Value> {
    let bytes = store.get(key).await.ok()??;
    serde_json::from_slice(&bytes).ok()
}

/// Writes `entry` under `key` unless an entry is there: returns the entry that stands and
/// whether it is this one.
pub async fn create_first(store: &kv::Store, key: &str, entry: &Value) -> Result<(Value, bool), String> {
    let start = Instant::now();
    loop {
        match store.create(key, entry.to_string().into()).await {
            Ok(_) => return Ok((entry.clone(), true)),
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => {
                if let Some(first) = read(store, key).await {
                    return Ok((first, false));
                }
            }
            Err(e) if start.elapsed() >= RETRY_FOR => return Err(format!("cannot write {key} in the bucket: {e}")),
            Err(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Retries `step` for up to `RETRY_FOR` (a cluster may be electing a leader).
pub async fn retried<T, E: std::fmt::Display, F, Fut>(mut step: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let start = Instant::now();
    loop {
        match step().await {
            Ok(v) => return Ok(v),
            Err(e) if start.elapsed() >= RETRY_FOR => return Err(e.to_string()),
            Err(e) => tracing::debug!("retrying: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
