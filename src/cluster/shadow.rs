//! A worker's runs: for each owner's run it serves, a local run of its own (folder
//! `.awf/worker-runs/<run>-<worker>`), whose agent book opens the agents and whose one operation
//! pipeline runs each operation with the local harness and sandbox, exactly as a local run would.
//! An operation the same worker is given again (a redelivery) returns its kept outcome. An agent
//! it opens that another worker held takes over the stored session (`sessions.rs`) before its
//! first turn here, and its session is stored again after each turn. What it returns is scrubbed
//! of the worker's secrets (it goes to the bucket and to the owner).

use super::admit::Admitted;
use super::key::ClusterKey;
use super::wire::OpRequest;
use crate::accounting::{CostSource, Usage};
use crate::agent::{operation, start, OpenRequest, RuntimeChoice};
use crate::config::Config;
use crate::host::launch::{self, CouncilPool, Request};
use crate::host::Host;
use crate::run::scope::Frame;
use crate::run::{Outcome, OutcomeKind, RunSpec, RunStatus};
use serde_json::json;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The local runs of one worker, by the owner's run id.
pub(super) struct Shadows {
    pub name: String,
    cwd: PathBuf,
    config: Config,
    /// The worker's limits, resolved as it started (`run::limits::for_worker`).
    limits: crate::run::Limits,
    rt: tokio::runtime::Handle,
    sessions: async_nats::jetstream::object_store::ObjectStore,
    key: ClusterKey,
    report: super::Report,
    hosts: Mutex<HashMap<String, Arc<Host>>>,
}

/// A failed outcome, for an operation that could not be run.
pub(super) fn failed_outcome(op_id: &str, why: String) -> Outcome {
    failed(op_id, why, Instant::now())
}

fn failed(op_id: &str, why: String, started: Instant) -> Outcome {
    Outcome {
        kind: OutcomeKind::Failed,
        value: None,
        reason: Some(why),
        op_id: op_id.to_string(),
        usage: Usage::default(),
        duration_ms: started.elapsed().as_millis() as u64,
        cost_source: CostSource::Simulated,
        simulated: false,
    }
}

impl Shadows {
    pub fn new(
        name: String,
        cwd: PathBuf,
        config: Config,
        limits: crate::run::Limits,
        rt: tokio::runtime::Handle,
        (sessions, key, report): (async_nats::jetstream::object_store::ObjectStore, ClusterKey, super::Report),
    ) -> Shadows {
        Shadows { name, cwd, config, limits, rt, sessions, key, report, hosts: Mutex::new(HashMap::new()) }
    }

    fn host(&self, run: &str) -> Result<Arc<Host>, crate::host::launch::LaunchError> {
        let mut hosts = self.hosts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(h) = hosts.get(run) {
            return Ok(h.clone());
        }
        let limits = self.limits.clone();
        let spec = RunSpec {
            script: PathBuf::from(format!("(operations of run {run})")),
            script_sha256: String::new(),
            cwd: self.cwd.clone(),
            runs_dir: self.cwd.join(".awf/worker-runs"),
            args: json!({}),
            meta: json!({ "name": "awf worker", "serves": run }),
            config: self.config.clone(),
            limits,
            deadline: None,
            default_runtime: "fake".into(),
            sandbox: None,
            resume: None,
            isolation: Default::default(),
        };
        let id = format!("{run}-{}", self.name);
        let caps = crate::council::child::capabilities(CouncilPool::Machine);
        let req = Request { spec, id: Some(id), caller: None, parent: None };
        let host = launch::start(req, self.rt.clone(), caps)?;
        hosts.insert(run.to_string(), host.clone());
        Ok(host)
    }

    /// Runs one operation of an admitted agent to its settled outcome, scrubbed of the worker's
    /// secrets (blocks: call it off the async threads).
    pub fn run(&self, req: &OpRequest, admitted: Admitted) -> Outcome {
        let started = Instant::now();
        let host = match self.host(&req.run) {
            Ok(h) => h,
            Err(why) => return failed(&req.op_id, format!("worker {}: for {}: {why}", self.name, req.run), started),
        };
        let mut outcome = self.run_in(&host, req, admitted, started);
        let secrets = &host.run.secrets;
        outcome.reason = outcome.reason.map(|r| secrets.scrub(&r));
        outcome.value = outcome.value.map(|v| scrub_value(secrets, v));
        outcome
    }

    fn run_in(&self, host: &Arc<Host>, req: &OpRequest, admitted: Admitted, started: Instant) -> Outcome {
        let book = &host.agents;
        let agent = match book.get(&req.agent.key) {
            Some(a) => a,
            None => {
                let open = OpenRequest {
                    key: req.agent.key.clone(),
                    runtime: RuntimeChoice::Inline(Box::new(admitted.runtime)),
                    instructions: req.agent.instructions.clone(),
                    cwd: Some(admitted.cwd),
                    sandbox: admitted.sandbox.map(|s| Box::new(crate::agent::sandboxes::Asked::from_json(s))),
                    labels: req.agent.labels.clone(),
                    timeout_ms: None,
                    deadline_ms: None,
                    councils: crate::control::convene::Grant::None,
                    skills: admitted.skills,
                    fork_caller: None,
                    operator: false,
                    // A worker runs an owner's agent in the folder it admitted, never a worktree.
                    isolation: Some(crate::worktree::Isolation::None),
                    keep: Default::default(),
                    pane: None,
                };
                match book.open(open) {
                    Ok(a) => {
                        self.take_over(&req.run, &a);
                        a
                    }
                    Err(why) => return failed(&req.op_id, format!("worker {}: {why}", self.name), started),
                }
            }
        };
        let schema = match host.run.schemas.compile(&req.schema) {
            Ok(s) => s,
            Err(why) => return failed(&req.op_id, format!("the schema does not compile: {why}"), started),
        };
        let turn = operation::Turn {
            prompt: req.prompt.clone(),
            schema,
            id: Some(req.op_id.clone()),
            label: None,
            timeout_ms: req.timeout_ms,
            deadline_ms: None,
            nudge: crate::agent::supervise::Nudge { text: req.nudge_text.clone(), max: req.max_nudges },
        };
        let frame = Frame::root(host.run.root.clone(), host.run.deadline);
        let outcome = match start::run(book, &agent, turn, &frame) {
            Ok(o) => o,
            Err(e) => failed(&req.op_id, format!("worker {}: {e}", self.name), started),
        };
        if let Some(session) = agent.export_session() {
            let who = (req.run.as_str(), agent.key.as_str(), self.name.as_str());
            self.rt.block_on(super::sessions::save(&self.sessions, &self.key, &self.report, who, &session));
        }
        outcome
    }

    /// Restores the stored session of an agent just opened here, if another worker held it.
    fn take_over(&self, run: &str, agent: &crate::agent::Agent) {
        let found = self.rt.block_on(super::sessions::load(&self.sessions, &self.key, run, &agent.key));
        let line = match found {
            None => return,
            Some(Err(why)) => format!("the stored session is not used: {why}"),
            Some(Ok((from, session))) => match agent.import_session(session) {
                Ok(()) => format!("takes over its session from {from}"),
                Err(e) => format!("the session {from} stored is not used: {e}"),
            },
        };
        (self.report)(format!("awf worker {}: agent {} of run {run} {line}", self.name, agent.key));
    }

    /// Ends every local run (their `result.json`), when the worker stops.
    pub fn finish(&self) {
        let hosts: Vec<Arc<Host>> =
            self.hosts.lock().unwrap_or_else(|p| p.into_inner()).drain().map(|(_, h)| h).collect();
        for h in hosts {
            h.run.root.cancel();
            h.finish(RunStatus::Succeeded, None, None, None);
        }
    }
}

/// `value` with every string in it scrubbed.
pub(super) fn scrub_value(secrets: &crate::redact::Redactor, value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(s) => Value::String(secrets.scrub(&s)),
        Value::Array(items) => Value::Array(items.into_iter().map(|v| scrub_value(secrets, v)).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (secrets.scrub(&k), scrub_value(secrets, v))).collect())
        }
        other => other,
    }
}
