//! `awf runs logs ID [-f] [--json]`: a run's events as lines a person reads (time, stage, agent,
//! what happened, spend) or raw, following a live run until it ends.

use super::background;
use crate::record::events::{EventLine, EventRecord, Message};
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::time::Duration;

/// How often a followed run's events are read again.
const POLL: Duration = Duration::from_millis(100);

/// What the reader keeps between lines: the stage in force, the spend so far, and the
/// rejection just shown (its `op-submission` says nothing more).
#[derive(Default)]
pub struct Reader {
    stage: Option<String>,
    cost_usd: f64,
    tokens: u64,
    rejected: Option<(u32, String)>,
}

/// A message event's suffix: `message-sent` → `sent`.
fn message_what(event: &EventRecord) -> Option<(&'static str, &Message)> {
    match event {
        EventRecord::MessageSent(m) => Some(("sent", m)),
        EventRecord::MessageDelivered(m) => Some(("delivered", m)),
        EventRecord::MessageUndelivered(m) => Some(("undelivered", m)),
        EventRecord::MessageReplied(m) => Some(("replied", m)),
        EventRecord::MessageAskFailed(m) => Some(("ask-failed", m)),
        _ => None,
    }
}

fn or_q(s: &Option<String>) -> &str {
    s.as_deref().unwrap_or("?")
}

impl Reader {
    /// The spend so far: USD once anything cost, else tokens (a local or fake model's $0 says
    /// nothing).
    fn spent(&self) -> String {
        if self.cost_usd > 0.0 {
            format!("${:.4}", self.cost_usd)
        } else {
            format!("{} tokens", self.tokens)
        }
    }

    /// One event as a line: `12:00:01.234  [stage]  agent  what happened`; `None` for an event
    /// the line before said all of.
    pub fn line(&mut self, event: &EventLine) -> Option<String> {
        let time = event.at.as_deref().and_then(|t| t.get(11..23)).unwrap_or("--:--:--.---");
        let mut agent = event.agent.clone();
        let mut stage_event = false;
        let what = match &event.event {
            EventRecord::RunStarted { script, attempt, .. } => {
                format!("run started (attempt {attempt}): {}", super::show::script_name(script))
            }
            EventRecord::RunStopping { cause } => {
                format!("stopping: {}", cause.reason.as_deref().unwrap_or("run deadline exceeded"))
            }
            EventRecord::RunFinished { status, error } => match error {
                Some(e) => format!("run {}: {e} · spent {}", status.as_str(), self.spent()),
                None => format!("run {} · spent {}", status.as_str(), self.spent()),
            },
            EventRecord::StageStarted { name } => {
                stage_event = true;
                self.stage = Some(name.clone());
                format!("stage {name} started")
            }
            EventRecord::StageFinished { name, status, reason } => {
                stage_event = true;
                self.stage = None;
                match reason {
                    Some(r) => format!("stage {name} {}: {r}", status.as_str()),
                    None => format!("stage {name} {}", status.as_str()),
                }
            }
            EventRecord::AgentOpened { harness, model, .. } => format!("opened ({harness}, {model})"),
            EventRecord::AgentClosed { reason, .. } => format!("closed ({reason})"),
            EventRecord::AgentStopped { reason, .. } => format!("stopped ({reason})"),
            EventRecord::OpStarted { kind, op_id, label, .. } => match label {
                Some(l) => format!("{kind} {op_id} started: {l}"),
                None => format!("{kind} {op_id} started"),
            },
            EventRecord::OpSettled { op_id, outcome, reason, tokens, cost_usd, .. } => {
                self.cost_usd += cost_usd;
                self.tokens += tokens;
                let why = reason.as_ref().map(|r| format!(": {r}")).unwrap_or_default();
                let this = if *cost_usd > 0.0 {
                    format!("{tokens} tokens ${cost_usd:.4}")
                } else {
                    format!("{tokens} tokens")
                };
                format!("{op_id} {}{why} · {this} · spent {}", outcome.as_str(), self.spent())
            }
            EventRecord::OpRejected(r) => {
                // The `op-submission` that follows says nothing more: it is not shown again.
                self.rejected = Some((event.attempt, r.op_id.clone()));
                format!("{} answer rejected ({} bytes): {}", r.op_id, r.bytes, r.errors.join("; "))
            }
            EventRecord::OpSubmission { op_id, verdict, bytes, .. } => {
                let shown = self.rejected.take().is_some_and(|(a, o)| a == event.attempt && o == *op_id);
                match verdict.as_str() {
                    "rejected" if shown => return None,
                    "rejected" => format!("{op_id} answer rejected ({bytes} bytes; this record keeps no errors)"),
                    "accepted" => format!("{op_id} answer accepted ({bytes} bytes)"),
                    verdict => format!("{op_id} answer {verdict} ({bytes} bytes): the operation was already settled"),
                }
            }
            EventRecord::OpNudged { op_id, nudge, .. } => {
                format!("{op_id} nudged (check-in {nudge}): no accepted answer yet")
            }
            EventRecord::OpReplayed { op_id, .. } => format!("{op_id} replayed from the journal"),
            EventRecord::CheckpointAsked { key, question } => format!("asks the operator ({key}): {question}"),
            EventRecord::CheckpointAnswered { key, answer } => format!("checkpoint {key} answered: {answer}"),
            EventRecord::CheckpointTimedOut { key, question, timeout_ms } => {
                format!("checkpoint {key} timed out after {timeout_ms} ms: {question}")
            }
            EventRecord::CheckpointReplayed { key } => format!("checkpoint {key} replayed from the journal"),
            EventRecord::ParallelStarted { label, items, .. } => {
                format!("parallel {} started: {items} items", label.as_deref().unwrap_or("(unlabelled)"))
            }
            EventRecord::ParallelFinished { label, items, failed } => format!(
                "parallel {} finished: {items} items, {failed} failed",
                label.as_deref().unwrap_or("(unlabelled)")
            ),
            EventRecord::Log { level, text } => format!("{level}: {text}"),
            EventRecord::BudgetExhausted { reason } => format!("budget exhausted: {reason}"),
            EventRecord::DecisionSettled(d) => {
                let spend = if d.cost_usd > 0.0 {
                    format!("{} tokens ${:.4}", d.tokens, d.cost_usd)
                } else {
                    format!("{} tokens", d.tokens)
                };
                match (&d.choice, &d.decided_by, &d.error) {
                    (Some(choice), Some(by), _) => format!(
                        "decision {}: {choice} (decided by {}; confidence {:.2} from {}; {}) · {spend}",
                        d.key,
                        by.as_str(),
                        d.confidence,
                        d.source.as_str(),
                        d.model
                    ),
                    (_, _, error) => {
                        format!("decision {} failed: {} · {spend}", d.key, error.as_deref().unwrap_or("no choice"))
                    }
                }
            }
            EventRecord::DecisionReplayed { key, settled: true } => format!("decision {key} replayed from the journal"),
            EventRecord::DecisionReplayed { key, settled: false } => {
                format!("decision {key}: the model's answer replayed from the journal; its fallback runs again")
            }
            EventRecord::DecisionRerun { key, why } => format!("decision {key} asked again: {why}"),
            EventRecord::Other { ty, data } => format!("{ty} {data}"),
            m => match message_what(m) {
                Some((what, m)) => {
                    agent = None;
                    format!("{} → {}: message {} {what}", or_q(&m.from), or_q(&m.to), m.n)
                }
                None => return None,
            },
        };
        let stage = event.stage.clone().or_else(|| self.stage.clone());
        let mut line = time.to_string();
        if let Some(stage) = stage.filter(|_| !stage_event) {
            line.push_str(&format!("  [{stage}]"));
        }
        if let Some(agent) = agent {
            line.push_str(&format!("  {agent}"));
        }
        line.push_str("  ");
        line.push_str(&what);
        Some(line)
    }
}

/// Whether the run in `dir` may still write events: queued, starting, or its attempt alive.
fn live(dir: &Path) -> bool {
    if !dir.join("run.json").exists() {
        return background::queued(dir);
    }
    crate::record::lock::held(dir) == Some(true)
}

/// Prints the events of the run in `dir`; with `follow`, goes on until the run ends.
pub fn print(dir: &Path, follow: bool, json: bool) -> std::io::Result<()> {
    let path = dir.join("events.jsonl");
    let mut reader = Reader::default();
    let mut offset = 0u64;
    let mut partial = String::new();
    loop {
        // Whether it is live is read first: a run that has ended has written its last line.
        let was_live = follow && live(dir);
        if let Ok(mut file) = std::fs::File::open(&path) {
            file.seek(SeekFrom::Start(offset))?;
            let mut fresh = String::new();
            offset += file.read_to_string(&mut fresh)? as u64;
            partial.push_str(&fresh);
            while let Some(end) = partial.find('\n') {
                let line: String = partial.drain(..=end).collect();
                let line = line.trim();
                if line.is_empty() {
                    continue;
                }
                if json {
                    out!("{line}");
                } else if let Some(text) = EventLine::parse_text(line).and_then(|e| reader.line(&e)) {
                    out!("{text}");
                }
            }
        }
        if !was_live {
            return Ok(());
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    #[test]
    fn events_read_as_lines_with_the_stage_the_agent_and_the_spend() {
        let mut r = Reader::default();
        let at = "2026-01-02T03:04:05.678Z";
        let ev = |ty: &str, data: Value| {
            EventLine::parse(&json!({ "v": 1, "type": ty, "at": at, "attempt": 1, "data": data })).expect("envelope")
        };
        let mut line = |ty: &str, data: Value| r.line(&ev(ty, data)).unwrap_or_default();
        assert_eq!(line("stage-started", json!({ "name": "plan" })), "03:04:05.678  stage plan started");
        assert_eq!(
            line(
                "op-settled",
                json!({ "agent": "a", "op_id": "a#1", "outcome": "answered", "tokens": 12, "cost_usd": 0.5 })
            ),
            "03:04:05.678  [plan]  a  a#1 answered · 12 tokens $0.5000 · spent $0.5000"
        );
        assert_eq!(
            line("run-finished", json!({ "status": "succeeded", "error": null })),
            "03:04:05.678  [plan]  run succeeded · spent $0.5000"
        );
    }

    #[test]
    fn unpriced_spend_reads_as_tokens_and_a_rejection_as_its_errors_once() {
        let mut r = Reader::default();
        let at = "2026-01-02T03:04:05.678Z";
        let ev = |ty: &str, data: Value| {
            EventLine::parse(&json!({ "v": 1, "type": ty, "at": at, "attempt": 1, "data": data })).expect("envelope")
        };
        let mut line = |ty: &str, data: Value| r.line(&ev(ty, data));
        let rejected = line(
            "op-rejected",
            json!({ "agent": "a", "op_id": "a#1", "errors": ["/verdict: \"maybe\" is not one of [\"yes\",\"no\"]", "/reason: missing"],
                    "answer": "{\"verdict\":\"maybe\"}", "bytes": 19 }),
        );
        assert_eq!(
            rejected.as_deref(),
            Some("03:04:05.678  a  a#1 answer rejected (19 bytes): /verdict: \"maybe\" is not one of [\"yes\",\"no\"]; /reason: missing")
        );
        let submission =
            |verdict: &str| json!({ "agent": "a", "op_id": "a#1", "accepted": false, "verdict": verdict, "bytes": 19 });
        assert_eq!(line("op-submission", submission("rejected")), None, "said once, by op-rejected");
        assert_eq!(
            line("op-submission", submission("rejected")).as_deref(),
            Some("03:04:05.678  a  a#1 answer rejected (19 bytes; this record keeps no errors)")
        );
        assert_eq!(
            line(
                "op-settled",
                json!({ "agent": "a", "op_id": "a#1", "outcome": "answered", "tokens": 7, "cost_usd": 0.0 })
            )
            .as_deref(),
            Some("03:04:05.678  a  a#1 answered · 7 tokens · spent 7 tokens")
        );
    }
}
