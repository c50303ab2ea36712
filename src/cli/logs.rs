//! `awf runs logs ID [-f] [--json]`: a run's events as lines a person reads (time, stage, agent,
//! what happened, spend) or raw, following a live run until it ends.

use super::background;
use serde_json::Value;
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
    rejected: Option<(u64, String)>,
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v[k].as_str().unwrap_or("?")
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

    /// A rejected answer as its errors; the `op-submission` that follows it is not shown again.
    fn rejection(&mut self, event: &Value) -> String {
        let attempt = event["attempt"].as_u64().unwrap_or(1);
        match serde_json::from_value::<super::records::Rejected>(event["data"].clone()) {
            Ok(r) => {
                self.rejected = Some((attempt, r.op_id.clone()));
                format!("{} answer rejected ({} bytes): {}", r.op_id, r.bytes, r.errors.join("; "))
            }
            Err(_) => format!("op-rejected {}", event["data"]),
        }
    }

    /// One event as a line: `12:00:01.234  [stage]  agent  what happened`; `None` for an event
    /// the line before said all of.
    pub fn line(&mut self, event: &Value) -> Option<String> {
        let d = &event["data"];
        let time = event["at"].as_str().and_then(|t| t.get(11..23)).unwrap_or("--:--:--.---");
        let ty = event["type"].as_str().unwrap_or("?");
        let mut agent = d["agent"].as_str().map(String::from);
        let what = match ty {
            "run-started" => {
                format!("run started (attempt {}): {}", d["attempt"], super::show::script_name(s(d, "script")))
            }
            "run-stopping" => format!("stopping: {}", d["cause"]["reason"].as_str().unwrap_or("run deadline exceeded")),
            "run-finished" => match d["error"].as_str() {
                Some(e) => format!("run {}: {e} · spent {}", s(d, "status"), self.spent()),
                None => format!("run {} · spent {}", s(d, "status"), self.spent()),
            },
            "stage-started" => {
                self.stage = d["name"].as_str().map(String::from);
                format!("stage {} started", s(d, "name"))
            }
            "stage-finished" => {
                let line = match d["reason"].as_str() {
                    Some(r) => format!("stage {} {}: {r}", s(d, "name"), s(d, "status")),
                    None => format!("stage {} {}", s(d, "name"), s(d, "status")),
                };
                self.stage = None;
                line
            }
            "agent-opened" => format!("opened ({}, {})", s(d, "harness"), s(d, "model")),
            "agent-closed" | "agent-stopped" => format!("{} ({})", &ty[6..], s(d, "reason")),
            "op-started" => match d["label"].as_str() {
                Some(l) => format!("{} {} started: {l}", s(d, "kind"), s(d, "op_id")),
                None => format!("{} {} started", s(d, "kind"), s(d, "op_id")),
            },
            "op-settled" => {
                let cost = d["cost_usd"].as_f64().unwrap_or(0.0);
                let tokens = d["tokens"].as_u64().unwrap_or(0);
                self.cost_usd += cost;
                self.tokens += tokens;
                let why = d["reason"].as_str().map(|r| format!(": {r}")).unwrap_or_default();
                let this = if cost > 0.0 { format!("{tokens} tokens ${cost:.4}") } else { format!("{tokens} tokens") };
                format!("{} {}{why} · {this} · spent {}", s(d, "op_id"), s(d, "outcome"), self.spent())
            }
            "op-rejected" => self.rejection(event),
            "op-submission" => {
                let attempt = event["attempt"].as_u64().unwrap_or(1);
                let op = s(d, "op_id");
                let shown = self.rejected.take().is_some_and(|(a, o)| a == attempt && o == op);
                match s(d, "verdict") {
                    "rejected" if shown => return None,
                    "rejected" => format!("{op} answer rejected ({} bytes; this record keeps no errors)", d["bytes"]),
                    "accepted" => format!("{op} answer accepted ({} bytes)", d["bytes"]),
                    verdict => {
                        format!("{op} answer {verdict} ({} bytes): the operation was already settled", d["bytes"])
                    }
                }
            }
            "op-nudged" => format!("{} nudged (check-in {}): no accepted answer yet", s(d, "op_id"), d["nudge"]),
            "op-replayed" => format!("{} replayed from the journal", s(d, "op_id")),
            "checkpoint-asked" => format!("asks the operator ({}): {}", s(d, "key"), s(d, "question")),
            "checkpoint-answered" => format!("checkpoint {} answered: {}", s(d, "key"), d["answer"]),
            "checkpoint-timed-out" => {
                format!("checkpoint {} timed out after {} ms: {}", s(d, "key"), d["timeout_ms"], s(d, "question"))
            }
            "checkpoint-replayed" => format!("checkpoint {} replayed from the journal", s(d, "key")),
            "parallel-started" => {
                format!("parallel {} started: {} items", d["label"].as_str().unwrap_or("(unlabelled)"), d["items"])
            }
            "parallel-finished" => format!(
                "parallel {} finished: {} items, {} failed",
                d["label"].as_str().unwrap_or("(unlabelled)"),
                d["items"],
                d["failed"]
            ),
            "log" => format!("{}: {}", s(d, "level"), s(d, "text")),
            "budget-exhausted" => format!("budget exhausted: {}", s(d, "reason")),
            t if t.starts_with("message-") => {
                agent = None;
                format!("{} → {}: message {} {}", s(d, "from"), s(d, "to"), d["n"], &t[8..])
            }
            other => format!("{other} {d}"),
        };
        let stage = d["stage"].as_str().map(String::from).or_else(|| self.stage.clone());
        let mut line = time.to_string();
        if let Some(stage) = stage.filter(|_| !ty.starts_with("stage-")) {
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
        return background::status(dir) == "queued";
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
                } else if let Some(text) = serde_json::from_str::<Value>(line).ok().and_then(|e| reader.line(&e)) {
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
    use serde_json::json;

    #[test]
    fn events_read_as_lines_with_the_stage_the_agent_and_the_spend() {
        let mut r = Reader::default();
        let at = "2026-01-02T03:04:05.678Z";
        let ev = |ty: &str, data: Value| json!({ "v": 1, "type": ty, "at": at, "attempt": 1, "data": data });
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
        let ev = |ty: &str, data: Value| json!({ "v": 1, "type": ty, "at": at, "attempt": 1, "data": data });
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
