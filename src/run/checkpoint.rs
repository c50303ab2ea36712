//! Operator checkpoints: questions a run asks its operator (`ctx.checkpoint`, `wf ask-operator`)
//! and waits on, the run parked `waiting` in `run.json` meanwhile. An answer is validated against
//! the question's schema, written to `journal.jsonl` before the asker gets it, and replayed by
//! every later attempt: an answered checkpoint is never asked again.

use super::schema::Schema;
use super::{lock, Event, Run, RunStatus};
use crate::record::docs::Waiting;
use crate::record::Stream;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use tokio::sync::oneshot;

/// The checkpoints of one attempt: those open now, and the answers earlier attempts got.
#[derive(Default)]
pub struct Checkpoints {
    open: Mutex<Vec<Open>>,
    /// key → (question hash, answer), from the journal.
    replay: HashMap<String, (String, Value)>,
    counter: AtomicU64,
}

/// A question the operator has not answered yet.
struct Open {
    key: String,
    question: String,
    schema: Schema,
    asked_at: String,
    timeout_ms: Option<u64>,
    agent: Option<String>,
    tx: oneshot::Sender<Value>,
}

/// What asking gives: the answer an earlier attempt got, or a wait for the operator's.
pub enum Asked {
    Replayed(Value),
    Waiting(oneshot::Receiver<Value>),
}

/// One question to ask.
pub struct Question<'a> {
    pub key: String,
    pub question: &'a str,
    pub schema: Schema,
    pub timeout_ms: Option<u64>,
    /// The agent asking (`wf ask-operator`); `None` for the workflow.
    pub agent: Option<&'a str>,
}

impl Checkpoints {
    pub fn new(replay: HashMap<String, (String, Value)>) -> Checkpoints {
        Checkpoints { replay, ..Default::default() }
    }
}

/// What a question is, for matching a journalled answer: its text and its schema.
pub fn question_hash(question: &str, schema: &Schema) -> String {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(question.as_bytes());
    h.update(&[0]);
    h.update(schema.text.as_bytes());
    format!("{:032x}", h.digest128())
}

/// A checkpoint asked while one of the same key still waits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("checkpoint `{0}` is already waiting for an answer: give each one its own key")]
pub struct AlreadyWaiting(pub String);

/// Why an operator's answer was refused; the checkpoint, if any, stays open.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AnswerRefused {
    #[error("run {run} is not waiting for the operator: no checkpoint is open")]
    NotWaiting { run: String },
    /// `open`: the keys that are open, listed.
    #[error("run {run} has no open checkpoint `{key}` (open: {open})")]
    NoSuchKey { run: String, key: String, open: String },
    #[error("run {run} has several open checkpoints ({open}): say which with --key")]
    WhichKey { run: String, open: String },
    #[error("the answer does not match checkpoint `{key}`'s schema; it is still waiting:\n{}", indented(violations))]
    Mismatch { key: String, violations: Vec<super::schema::Violation> },
}

fn indented(violations: &[super::schema::Violation]) -> String {
    violations.iter().map(|v| format!("  {v}")).collect::<Vec<_>>().join("\n")
}

impl Run {
    /// The key of the workflow's next checkpoint that names none: `checkpoint-N`, counted per attempt.
    pub fn next_checkpoint_key(&self) -> String {
        format!("checkpoint-{}", self.checkpoints.counter.fetch_add(1, Ordering::SeqCst) + 1)
    }

    /// Asks the operator `q`: its journalled answer when an earlier attempt got one for the same
    /// question, else the run parks `waiting` until `answer_checkpoint` (or the asker gives up).
    pub fn ask_operator(&self, q: Question<'_>) -> Result<Asked, AlreadyWaiting> {
        let hash = question_hash(q.question, &q.schema);
        if let Some((h, answer)) = self.checkpoints.replay.get(&q.key) {
            if *h == hash {
                self.records.event(&Event::CheckpointReplayed { key: &q.key });
                return Ok(Asked::Replayed(answer.clone()));
            }
        }
        let (tx, rx) = oneshot::channel();
        {
            let mut open = lock(&self.checkpoints.open);
            if open.iter().any(|o| o.key == q.key) {
                return Err(AlreadyWaiting(q.key.clone()));
            }
            self.records.event(&Event::CheckpointAsked {
                key: &q.key,
                question: q.question,
                schema: &q.schema.value,
                timeout_ms: q.timeout_ms,
                agent: q.agent,
            });
            // A parked run is idle: its records are made durable before run.json says `waiting`,
            // so a run killed while parked has the question in its events.
            self.records.flush(true);
            open.push(Open {
                key: q.key.clone(),
                question: q.question.to_string(),
                schema: q.schema,
                asked_at: crate::record::now_iso(),
                timeout_ms: q.timeout_ms,
                agent: q.agent.map(String::from),
                tx,
            });
            self.write_waiting(&open);
        }
        self.progress.line(
            "warn",
            &format!(
                "waiting for the operator ({}): {}\n  answer with: awf runs answer {} --key {} --json VALUE",
                q.key, q.question, self.id, q.key
            ),
        );
        Ok(Asked::Waiting(rx))
    }

    /// The checkpoints waiting for an answer, as `run.json` `waiting` records them.
    pub fn waiting(&self) -> Vec<Waiting> {
        lock(&self.checkpoints.open).iter().map(Open::waiting).collect()
    }

    /// Answers the open checkpoint `key` (or the only one) with `value`: refused with the reasons
    /// when it fails the question's schema (the checkpoint stays open). The answer is in the
    /// journal before the asker gets it. Returns the key answered.
    pub async fn answer_checkpoint(&self, key: Option<&str>, value: Value) -> Result<String, AnswerRefused> {
        let taken = {
            let mut open = lock(&self.checkpoints.open);
            let run = self.id.clone();
            let i = match (key, open.len()) {
                (_, 0) => return Err(AnswerRefused::NotWaiting { run }),
                (Some(k), _) => open.iter().position(|o| o.key == k).ok_or_else(|| AnswerRefused::NoSuchKey {
                    run,
                    key: k.to_string(),
                    open: keys(&open),
                })?,
                (None, 1) => 0,
                (None, _) => return Err(AnswerRefused::WhichKey { run, open: keys(&open) }),
            };
            let violations = open[i].schema.violations(&value);
            if !violations.is_empty() {
                return Err(AnswerRefused::Mismatch { key: open[i].key.clone(), violations });
            }
            let o = open.remove(i);
            self.write_waiting(&open);
            o
        };
        let line = json!({ "attempt": self.attempt, "checkpoint": taken.key,
                           "question_hash": question_hash(&taken.question, &taken.schema),
                           "answer": value, "answered_at": crate::record::now_iso() });
        let _ = self.records.durable_line(Stream::Journal, &line.to_string()).await;
        self.records.event(&Event::CheckpointAnswered { key: &taken.key, answer: &value });
        self.progress.line("info", &format!("checkpoint {} answered", taken.key));
        let _ = taken.tx.send(value);
        Ok(taken.key)
    }

    /// Settles checkpoint `key` timed out, unless an answer took it first (then `false`).
    pub fn checkpoint_timed_out(&self, key: &str) -> bool {
        let mut open = lock(&self.checkpoints.open);
        let Some(i) = open.iter().position(|o| o.key == key) else { return false };
        let o = open.remove(i);
        self.records.event(&Event::CheckpointTimedOut {
            key,
            question: &o.question,
            timeout_ms: o.timeout_ms.unwrap_or_default(),
        });
        self.write_waiting(&open);
        true
    }

    /// Closes checkpoint `key` unanswered: its asker was cancelled or the run is ending.
    pub fn checkpoint_abandoned(&self, key: &str) {
        let mut open = lock(&self.checkpoints.open);
        if let Some(i) = open.iter().position(|o| o.key == key) {
            open.remove(i);
            self.write_waiting(&open);
        }
    }

    /// `run.json` says `waiting` (and what for) while any checkpoint is open, else `running`; an
    /// attempt already settled is left as it is.
    fn write_waiting(&self, open: &[Open]) {
        let mut doc = lock(&self.run_doc);
        let Some(a) = doc["attempts"].as_array_mut().and_then(|a| a.last_mut()) else { return };
        if !matches!(a["status"].as_str(), Some("running" | "waiting")) {
            return;
        }
        a["status"] = json!(if open.is_empty() { RunStatus::Running } else { RunStatus::Waiting });
        match doc.as_object_mut() {
            Some(m) if open.is_empty() => {
                m.remove("waiting");
            }
            Some(m) => {
                m.insert("waiting".into(), json!(open.iter().map(Open::waiting).collect::<Vec<_>>()));
            }
            None => {}
        }
        if let Err(e) = self.records.write_document("run.json", &*doc) {
            tracing::error!("cannot write run.json: {e}");
        }
    }
}

fn keys(open: &[Open]) -> String {
    open.iter().map(|o| o.key.as_str()).collect::<Vec<_>>().join(", ")
}

impl Open {
    fn waiting(&self) -> Waiting {
        Waiting {
            key: self.key.clone(),
            question: self.question.clone(),
            schema: (*self.schema.value).clone(),
            asked_at: Some(self.asked_at.clone()),
            timeout_ms: self.timeout_ms,
            agent: self.agent.clone(),
        }
    }
}

/// How a wait for the operator ended.
pub enum Waited {
    Answer(Value),
    /// The checkpoint's own `timeout_ms` passed first: settled timed out.
    TimedOut,
    /// The asker's scope was cancelled or its deadline passed: the checkpoint is closed unanswered.
    Cancelled,
}

impl Run {
    /// Waits for the answer to checkpoint `key`, at most until `timeout` (the checkpoint's own,
    /// which settles it timed out) or `outer` (the asker's deadline), or until `cancel`.
    pub async fn wait_for_operator(
        &self,
        key: &str,
        mut rx: oneshot::Receiver<Value>,
        timeout: Option<super::deadline::Deadline>,
        outer: Option<super::deadline::Deadline>,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Waited {
        let until = |d: Option<super::deadline::Deadline>| async move {
            match d {
                Some(at) => tokio::time::sleep_until(at.instant().into()).await,
                None => std::future::pending().await,
            }
        };
        // The checkpoint's own timeout only when it comes before the asker's deadline.
        let own = timeout.filter(|t| outer.is_none_or(|o| *t <= o));
        tokio::select! {
            biased;
            answer = &mut rx => match answer {
                Ok(v) => Waited::Answer(v),
                Err(_) => Waited::Cancelled,
            },
            _ = cancel.cancelled() => {
                self.checkpoint_abandoned(key);
                Waited::Cancelled
            }
            _ = until(own) => {
                if self.checkpoint_timed_out(key) {
                    return Waited::TimedOut;
                }
                // An answer took it first: it is on its way.
                match rx.await {
                    Ok(v) => Waited::Answer(v),
                    Err(_) => Waited::Cancelled,
                }
            }
            _ = until(outer) => {
                self.checkpoint_abandoned(key);
                Waited::Cancelled
            }
        }
    }
}
