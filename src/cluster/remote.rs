//! The owner's side (`script run --nats`): the script runs here and every agent's session is a
//! `RemoteSession`. A turn is sealed and published to the ops stream (subject by harness and run,
//! message id by run, attempt and op id, so a retried publish is dropped as a duplicate), a worker
//! runs the whole operation (its check-ins too) and answers on a reply subject; only a reply
//! sealed for this very operation counts (any other is dropped and recorded as
//! `cluster-refused`). The answer is journalled in the bucket with a create-only write (the first
//! valid answer stands) and then enters this run's result slot, so the records on disk are those of
//! a local run. The agent's runtime travels by name: its program, key and env never leave here.
//! When the run ends its operations still queued are purged from the stream.

use super::error::ClusterError;
use super::key::ClusterKey;
use super::seal::{self, Kind, Place};
use super::wire::{forbidden_inline_fields, AgentSpec, Kept, OpRequest, Reply, RuntimeRef, OP_TTL};
use super::{op_key, ops_subject, Cluster};
use crate::accounting::{CostSource, Usage};
use crate::agent::{OpenError, OpenRequest, RuntimeChoice};
use crate::config::RuntimeConfig;
use crate::control::slot::Submission;
use crate::harness::{
    AgentInfo, BoxFuture, Compaction, HarnessError, Session, TurnEnd, TurnInput, TurnKind, TurnReport,
};
use crate::run::{Outcome, OutcomeKind};
use futures_util::StreamExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How long before an operation's deadline the owner gives up waiting for a worker to take it,
/// so that the outcome says why.
const UNTAKEN_MARGIN: Duration = Duration::from_millis(200);
/// How often the owner looks in the bucket for an outcome whose reply it may have missed.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// A run whose agents' operations run on workers.
#[derive(Clone)]
pub struct Owner {
    cluster: Cluster,
    key: ClusterKey,
    run: String,
    attempt: u32,
    cwd: PathBuf,
    script_dir: PathBuf,
    default_runtime: String,
    /// The run, for its records (an answer taken is an `op-submission`, as a local one is).
    records: std::sync::Weak<crate::run::Run>,
}

impl Owner {
    pub fn new(cluster: Cluster, key: ClusterKey, run: &Arc<crate::run::Run>) -> Arc<Owner> {
        let script_dir = run.script.parent().map(PathBuf::from).unwrap_or_else(|| run.cwd.clone());
        Arc::new(Owner {
            cluster,
            key,
            run: run.id.clone(),
            attempt: run.attempt,
            cwd: run.cwd.clone(),
            script_dir,
            default_runtime: run.default_runtime.clone(),
            records: Arc::downgrade(run),
        })
    }

    /// Purges the run's operations still queued (the run ended: nobody waits for them).
    pub async fn purge(&self) {
        let h = super::hashed(&self.run);
        for filter in [format!("awf.ops.*.{h}"), format!("awf.ops.*.at.*.{h}")] {
            if let Err(e) = self.cluster.ops.purge().filter(filter).await {
                tracing::warn!("purging the operations of run {}: {e}", self.run);
            }
        }
    }

    /// The runtime as the workers are told it: by name, or inline when it carries nothing of this
    /// machine's (a program's argv, a model).
    fn runtime_ref(
        &self,
        req: &OpenRequest,
        runtime: &RuntimeConfig,
        info: &AgentInfo,
    ) -> Result<RuntimeRef, OpenError> {
        let (model, effort) = (Some(info.model.clone()), info.effort.clone());
        let alias = match &req.runtime {
            RuntimeChoice::Default => self.default_runtime.clone(),
            RuntimeChoice::Alias { alias, .. } => alias.clone(),
            RuntimeChoice::Inline(_) => {
                let forbidden = forbidden_inline_fields(runtime);
                if !forbidden.is_empty() {
                    return Err(OpenError::Config(format!(
                        "agent {}: an inline runtime with {} cannot run on workers (--nats): name a runtime of \
                         awf.toml, which each worker resolves in its own",
                        req.key,
                        forbidden.join(", ")
                    )));
                }
                let mut r = runtime.clone();
                // A fake responder is found as a local run finds it (beside the script, then in
                // the run's folder), and sent as an absolute path.
                if let Some(path) = r.responder.as_ref().filter(|p| p.is_relative()) {
                    let found = [self.script_dir.join(path), self.cwd.join(path)].into_iter().find(|p| p.is_file());
                    r.responder = Some(found.unwrap_or_else(|| self.cwd.join(path)));
                }
                (r.model, r.effort) = (model, effort);
                return Ok(RuntimeRef::Inline { runtime: Box::new(r) });
            }
        };
        Ok(RuntimeRef::Named { alias, harness: runtime.harness, model, effort })
    }
}

impl crate::agent::remote::Remote for Owner {
    fn session(
        &self,
        req: &OpenRequest,
        runtime: &RuntimeConfig,
        info: &AgentInfo,
    ) -> Result<Box<dyn Session>, OpenError> {
        // Grants that reach back into this run cannot be honoured from a worker's run: refused
        // plainly rather than dropped.
        let unsupported = |what: &str| {
            OpenError::Config(format!("agent {}: {what} is not supported for agents on workers (--nats) yet", req.key))
        };
        if req.councils != crate::control::convene::Grant::None {
            return Err(unsupported("`councils`"));
        }
        if req.operator {
            return Err(unsupported("`operator`"));
        }
        if req.fork_caller.is_some() {
            return Err(unsupported("fork_caller"));
        }
        let cwd = match &req.cwd {
            Some(c) if c.is_absolute() => c.clone(),
            Some(c) => self.cwd.join(c),
            None => self.cwd.clone(),
        };
        let skills =
            req.skills.iter().map(|s| if s.is_absolute() { s.clone() } else { self.script_dir.join(s) }).collect();
        let agent = AgentSpec {
            key: req.key.clone(),
            runtime: self.runtime_ref(req, runtime, info)?,
            instructions: req.instructions.clone(),
            cwd,
            sandbox: req
                .sandbox
                .as_deref()
                .map(crate::agent::sandboxes::Asked::to_json)
                .transpose()
                .map_err(|e| OpenError::Config(e.to_string()))?,
            labels: req.labels.clone(),
            skills,
        };
        Ok(Box::new(RemoteSession { owner: Arc::new(self.clone()), agent, holder: None }))
    }
}

/// An agent whose turns run on workers.
pub struct RemoteSession {
    owner: Arc<Owner>,
    agent: AgentSpec,
    /// The worker that settled the agent's last turn: it holds the agent's session.
    holder: Option<String>,
}

fn report(end: TurnEnd, usage: Usage, cost_source: CostSource, simulated: bool) -> TurnReport {
    TurnReport { end, usage, cost_source, simulated }
}

impl Session for RemoteSession {
    fn turn(&mut self, input: TurnInput) -> BoxFuture<'_, TurnReport> {
        Box::pin(async move {
            let free = |end| report(end, Usage::default(), CostSource::Simulated, false);
            if input.kind == TurnKind::Message {
                let why = "message operations (an idle agent woken by its messages) do not run on a cluster yet";
                return free(TurnEnd::Failed(why.into()));
            }
            if input.nudge > 0 {
                // The worker ran the operation's check-ins itself: an unanswered operation is
                // unanswered here too.
                return free(TurnEnd::Ended);
            }
            let (worker, outcome) = match self.owner.send(&self.agent, &input, self.holder.as_deref()).await {
                Ok(v) => v,
                Err(why) => return free(TurnEnd::Failed(why.to_string())),
            };
            self.holder = Some(worker.clone());
            let end = match outcome.kind {
                OutcomeKind::Answered => match outcome.value.clone() {
                    Some(v) => {
                        let bytes = v.to_string().len();
                        let sub = input.slot.submit_recorded(v).await;
                        self.owner.submitted(&self.agent.key, &input.op_id, &sub, bytes);
                        match sub {
                            Submission::Accepted => TurnEnd::Ended,
                            other => TurnEnd::Failed(format!(
                                "the answer from worker {worker} was refused here: {}",
                                other.text()
                            )),
                        }
                    }
                    None => TurnEnd::Failed(format!("worker {worker} answered without a value")),
                },
                OutcomeKind::Unanswered => TurnEnd::Ended,
                OutcomeKind::Blocked => TurnEnd::Blocked(outcome.reason.clone().unwrap_or_default()),
                kind => TurnEnd::Failed(format!(
                    "{} on worker {worker}: {}",
                    kind.as_str(),
                    outcome.reason.as_deref().unwrap_or("no reason given")
                )),
            };
            report(end, outcome.usage, outcome.cost_source, outcome.simulated)
        })
    }

    fn fork(&self, _info: AgentInfo) -> Result<Box<dyn Session>, HarnessError> {
        Err(HarnessError::Cannot("agents on a cluster cannot fork yet".into()))
    }

    fn compact(&mut self, _prompt: &str) -> BoxFuture<'_, Compaction> {
        let why = HarnessError::Cannot("agents on a cluster cannot compact yet".into());
        Box::pin(async { Compaction::free(Err(why), false) })
    }

    fn set(&mut self, model: Option<&str>, effort: Option<&str>) -> Result<(), HarnessError> {
        match &mut self.agent.runtime {
            RuntimeRef::Named { model: m, effort: e, .. } => {
                if let Some(v) = model {
                    *m = Some(v.to_string());
                }
                if let Some(v) = effort {
                    *e = Some(v.to_string());
                }
            }
            RuntimeRef::Inline { runtime } => {
                if let Some(v) = model {
                    runtime.model = Some(v.to_string());
                }
                if let Some(v) = effort {
                    runtime.effort = Some(v.to_string());
                }
            }
        }
        Ok(())
    }
}

impl Owner {
    /// Records a worker's answer entering this run's slot, as an agent's own submission is.
    fn submitted(&self, agent: &str, op_id: &str, sub: &Submission, bytes: usize) {
        let Some(run) = self.records.upgrade() else { return };
        let verdict = match sub {
            Submission::Accepted => "accepted",
            Submission::Rejected(_) => "rejected",
            Submission::Closed(_) => "closed",
        };
        let accepted = *sub == Submission::Accepted;
        run.records.event(&crate::run::Event::OpSubmission { agent, op_id, accepted, verdict, bytes });
    }

    /// Records a message for one of this run's operations that was dropped.
    fn refused(&self, place: &Place, what: &str, why: &str) {
        tracing::warn!("run {}: a {what} for {} was dropped: {why}", self.run, place.op);
        let Some(run) = self.records.upgrade() else { return };
        run.records.event(&crate::run::Event::ClusterRefused { agent: &place.agent, op_id: &place.op, what, why });
    }

    /// Publishes one operation and waits for its outcome: (the worker, the outcome that stands).
    async fn send(
        &self,
        agent: &AgentSpec,
        input: &TurnInput,
        holder: Option<&str>,
    ) -> Result<(String, Outcome), ClusterError> {
        let c = &self.cluster;
        let harness = agent.runtime.harness();
        let inbox = c.client.new_inbox();
        let mut replies =
            c.client.subscribe(inbox.clone()).await.map_err(|e| ClusterError::nats(format!("NATS at {}", c.url), e))?;
        let journal_key = op_key(&self.run, &agent.key, &input.op_id);
        let request = OpRequest {
            run: self.run.clone(),
            attempt: self.attempt,
            agent: agent.clone(),
            op_id: input.op_id.clone(),
            prompt: input.prompt.clone(),
            schema: (*input.slot.schema().value).clone(),
            nudge_text: input.nudge_text.clone(),
            max_nudges: input.max_nudges,
            timeout_ms: input.deadline.map(|d| d.remaining().as_millis() as u64),
            reply: inbox,
            journal_key: journal_key.clone(),
        };
        let place = request.place();
        let expires = match request.timeout_ms {
            Some(ms) => seal::now_ms() + ms,
            None => super::wire::expires_in(OP_TTL),
        };
        let payload = seal::seal(&self.key, Kind::Op, place.clone(), expires, &request);
        let msg_id = format!("{}/{}/{}", self.run, self.attempt, input.op_id);
        // The worker holding the agent's session, while it lives.
        let mut held_by = match holder {
            Some(w) if super::affinity::alive(&c.journal, &self.key, w).await => Some(w.to_string()),
            _ => None,
        };
        let subject = match &held_by {
            Some(w) => super::affinity::subject(harness, w, &self.run),
            None => ops_subject(harness, &self.run),
        };
        self.queue(&subject, &msg_id, &payload, &input.op_id).await?;
        let result_key = super::store::result_key(&journal_key);
        let mut taken: Option<String> = None;
        let untaken = input.deadline.map(|d| tokio::time::Instant::from_std(d.instant()) - UNTAKEN_MARGIN);
        // A reply is not kept by the server: one sent while this connection was down is found in
        // the bucket, where the worker put it first.
        let mut look = tokio::time::interval(LOOK_EVERY);
        loop {
            let until = match untaken {
                Some(at) if taken.is_none() => at,
                _ => tokio::time::Instant::now() + Duration::from_secs(3600),
            };
            let msg = tokio::select! {
                m = replies.next() => m,
                _ = look.tick() => {
                    if let Some(w) = &held_by {
                        if !super::affinity::alive(&c.journal, &self.key, w).await {
                            // Its worker died before settling it (only that worker reads its
                            // subject): any worker serving the harness may take it now.
                            let shared = ops_subject(harness, &self.run);
                            self.queue(&shared, &format!("{msg_id}/shared"), &payload, &input.op_id).await?;
                            held_by = None;
                        }
                    }
                    let kept = super::store::read::<Kept>(&c.journal, &result_key, &self.key, Kind::Outcome, &place).await;
                    if let Some(kept) = kept {
                        return self.journal(&journal_key, &place, kept).await;
                    }
                    continue;
                }
                _ = tokio::time::sleep_until(until) => {
                    return Err(ClusterError::Untaken { harness, url: c.url.clone() })
                }
            };
            let Some(msg) = msg else {
                return Err(ClusterError::nats(format!("the reply subscription on {}", c.url), "closed"));
            };
            match seal::open::<Reply>(&self.key, &msg.payload, Kind::Reply) {
                Ok(env) if env.place != place => self.refused(&place, "reply", &seal::Refusal::Misplaced.to_string()),
                Ok(env) => match env.body {
                    Reply::Taken { worker } => taken = Some(worker),
                    Reply::Settled { worker, outcome } => {
                        return self.journal(&journal_key, &place, Kept { worker, outcome }).await
                    }
                },
                Err(refused) => self.refused(&place, "reply", &refused.to_string()),
            }
        }
    }

    /// Publishes an operation, retried while a cluster elects a leader (the message id makes a
    /// repeat a duplicate).
    async fn queue(&self, subject: &str, msg_id: &str, payload: &[u8], op_id: &str) -> Result<(), ClusterError> {
        let c = &self.cluster;
        super::store::retried(|| async {
            let mut headers = async_nats::HeaderMap::new();
            headers.insert("Nats-Msg-Id", msg_id);
            let ack = c.js.publish_with_headers(subject.to_string(), headers, payload.to_vec().into()).await?;
            ack.await.map(|_| ()).map_err(async_nats::Error::from)
        })
        .await
        .map_err(|e| ClusterError::nats(format!("cannot queue {op_id} on NATS at {}", c.url), e))
    }

    /// Journals an answered outcome in the bucket, create-only: when a valid answer is there
    /// already (a worker that lost its lease answered too), the first one stands.
    async fn journal(&self, key: &str, place: &Place, kept: Kept) -> Result<(String, Outcome), ClusterError> {
        if kept.outcome.kind != OutcomeKind::Answered {
            return Ok((kept.worker, kept.outcome));
        }
        let entry =
            seal::seal(&self.key, Kind::Journal, place.clone(), super::wire::expires_in(super::wire::KEPT_TTL), &kept);
        let (stands, how) =
            super::store::create_first::<Kept>(&self.cluster.journal, key, entry, &self.key, Kind::Journal, place)
                .await?;
        match how {
            super::store::Written::Found if stands.worker != kept.worker => {
                tracing::warn!(
                    "a second answer to {} from worker {} was refused: the first stands",
                    place.op,
                    kept.worker
                )
            }
            super::store::Written::Replaced => self.refused(place, "journal entry", "it did not open: replaced"),
            _ => {}
        }
        Ok((stands.worker, stands.outcome))
    }
}
