//! Agents' sessions in the object store `AWF_SESSIONS`, so that another worker can take an agent
//! over when the one holding it dies: after each settled turn a worker stores what the harness
//! exports (`harness::SessionExport`: an HTTP agent's history, a CLI agent's home), keyed by run and agent (hashed),
//! and a worker opening an agent it has not held restores it before the agent's first turn there.
//! A stored session is sealed for its run and agent: one that does not open (planted, altered,
//! another run's) is not used.

use super::error::ClusterError;
use super::key::ClusterKey;
use super::seal::{self, Kind, Place};
use super::{hashed, SCHEMA, SESSIONS_BUCKET};
use crate::harness::SessionExport;
use async_nats::jetstream::{self, object_store};
use serde_json::json;
use tokio::io::AsyncReadExt;

/// The largest session stored: a larger one is not stored (a warning says so), and a worker that
/// takes the agent over starts it afresh.
pub const MAX_SESSION: usize = 64 << 20;
/// The object holding the schema the store was made by.
const SCHEMA_OBJECT: &str = "schema";

/// The object name of an agent's session in a run.
pub fn key(run: &str, agent: &str) -> String {
    format!("session.{}.{}", hashed(run), hashed(agent))
}

/// The store, made when missing.
pub async fn make(
    js: &jetstream::Context,
    replicas: usize,
) -> Result<object_store::ObjectStore, jetstream::context::CreateObjectStoreError> {
    if let Ok(store) = js.get_object_store(SESSIONS_BUCKET).await {
        return Ok(store);
    }
    let config = object_store::Config { bucket: SESSIONS_BUCKET.into(), num_replicas: replicas, ..Default::default() };
    js.create_object_store(config).await
}

/// Refuses a store another schema of awf made (the first to come writes the schema).
pub(super) async fn check(store: &object_store::ObjectStore, url: &str) -> Result<(), super::connect::Failed> {
    use super::connect::Failed;
    if store.info(SCHEMA_OBJECT).await.is_err() {
        store
            .put(SCHEMA_OBJECT, &mut SCHEMA.as_bytes())
            .await
            .map_err(|e| Failed::Again(format!("cannot write to the object store {SESSIONS_BUCKET} on {url}: {e}")))?;
    }
    let found = read(store, SCHEMA_OBJECT, 64).await.map_err(|e| Failed::Again(e.to_string()))?;
    if found != SCHEMA.as_bytes() {
        return Err(Failed::Final(ClusterError::Schema(format!(
            "the object store {SESSIONS_BUCKET} on {url} was made by another awf (schema {}; this awf needs \
             {SCHEMA}): remove it (`nats object rm {SESSIONS_BUCKET}`, which drops stored sessions) or use a \
             fresh server",
            String::from_utf8_lossy(&found)
        ))));
    }
    Ok(())
}

/// Reads an object whole, refusing one over `max` bytes.
async fn read(store: &object_store::ObjectStore, name: &str, max: usize) -> Result<Vec<u8>, ClusterError> {
    let unread = |e: &dyn std::fmt::Display| ClusterError::nats(format!("cannot read {name} in {SESSIONS_BUCKET}"), e);
    let object = store.get(name).await.map_err(|e| unread(&e))?;
    let mut bytes = Vec::new();
    object.take(max as u64 + 1).read_to_end(&mut bytes).await.map_err(|e| unread(&e))?;
    if bytes.len() > max {
        return Err(ClusterError::Stored(format!("{name} in {SESSIONS_BUCKET} is over {max} bytes")));
    }
    Ok(bytes)
}

fn place(run: &str, agent: &str) -> Place {
    Place { run: run.to_string(), agent: agent.to_string(), ..Place::default() }
}

/// Stores an agent's session after a settled turn; a failure or a session over `MAX_SESSION` is
/// reported, and the turn stands.
pub async fn save(
    store: &object_store::ObjectStore,
    k: &ClusterKey,
    report: &super::Report,
    (run, agent, worker): (&str, &str, &str),
    session: &SessionExport,
) {
    let doc = json!({ "worker": worker, "session": session });
    let bytes = seal::seal(k, Kind::Session, place(run, agent), super::wire::expires_in(super::wire::KEPT_TTL), &doc);
    let why = match session {
        SessionExport::Unstorable { why } => Some(why.clone()),
        _ if bytes.len() > MAX_SESSION => Some(format!("it is {} bytes, over {MAX_SESSION}", bytes.len())),
        _ => None,
    };
    if let Some(why) = why {
        // An older session left in the store would bring back a past state: it goes too.
        let _ = store.delete(key(run, agent).as_str()).await;
        report(format!(
            "awf worker {worker}: the session of agent {agent} of run {run} is not stored ({why}): a worker \
             taking the agent over starts it afresh"
        ));
        return;
    }
    if let Err(e) = store.put(key(run, agent).as_str(), &mut bytes.as_slice()).await {
        report(format!("awf worker {worker}: cannot store the session of agent {agent} of run {run}: {e}"));
    }
}

/// A stored session, as sealed.
#[derive(serde::Deserialize)]
struct Stored {
    worker: String,
    session: SessionExport,
}

/// The stored session of an agent, if there is one: `Err` says why one that is there is not used
/// (unreadable, or its seal does not open for this run and agent).
pub async fn load(
    store: &object_store::ObjectStore,
    k: &ClusterKey,
    run: &str,
    agent: &str,
) -> Option<Result<(String, SessionExport), ClusterError>> {
    let name = key(run, agent);
    store.info(&name).await.ok()?;
    let bytes = match read(store, &name, MAX_SESSION + 4096).await {
        Ok(b) => b,
        Err(e) => return Some(Err(e)),
    };
    Some(match seal::open::<Stored>(k, &bytes, Kind::Session) {
        Ok(env) if env.place == place(run, agent) => Ok((env.body.worker, env.body.session)),
        Ok(_) => Err(ClusterError::Sealed(seal::Refusal::Misplaced)),
        Err(refused) => Err(ClusterError::Sealed(refused)),
    })
}
