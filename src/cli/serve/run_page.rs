//! `GET /runs/{id}/view`: one run as the dashboard draws it, typed: its status, stages, each
//! agent with its state and turns (prompt, answer, rejections, nudges, reasons), messages, open
//! checkpoints and spend by agent and by model. Folded from the run folder at each request with
//! `record::view::RunView` (events), `turns.jsonl` and the journal.

use super::{error, folder_of, Shared};
use crate::cli::listing;
use crate::record::docs::{self, Waiting};
use crate::record::events::{self, EventRecord};
use crate::record::lines::{self, JournalRecord};
use crate::record::view::{AgentState, RunView};
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::SystemTime;

/// What an agent is doing, tagged by `state`.
#[derive(Debug, Serialize, PartialEq)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub(super) enum Doing {
    Idle,
    Working,
    Waiting {
        reason: String,
    },
    AwaitingReply {
        to: String,
    },
    /// Waits for the operator to answer checkpoint `checkpoint`.
    AskingOperator {
        checkpoint: String,
    },
    Nudged {
        nudges: u32,
    },
    Answered,
    Failed {
        outcome: String,
    },
    Closed {
        reason: String,
    },
}

impl From<&AgentState> for Doing {
    fn from(s: &AgentState) -> Doing {
        match s.clone() {
            AgentState::Idle => Doing::Idle,
            AgentState::Working => Doing::Working,
            AgentState::Waiting(reason) => Doing::Waiting { reason },
            AgentState::AwaitingReply { to } => Doing::AwaitingReply { to },
            AgentState::AskingOperator { key } => Doing::AskingOperator { checkpoint: key },
            AgentState::Nudged(nudges) => Doing::Nudged { nudges },
            AgentState::Answered => Doing::Answered,
            AgentState::Failed(outcome) => Doing::Failed { outcome },
            AgentState::Closed(reason) => Doing::Closed { reason },
        }
    }
}

/// A submission refused, with the reasons it was told.
#[derive(Debug, Serialize)]
pub(super) struct Rejection {
    errors: Vec<String>,
    answer: String,
}

/// One operation of an agent.
#[derive(Debug, Default, Serialize)]
pub(super) struct Turn {
    op_id: String,
    kind: String,
    label: Option<String>,
    stage: Option<String>,
    prompt: Option<String>,
    /// The value it answered with (from the journal).
    answer: Option<Value>,
    /// `None` while it runs.
    outcome: Option<String>,
    reason: Option<String>,
    rejections: Vec<Rejection>,
    nudges: u32,
    tokens: u64,
    cost_usd: f64,
}

#[derive(Debug, Serialize)]
pub(super) struct Agent {
    key: String,
    harness: String,
    model: String,
    #[serde(flatten)]
    state: Doing,
    /// The operation it is in.
    current: Option<String>,
    operations: u64,
    tokens: u64,
    cost_usd: f64,
    turns: Vec<Turn>,
}

#[derive(Debug, Serialize)]
pub(super) struct Stage {
    name: String,
    /// `None` while it runs.
    status: Option<String>,
}

/// A message between agents, as its events say (its text is not in the events).
#[derive(Debug, Serialize)]
pub(super) struct Message {
    n: u64,
    event: &'static str,
    from: Option<String>,
    to: Option<String>,
}

#[derive(Debug, Default, Serialize)]
pub(super) struct Spend {
    tokens: u64,
    cost_usd: f64,
    operations: u64,
}

#[derive(Debug, Serialize)]
pub(super) struct Page {
    run_id: String,
    script: String,
    status: String,
    started_at: Option<String>,
    duration_ms: Option<u64>,
    error: Option<String>,
    tokens: u64,
    cost_usd: f64,
    /// Whether any cost is a price (else its $0 says nothing).
    priced: bool,
    budget_usd: Option<f64>,
    stages: Vec<Stage>,
    agents: Vec<Agent>,
    messages: Vec<Message>,
    /// Open checkpoints, which the page answers.
    checkpoints: Vec<Waiting>,
    spend_by_agent: BTreeMap<String, Spend>,
    spend_by_model: BTreeMap<String, Spend>,
}

pub(super) async fn view(State(server): State<Shared>, UrlPath(id): UrlPath<String>) -> Response {
    let own = server.entries().iter().find(|e| e.id == id).map(|e| (e.dir.clone(), e.status));
    let (dir, own_status) = match own {
        Some((dir, status)) => (dir, Some(status)),
        None => match folder_of(&server, &id) {
            Some(dir) => (dir, None),
            None => return error(StatusCode::NOT_FOUND, format!("no run {id} in {}", server.runs_dir().display())),
        },
    };
    let cwd = server.cwd.clone();
    let read = tokio::task::spawn_blocking(move || page(&dir, &id, own_status, &cwd)).await;
    match read {
        Ok(Ok(page)) => Json(page).into_response(),
        Ok(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

fn message(event: &EventRecord) -> Option<(&'static str, &events::Message)> {
    Some(match event {
        EventRecord::MessageSent(m) => ("sent", m),
        EventRecord::MessageDelivered(m) => ("delivered", m),
        EventRecord::MessageUndelivered(m) => ("undelivered", m),
        EventRecord::MessageReplied(m) => ("replied", m),
        EventRecord::MessageAskFailed(m) => ("ask-failed", m),
        _ => return None,
    })
}

/// Reads run `id` in `dir`; the error names the file that cannot be read.
fn page(dir: &Path, id: &str, own: Option<crate::run::RunStatus>, cwd: &Path) -> Result<Page, String> {
    let lines = match events::read(dir) {
        Ok(lines) => lines,
        // A queued run has no events yet.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(format!("cannot read {}: {e}", dir.join("events.jsonl").display())),
    };
    let mut view = RunView::default();
    let mut turns: Vec<(String, Turn)> = Vec::new();
    let mut messages = Vec::new();
    let mut finished_at = None;
    for line in &lines {
        view.apply(line);
        match &line.event {
            EventRecord::OpStarted { agent, op_id, kind, stage, label, prompt } => turns.push((
                agent.clone(),
                Turn {
                    op_id: op_id.clone(),
                    kind: kind.clone(),
                    label: label.clone(),
                    stage: stage.clone(),
                    prompt: prompt.clone(),
                    ..Turn::default()
                },
            )),
            EventRecord::OpRejected(r) => {
                if let Some(t) = find(&mut turns, &r.op_id) {
                    t.rejections.push(Rejection { errors: r.errors.clone(), answer: r.answer.clone() });
                }
            }
            EventRecord::OpNudged { op_id, nudge, .. } => {
                if let Some(t) = find(&mut turns, op_id) {
                    t.nudges = t.nudges.max(*nudge);
                }
            }
            EventRecord::OpSettled { op_id, outcome, reason, tokens, cost_usd, .. } => {
                if let Some(t) = find(&mut turns, op_id) {
                    t.outcome = Some(outcome.as_str().to_string());
                    t.reason = reason.clone();
                    t.tokens = *tokens;
                    t.cost_usd = *cost_usd;
                }
            }
            EventRecord::RunFinished { .. } => finished_at = line.at.clone(),
            event => {
                if let Some((kind, m)) = message(event) {
                    messages.push(Message { n: m.n, event: kind, from: m.from.clone(), to: m.to.clone() });
                }
            }
        }
    }
    // The journal's last line for an operation holds the value it answered with.
    for record in lines::journal(dir).unwrap_or_default() {
        if let JournalRecord::Op(op) = record {
            if let Some(t) = find(&mut turns, &op.op_id) {
                t.answer = op.value();
            }
        }
    }
    let mut spend_by_model: BTreeMap<String, Spend> = BTreeMap::new();
    let recorded = lines::turns(dir).unwrap_or_default();
    let priced = recorded.iter().any(lines::TurnRecord::priced);
    for t in recorded {
        let s = spend_by_model.entry(if t.model.is_empty() { t.harness.clone() } else { t.model.clone() }).or_default();
        s.tokens += t.tokens;
        s.cost_usd += t.cost_usd();
        s.operations += 1;
    }
    let spend_by_agent = view
        .agents
        .values()
        .map(|a| (a.key.clone(), Spend { tokens: a.tokens, cost_usd: a.usd, operations: a.operations }))
        .collect();
    let agents = view
        .agents
        .values()
        .map(|a| Agent {
            key: a.key.clone(),
            harness: a.harness.clone(),
            model: a.model.clone(),
            state: Doing::from(&a.state),
            current: a.current.as_ref().map(|c| c.op_id.clone()),
            operations: a.operations,
            tokens: a.tokens,
            cost_usd: a.usd,
            turns: turns.iter_mut().filter(|t| t.0 == a.key).map(|t| std::mem::take(&mut t.1)).collect(),
        })
        .collect();
    let doc = docs::run(dir).unwrap_or_default();
    let started = view.started.or_else(|| parse(doc.attempts.first().and_then(|a| a.started_at.as_deref())));
    let ended = if view.ended() { parse(finished_at.as_deref()).or(started) } else { None };
    Ok(Page {
        run_id: id.to_string(),
        script: Path::new(&view.script).strip_prefix(cwd).unwrap_or(Path::new(&view.script)).display().to_string(),
        status: super::dashboard::status(own, listing::run_status(dir)),
        started_at: started.map(|t| humantime::format_rfc3339_millis(t).to_string()),
        duration_ms: super::dashboard::duration_ms(started, ended),
        error: view.error.clone(),
        tokens: view.tokens,
        cost_usd: view.usd,
        priced,
        budget_usd: view.budget_usd,
        stages: view
            .stages
            .iter()
            .map(|s| Stage { name: s.name.clone(), status: s.status.as_ref().map(|r| r.as_str().to_string()) })
            .collect(),
        agents,
        messages,
        checkpoints: doc.waiting,
        spend_by_agent,
        spend_by_model,
    })
}

fn parse(at: Option<&str>) -> Option<SystemTime> {
    at.and_then(|t| humantime::parse_rfc3339_weak(t).ok())
}

/// The latest operation `op_id` (an id is reused by a later attempt).
fn find<'a>(turns: &'a mut [(String, Turn)], op_id: &str) -> Option<&'a mut Turn> {
    turns.iter_mut().rev().find(|t| t.1.op_id == op_id).map(|t| &mut t.1)
}
