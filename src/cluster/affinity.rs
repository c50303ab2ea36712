//! An agent's turns go to the worker that holds its session while that worker lives: the owner
//! sends a turn to the subject of the worker that settled the agent's last turn
//! (`awf.ops.<harness>.at.<worker>`, one consumer per worker) while that worker's heartbeat in the
//! bucket (`worker.<name>`) is fresh, else to the harness's shared subject; a turn sent to a worker
//! that dies before taking it is sent again on the shared subject. A worker that gets an agent
//! another held takes over the session stored after its last turn (`sessions.rs`). Heartbeats are
//! sealed and expire with the lease's time: a forged one does not keep a dead worker alive.
//! Subjects end in the run's hash, so that a run's operations can be purged when it ends.

use super::error::ClusterError;
use super::key::ClusterKey;
use super::seal::{self, Kind, Place};
use super::Cluster;
use crate::config::HarnessKind;
use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::kv;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often a worker says it is alive; it counts as gone after `lease::LEASE_TTL` of silence.
const BEAT: Duration = Duration::from_secs(2);

/// The subject of a harness's turns of run `run` meant for one worker.
pub fn subject(harness: HarnessKind, worker: &str, run: &str) -> String {
    format!("awf.ops.{}.at.{worker}.{}", harness.as_str(), super::hashed(run))
}

fn key(worker: &str) -> String {
    format!("worker.{worker}")
}

fn place(worker: &str) -> Place {
    Place { agent: worker.to_string(), ..Place::default() }
}

/// Puts the worker's heartbeat in the bucket until `stop`.
pub async fn beat(store: kv::Store, k: ClusterKey, worker: String, stop: CancellationToken) {
    let mut tick = tokio::time::interval(BEAT);
    while !stop.is_cancelled() {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tick.tick() => {
                let expires = seal::now_ms() + super::lease::LEASE_TTL.as_millis() as u64;
                let value = seal::seal(&k, Kind::Beat, place(&worker), expires, &());
                if let Err(e) = store.put(key(&worker), value.into()).await {
                    tracing::debug!("heartbeat of worker {worker}: {e}");
                }
            }
        }
    }
    let _ = store.delete(key(&worker)).await;
}

/// Whether `worker` said it was alive within the lease's time.
pub async fn alive(store: &kv::Store, k: &ClusterKey, worker: &str) -> bool {
    let Ok(Some(bytes)) = store.get(key(worker)).await else { return false };
    seal::open::<()>(k, &bytes, Kind::Beat).is_ok_and(|e| e.place == place(worker))
}

/// The consumer of the turns meant for this worker.
pub async fn consumer(cluster: &Cluster, worker: &str) -> Result<PullConsumer, ClusterError> {
    super::worker::durable_consumer(cluster, format!("at-{worker}"), format!("awf.ops.*.at.{worker}.*")).await
}
