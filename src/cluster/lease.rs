//! Leases: the worker running an operation holds `lease.<run>.<op>` in the bucket, written with
//! an expected revision (create when absent, update at the revision read) and renewed at every
//! heartbeat. A redelivered operation whose lease another worker renewed within `LEASE_TTL` is not
//! run again; once the lease is stale (its holder died) the next worker takes it over, and the
//! old holder, finding the revision moved on, drops its answer: a late answer is refused.
//! A lease is sealed, expiring `LEASE_TTL` after it was written: one that does not open (stale,
//! or forged) is taken over. Freshness compares the holder's wall clock with the reader's.

use super::error::ClusterError;
use super::key::ClusterKey;
use super::seal::{self, Kind, Place};
use async_nats::jetstream::kv;

use std::time::Duration;

/// How long a lease stands without renewal.
pub const LEASE_TTL: Duration = Duration::from_secs(15);

/// The lease key of an operation whose journal key is `journal_key`.
pub fn key(journal_key: &str) -> String {
    format!("lease.{}", journal_key.strip_prefix("op.").unwrap_or(journal_key))
}

/// What a lease says: the worker that holds it.
#[derive(serde::Serialize, serde::Deserialize)]
struct Lease {
    worker: String,
}

/// A lease's value: who holds it, sealed to expire `LEASE_TTL` from now.
fn body(k: &ClusterKey, place: &Place, worker: &str) -> Vec<u8> {
    let expires = seal::now_ms() + LEASE_TTL.as_millis() as u64;
    seal::seal(k, Kind::Lease, place.clone(), expires, &Lease { worker: worker.to_string() })
}

/// The holder of a fresh lease for `place`, if the value is one.
fn holder(k: &ClusterKey, place: &Place, value: &[u8]) -> Option<String> {
    let env = seal::open::<Lease>(k, value, Kind::Lease).ok().filter(|e| e.place.same_op(place))?;
    Some(env.body.worker)
}

/// Whether this worker holds the lease (and at which revision), or who does.
pub enum Take {
    Mine(u64),
    Held(String),
}

/// Takes the lease of `key` for `worker` unless another worker holds it fresh.
pub async fn take(
    store: &kv::Store,
    k: &ClusterKey,
    key: &str,
    place: &Place,
    worker: &str,
) -> Result<Take, ClusterError> {
    let entry = store.entry(key).await.map_err(|e| ClusterError::nats(format!("cannot read {key}"), e))?;
    let revision = match entry {
        None => {
            return match store.create(key, body(k, place, worker).into()).await {
                Ok(rev) => Ok(Take::Mine(rev)),
                Err(_) => Ok(Take::Held("another worker".into())),
            }
        }
        Some(e) => {
            if let Some(holder) = holder(k, place, &e.value).filter(|h| h != worker) {
                return Ok(Take::Held(holder));
            }
            e.revision
        }
    };
    match store.update(key, body(k, place, worker).into(), revision).await {
        Ok(rev) => Ok(Take::Mine(rev)),
        Err(_) => Ok(Take::Held("another worker".into())),
    }
}

/// Renews a held lease: the new revision, or an error when another worker took it over (or the
/// bucket did not answer: the caller retries at the next heartbeat).
pub async fn renew(
    store: &kv::Store,
    k: &ClusterKey,
    key: &str,
    place: &Place,
    worker: &str,
    revision: u64,
) -> Result<u64, kv::UpdateError> {
    store.update(key, body(k, place, worker).into(), revision).await
}

/// Whether the lease is still this worker's at `revision` (nobody took it over since).
pub async fn still_mine(store: &kv::Store, key: &str, revision: u64) -> bool {
    match store.entry(key).await {
        Ok(Some(e)) => e.revision == revision,
        // The bucket cannot say: the answer's create-only write decides.
        Err(_) => true,
        Ok(None) => false,
    }
}
