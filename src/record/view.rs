//! A run's state as its events say, folded line by line: each agent with its state, current
//! operation, last activity and spend; the labelled parallel groups, stages, open checkpoints and
//! the run's spend and budget. The live view, `awf runs watch` and `awf runs show`'s agent table
//! all draw from this one fold; `Follow` feeds it from a growing `events.jsonl`.

use super::events::{EventLine, EventRecord};
use super::status::{OutcomeKind, Recorded, RunStatus, StageStatus};
use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// What an agent is doing, as its events say.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentState {
    /// Open, no operation running.
    Idle,
    /// In an operation.
    Working,
    /// In an operation, and said it waits (`wf waiting`), with its reason.
    Waiting(String),
    /// In an operation, waiting for the reply to a message it asked.
    AwaitingReply { to: String },
    /// In an operation, waiting for the operator to answer checkpoint `key`.
    AskingOperator { key: String },
    /// In an operation that was nudged `n` times.
    Nudged(u32),
    /// Its last operation was answered.
    Answered,
    /// Its last operation ended otherwise (its outcome's kind).
    Failed(String),
    /// Stopped or closed.
    Closed(String),
}

impl AgentState {
    /// Whether an operation is running.
    pub fn busy(&self) -> bool {
        matches!(
            self,
            AgentState::Working
                | AgentState::Waiting(_)
                | AgentState::AwaitingReply { .. }
                | AgentState::AskingOperator { .. }
                | AgentState::Nudged(_)
        )
    }

    /// Whether a person should look at it first: asking, nudged or failed.
    pub fn troubled(&self) -> bool {
        matches!(self, AgentState::AskingOperator { .. } | AgentState::Nudged(_) | AgentState::Failed(_))
    }
}

/// The operation an agent is in.
#[derive(Debug, Clone, PartialEq)]
pub struct Current {
    pub op_id: String,
    pub kind: String,
    pub label: Option<String>,
    pub since: Option<SystemTime>,
}

/// One agent of the run.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRow {
    pub key: String,
    pub harness: String,
    pub model: String,
    pub state: AgentState,
    pub current: Option<Current>,
    /// When one of its events was last written.
    pub last: Option<SystemTime>,
    pub operations: u64,
    pub tokens: u64,
    pub usd: f64,
    /// The tmux pane it runs in (`placement: "pane"`), `%3`, or `%3 kept` once released.
    pub pane: Option<String>,
}

/// A labelled `ctx.parallel`.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub label: String,
    pub total: usize,
    pub failed: usize,
    pub done: bool,
}

/// A stage, as far as the run has come.
#[derive(Debug, Clone, PartialEq)]
pub struct StageRow {
    pub name: String,
    /// `None` while it runs.
    pub status: Option<Recorded<StageStatus>>,
}

/// A checkpoint waiting for the operator.
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    pub key: String,
    pub question: String,
}

/// The fold of a run's events.
#[derive(Debug, Clone, Default)]
pub struct RunView {
    pub run_id: String,
    pub script: String,
    pub started: Option<SystemTime>,
    pub finished: Option<Recorded<RunStatus>>,
    pub error: Option<String>,
    pub agents: BTreeMap<String, AgentRow>,
    pub groups: Vec<Group>,
    pub stages: Vec<StageRow>,
    pub asked: Vec<Asked>,
    pub tokens: u64,
    pub usd: f64,
    pub budget_usd: Option<f64>,
    pub budget_tokens: Option<u64>,
    pub stall_ms: Option<u64>,
    pub messages: u64,
}

fn time(at: &Option<String>) -> Option<SystemTime> {
    at.as_deref().and_then(|t| humantime::parse_rfc3339_weak(t).ok())
}

impl RunView {
    /// Folds one event in.
    pub fn apply(&mut self, line: &EventLine) {
        let at = time(&line.at);
        if let Some(row) = line.agent.as_ref().and_then(|a| self.agents.get_mut(a)) {
            row.last = at.or(row.last);
        }
        match &line.event {
            EventRecord::RunStarted { run_id, script, limits, .. } => {
                self.run_id = run_id.clone();
                self.script = script.clone();
                self.started = self.started.or(at);
                self.finished = None;
                self.budget_usd = limits.get("budget_usd").and_then(|v| v.as_f64());
                self.budget_tokens = limits.get("budget_tokens").and_then(|v| v.as_u64());
                self.stall_ms = limits.get("stall_timeout_ms").and_then(|v| v.as_u64());
            }
            EventRecord::RunFinished { status, error } => {
                self.finished = Some(status.clone());
                self.error = error.clone();
            }
            EventRecord::AgentOpened { agent, harness, model } => {
                self.agents.insert(
                    agent.clone(),
                    AgentRow {
                        key: agent.clone(),
                        harness: harness.clone(),
                        model: model.clone(),
                        state: AgentState::Idle,
                        current: None,
                        last: at,
                        operations: 0,
                        tokens: 0,
                        usd: 0.0,
                        pane: None,
                    },
                );
            }
            EventRecord::PaneOpened { agent, target, .. } => {
                if let Some(row) = self.agents.get_mut(agent) {
                    row.pane = Some(target.clone());
                }
            }
            EventRecord::PaneClosed { agent, target, state } => {
                if let Some(row) = self.agents.get_mut(agent) {
                    row.pane = (state == "kept").then(|| format!("{target} kept"));
                }
            }
            EventRecord::AgentStopped { agent, reason } | EventRecord::AgentClosed { agent, reason } => {
                if let Some(row) = self.agents.get_mut(agent) {
                    row.state = AgentState::Closed(reason.clone());
                    row.current = None;
                }
            }
            EventRecord::OpStarted { agent, op_id, kind, label, .. } => {
                if let Some(row) = self.agents.get_mut(agent) {
                    row.state = AgentState::Working;
                    row.current =
                        Some(Current { op_id: op_id.clone(), kind: kind.clone(), label: label.clone(), since: at });
                }
            }
            EventRecord::OpNudged { agent, nudge, .. } => self.set_busy(agent, AgentState::Nudged(*nudge)),
            EventRecord::OpSettled { agent, outcome, tokens, cost_usd, .. } => {
                self.tokens += tokens;
                self.usd += cost_usd;
                if let Some(row) = self.agents.get_mut(agent) {
                    row.operations += 1;
                    row.tokens += tokens;
                    row.usd += cost_usd;
                    row.current = None;
                    row.state = match outcome {
                        Recorded::Known(OutcomeKind::Answered) => AgentState::Answered,
                        other => AgentState::Failed(other.as_str().to_string()),
                    };
                }
            }
            EventRecord::OpWaiting { agent, reason, .. } => self.set_busy(agent, AgentState::Waiting(reason.clone())),
            EventRecord::MessageSent(m) => {
                self.messages += 1;
                if let Some(row) = m.from.as_ref().and_then(|a| self.agents.get_mut(a)) {
                    row.last = at.or(row.last);
                }
                if let (true, Some(from), Some(to)) = (m.asks, &m.from, &m.to) {
                    self.set_busy(from, AgentState::AwaitingReply { to: to.clone() });
                }
            }
            EventRecord::MessageReplied(m) | EventRecord::MessageAskFailed(m) => {
                let asker = if matches!(line.event, EventRecord::MessageReplied(_)) { &m.to } else { &m.asker };
                if let Some(a) = asker.clone() {
                    self.resume(&a);
                }
            }
            EventRecord::CheckpointAsked { key, question } => {
                self.asked.push(Asked { key: key.clone(), question: question.clone() });
                if let Some(agent) = &line.agent {
                    self.set_busy(agent, AgentState::AskingOperator { key: key.clone() });
                }
            }
            EventRecord::CheckpointAnswered { key, .. } | EventRecord::CheckpointTimedOut { key, .. } => {
                self.asked.retain(|a| &a.key != key);
                let asking: Vec<String> = self
                    .agents
                    .values()
                    .filter(|r| matches!(&r.state, AgentState::AskingOperator { key: k } if k == key))
                    .map(|r| r.key.clone())
                    .collect();
                for a in asking {
                    self.resume(&a);
                }
            }
            EventRecord::StageStarted { name } => self.stages.push(StageRow { name: name.clone(), status: None }),
            EventRecord::StageFinished { name, status, .. } => {
                match self.stages.iter_mut().rev().find(|s| &s.name == name) {
                    Some(s) => s.status = Some(status.clone()),
                    None => self.stages.push(StageRow { name: name.clone(), status: Some(status.clone()) }),
                }
            }
            EventRecord::ParallelStarted { label: Some(label), items, .. } => {
                self.groups.push(Group { label: label.clone(), total: *items, failed: 0, done: false });
            }
            EventRecord::ParallelFinished { label: Some(label), failed, .. } => {
                if let Some(g) = self.groups.iter_mut().rev().find(|g| &g.label == label && !g.done) {
                    g.done = true;
                    g.failed = *failed;
                }
            }
            _ => {}
        }
    }

    /// Puts a busy agent in `state` (an idle or closed one keeps its own).
    fn set_busy(&mut self, agent: &str, state: AgentState) {
        if let Some(row) = self.agents.get_mut(agent).filter(|r| r.current.is_some()) {
            row.state = state;
        }
    }

    /// Back to working, once what it waited on came.
    fn resume(&mut self, agent: &str) {
        self.set_busy(agent, AgentState::Working);
    }

    /// Whether the run has ended.
    pub fn ended(&self) -> bool {
        self.finished.is_some()
    }
}

/// Reads a growing `events.jsonl` from where it left off, whole lines only.
pub struct Follow {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
}

impl Follow {
    pub fn new(dir: &Path) -> Follow {
        Follow { path: dir.join("events.jsonl"), offset: 0, partial: Vec::new() }
    }

    /// Folds every whole line written since the last call into `view`; the number folded.
    pub fn poll(&mut self, view: &mut RunView) -> std::io::Result<usize> {
        let mut file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(e),
        };
        file.seek(SeekFrom::Start(self.offset))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        self.offset += bytes.len() as u64;
        self.partial.extend_from_slice(&bytes);
        let Some(end) = self.partial.iter().rposition(|&b| b == b'\n') else { return Ok(0) };
        let whole: Vec<u8> = self.partial.drain(..=end).collect();
        let mut n = 0;
        for line in whole.split(|&b| b == b'\n') {
            if let Some(e) = std::str::from_utf8(line).ok().and_then(EventLine::parse_text) {
                view.apply(&e);
                n += 1;
            }
        }
        Ok(n)
    }
}

#[cfg(test)]
#[path = "view_tests.rs"]
mod tests;
