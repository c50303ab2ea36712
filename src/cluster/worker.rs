//! `awf worker`: takes agent operations from the ops stream as its slots free up (one durable
//! pull consumer per harness, shared by every worker serving it), runs each through a local run
//! of its own (`shadow.rs`), heartbeats the message (in progress) while it runs, answers on the
//! operation's reply subject and acks. A worker killed mid-operation never acks: the server gives
//! the operation to another worker once the ack wait passes. An operation whose answer is in the
//! bucket already is answered from there, never run again.

use super::shadow::Shadows;
use super::wire::{OpRequest, Reply, WIRE};
use super::{lease, ops_subject, store, Cluster};
use crate::config::{Config, HarnessKind};
use async_nats::jetstream::consumer::{pull, PullConsumer};
use async_nats::jetstream::{AckKind, Message};
use futures_util::StreamExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long an operation a worker took may go without a heartbeat before the server gives it to
/// another worker (heartbeats come every third of it).
pub const ACK_WAIT: Duration = Duration::from_secs(6);
/// When an operation leased by another worker is offered again.
const RETRY_HELD: Duration = Duration::from_secs(2);

pub struct Options {
    pub slots: usize,
    pub runtimes: Vec<HarnessKind>,
    pub name: String,
    pub cwd: PathBuf,
    pub config: Config,
}

/// The consumer of a harness's operations, made on first use.
async fn consumer(cluster: &Cluster, harness: HarnessKind) -> Result<PullConsumer, String> {
    durable_consumer(cluster, format!("ops-{}", harness.as_str()), ops_subject(harness)).await
}

/// The durable pull consumer `name` on the ops stream, for the subjects `filter` matches.
pub(super) async fn durable_consumer(cluster: &Cluster, name: String, filter: String) -> Result<PullConsumer, String> {
    let config = pull::Config {
        durable_name: Some(name.clone()),
        filter_subject: filter,
        ack_wait: ACK_WAIT,
        max_ack_pending: 100_000,
        ..Default::default()
    };
    cluster
        .ops
        .get_or_create_consumer(&name, config)
        .await
        .map_err(|e| format!("cannot make the consumer {name} on {}: {e}", cluster.url))
}

/// Serves operations until `stop` is cancelled; then ends its local runs.
pub async fn serve(cluster: Cluster, options: Options, stop: CancellationToken) -> Result<(), String> {
    let mut consumers = Vec::new();
    for h in &options.runtimes {
        consumers.push(consumer(&cluster, *h).await?);
    }
    consumers.push(super::affinity::consumer(&cluster, &options.name).await?);
    tokio::spawn(super::affinity::beat(cluster.journal.clone(), options.name.clone(), stop.clone()));
    let slots = Arc::new(tokio::sync::Semaphore::new(options.slots));
    let shadows = Arc::new(Shadows::new(
        options.name.clone(),
        options.cwd.clone(),
        options.config.clone(),
        options.slots,
        tokio::runtime::Handle::current(),
        cluster.sessions.clone(),
    ));
    let names: Vec<&str> = options.runtimes.iter().map(|h| h.as_str()).collect();
    eprintln!(
        "awf worker {}: serving {} with {} slots on {}",
        options.name,
        names.join(", "),
        options.slots,
        cluster.url
    );
    // Every operation task holds a sender: when the last is dropped, none is in flight.
    let (inflight, mut drained) = tokio::sync::mpsc::channel::<()>(1);
    let mut pullers = tokio::task::JoinSet::new();
    for c in consumers {
        let (cluster, shadows, slots, stop) = (cluster.clone(), shadows.clone(), slots.clone(), stop.clone());
        let inflight = inflight.clone();
        pullers.spawn(async move { pull(c, cluster, shadows, slots, stop, inflight).await });
    }
    drop(inflight);
    let runs = tokio::spawn(super::runs::serve(cluster.clone(), options.name.clone(), options.slots, stop.clone()));
    while pullers.join_next().await.is_some() {}
    match runs.await {
        Ok(Err(e)) => tracing::warn!("{e}"),
        Err(e) => tracing::warn!("the runs of worker {}: {e}", options.name),
        Ok(Ok(())) => {}
    }
    // The local runs end (their operations cancelled), and each operation goes back to the queue.
    let done = shadows.clone();
    let _ = tokio::task::spawn_blocking(move || done.finish()).await;
    let _ = tokio::time::timeout(Duration::from_secs(10), drained.recv()).await;
    Ok(())
}

/// Takes one harness's operations while slots are free: it asks for as many as there are free
/// slots, waiting up to a second for them, and iterates each batch to its end (a batch dropped
/// early would leave the server a pull request for messages nobody reads).
async fn pull(
    c: PullConsumer,
    cluster: Cluster,
    shadows: Arc<Shadows>,
    slots: Arc<tokio::sync::Semaphore>,
    stop: CancellationToken,
    inflight: tokio::sync::mpsc::Sender<()>,
) {
    while !stop.is_cancelled() {
        // Wait for a free slot without taking it: the operation takes one when it starts.
        let free = tokio::select! {
            _ = stop.cancelled() => break,
            p = slots.acquire() => match p { Ok(p) => p, Err(_) => break },
        };
        drop(free);
        let want = slots.available_permits().max(1);
        let mut batch = match c.batch().max_messages(want).expires(Duration::from_secs(1)).messages().await {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!("fetching operations: {e}");
                tokio::time::sleep(Duration::from_millis(250)).await;
                continue;
            }
        };
        while let Some(next) = batch.next().await {
            match next {
                Ok(msg) => {
                    let (cluster, shadows, slots, stop) =
                        (cluster.clone(), shadows.clone(), slots.clone(), stop.clone());
                    let inflight = inflight.clone();
                    tokio::spawn(async move {
                        handle(&cluster, &shadows, &slots, &stop, msg).await;
                        drop(inflight);
                    });
                }
                Err(e) => tracing::debug!("a fetch ended: {e}"),
            }
        }
    }
}

async fn publish(cluster: &Cluster, subject: &str, reply: &Reply) {
    let Ok(body) = serde_json::to_vec(reply) else { return };
    if let Err(e) = cluster.client.publish(subject.to_string(), body.into()).await {
        tracing::warn!("answering on {subject}: {e}");
    }
    let _ = cluster.client.flush().await;
}

/// The outcome on record for an operation, by the worker that settled it: the worker's result,
/// else the owner's journal.
async fn on_record(cluster: &Cluster, req: &OpRequest) -> Option<(String, crate::run::Outcome)> {
    for key in [store::result_key(&req.journal_key), req.journal_key.clone()] {
        if let Some(stored) = store::read(&cluster.journal, &key).await {
            if let Ok(outcome) = serde_json::from_value(stored["outcome"].clone()) {
                return Some((stored["worker"].as_str().unwrap_or("?").to_string(), outcome));
            }
        }
    }
    None
}

/// One operation: answered from the bucket when it settled before (a redelivery), else run here.
async fn handle(
    cluster: &Cluster,
    shadows: &Arc<Shadows>,
    slots: &tokio::sync::Semaphore,
    stop: &CancellationToken,
    msg: Message,
) {
    let worker = shadows.name.clone();
    let req: OpRequest = match serde_json::from_slice(&msg.payload) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!("an operation message that does not parse (dropped): {e}");
            let _ = msg.ack_with(AckKind::Term).await;
            return;
        }
    };
    if req.v != WIRE {
        let why = format!("worker {worker} speaks version {WIRE} of the operation messages, not {}", req.v);
        let outcome = Reply::Settled { worker, outcome: super::shadow::failed_outcome(&req.op_id, why) };
        publish(cluster, &req.reply, &outcome).await;
        let _ = msg.ack().await;
        return;
    }
    if let Some((by, outcome)) = on_record(cluster, &req).await {
        publish(cluster, &req.reply, &Reply::Settled { worker: by, outcome }).await;
        let _ = msg.ack().await;
        return;
    }
    let lease_key = lease::key(&req.journal_key);
    let mut revision = match lease::take(&cluster.journal, &lease_key, &worker).await {
        Ok(lease::Take::Mine(rev)) => rev,
        Ok(lease::Take::Held(holder)) => {
            // Another worker runs it and renews its lease: come back once it answered or died.
            tracing::debug!("{} is leased by {holder}", req.op_id);
            let _ = msg.ack_with(AckKind::Nak(Some(RETRY_HELD))).await;
            return;
        }
        Err(e) => {
            tracing::warn!("{}: {e}", req.op_id);
            let _ = msg.ack_with(AckKind::Nak(Some(RETRY_HELD))).await;
            return;
        }
    };
    publish(cluster, &req.reply, &Reply::Taken { worker: worker.clone() }).await;
    let run = {
        let (shadows, req) = (shadows.clone(), req.clone());
        async move {
            // The slot is held until the operation settles; the message is heartbeated meanwhile.
            let _slot = slots.acquire().await;
            tokio::task::spawn_blocking(move || shadows.run(&req)).await
        }
    };
    tokio::pin!(run);
    let mut beat = tokio::time::interval(ACK_WAIT / 3);
    beat.tick().await;
    let outcome = loop {
        tokio::select! {
            done = &mut run => break done,
            _ = beat.tick() => {
                if let Err(e) = msg.ack_with(AckKind::Progress).await {
                    tracing::warn!("heartbeat for {}: {e}", req.op_id);
                }
                match lease::renew(&cluster.journal, &lease_key, &worker, revision).await {
                    Ok(rev) => revision = rev,
                    Err(e) => tracing::warn!("renewing the lease of {}: {e}", req.op_id),
                }
            }
        }
    };
    if !lease::still_mine(&cluster.journal, &lease_key, revision).await {
        // Another worker took the operation over while this one could not renew: its answer is
        // the one that counts, and this late one is dropped.
        tracing::warn!("{}: the lease passed to another worker; this answer is dropped", req.op_id);
        return;
    }
    if stop.is_cancelled() {
        // Stopped while it ran: the operation goes back to the queue, its lease given up, for
        // another worker to take at once.
        let _ = cluster.journal.delete(&lease_key).await;
        let _ = msg.ack_with(AckKind::Nak(None)).await;
        return;
    }
    let outcome =
        outcome.unwrap_or_else(|e| super::shadow::failed_outcome(&req.op_id, format!("worker {worker}: {e}")));
    // The outcome goes in the bucket before the reply: a reply is not kept, and a redelivery of
    // this operation is answered from there.
    let entry = serde_json::json!({ "run": req.run, "worker": worker, "outcome": outcome });
    let (by, outcome) = match store::create_first(&cluster.journal, &store::result_key(&req.journal_key), &entry).await
    {
        Ok((stands, _)) => match serde_json::from_value(stands["outcome"].clone()) {
            Ok(o) => (stands["worker"].as_str().unwrap_or("?").to_string(), o),
            Err(_) => (worker, outcome),
        },
        Err(e) => {
            tracing::warn!("{}: {e}", req.op_id);
            (worker, outcome)
        }
    };
    publish(cluster, &req.reply, &Reply::Settled { worker: by, outcome }).await;
    if let Err(e) = msg.double_ack().await {
        tracing::warn!("acknowledging {}: {e}", req.op_id);
    }
}
