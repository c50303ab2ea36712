//! Reaching the NATS server: a bounded wait and a clear error naming the URL and the reason;
//! then the ops stream, the journal bucket and the sessions' object store, made when missing (three replicas on a cluster,
//! one on a lone server) and refused when another schema of awf made them.

use super::{JOURNAL_BUCKET, OPS_STREAM, RUNS_STREAM, SCHEMA};
use async_nats::jetstream::{self, kv, stream};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long connecting may take before the URL is reported as not answering.
const CONNECT_WAIT: Duration = Duration::from_secs(5);
/// How long the streams may take to be made: a cluster just started elects its JetStream leader.
const SETUP_WAIT: Duration = Duration::from_secs(30);
/// The stream metadata key holding the schema.
const SCHEMA_KEY: &str = "awf_schema";

/// A connection with the streams and bucket awf uses.
#[derive(Clone)]
pub struct Cluster {
    pub url: String,
    pub client: async_nats::Client,
    pub js: jetstream::Context,
    pub ops: stream::Stream,
    pub runs: stream::Stream,
    pub journal: kv::Store,
    /// Agents' sessions (`sessions.rs`).
    pub sessions: async_nats::jetstream::object_store::ObjectStore,
}

/// Connects to `url` and makes or checks the stream and bucket. The error is the text to print.
pub async fn connect(url: &str) -> Result<Cluster, String> {
    let options = async_nats::ConnectOptions::new().connection_timeout(CONNECT_WAIT).name("awf");
    let client = match tokio::time::timeout(CONNECT_WAIT, options.connect(url)).await {
        Err(_) => return Err(format!("the NATS server at {url} did not answer within {}s", CONNECT_WAIT.as_secs())),
        Ok(Err(e)) => return Err(format!("cannot connect to the NATS server at {url}: {e}")),
        Ok(Ok(c)) => c,
    };
    let replicas = if client.server_info().cluster.is_some() { 3 } else { 1 };
    let js = jetstream::new(client.clone());
    let start = Instant::now();
    let ops = retry(url, start, || work_queue(&js, OPS_STREAM, "awf.ops.>", replicas)).await?;
    check_stream(url, &ops)?;
    let runs = retry(url, start, || work_queue(&js, RUNS_STREAM, super::runs::RUNS_SUBJECT, replicas)).await?;
    check_stream(url, &runs)?;
    let journal = retry(url, start, || bucket(&js, replicas)).await?;
    check_bucket(url, &journal).await?;
    let sessions = retry(url, start, || super::sessions::make(&js, replicas)).await?;
    super::sessions::check(&sessions, url).await?;
    Ok(Cluster { url: url.to_string(), client, js, ops, runs, journal, sessions })
}

/// Retries a setup step until `SETUP_WAIT` has passed since `start`.
async fn retry<T, F, Fut>(url: &str, start: Instant, mut step: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    loop {
        match step().await {
            Ok(v) => return Ok(v),
            Err(e) if start.elapsed() >= SETUP_WAIT => {
                return Err(format!("JetStream on {url} is not usable (is the server started with -js?): {e}"))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

async fn work_queue(
    js: &jetstream::Context,
    name: &str,
    subjects: &str,
    replicas: usize,
) -> Result<stream::Stream, String> {
    let config = stream::Config {
        name: name.into(),
        subjects: vec![subjects.into()],
        retention: stream::RetentionPolicy::WorkQueue,
        num_replicas: replicas,
        duplicate_window: Duration::from_secs(120),
        metadata: HashMap::from([(SCHEMA_KEY.to_string(), SCHEMA.to_string())]),
        ..Default::default()
    };
    js.get_or_create_stream(config).await.map_err(|e| e.to_string())
}

async fn bucket(js: &jetstream::Context, replicas: usize) -> Result<kv::Store, String> {
    if let Ok(store) = js.get_key_value(JOURNAL_BUCKET).await {
        return Ok(store);
    }
    let config = kv::Config { bucket: JOURNAL_BUCKET.into(), history: 1, num_replicas: replicas, ..Default::default() };
    js.create_key_value(config).await.map_err(|e| e.to_string())
}

/// The fix for a stream or bucket another schema made.
fn fix() -> String {
    format!(
        "remove them (`nats stream rm {OPS_STREAM}`, `nats stream rm {RUNS_STREAM}` and `nats kv rm \
         {JOURNAL_BUCKET}`, which drops queued work and journals) or use a fresh server"
    )
}

fn check_stream(url: &str, ops: &stream::Stream) -> Result<(), String> {
    let info = ops.cached_info();
    let name = &info.config.name;
    match info.config.metadata.get(SCHEMA_KEY).map(String::as_str) {
        Some(SCHEMA) => Ok(()),
        other => Err(format!(
            "the stream {name} on {url} was made by another awf (schema {}; this awf needs {SCHEMA}): {}",
            other.unwrap_or("none"),
            fix()
        )),
    }
}

async fn check_bucket(url: &str, journal: &kv::Store) -> Result<(), String> {
    // The first to come writes the schema; everyone later reads it.
    let _ = journal.create("schema", SCHEMA.into()).await;
    let found =
        journal.get("schema").await.map_err(|e| format!("cannot read the bucket {JOURNAL_BUCKET} on {url}: {e}"))?;
    match found.as_deref() {
        Some(b) if b == SCHEMA.as_bytes() => Ok(()),
        other => Err(format!(
            "the bucket {JOURNAL_BUCKET} on {url} was made by another awf (schema {}; this awf needs {SCHEMA}): {}",
            other.map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_else(|| "none".into()),
            fix()
        )),
    }
}
