//! Reaching the NATS servers (`options.rs`: the servers, credentials and TLS): a bounded wait and a
//! clear error naming the servers (credentials masked) and the reason; then the ops and runs
//! streams, the journal bucket and the sessions' object store, made when missing (three replicas
//! on a cluster, one on a lone server) and refused when another schema of awf made them. Every
//! setup step, its schema check too, is retried with backoff while a cluster just started elects
//! its leaders (`SETUP_WAIT`); a permission the server refuses ends it at once, saying which.

use super::error::ClusterError;
pub use super::options::Options;
use super::{JOURNAL_BUCKET, OPS_STREAM, RUNS_STREAM, SCHEMA};
use async_nats::jetstream::{self, kv, stream};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long connecting may take before the servers are reported as not answering.
const CONNECT_WAIT: Duration = Duration::from_secs(5);
/// How long the streams may take to be made: a cluster just started elects its JetStream leader.
const SETUP_WAIT: Duration = Duration::from_secs(30);
/// The stream metadata key holding the schema.
const SCHEMA_KEY: &str = "awf_schema";

/// A connection with the streams and bucket awf uses.
#[derive(Clone)]
pub struct Cluster {
    /// The servers as shown in messages: credentials masked (`Options::display`).
    pub url: String,
    pub client: async_nats::Client,
    pub js: jetstream::Context,
    pub ops: stream::Stream,
    pub runs: stream::Stream,
    pub journal: kv::Store,
    /// Agents' sessions (`sessions.rs`).
    pub sessions: async_nats::jetstream::object_store::ObjectStore,
}

/// Why a setup step failed: worth another try while the cluster elects (the server's words), or
/// final (a store another awf made).
pub(super) enum Failed {
    Again(String),
    Final(ClusterError),
}

/// The last error the server sent (a permission refused), kept by the client's event callback.
type Refusal = Arc<Mutex<Option<String>>>;

/// Connects to the servers of `options` and makes or checks the streams, bucket and object
/// store. The error is the text to print.
pub async fn connect(options: &Options) -> Result<Cluster, ClusterError> {
    let url = options.display().to_string();
    let refusal: Refusal = Arc::default();
    let (shown, seen) = (url.clone(), refusal.clone());
    let connect =
        options.connect_options()?.connection_timeout(CONNECT_WAIT).name("awf").event_callback(move |event| {
            let (shown, seen) = (shown.clone(), seen.clone());
            async move {
                if let async_nats::Event::ServerError(e) = event {
                    tracing::warn!("the NATS server at {shown}: {e}");
                    *seen.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                }
            }
        });
    let client = match tokio::time::timeout(CONNECT_WAIT, connect.connect(options.servers.as_slice())).await {
        Err(_) => return Err(ClusterError::Silent { url, secs: CONNECT_WAIT.as_secs() }),
        Ok(Err(source)) => return Err(ClusterError::Connect { url, source }),
        Ok(Ok(c)) => c,
    };
    let replicas = if client.server_info().cluster.is_some() { 3 } else { 1 };
    let js = jetstream::new(client.clone());
    let setup = Setup { url: &url, start: Instant::now(), refusal };
    let (js, url) = (&js, url.as_str());
    let ops = setup.step("the stream AWF_OPS", move || async move {
        let ops = work_queue(js, OPS_STREAM, "awf.ops.>", replicas).await.map_err(|e| Failed::Again(e.to_string()))?;
        check_stream(url, &ops).map_err(Failed::Final)?;
        Ok(ops)
    });
    let ops = ops.await?;
    let runs = setup.step("the stream AWF_RUNS", move || async move {
        let runs = work_queue(js, RUNS_STREAM, super::runs::RUNS_SUBJECT, replicas)
            .await
            .map_err(|e| Failed::Again(e.to_string()))?;
        check_stream(url, &runs).map_err(Failed::Final)?;
        Ok(runs)
    });
    let runs = runs.await?;
    let journal = setup.step("the bucket AWF_JOURNAL", move || async move {
        let journal = bucket(js, replicas).await.map_err(|e| Failed::Again(e.to_string()))?;
        check_bucket(url, &journal).await?;
        Ok(journal)
    });
    let journal = journal.await?;
    let sessions = setup.step("the object store AWF_SESSIONS", move || async move {
        let sessions = super::sessions::make(js, replicas).await.map_err(|e| Failed::Again(e.to_string()))?;
        // A store of another schema is final; anything else is the server not ready yet.
        super::sessions::check(&sessions, url).await?;
        Ok(sessions)
    });
    let sessions = sessions.await?;
    Ok(Cluster { url: url.to_string(), client, js: js.clone(), ops, runs, journal, sessions })
}

/// The setup steps of one connection, retried until `SETUP_WAIT` has passed since `start`.
struct Setup<'a> {
    url: &'a str,
    start: Instant,
    refusal: Refusal,
}

impl Setup<'_> {
    async fn step<T, F, Fut>(&self, what: &str, mut step: F) -> Result<T, ClusterError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, Failed>>,
    {
        let mut pause = Duration::from_millis(100);
        loop {
            let e = match step().await {
                Ok(v) => return Ok(v),
                Err(Failed::Final(e)) => return Err(e),
                Err(Failed::Again(e)) => e,
            };
            let refused = self.refusal.lock().unwrap_or_else(|p| p.into_inner()).clone();
            let (what, url) = (what.to_string(), self.url.to_string());
            // The server's own words: a refused permission ends the setup at once.
            if let Some(refusal) = refused.filter(|r| r.to_lowercase().contains("permissions violation")) {
                return Err(ClusterError::Permission { what, url, refusal });
            }
            if self.start.elapsed() >= SETUP_WAIT {
                return Err(ClusterError::Setup { what, url, secs: SETUP_WAIT.as_secs(), why: e });
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(2));
        }
    }
}

async fn work_queue(
    js: &jetstream::Context,
    name: &str,
    subjects: &str,
    replicas: usize,
) -> Result<stream::Stream, jetstream::context::CreateStreamError> {
    let config = stream::Config {
        name: name.into(),
        subjects: vec![subjects.into()],
        retention: stream::RetentionPolicy::WorkQueue,
        num_replicas: replicas,
        duplicate_window: Duration::from_secs(120),
        metadata: HashMap::from([(SCHEMA_KEY.to_string(), SCHEMA.to_string())]),
        ..Default::default()
    };
    js.get_or_create_stream(config).await
}

async fn bucket(
    js: &jetstream::Context,
    replicas: usize,
) -> Result<kv::Store, jetstream::context::CreateKeyValueError> {
    if let Ok(store) = js.get_key_value(JOURNAL_BUCKET).await {
        return Ok(store);
    }
    let config = kv::Config { bucket: JOURNAL_BUCKET.into(), history: 1, num_replicas: replicas, ..Default::default() };
    js.create_key_value(config).await
}

/// The fix for a stream or bucket another schema made.
fn fix() -> String {
    format!(
        "remove them (`nats stream rm {OPS_STREAM}`, `nats stream rm {RUNS_STREAM}` and `nats kv rm \
         {JOURNAL_BUCKET}`, which drops queued work and journals) or use a fresh server"
    )
}

fn check_stream(url: &str, ops: &stream::Stream) -> Result<(), ClusterError> {
    let info = ops.cached_info();
    let name = &info.config.name;
    match info.config.metadata.get(SCHEMA_KEY).map(String::as_str) {
        Some(SCHEMA) => Ok(()),
        other => Err(ClusterError::Schema(format!(
            "the stream {name} on {url} was made by another awf (schema {}; this awf needs {SCHEMA}): {}",
            other.unwrap_or("none"),
            fix()
        ))),
    }
}

async fn check_bucket(url: &str, journal: &kv::Store) -> Result<(), Failed> {
    // The first to come writes the schema; everyone later reads it.
    match journal.create("schema", SCHEMA.into()).await {
        Ok(_) => return Ok(()),
        Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => {}
        Err(e) => return Err(Failed::Again(format!("cannot write the schema to the bucket {JOURNAL_BUCKET}: {e}"))),
    }
    let found = journal
        .get("schema")
        .await
        .map_err(|e| Failed::Again(format!("cannot read the bucket {JOURNAL_BUCKET} on {url}: {e}")))?;
    match found.as_deref() {
        Some(b) if b == SCHEMA.as_bytes() => Ok(()),
        // There a moment ago, gone now: read again.
        None => Err(Failed::Again(format!("the bucket {JOURNAL_BUCKET} on {url} has no schema entry"))),
        Some(other) => Err(Failed::Final(ClusterError::Schema(format!(
            "the bucket {JOURNAL_BUCKET} on {url} was made by another awf (schema {}; this awf needs {SCHEMA}): {}",
            String::from_utf8_lossy(other),
            fix()
        )))),
    }
}
