//! Whole runs on workers (`awf runs submit`): a run waits in the `AWF_RUNS` work-queue stream; a
//! worker takes it, runs its script in-process as the run's owner (its agents' turns go to the ops
//! stream like any `script run --nats`), heartbeats the message while it runs, puts the result in
//! the bucket (`run.<run>`) and acks. A worker that dies stops heartbeating: another takes the run
//! and starts its script again under the same run id, and every turn answered before is answered
//! from the bucket, never run again. A run request is sealed with the cluster key (one that does
//! not open is dropped and counted); its script and folder must be under the worker's roots; what
//! reaches the bucket of a run that could not start names the problem, never a line of a file.

use super::admit::Rules;
use super::error::ClusterError;
use super::key::ClusterKey;
use super::seal::{self, Kind, Place};
use super::worker::Stats;
use super::{store, Cluster, Report};
use crate::config::Config;
use crate::host::launch::{self, Admission, CouncilPool, Request};
use crate::host::Output;
use crate::run::limits::Overrides;
use crate::run::RunSpec;
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

fn place(run: &str) -> Place {
    Place { run: run.to_string(), ..Place::default() }
}

/// Queues a run, sealed; the run id is its message id, so a repeat is a duplicate.
pub async fn submit(cluster: &Cluster, key: &ClusterKey, req: &RunRequest) -> Result<(), ClusterError> {
    submit_sealed(&cluster.js, key, req)
        .await
        .map_err(|e| ClusterError::nats(format!("cannot queue the run on NATS at {}", cluster.url), e))
}

/// Queues a run, sealed, through a JetStream context (`submit` names the server in its error).
pub async fn submit_sealed(
    js: &async_nats::jetstream::Context,
    key: &ClusterKey,
    req: &RunRequest,
) -> Result<(), async_nats::Error> {
    let payload = seal::seal(key, Kind::Run, place(&req.id), super::wire::expires_in(super::wire::RUN_TTL), req);
    store::retried(|| async {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", req.id.as_str());
        let ack = js.publish_with_headers(RUNS_SUBJECT, headers, payload.clone().into()).await?;
        ack.await.map(|_| ()).map_err(async_nats::Error::from)
    })
    .await
}

/// A worker's serving of whole runs.
pub(super) struct Serving {
    pub cluster: Cluster,
    pub worker: String,
    /// Runs at once.
    pub most: usize,
    pub key: ClusterKey,
    pub rules: Rules,
    pub report: Report,
    pub stats: Arc<Stats>,
}

impl Serving {
    /// Takes queued runs, `most` at once, until `stop` is cancelled.
    pub async fn serve(self, stop: CancellationToken) -> Result<(), ClusterError> {
        let config = pull::Config {
            durable_name: Some("runs".into()),
            filter_subject: RUNS_SUBJECT.into(),
            ack_wait: super::worker::ACK_WAIT,
            ..Default::default()
        };
        let consumer =
            self.cluster.runs.get_or_create_consumer("runs", config).await.map_err(|e| {
                ClusterError::nats(format!("cannot make the consumer of runs on {}", self.cluster.url), e)
            })?;
        let me = Arc::new(self);
        let slots = Arc::new(tokio::sync::Semaphore::new(me.most));
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
                let me = me.clone();
                tokio::spawn(async move { me.take(msg, p).await });
            }
        }
        Ok(())
    }

    /// Opens a run message: `None` (reported, counted, dropped for good) when it does not open.
    async fn opened(&self, msg: &Message) -> Option<RunRequest> {
        let refusal = match seal::open::<RunRequest>(&self.key, &msg.payload, Kind::Run) {
            Ok(env) if env.place == place(&env.body.id) => return Some(env.body),
            Ok(_) => seal::Refusal::Misplaced,
            Err(r) => r,
        };
        self.stats.refused(&refusal);
        (self.report)(format!("awf worker {}: a run message was dropped: {refusal}", self.worker));
        let _ = msg.ack_with(AckKind::Term).await;
        None
    }

    /// One queued run, heartbeated while its script runs; it holds `slot` until it ends.
    async fn take(&self, msg: Message, slot: tokio::sync::OwnedSemaphorePermit) {
        let Some(req) = self.opened(&msg).await else { return };
        let key = result_key(&req.id);
        let at = place(&req.id);
        if store::read::<Value>(&self.cluster.journal, &key, &self.key, Kind::RunResult, &at).await.is_some() {
            let _ = msg.ack().await;
            return;
        }
        (self.report)(format!("awf worker {}: running {} ({})", self.worker, req.id, req.script.display()));
        let work = self.own(&req, slot);
        tokio::pin!(work);
        let mut beat = tokio::time::interval(super::worker::ACK_WAIT / 3);
        beat.tick().await;
        let result = loop {
            tokio::select! {
                r = &mut work => break r,
                _ = beat.tick() => { let _ = msg.ack_with(AckKind::Progress).await; }
            }
        };
        let result = result.unwrap_or_else(|e| {
            (self.report)(format!("awf worker {}: run {}: {e}", self.worker, req.id));
            json!({ "run_id": req.id, "status": "failed", "error": e.to_string(), "worker": self.worker })
        });
        let entry =
            seal::seal(&self.key, Kind::RunResult, at.clone(), super::wire::expires_in(super::wire::KEPT_TTL), &result);
        let written = store::create_first::<Value>(&self.cluster.journal, &key, entry, &self.key, Kind::RunResult, &at);
        if let Err(e) = written.await {
            tracing::warn!("{}: {e}", req.id);
        }
        let _ = msg.double_ack().await;
    }

    /// Runs the script as the run's owner, in a folder of this worker's
    /// (`.awf/worker-runs/runs-<worker>/<run>`); returns what the bucket keeps of its result,
    /// scrubbed. An error names what could not be done, never a line of the files it read.
    async fn own(&self, req: &RunRequest, slot: tokio::sync::OwnedSemaphorePermit) -> Result<Value, ClusterError> {
        let cwd = self.rules.under_roots(&req.cwd, "the run's folder")?;
        let script = self.rules.under_roots(&req.script, "the script")?;
        let program = crate::script::load(&script, &cwd).map_err(|full| {
            tracing::warn!("{full}");
            ClusterError::Run(format!(
                "the script {} does not load on worker {} (its log has the error)",
                script.display(),
                self.worker
            ))
        })?;
        let config = Config::load(&cwd).map_err(|e| {
            tracing::warn!("{e}");
            ClusterError::Run(format!("the run's folder has an awf.toml that does not load on worker {}", self.worker))
        })?;
        // Refused as `script run` refuses it, naming the field and the file, never its line.
        let limits = crate::run::limits::resolve(&Overrides::default(), None, &config)
            .map_err(|e| ClusterError::Run(format!("the run's awf.toml is refused on worker {}: {e}", self.worker)))?;
        let spec = RunSpec {
            script: program.path.clone(),
            script_sha256: program.sha256.clone(),
            cwd: cwd.clone(),
            runs_dir: cwd.join(".awf/worker-runs").join(format!("runs-{}", self.worker)),
            args: req.args.clone(),
            meta: program.meta.clone(),
            default_runtime: config.default_alias(),
            config,
            limits,
            deadline: None,
            sandbox: None,
            resume: None,
            isolation: Default::default(),
        };
        let rt = tokio::runtime::Handle::current();
        let caps = crate::council::child::capabilities(CouncilPool::Machine);
        let host = launch::start(Request { spec, id: Some(req.id.clone()), caller: None, parent: None }, rt, caps)
            .map_err(|e| ClusterError::Run(e.to_string()))?;
        let owner = super::remote::Owner::new(self.cluster.clone(), self.key.clone(), &host.run);
        host.agents.set_remote(owner.clone());
        let admission = Admission::WorkerSlot(slot);
        let end = launch::run(host.clone(), admission, &program, req.args.clone(), None, Output::Value).await;
        owner.purge().await;
        let secrets = &host.run.secrets;
        let error = end.error.as_deref().map(|e| secrets.scrub(e));
        let value = end.value.clone().map(|v| super::shadow::scrub_value(secrets, v));
        Ok(json!({ "run_id": req.id, "status": end.status, "value": value, "error": error, "worker": self.worker,
                   "folder": host.run.dir().display().to_string() }))
    }
}
