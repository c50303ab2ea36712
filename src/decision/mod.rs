//! Decisions (`ctx.decisions.decide`): a closed question to the decision model `[decisions]`
//! configures, answered with a choice among the options and a confidence. Under the spec's floor
//! (or with no valid answer) its fallback decides: the operator at a checkpoint, a default
//! option, or an error. Every decision is journalled (the model's answer, then the settled
//! decision): a later attempt replays it by key when its question and options are the same, and
//! never asks the model again. `spec.rs` checks the spec, `prompt.rs` words the question,
//! `ask.rs` asks the model through the agent layer (billed like a turn), `logprobs.rs` reads the
//! distribution from the tokens, `record.rs` holds what is recorded.

pub mod ask;
pub mod logprobs;
pub mod prompt;
pub mod record;
pub mod spec;

use crate::agent::AgentBook;
use crate::record::lines::{DecisionLine, DecisionPhase};
use crate::record::status::{DecidedBy, DecisionSource};
use crate::record::Stream;
use crate::run::checkpoint::{Asked, Question, Waited};
use crate::run::scope::Frame;
use crate::run::{Event, Run};
use record::{DecisionRecord, JournalLine, ModelAnswer};
use serde_json::{json, Value};
use spec::{Fallback, Spec, SpecError};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Why a decision gave no choice.
#[derive(Debug, thiserror::Error)]
pub enum DecideError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// No `[decisions]` table: nothing to ask.
    #[error(
        "no decision model is configured: add a [decisions] table to {place}, naming a runtime \
         (runtime = \"NAME\") or giving one (harness = \"fake\" with a responder, for tests)"
    )]
    NotConfigured { place: String },
    /// The decision model's runtime cannot be had as configured.
    #[error("{0}")]
    Config(String),
    #[error("key `{key}` was already used by the decision at {first}; the one at {second} needs a key of its own")]
    KeyReused { key: String, first: String, second: String },
    /// The model's turn failed (an unreachable server, a harness error), as an agent's would.
    #[error("the decision model failed: {0}")]
    Provider(String),
    #[error("the decision's schema does not compile: {0}")]
    Schema(#[from] crate::run::schema::Invalid),
    #[error("the model's confidence {confidence:.3} in `{choice}` is under min_confidence {floor} and the fallback is \"fail\"")]
    BelowFloor { choice: String, confidence: f64, floor: f64 },
    #[error("the model gave no valid answer ({why}) and the fallback is \"fail\"")]
    NoAnswer { why: String },
    /// The operator could not be asked (a checkpoint of that key is already open).
    #[error(transparent)]
    Operator(#[from] crate::run::checkpoint::AlreadyWaiting),
    /// The scope was cancelled or passed its deadline: the script must unwind.
    #[error("{0}")]
    Terminated(String),
}

/// The decisions of one attempt: those on record from earlier attempts (replayed by key), the
/// keys used so far and where, and every decision asked, in the order asked.
#[derive(Default)]
pub struct DecisionBook {
    /// Earlier attempts' decisions, the last journal line of each, in journal order.
    recorded: Vec<DecisionLine>,
    /// Key → the call site that used it in this attempt.
    sites: Mutex<HashMap<String, String>>,
    /// This attempt's decisions in the order asked (a placeholder until each settles).
    asked: Mutex<Vec<DecisionRecord>>,
    /// Whether the decision model's agent row was announced (`agent-opened`, once).
    announced: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every value behind these locks is replaced or appended whole.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl DecisionBook {
    pub fn new(recorded: Vec<DecisionLine>) -> DecisionBook {
        DecisionBook { recorded, ..Default::default() }
    }

    /// Every decision the run made, for `result.json`: those earlier attempts settled that this
    /// one did not ask again (a reused stage's), then this attempt's, in the order asked.
    pub fn summary(&self) -> Vec<DecisionRecord> {
        let asked = lock(&self.asked).clone();
        let mut out: Vec<DecisionRecord> = self
            .recorded
            .iter()
            .filter(|l| l.phase == DecisionPhase::Settled && !asked.iter().any(|a| a.key == l.decision))
            .filter_map(|l| serde_json::from_value(l.record.clone()).ok())
            .collect();
        out.extend(asked);
        out
    }

    /// Notes `key` as used at `site`, or refuses it when this attempt used it already.
    fn claim(&self, key: &str, site: &str) -> Result<(), DecideError> {
        let mut sites = lock(&self.sites);
        if let Some(first) = sites.get(key) {
            return Err(DecideError::KeyReused { key: key.into(), first: first.clone(), second: site.into() });
        }
        sites.insert(key.into(), site.into());
        Ok(())
    }
}

/// Decides `spec` (asked at `site`, a script position) under `frame`: replayed from the journal
/// when an earlier attempt decided the same, else asked of the model, then held to the floor.
pub fn decide(
    book: &DecisionBook,
    agents: &Arc<AgentBook>,
    spec: &Spec,
    site: &str,
    frame: &Frame,
) -> Result<DecisionRecord, DecideError> {
    spec.validate()?;
    let run = &agents.run;
    let Some(config) = run.config.decisions.as_ref() else {
        let place = run.config.source.as_ref().map_or("awf.toml".into(), |p| p.display().to_string());
        return Err(DecideError::NotConfigured { place });
    };
    book.claim(&spec.key, site)?;
    let index = {
        let mut asked = lock(&book.asked);
        asked.push(failed(run, spec, None, "not settled: the run ended first"));
        asked.len() - 1
    };
    let (record, result) = match settle(book, agents, config, spec, frame) {
        Ok(r) => (r.clone(), Ok(r)),
        Err((e, answer)) => (failed(run, spec, answer.as_deref(), &e.to_string()), Err(e)),
    };
    run.records.event(&Event::DecisionSettled {
        key: &record.key,
        choice: record.choice.as_deref(),
        confidence: record.confidence,
        decided_by: record.decided_by,
        source: record.source,
        model: &record.model,
        error: record.error.as_deref(),
        tokens: record.spend.tokens,
        cost_usd: record.spend.cost_usd,
    });
    let line = match (&record.choice, record.decided_by) {
        (Some(choice), Some(by)) => format!(
            "decision {}: {choice} (decided by {}; confidence {:.2} from {}{})",
            record.key,
            by.as_str(),
            record.confidence,
            record.source.as_str(),
            if record.replayed { ", replayed" } else { "" }
        ),
        _ => format!("decision {} failed: {}", record.key, record.error.as_deref().unwrap_or("")),
    };
    run.progress.line(if record.error.is_some() { "warn" } else { "info" }, &line);
    lock(&book.asked)[index] = record;
    result
}

/// The decision, or why none was made (with the model's answer when it had given one).
fn settle(
    book: &DecisionBook,
    agents: &Arc<AgentBook>,
    config: &crate::config::DecisionsConfig,
    spec: &Spec,
    frame: &Frame,
) -> Result<DecisionRecord, (DecideError, Option<Box<ModelAnswer>>)> {
    let run = &agents.run;
    let hash = spec.hash();
    let mut answer: Option<ModelAnswer> = None;
    match book.recorded.iter().find(|l| l.decision == spec.key) {
        Some(l) if l.decision_hash == hash => match l.phase {
            DecisionPhase::Settled => {
                if let Ok(mut r) = serde_json::from_value::<DecisionRecord>(l.record.clone()) {
                    run.records.event(&Event::DecisionReplayed { key: &spec.key, settled: true });
                    r.replayed = true;
                    return Ok(r);
                }
            }
            DecisionPhase::Model => {
                answer = serde_json::from_value(l.record.clone()).ok();
                if answer.is_some() {
                    run.records.event(&Event::DecisionReplayed { key: &spec.key, settled: false });
                }
            }
        },
        Some(_) => run.records.event(&Event::DecisionRerun {
            key: &spec.key,
            why: "its question or options changed since the attempt that decided it",
        }),
        None => {}
    }
    let answer = match answer {
        Some(a) => a,
        None => {
            let first = !book.announced.swap(true, Ordering::SeqCst);
            let a = ask::model(agents, config, spec, first, frame).map_err(|e| (e, None))?;
            journal(run, spec, &hash, DecisionPhase::Model, &a);
            a
        }
    };
    let confident = answer.choice.clone().filter(|c| answer.probability(c) >= spec.min_confidence);
    let (choice, by) = match (confident, &spec.fallback) {
        (Some(c), _) => (c, DecidedBy::Model),
        (None, Fallback::Default(d)) => (d.clone(), DecidedBy::Default),
        (None, Fallback::Operator) => {
            (operator(run, spec, &answer, frame).map_err(|e| (e, Some(Box::new(answer.clone()))))?, DecidedBy::Operator)
        }
        (None, Fallback::Fail) => {
            let e = match &answer.choice {
                Some(c) => DecideError::BelowFloor {
                    choice: c.clone(),
                    confidence: answer.probability(c),
                    floor: spec.min_confidence,
                },
                None => DecideError::NoAnswer { why: answer.why_none.clone().unwrap_or_default() },
            };
            return Err((e, Some(Box::new(answer))));
        }
    };
    let mut record = failed(run, spec, Some(&answer), "");
    record.confidence = answer.probability(&choice);
    record.choice = Some(choice);
    record.decided_by = Some(by);
    record.error = None;
    journal(run, spec, &hash, DecisionPhase::Settled, &record);
    Ok(record)
}

/// A decision's record without a choice (it failed, or has not settled yet), with what the model
/// answered when it did.
fn failed(run: &Run, spec: &Spec, answer: Option<&ModelAnswer>, error: &str) -> DecisionRecord {
    DecisionRecord {
        key: spec.key.clone(),
        question: spec.question.clone(),
        options: spec.ids(),
        choice: None,
        confidence: 0.0,
        distribution: answer.map(|a| a.distribution.clone()).unwrap_or_default(),
        decided_by: None,
        model: answer.map(|a| a.model.clone()).unwrap_or_default(),
        source: answer.map_or(DecisionSource::None, |a| a.source),
        reason: answer.and_then(|a| a.reason.clone()),
        model_choice: answer.and_then(|a| a.choice.clone()),
        sampled: answer.and_then(|a| a.sampled.clone()),
        approximate: answer.is_some_and(|a| a.approximate),
        no_answer: answer.and_then(|a| a.why_none.clone()),
        min_confidence: spec.min_confidence,
        fallback: spec.fallback.text(),
        spend: answer.map(|a| a.spend).unwrap_or_default(),
        attempt: run.attempt,
        at: crate::record::now_iso(),
        error: Some(error.to_string()),
        replayed: false,
    }
}

/// Writes a decision's journal line and waits until it is written.
fn journal<T: serde::Serialize>(run: &Run, spec: &Spec, hash: &str, phase: DecisionPhase, record: &T) {
    let line = JournalLine { attempt: run.attempt, decision: &spec.key, decision_hash: hash, phase, record };
    let text = serde_json::to_string(&line).unwrap_or_default();
    // A closed writer (the run is ending) cannot record it; nothing more can be done.
    let _ = run.rt.block_on(run.records.durable_line(Stream::Journal, &text));
}

/// Asks the operator to decide, showing the model's pick and confidence: checkpoint
/// `decision-<key>`, answered with one of the option ids (replayed when an earlier attempt's
/// operator answered it).
fn operator(run: &Run, spec: &Spec, answer: &ModelAnswer, frame: &Frame) -> Result<String, DecideError> {
    let key = format!("decision-{}", spec.key);
    let ids = spec.ids();
    let schema = run.schemas.compile(&json!({ "enum": ids })).map_err(DecideError::Schema)?;
    let model = if answer.model.is_empty() { "the decision model".to_string() } else { answer.model.clone() };
    let said = match &answer.choice {
        Some(c) => format!(
            "{model} picked `{c}` with confidence {:.2} (from {}), under the floor {}",
            answer.probability(c),
            answer.source.as_str(),
            spec.min_confidence
        ),
        None => format!("{model} gave no valid answer ({})", answer.why_none.as_deref().unwrap_or("no reason")),
    };
    let question = format!(
        "Decide `{}`: {}\n{said}.\nAnswer with one of: {}",
        spec.key,
        spec.question.trim(),
        ids.iter().map(|i| json!(i).to_string()).collect::<Vec<_>>().join(", ")
    );
    let asked = run
        .ask_operator(Question { key: key.clone(), question: &question, schema, timeout_ms: None, agent: None })
        .map_err(DecideError::Operator)?;
    let rx = match asked {
        Asked::Replayed(v) => return Ok(option_of(v)),
        Asked::Waiting(rx) => rx,
    };
    match run.rt.block_on(run.wait_for_operator(&key, rx, None, frame.deadline_at(), &frame.cancel)) {
        Waited::Answer(v) => Ok(option_of(v)),
        Waited::TimedOut | Waited::Cancelled => Err(DecideError::Terminated(run.stop_reason())),
    }
}

/// An operator's answer (valid against the options' enum: a string).
fn option_of(v: Value) -> String {
    match v {
        Value::String(s) => s,
        other => other.to_string(),
    }
}
