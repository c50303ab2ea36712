//! A run's records as spans, named and attributed per the OpenTelemetry GenAI conventions: the
//! attempt is `invoke_workflow NAME` (from `run-started` to `run-finished`), each stage `stage
//! NAME`, each parallel group `parallel LABEL`, and each settled agent operation (a
//! `turns.jsonl` line) `invoke_agent AGENT` with `gen_ai.agent.name`, `gen_ai.request.model`,
//! `gen_ai.usage.input_tokens`/`output_tokens`, `awf.op_id`, `awf.outcome` and `awf.cost_usd`.
//! Times come from the records. Events do not say which group an operation ran in: it is the
//! innermost group of its stage open when it started.

use crate::record::events::{EventLine, EventRecord};
use crate::record::lines::{JournalOp, JournalRecord, TurnRecord};
use crate::record::status::{OutcomeKind, Recorded, StageStatus};
use opentelemetry::trace::{Span as _, SpanContext, SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{SdkTracer, Span};
use serde_json::Value;
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// A JSONL file read as it grows; only whole lines.
struct Tail {
    path: PathBuf,
    offset: u64,
    partial: String,
}

impl Tail {
    fn new(path: PathBuf) -> Tail {
        Tail { path, offset: 0, partial: String::new() }
    }

    fn lines(&mut self) -> Vec<Value> {
        let Ok(mut file) = std::fs::File::open(&self.path) else { return Vec::new() };
        let mut fresh = String::new();
        if file.seek(SeekFrom::Start(self.offset)).is_err() || file.read_to_string(&mut fresh).is_err() {
            return Vec::new();
        }
        self.offset += fresh.len() as u64;
        self.partial.push_str(&fresh);
        let mut out = Vec::new();
        while let Some(end) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=end).collect();
            if let Ok(v) = serde_json::from_str(line.trim()) {
                out.push(v);
            }
        }
        out
    }
}

struct Group {
    label: Option<String>,
    stage: Option<String>,
    start: SystemTime,
    end: Option<SystemTime>,
    cx: SpanContext,
    span: Option<Span>,
}

/// Turns one attempt's records into spans as they are read.
pub struct Builder {
    attempt: u32,
    capture: bool,
    events: Tail,
    turns: Tail,
    journal: Tail,
    run: Option<Span>,
    run_cx: Option<SpanContext>,
    /// When the attempt finished, its status and error.
    run_end: Option<(SystemTime, String, Option<String>)>,
    stages: Vec<(String, Span)>,
    stage_cx: HashMap<String, SpanContext>,
    groups: Vec<Group>,
    answers: HashMap<(String, String), JournalOp>,
    totals: (u64, u64, f64),
}

fn time(at: Option<&str>) -> SystemTime {
    at.and_then(|t| humantime::parse_rfc3339(t).ok()).unwrap_or_else(SystemTime::now)
}

/// A field an older line may lack, as `?`.
fn or_q(s: &str) -> String {
    if s.is_empty() {
        "?".into()
    } else {
        s.to_string()
    }
}

fn parent(cx: Option<&SpanContext>) -> Context {
    match cx {
        Some(sc) => Context::new().with_remote_span_context(sc.clone()),
        None => Context::new(),
    }
}

impl Builder {
    pub fn new(dir: &Path, attempt: u32, capture: bool) -> Builder {
        Builder {
            attempt,
            capture,
            events: Tail::new(dir.join("events.jsonl")),
            turns: Tail::new(dir.join("turns.jsonl")),
            journal: Tail::new(dir.join("journal.jsonl")),
            run: None,
            run_cx: None,
            run_end: None,
            stages: Vec::new(),
            stage_cx: HashMap::new(),
            groups: Vec::new(),
            answers: HashMap::new(),
            totals: (0, 0, 0.0),
        }
    }

    fn start(
        &self,
        tracer: &SdkTracer,
        name: String,
        at: SystemTime,
        cx: Option<&SpanContext>,
        attrs: Vec<KeyValue>,
    ) -> Span {
        tracer
            .span_builder(name)
            .with_kind(SpanKind::Internal)
            .with_start_time(at)
            .with_attributes(attrs)
            .start_with_context(tracer, &parent(cx))
    }

    /// Reads what the records gained and makes spans of it.
    pub fn read(&mut self, tracer: &SdkTracer) {
        for e in self.events.lines().iter().filter_map(EventLine::parse) {
            if e.attempt == self.attempt {
                self.event(tracer, e);
            }
        }
        if self.capture {
            for j in self.journal.lines() {
                if let Ok(JournalRecord::Op(op)) = serde_json::from_value(j) {
                    self.answers.insert((op.agent.clone(), op.op_id.clone()), op);
                }
            }
        }
        for t in self.turns.lines() {
            match serde_json::from_value::<TurnRecord>(t) {
                Ok(t) if t.attempt == self.attempt => self.operation(tracer, t),
                _ => {}
            }
        }
        let ended = if self.run_end.is_some() { self.run.take().zip(self.run_end.take()) } else { None };
        if let Some((mut run, (at, status, error))) = ended {
            let (input, output, cost) = self.totals;
            run.set_attribute(KeyValue::new("awf.status", status));
            run.set_attribute(KeyValue::new("gen_ai.usage.input_tokens", input as i64));
            run.set_attribute(KeyValue::new("gen_ai.usage.output_tokens", output as i64));
            run.set_attribute(KeyValue::new("awf.cost_usd", cost));
            if let Some(e) = error {
                run.set_status(Status::error(e));
            }
            run.end_with_timestamp(at);
        }
    }

    fn event(&mut self, tracer: &SdkTracer, e: EventLine) {
        let at = time(e.at.as_deref());
        match e.event {
            EventRecord::RunStarted { run_id, script, .. } => {
                let name = Path::new(&script).file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
                let attrs = vec![
                    KeyValue::new("gen_ai.operation.name", "invoke_workflow"),
                    KeyValue::new("awf.run_id", run_id),
                    KeyValue::new("awf.attempt", i64::from(self.attempt)),
                    KeyValue::new("awf.script", script),
                ];
                let span = self.start(tracer, format!("invoke_workflow {name}"), at, None, attrs);
                self.run_cx = Some(span.span_context().clone());
                self.run = Some(span);
            }
            EventRecord::RunFinished { status, error } => {
                self.run_end = Some((at, status.as_str().to_string(), error));
            }
            EventRecord::StageStarted { name } => {
                let cx = self.stages.last().map(|(_, s)| s.span_context().clone()).or(self.run_cx.clone());
                let span = self.start(
                    tracer,
                    format!("stage {name}"),
                    at,
                    cx.as_ref(),
                    vec![KeyValue::new("awf.stage", name.clone())],
                );
                self.stage_cx.insert(name.clone(), span.span_context().clone());
                self.stages.push((name, span));
            }
            EventRecord::StageFinished { name, status, reason } => {
                if let Some(i) = self.stages.iter().rposition(|(n, _)| *n == name) {
                    let (_, mut span) = self.stages.remove(i);
                    span.set_attribute(KeyValue::new("awf.status", status.as_str().to_string()));
                    if status == Recorded::Known(StageStatus::Failed) {
                        span.set_status(Status::error(reason.unwrap_or_else(|| "failed".into())));
                    }
                    span.end_with_timestamp(at);
                }
            }
            EventRecord::ParallelStarted { label, items, stage, .. } => {
                let cx = stage.as_ref().and_then(|s| self.stage_cx.get(s)).or(self.run_cx.as_ref()).cloned();
                let mut attrs = vec![KeyValue::new("awf.parallel.items", items as i64)];
                if let Some(l) = &label {
                    attrs.push(KeyValue::new("awf.label", l.clone()));
                }
                let name = format!("parallel {}", label.as_deref().unwrap_or("(unlabelled)"));
                let span = self.start(tracer, name, at, cx.as_ref(), attrs);
                let cx = span.span_context().clone();
                self.groups.push(Group { label, stage, start: at, end: None, cx, span: Some(span) });
            }
            EventRecord::ParallelFinished { label, failed, .. } => {
                if let Some(g) = self.groups.iter_mut().rev().find(|g| g.end.is_none() && g.label == label) {
                    g.end = Some(at);
                    if let Some(mut span) = g.span.take() {
                        span.set_attribute(KeyValue::new("awf.parallel.failed", failed as i64));
                        span.end_with_timestamp(at);
                    }
                }
            }
            _ => {}
        }
    }

    /// One settled operation: a span from its delivery to its settling.
    fn operation(&mut self, tracer: &SdkTracer, t: TurnRecord) {
        let (start, end) = (time(t.delivered_at.as_deref()), time(t.settled_at.as_deref()));
        let stage = t.stage.clone();
        let group = self
            .groups
            .iter()
            .filter(|g| g.stage == stage && g.start <= start && g.end.is_none_or(|e| e >= start))
            .max_by_key(|g| g.start)
            .map(|g| g.cx.clone());
        let cx = group.or_else(|| stage.as_ref().and_then(|s| self.stage_cx.get(s).cloned())).or(self.run_cx.clone());
        let (input, output, cost) = (t.usage.input_tokens, t.usage.output_tokens, t.cost_usd());
        self.totals = (self.totals.0 + input, self.totals.1 + output, self.totals.2 + cost);
        let outcome = t.outcome.as_str().to_string();
        let mut attrs = vec![
            KeyValue::new("gen_ai.operation.name", "invoke_agent"),
            KeyValue::new("gen_ai.agent.name", t.agent.clone()),
            KeyValue::new("gen_ai.request.model", or_q(&t.model)),
            KeyValue::new("gen_ai.usage.input_tokens", input as i64),
            KeyValue::new("gen_ai.usage.output_tokens", output as i64),
            KeyValue::new("awf.op_id", t.op_id.clone()),
            KeyValue::new("awf.op_kind", or_q(&t.kind)),
            KeyValue::new("awf.outcome", outcome.clone()),
            KeyValue::new("awf.harness", or_q(&t.harness)),
            KeyValue::new("awf.cost_usd", cost),
        ];
        for (key, v) in [("stage", &t.stage), ("label", &t.label)] {
            if let Some(v) = v {
                attrs.push(KeyValue::new(format!("awf.{key}"), v.clone()));
            }
        }
        if let Some(op) = self.answers.remove(&(t.agent.clone(), t.op_id.clone())) {
            let value = op.value().unwrap_or(op.outcome);
            attrs.push(KeyValue::new("gen_ai.output.messages", value.to_string()));
        }
        let mut span = self.start(tracer, format!("invoke_agent {}", t.agent), start, cx.as_ref(), attrs);
        if t.outcome != Recorded::Known(OutcomeKind::Answered) {
            span.set_status(Status::error(t.reason.unwrap_or(outcome)));
        }
        span.end_with_timestamp(end);
    }

    /// Ends whatever is still open (the run ended without closing it), now.
    pub fn end_all(&mut self, tracer: &SdkTracer) {
        self.read(tracer);
        let now = SystemTime::now();
        for g in &mut self.groups {
            if let Some(mut span) = g.span.take() {
                span.end_with_timestamp(now);
            }
        }
        while let Some((_, mut span)) = self.stages.pop() {
            span.end_with_timestamp(now);
        }
        if let Some(mut run) = self.run.take() {
            run.end_with_timestamp(now);
        }
    }
}
