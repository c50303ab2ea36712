//! The `fake` harness: an in-process agent for tests and offline demos. By default it answers every
//! schema with a value built from the schema and marks it simulated; a responder script can answer,
//! answer badly first, stay silent, fail, block, hang (until `stall_timeout` settles it `stalled`,
//! like any harness that goes quiet), delay and report usage. Answers go through the same result
//! slot as every other harness.

use super::{AgentInfo, BoxFuture, Responder, Session, TurnEnd, TurnInput, TurnReport};
use crate::accounting::{CostSource, Usage};
use crate::control::dispatch::EventSink;
use crate::control::slot::Submission;
use crate::run::schema::example_value;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// How many times one turn may resubmit after a rejection before the turn ends (fewer when the
/// rejections use up the nudge limit first).
const MAX_RESUBMITS: u32 = 5;

/// What a responder's reply gets wrong (the turn fails with `fake responder: ` and this).
#[derive(Debug, thiserror::Error)]
enum BadReply {
    #[error("respond() must return a map such as #{{ answer: value }}, #{{ json: text }}, #{{ silent: true }}, #{{ fail: reason }}, #{{ blocked: reason }}, #{{ hang: true }}, or () for the default answer; it returned {0}")]
    NotAMap(Value),
    #[error("respond() returned an unknown key `{key}` (known: {known})")]
    UnknownKey { key: String, known: String },
    #[error("`{key}` must be a map or an array of maps, got {got}")]
    NotAList { key: &'static str, got: Value },
    #[error("this turn cannot send messages")]
    NoMessenger,
    /// A `send`, `reply` or `ask` entry without what it needs (`needs`: its fields).
    #[error("{kind} entries need {needs}, got {got}")]
    Entry { kind: &'static str, needs: &'static str, got: Value },
}

/// What a fake agent submits: a value, or text as a harness would read it from a model.
enum Submitted {
    Value(Value),
    Text(String),
}

pub struct FakeSession {
    info: AgentInfo,
    responder: Option<Arc<dyn Responder>>,
    /// Turns in the session's history (a compaction leaves one, its summary): responders see the
    /// count, and nothing reads the turns themselves, so only the count is kept.
    history: usize,
    /// Where each submission's `op-submission` event goes, as for every harness.
    events: EventSink,
    /// The run's `stall_timeout`: a turn that hangs says nothing, and fails `stalled` after it.
    stall: Duration,
}

impl FakeSession {
    pub fn new(info: AgentInfo, responder: Option<Arc<dyn Responder>>, events: EventSink, stall: Duration) -> Self {
        FakeSession { info, responder, history: 0, events, stall }
    }

    /// Submits to the slot and records the submission with its verdict.
    fn submit(&self, input: &TurnInput, answer: Submitted) -> Submission {
        let (submission, bytes) = match answer {
            Submitted::Value(v) => {
                let bytes = json_len(&v);
                (input.slot.submit(v), bytes)
            }
            Submitted::Text(text) => (input.slot.submit_text(&text), text.len()),
        };
        let verdict = match &submission {
            Submission::Accepted => "accepted",
            Submission::Rejected(_) => "rejected",
            Submission::Closed(_) => "closed",
        };
        (self.events)(&crate::run::Event::OpSubmission {
            agent: &self.info.key,
            op_id: &input.op_id,
            accepted: submission == Submission::Accepted,
            verdict,
            bytes,
        });
        submission
    }

    fn turn_info(&self, input: &TurnInput, rejection: Option<&str>, replies: &[Value]) -> Value {
        json!({
            "agent": self.info.key,
            "op_id": input.op_id,
            "prompt": input.prompt,
            "shown": input.shown,
            "schema": *input.slot.schema().value,
            "instructions": self.info.instructions,
            "model": self.info.model,
            "effort": self.info.effort,
            "labels": self.info.labels,
            "n": input.n,
            "nudge": input.nudge,
            "rejection": rejection,
            "history": self.history,
            "kind": match input.kind { super::TurnKind::Turn => "turn", super::TurnKind::Message => "message" },
            "messages": input.messages,
            "replies": replies,
        })
    }

    /// Carries out a reply's `send`, `reply` and `ask` lists, noting each result in `replies`.
    /// True when asks were made: the responder is then called again to see their replies.
    async fn messages(&self, input: &TurnInput, reply: &Value, replies: &mut Vec<Value>) -> Result<bool, BadReply> {
        let list = |key: &'static str| -> Result<Vec<Value>, BadReply> {
            match reply.get(key) {
                None | Some(Value::Null) => Ok(Vec::new()),
                Some(Value::Array(a)) => Ok(a.clone()),
                Some(v @ Value::Object(_)) => Ok(vec![v.clone()]),
                Some(v) => Err(BadReply::NotAList { key, got: v.clone() }),
            }
        };
        let (sends, asks, answers) = (list("send")?, list("ask")?, list("reply")?);
        if sends.is_empty() && asks.is_empty() && answers.is_empty() {
            return Ok(false);
        }
        let Some(m) = &input.messenger else {
            return Err(BadReply::NoMessenger);
        };
        let text = |v: &Value, k: &str| v.get(k).map(|t| t.as_str().map(String::from).unwrap_or_else(|| t.to_string()));
        for s in &sends {
            let (Some(to), Some(body)) = (text(s, "to"), text(s, "text")) else {
                return Err(BadReply::Entry { kind: "send", needs: "`to` and `text`", got: s.clone() });
            };
            let r = m.send(&to, &body);
            replies.push(
                json!({ "send": to, "ok": r.is_ok(), "n": r.as_ref().ok(), "error": r.err().map(|e| e.to_string()) }),
            );
        }
        for a in &answers {
            let (Some(n), Some(body)) = (a.get("n").and_then(Value::as_u64), text(a, "text")) else {
                return Err(BadReply::Entry { kind: "reply", needs: "`n` and `text`", got: a.clone() });
            };
            let r = m.reply(n, &body);
            replies.push(json!({ "reply": n, "ok": r.is_ok(), "error": r.err().map(|e| e.to_string()) }));
        }
        let deadline = input.deadline;
        for a in &asks {
            let (Some(to), Some(body)) = (text(a, "to"), text(a, "text")) else {
                return Err(BadReply::Entry { kind: "ask", needs: "`to` and `text`", got: a.clone() });
            };
            let r = m.ask(&to, &body, deadline).await;
            replies.push(
                json!({ "ask": to, "ok": r.is_ok(), "text": r.as_ref().ok(), "error": r.err().map(|e| e.to_string()) }),
            );
        }
        Ok(!asks.is_empty())
    }

    fn default_answer(&self, input: &TurnInput) -> Value {
        let words: Vec<&str> = input.prompt.split_whitespace().take(8).collect();
        let text = format!("{}: {}", self.info.key, words.join(" "));
        example_value(&input.slot.schema().value, &text)
    }
}

/// One parsed responder reply.
enum Action {
    Answer(Value),
    Raw(String),
    Silent,
    Fail(String),
    Blocked(String),
    Hang,
}

fn parse_reply(reply: &Value) -> Result<(Option<Action>, u64, Usage), BadReply> {
    let Some(map) = reply.as_object() else {
        if reply.is_null() {
            return Ok((None, 0, Usage::default()));
        }
        return Err(BadReply::NotAMap(reply.clone()));
    };
    let known = ["answer", "json", "silent", "fail", "blocked", "hang", "delay_ms", "usage", "send", "ask", "reply"];
    if let Some(bad) = map.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(BadReply::UnknownKey { key: bad.clone(), known: known.join(", ") });
    }
    let text = |v: &Value| v.as_str().map(String::from).unwrap_or_else(|| v.to_string());
    let action = if let Some(v) = map.get("answer") {
        Some(Action::Answer(v.clone()))
    } else if let Some(v) = map.get("json") {
        Some(Action::Raw(text(v)))
    } else if let Some(v) = map.get("fail") {
        Some(Action::Fail(text(v)))
    } else if let Some(v) = map.get("blocked") {
        Some(Action::Blocked(text(v)))
    } else if map.get("hang").and_then(Value::as_bool) == Some(true) {
        Some(Action::Hang)
    } else if map.get("silent").and_then(Value::as_bool) == Some(true) {
        Some(Action::Silent)
    } else {
        None
    };
    let delay = map.get("delay_ms").and_then(Value::as_u64).unwrap_or(0);
    let mut usage = Usage::default();
    if let Some(u) = map.get("usage") {
        let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
        usage.input_tokens = n("input_tokens");
        usage.output_tokens = n("output_tokens");
        usage.cache_read_tokens = n("cache_read_tokens");
        usage.cache_write_tokens = n("cache_write_tokens");
        usage.cost_usd = u.get("cost_usd").and_then(Value::as_f64).unwrap_or(0.0);
    }
    Ok((action, delay, usage))
}

/// Why a hanging turn failed, in the words the process harnesses use (`stalled: ...`).
fn stalled(stall: Duration) -> String {
    let quiet =
        if stall.subsec_millis() == 0 { format!("{} s", stall.as_secs()) } else { format!("{} ms", stall.as_millis()) };
    format!("stalled: no output or event for {quiet}")
}

/// The length of `v` as compact JSON, counted without writing it out.
fn json_len(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a JSON value to a counter cannot fail.
    let _ = serde_json::to_writer(&mut count, v);
    count.0
}

/// A rough token count for simulated usage: four characters a token.
fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

impl Session for FakeSession {
    fn turn(&mut self, input: TurnInput) -> BoxFuture<'_, TurnReport> {
        Box::pin(async move {
            let mut usage = Usage::default();
            let mut rejection: Option<String> = None;
            let mut replies: Vec<Value> = Vec::new();
            let report = |end, usage| TurnReport { end, usage, cost_source: CostSource::Simulated, simulated: true };
            for _ in 0..=MAX_RESUBMITS {
                let (action, delay, used) = match &self.responder {
                    None => (None, 0, Usage::default()),
                    Some(r) => {
                        let reply = match r.respond(&self.turn_info(&input, rejection.as_deref(), &replies)) {
                            Ok(v) => v,
                            Err(e) => return report(TurnEnd::Failed(format!("fake responder: {e}")), usage),
                        };
                        // Sends and replies go out first; asks wait for their replies, and then the
                        // responder is called again to see them in `turn.replies`.
                        match self.messages(&input, &reply, &mut replies).await {
                            Ok(true) => continue,
                            Ok(false) => {}
                            Err(e) => return report(TurnEnd::Failed(format!("fake responder: {e}")), usage),
                        }
                        match parse_reply(&reply) {
                            Ok(parsed) => parsed,
                            Err(e) => return report(TurnEnd::Failed(format!("fake responder: {e}")), usage),
                        }
                    }
                };
                usage.add(&used);
                if delay > 0 {
                    tokio::time::sleep(Duration::from_millis(delay)).await;
                }
                let submission = match action {
                    // A message operation needs no result: the default is to read and end.
                    None if input.kind == super::TurnKind::Message => return report(TurnEnd::Ended, usage),
                    None => {
                        let answer = self.default_answer(&input);
                        if used == Usage::default() {
                            usage.input_tokens += estimate_tokens(&input.shown);
                            usage.output_tokens += (json_len(&answer) as u64).div_ceil(4);
                        }
                        self.submit(&input, Submitted::Value(answer))
                    }
                    Some(Action::Answer(v)) => self.submit(&input, Submitted::Value(v)),
                    Some(Action::Raw(text)) => self.submit(&input, Submitted::Text(text)),
                    Some(Action::Silent) => return report(TurnEnd::Ended, usage),
                    Some(Action::Fail(why)) => return report(TurnEnd::Failed(why), usage),
                    Some(Action::Blocked(why)) => return report(TurnEnd::Blocked(why), usage),
                    Some(Action::Hang) => {
                        tokio::time::sleep(self.stall).await;
                        return report(TurnEnd::Failed(stalled(self.stall)), usage);
                    }
                };
                match submission {
                    // Rejections count against the nudge limit, and an answer rejected twice is
                    // not sent again: the turn ends, and supervision decides.
                    Submission::Rejected(_) if !input.may_retry() => return report(TurnEnd::Ended, usage),
                    Submission::Rejected(_) => rejection = Some(submission.text()),
                    _ => {
                        self.history += 1;
                        return report(TurnEnd::Ended, usage);
                    }
                }
            }
            report(TurnEnd::Ended, usage)
        })
    }

    fn fork(&self, info: AgentInfo) -> Result<Box<dyn Session>, super::HarnessError> {
        Ok(Box::new(FakeSession {
            info,
            responder: self.responder.clone(),
            history: self.history,
            stall: self.stall,
            events: self.events.clone(),
        }))
    }

    fn compact(&mut self, prompt: &str) -> BoxFuture<'_, super::Compaction> {
        let summary = format!(
            "{}: simulated summary of {} turns ({})",
            self.info.key,
            self.history,
            prompt.split_whitespace().take(8).collect::<Vec<_>>().join(" ")
        );
        self.history = 1;
        Box::pin(async move { super::Compaction::free(Ok(summary), true) })
    }

    fn set(&mut self, model: Option<&str>, effort: Option<&str>) -> Result<(), super::HarnessError> {
        if let Some(m) = model {
            self.info.model = m.to_string();
        }
        if let Some(e) = effort {
            self.info.effort = Some(e.to_string());
        }
        Ok(())
    }
}
