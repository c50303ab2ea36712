//! Whole runs on workers (`awf runs submit`): a run waits in the `AWF_RUNS` work-queue stream; a
//! worker takes it, runs its script in-process as the run's owner (its agents' turns go to the ops
//! stream like any `script run --nats`), heartbeats the message while it runs, puts the result in
//! the bucket (`run.<run>`) and acks. A worker that dies stops heartbeating: another takes the run
//! and starts its script again under the same run id, and every turn answered before is answered
//! from the bucket, never run again.

use super::{store, Cluster};
use crate::config::Config;
use crate::host::{drive, Host, Output};
use crate::run::{Limits, RunSpec};
use async_nats::jetstream::consumer::pull;
use async_nats::jetstream::{AckKind, Message};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The subject runs are queued on.
pub const RUNS_SUBJECT: &str = "awf.runs";

/// A queued run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRequest {
    pub v: u32,
    pub id: String,
    /// The script, absolute: workers must see the same paths.
    pub script: PathBuf,
    pub cwd: PathBuf,
    pub args: Value,
}

/// The bucket key of a run's result.
pub fn result_key(run: &str) -> String {
    format!("run.{}", super::hashed(run))
}

/// Queues a run; the run id is its message id, so a repeat is a duplicate.
pub async fn submit(cluster: &Cluster, req: &RunRequest) -> Result<(), String> {
    let payload = serde_json::to_vec(req).map_err(|e| e.to_string())?;
    store::retried(|| async {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", req.id.as_str());
        let ack = cluster.js.publish_with_headers(RUNS_SUBJECT, headers, payload.clone().into()).await?;
        ack.await.map(|_| ()).map_err(async_nats::Error::from)
    })
    .await
    .map_err(|e| format!("cannot queue the run on NATS at {}: {e}", cluster.url))
}

/// Takes queued runs, `most` at once, until `stop` is cancelled.
pub(super) async fn serve(
    cluster: Cluster,
    worker: String,
    most: usize,
    stop: CancellationToken,
) -> Result<(), String> {
    let config = pull::Config {
        durable_name: Some("runs".into()),
        filter_subject: RUNS_SUBJECT.into(),
        ack_wait: super::worker::ACK_WAIT,
        ..Default::default()
    };
    let consumer = cluster
        .runs
        .get_or_create_consumer("runs", config)
        .await
        .map_err(|e| format!("cannot make the consumer of runs on {}: {e}", cluster.url))?;
    let slots = Arc::new(tokio::sync::Semaphore::new(most));
    while !stop.is_cancelled() {
        let permit = tokio::select! {
            _ = stop.cancelled() => break,
            p = slots.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
        };
        let mut batch = match consumer.batch().max_messages(1).expires(Duration::from_secs(1)).messages().await {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!("fetching runs: {e}");
                tokio::time::sleep(Duration::from_millis(250)).await;
                continue;
            }
        };
        let mut permit = Some(permit);
        while let Some(next) = batch.next().await {
            let (Ok(msg), Some(p)) = (next, permit.take()) else { continue };
            let (cluster, worker) = (cluster.clone(), worker.clone());
            tokio::spawn(async move {
                take(&cluster, &worker, msg).await;
                drop(p);
            });
        }
    }
    Ok(())
}

/// One queued run, heartbeated while its script runs.
async fn take(cluster: &Cluster, worker: &str, msg: Message) {
    let req: RunRequest = match serde_json::from_slice(&msg.payload) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!("a run message that does not parse (dropped): {e}");
            let _ = msg.ack_with(AckKind::Term).await;
            return;
        }
    };
    if store::read(&cluster.journal, &result_key(&req.id)).await.is_some() {
        let _ = msg.ack().await;
        return;
    }
    eprintln!("awf worker {worker}: running {} ({})", req.id, req.script.display());
    let work = own(cluster, worker, &req);
    tokio::pin!(work);
    let mut beat = tokio::time::interval(super::worker::ACK_WAIT / 3);
    beat.tick().await;
    let result = loop {
        tokio::select! {
            r = &mut work => break r,
            _ = beat.tick() => { let _ = msg.ack_with(AckKind::Progress).await; }
        }
    };
    let result =
        result.unwrap_or_else(|e| json!({ "run_id": req.id, "status": "failed", "error": e, "worker": worker }));
    if let Err(e) = store::create_first(&cluster.journal, &result_key(&req.id), &result).await {
        tracing::warn!("{}: {e}", req.id);
    }
    let _ = msg.double_ack().await;
}

/// Runs the script as the run's owner, in a folder of this worker's
/// (`.awf/worker-runs/runs-<worker>/<run>`); returns what the bucket keeps of its result.
async fn own(cluster: &Cluster, worker: &str, req: &RunRequest) -> Result<Value, String> {
    let program = crate::script::load(&req.script, &req.cwd)?;
    let config = Config::load(&req.cwd).map_err(|e| e.to_string())?;
    let d = Limits::default();
    let limits = Limits {
        max_concurrency: config.limits.max_concurrency.unwrap_or(d.max_concurrency),
        max_agents: config.limits.max_agents.unwrap_or(d.max_agents),
        budget_usd: config.limits.budget_usd,
        budget_tokens: config.limits.budget_tokens,
        nudges: config.limits.nudges.unwrap_or(d.nudges),
        stall_timeout: config.stall_timeout().ok().flatten().unwrap_or(d.stall_timeout),
    };
    let spec = RunSpec {
        script: program.path.clone(),
        script_sha256: program.sha256.clone(),
        cwd: req.cwd.clone(),
        runs_dir: req.cwd.join(".awf/worker-runs").join(format!("runs-{worker}")),
        args: req.args.clone(),
        meta: program.meta.clone(),
        default_runtime: config.default_alias(),
        config,
        limits,
        deadline: None,
        sandbox: None,
        resume: None,
    };
    let rt = tokio::runtime::Handle::current();
    let host = Host::start(spec, Some(req.id.clone()), rt, Box::new(crate::script::load_responder))
        .map_err(|e| format!("cannot make the run folder: {e}"))?;
    host.agents.set_remote(super::remote::Owner::new(cluster.clone(), &host.run));
    let end = drive(host.clone(), &program, req.args.clone(), None, Output::Value).await;
    Ok(json!({ "run_id": req.id, "status": end.status, "value": end.value, "error": end.error, "worker": worker,
               "folder": host.run.dir().display().to_string() }))
}
