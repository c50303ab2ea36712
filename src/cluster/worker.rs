//! `awf worker`: takes agent operations from the ops stream as its slots free up (one durable
//! pull consumer per harness, shared by every worker serving it), runs each through a local run
//! of its own (`shadow.rs`), heartbeats the message (in progress) while it runs, answers on the
//! operation's reply subject and acks. A worker killed mid-operation never acks: the server gives
//! the operation to another worker once the ack wait passes. An operation whose answer is in the
//! bucket already is answered from there, never run again. A message that does not open with the
//! cluster key (unsigned, another key, another version, expired: past its deadline) is dropped,
//! reported and counted; an operation the worker's rules refuse (`admit.rs`) fails saying why.

pub use super::admit::Rules;
use super::error::ClusterError;
use super::key::ClusterKey;
use super::seal::{self, Kind, Refusal};
use super::shadow::Shadows;
use super::wire::{Kept, OpRequest, Reply, REPLY_TTL};
use super::{lease, ops_filter, store, Cluster, Report};
use crate::config::HarnessKind;
use async_nats::jetstream::consumer::{pull, PullConsumer};
use async_nats::jetstream::{AckKind, Message};
use futures_util::StreamExt;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long an operation a worker took may go without a heartbeat before the server gives it to
/// another worker (heartbeats come every third of it).
pub const ACK_WAIT: Duration = Duration::from_secs(6);
/// When an operation leased by another worker is offered again.
const RETRY_HELD: Duration = Duration::from_secs(2);

pub struct Options {
    pub slots: usize,
    pub name: String,
    pub cwd: PathBuf,
    pub key: ClusterKey,
    /// What it runs: harnesses, runtimes by name, roots, the sandbox floor.
    pub rules: Rules,
    /// Its local runs' limits, resolved from its awf.toml as it started (`run::limits::for_worker`).
    pub limits: crate::run::Limits,
    /// Where its lines go (the operator's stderr).
    pub report: Report,
}

/// What a worker did, counted while it serves.
#[derive(Default)]
pub struct Stats {
    pub ran: AtomicU64,
    refused: Mutex<BTreeMap<&'static str, u64>>,
}

impl Stats {
    pub(super) fn refused(&self, why: &Refusal) {
        *self.refused.lock().unwrap_or_else(|p| p.into_inner()).entry(why.code()).or_default() += 1;
    }

    /// How many messages were refused, by why.
    pub fn refusals(&self) -> BTreeMap<&'static str, u64> {
        self.refused.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// One line: operations run, messages refused and why.
    pub fn summary(&self) -> String {
        let refused = self.refusals();
        let total: u64 = refused.values().sum();
        let by: Vec<String> = refused.iter().map(|(k, n)| format!("{n} {k}")).collect();
        let by = if by.is_empty() { String::new() } else { format!(" ({})", by.join(", ")) };
        format!("{} operations run, {total} messages refused{by}", self.ran.load(Ordering::Relaxed))
    }
}

/// What every operation task shares.
struct Ctx {
    cluster: Cluster,
    shadows: Arc<Shadows>,
    slots: tokio::sync::Semaphore,
    stop: CancellationToken,
    key: ClusterKey,
    rules: Rules,
    report: Report,
    stats: Arc<Stats>,
}

/// The consumer of a harness's operations, made on first use.
async fn consumer(cluster: &Cluster, harness: HarnessKind) -> Result<PullConsumer, ClusterError> {
    durable_consumer(cluster, format!("ops-{}", harness.as_str()), ops_filter(harness)).await
}

/// The durable pull consumer `name` on the ops stream, for the subjects `filter` matches.
pub(super) async fn durable_consumer(
    cluster: &Cluster,
    name: String,
    filter: String,
) -> Result<PullConsumer, ClusterError> {
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
        .map_err(|e| ClusterError::nats(format!("cannot make the consumer {name} on {}", cluster.url), e))
}

/// Serves operations until `stop` is cancelled; then ends its local runs. Returns what it did.
pub async fn serve(cluster: Cluster, options: Options, stop: CancellationToken) -> Result<Arc<Stats>, ClusterError> {
    let mut consumers = Vec::new();
    for h in &options.rules.serves {
        consumers.push(consumer(&cluster, *h).await?);
    }
    consumers.push(super::affinity::consumer(&cluster, &options.name).await?);
    let beat = super::affinity::beat(cluster.journal.clone(), options.key.clone(), options.name.clone(), stop.clone());
    tokio::spawn(beat);
    let shadows = Arc::new(Shadows::new(
        options.name.clone(),
        options.cwd.clone(),
        options.rules.config.clone(),
        options.limits.clone(),
        tokio::runtime::Handle::current(),
        (cluster.sessions.clone(), options.key.clone(), options.report.clone()),
    ));
    let names: Vec<&str> = options.rules.serves.iter().map(|h| h.as_str()).collect();
    let roots: Vec<String> = options.rules.roots.iter().map(|r| r.display().to_string()).collect();
    let floor = options.rules.floor.as_ref().map_or("none".to_string(), |f| f.name.clone());
    (options.report)(format!(
        "awf worker {}: serving {} with {} slots on {} (roots {}; sandbox floor {floor}; cluster key from {})",
        options.name,
        names.join(", "),
        options.slots,
        cluster.url,
        roots.join(", "),
        options.key.source
    ));
    let stats = Arc::new(Stats::default());
    let ctx = Arc::new(Ctx {
        cluster: cluster.clone(),
        shadows: shadows.clone(),
        slots: tokio::sync::Semaphore::new(options.slots),
        stop: stop.clone(),
        key: options.key.clone(),
        rules: options.rules.clone(),
        report: options.report.clone(),
        stats: stats.clone(),
    });
    // Every operation task holds a sender: when the last is dropped, none is in flight.
    let (inflight, mut drained) = tokio::sync::mpsc::channel::<()>(1);
    let mut pullers = tokio::task::JoinSet::new();
    for c in consumers {
        let (ctx, inflight) = (ctx.clone(), inflight.clone());
        pullers.spawn(async move { pull(c, ctx, inflight).await });
    }
    drop(inflight);
    let runs = super::runs::Serving {
        cluster: cluster.clone(),
        worker: options.name.clone(),
        most: options.slots,
        key: options.key.clone(),
        rules: options.rules.clone(),
        report: options.report.clone(),
        stats: stats.clone(),
    };
    let runs = tokio::spawn(runs.serve(stop.clone()));
    while pullers.join_next().await.is_some() {}
    match runs.await {
        Ok(Err(e)) => (options.report)(e.to_string()),
        Err(e) => (options.report)(format!("the runs of worker {}: {e}", options.name)),
        Ok(Ok(())) => {}
    }
    // The local runs end (their operations cancelled), and each operation goes back to the queue.
    let done = shadows.clone();
    let _ = tokio::task::spawn_blocking(move || done.finish()).await;
    let _ = tokio::time::timeout(Duration::from_secs(10), drained.recv()).await;
    Ok(stats)
}

/// Takes one harness's operations while slots are free: it asks for as many as there are free
/// slots, waiting up to a second for them, and iterates each batch to its end (a batch dropped
/// early would leave the server a pull request for messages nobody reads).
async fn pull(c: PullConsumer, ctx: Arc<Ctx>, inflight: tokio::sync::mpsc::Sender<()>) {
    while !ctx.stop.is_cancelled() {
        // Wait for a free slot without taking it: the operation takes one when it starts.
        let free = tokio::select! {
            _ = ctx.stop.cancelled() => break,
            p = ctx.slots.acquire() => match p { Ok(p) => p, Err(_) => break },
        };
        drop(free);
        let want = ctx.slots.available_permits().max(1);
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
                    let (ctx, inflight) = (ctx.clone(), inflight.clone());
                    tokio::spawn(async move {
                        handle(&ctx, msg).await;
                        drop(inflight);
                    });
                }
                Err(e) => tracing::debug!("a fetch ended: {e}"),
            }
        }
    }
}

/// Sends a sealed reply for the operation `req`.
async fn publish(ctx: &Ctx, req: &OpRequest, reply: &Reply) {
    let body = seal::seal(&ctx.key, Kind::Reply, req.place(), super::wire::expires_in(REPLY_TTL), reply);
    if let Err(e) = ctx.cluster.client.publish(req.reply.clone(), body.into()).await {
        tracing::warn!("answering on {}: {e}", req.reply);
    }
    let _ = ctx.cluster.client.flush().await;
}

/// The outcome on record for an operation, by the worker that settled it: the worker's result,
/// else the owner's journal (only entries sealed for this operation count).
async fn on_record(ctx: &Ctx, req: &OpRequest) -> Option<Kept> {
    let (journal, place) = (&ctx.cluster.journal, req.place());
    let result_key = store::result_key(&req.journal_key);
    match store::read::<Kept>(journal, &result_key, &ctx.key, Kind::Outcome, &place).await {
        Some(kept) => Some(kept),
        None => store::read::<Kept>(journal, &req.journal_key, &ctx.key, Kind::Journal, &place).await,
    }
}

/// Opens an operation message: `None` (reported, counted, dropped for good) when it does not open
/// with the cluster key or its body names another operation than its seal.
async fn opened(ctx: &Ctx, msg: &Message) -> Option<OpRequest> {
    let refusal = match seal::open::<OpRequest>(&ctx.key, &msg.payload, Kind::Op) {
        Ok(env) if env.place == env.body.place() => return Some(env.body),
        Ok(_) => Refusal::Misplaced,
        Err(r) => r,
    };
    ctx.stats.refused(&refusal);
    (ctx.report)(format!(
        "awf worker {}: an operation message on {} was dropped: {refusal}",
        ctx.shadows.name, msg.subject
    ));
    let _ = msg.ack_with(AckKind::Term).await;
    None
}

/// One operation: answered from the bucket when it settled before (a redelivery), else run here.
async fn handle(ctx: &Ctx, msg: Message) {
    let worker = ctx.shadows.name.clone();
    let Some(req) = opened(ctx, &msg).await else { return };
    if let Some(kept) = on_record(ctx, &req).await {
        publish(ctx, &req, &Reply::Settled { worker: kept.worker, outcome: kept.outcome }).await;
        let _ = msg.ack().await;
        return;
    }
    let admitted = match ctx.rules.admit(&req.agent) {
        Ok(a) => a,
        Err(why) => {
            let why = format!("worker {worker} refused the operation: {why}");
            (ctx.report)(format!("awf worker {worker}: {} of run {}: {why}", req.op_id, req.run));
            let outcome = super::shadow::failed_outcome(&req.op_id, why);
            publish(ctx, &req, &Reply::Settled { worker, outcome }).await;
            let _ = msg.ack().await;
            return;
        }
    };
    let (lease_key, place) = (lease::key(&req.journal_key), req.place());
    let mut revision = match lease::take(&ctx.cluster.journal, &ctx.key, &lease_key, &place, &worker).await {
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
    publish(ctx, &req, &Reply::Taken { worker: worker.clone() }).await;
    let run = {
        let (shadows, req) = (ctx.shadows.clone(), req.clone());
        async move {
            // The slot is held until the operation settles; the message is heartbeated meanwhile.
            let _slot = ctx.slots.acquire().await;
            tokio::task::spawn_blocking(move || shadows.run(&req, admitted)).await
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
                match lease::renew(&ctx.cluster.journal, &ctx.key, &lease_key, &place, &worker, revision).await {
                    Ok(rev) => revision = rev,
                    Err(e) => tracing::warn!("renewing the lease of {}: {e}", req.op_id),
                }
            }
        }
    };
    if !lease::still_mine(&ctx.cluster.journal, &lease_key, revision).await {
        // Another worker took the operation over while this one could not renew: its answer is
        // the one that counts, and this late one is dropped.
        tracing::warn!("{}: the lease passed to another worker; this answer is dropped", req.op_id);
        return;
    }
    if ctx.stop.is_cancelled() {
        // Stopped while it ran: the operation goes back to the queue, its lease given up, for
        // another worker to take at once.
        let _ = ctx.cluster.journal.delete(&lease_key).await;
        let _ = msg.ack_with(AckKind::Nak(None)).await;
        return;
    }
    ctx.stats.ran.fetch_add(1, Ordering::Relaxed);
    let outcome =
        outcome.unwrap_or_else(|e| super::shadow::failed_outcome(&req.op_id, format!("worker {worker}: {e}")));
    // The outcome goes in the bucket before the reply: a reply is not kept, and a redelivery of
    // this operation is answered from there.
    let kept = Kept { worker: worker.clone(), outcome };
    let entry =
        seal::seal(&ctx.key, Kind::Outcome, place.clone(), super::wire::expires_in(super::wire::KEPT_TTL), &kept);
    let key = store::result_key(&req.journal_key);
    let kept =
        match store::create_first::<Kept>(&ctx.cluster.journal, &key, entry, &ctx.key, Kind::Outcome, &place).await {
            Ok((stands, _)) => stands,
            Err(e) => {
                tracing::warn!("{}: {e}", req.op_id);
                kept
            }
        };
    publish(ctx, &req, &Reply::Settled { worker: kept.worker, outcome: kept.outcome }).await;
    if let Err(e) = msg.double_ack().await {
        tracing::warn!("acknowledging {}: {e}", req.op_id);
    }
}
