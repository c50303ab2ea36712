//! `awf runs show ID [--agent KEY]`: a run's status, script, attempts, stages, each agent's
//! operations (outcome and reason) and spend; with `--agent`, that agent's turns one by one: the
//! prompt, each rejection with its errors and what was submitted, the nudges, the replies an HTTP
//! agent's history holds, and the answer.

use super::listing;
use super::records;
use crate::accounting::Tally;
use crate::harness::http::Msg;
use crate::record::events::{self, EventRecord, Rejected};
use crate::record::lines::{self, JournalRecord, TurnRecord as TurnLine};
use crate::record::{docs, status::Recorded};
use crate::run::RunStatus;
use serde_json::Value;
use std::path::Path;

/// How a run's script is named to a person: `council NAME` for a strategy's run.
pub fn script_name(script: &str) -> String {
    match listing::strategy_name(Path::new(script)) {
        Some(name) => format!("council {name}"),
        None => script.to_string(),
    }
}

/// The run in `dir`, as `awf runs show` prints it.
pub fn run(dir: &Path, run_id: &str) -> std::io::Result<()> {
    let live = listing::live(dir);
    let run = docs::run(dir).unwrap_or_default();
    let result = docs::result(dir);
    let status = listing::run_status(dir);
    out!("run {run_id}: {status}");
    let script = run
        .script
        .clone()
        .or_else(|| crate::record::accepted::read(dir).map(|a| listing::requested_script(&a.request)));
    out!("script: {}", script_name(script.as_deref().unwrap_or("?")));
    for w in listing::waiting(dir, &status) {
        out!(
            "waiting for the operator ({}): {}\n  schema: {}\n  answer: awf runs answer {run_id} --key {} --json VALUE",
            w.key,
            w.question,
            w.schema,
            w.key
        );
    }
    let statuses = listing::attempt_statuses(&run, live);
    for (a, status) in run.attempts.iter().zip(&statuses) {
        out!(
            "attempt {}: {} ({} → {})",
            a.n,
            status.map(RunStatus::as_str).or(a.status.as_ref().map(Recorded::as_str)).unwrap_or("?"),
            a.started_at.as_deref().unwrap_or("?"),
            a.finished_at.as_deref().unwrap_or("-")
        );
    }
    for s in result.iter().flat_map(|r| &r.stages) {
        out!("stage {}: {}", s.name, s.status.as_str());
    }
    if let Some(e) = result.as_ref().and_then(|r| r.error.as_deref()) {
        out!("error: {e}");
    }
    if live {
        // A live run: each agent as the live view and `runs watch` show it, now.
        let mut view = crate::record::view::RunView::default();
        crate::record::view::Follow::new(dir).poll(&mut view)?;
        let frame =
            super::board::Frame { width: 200, color: false, rows: usize::MAX, now: std::time::SystemTime::now() };
        out!("agents now:");
        for line in super::board::agent_lines(&view, &frame) {
            out!("{line}");
        }
    }
    let turns = lines::turns(dir)?;
    let several = run.attempts.len() > 1;
    let mut agents: Vec<&str> = Vec::new();
    for t in &turns {
        if !agents.contains(&t.agent.as_str()) {
            agents.push(&t.agent);
        }
    }
    for agent in &agents {
        let mine: Vec<&TurnLine> = turns.iter().filter(|t| t.agent == *agent).collect();
        let rejections: u32 = mine.iter().map(|t| t.rejections).sum();
        let first = mine[0];
        out!(
            "agent {agent} ({}, {}): {}{}",
            first.harness,
            first.model,
            count(mine.len(), "operation"),
            if rejections > 0 { format!(", {}", count(rejections as usize, "rejected answer")) } else { String::new() }
        );
        for t in mine {
            out!("  {}", operation(t, several));
        }
    }
    worktrees(&run, run_id);
    // result.json accounts for every attempt (as of the last one that finished).
    let priced = turns.iter().any(TurnLine::priced);
    let spend = |t: &Tally| {
        format!("{}, {}", count(t.operations as usize, "operation"), records::spend(t.tokens, t.cost_usd, priced))
    };
    let accounts = result.map(|r| r.accounting).unwrap_or_default();
    out!("spend (all attempts): {}", spend(&accounts.totals));
    if let Some(plan) = crate::plan::read(dir) {
        out!("plan: {}", crate::plan::render::against(&plan, accounts.totals.tokens, accounts.totals.cost_usd));
    }
    for (n, t) in &accounts.by_attempt {
        out!("attempt {n} spent: {}", spend(t));
    }
    out!("records: {}", dir.display());
    if let Some(agent) = agents.first() {
        out!("an agent's turns (prompts, rejections, nudges, replies): awf runs show {run_id} --agent {agent}");
    }
    Ok(())
}

fn count(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// One settled operation on a line: `a#1 turn [attempt 2] [plan] answered (1 rejected answer) · 12 tokens`.
fn operation(t: &TurnLine, several: bool) -> String {
    let mut line = format!("{} {}", t.op_id, t.kind);
    if let Some(label) = &t.label {
        line.push_str(&format!(" \"{label}\""));
    }
    if several {
        line.push_str(&format!(" [attempt {}]", t.attempt));
    }
    if let Some(stage) = &t.stage {
        line.push_str(&format!(" [{stage}]"));
    }
    line.push(' ');
    line.push_str(t.outcome.as_str());
    if let Some(why) = &t.reason {
        line.push_str(&format!(": {why}"));
    }
    if t.rejections > 0 {
        line.push_str(&format!(" ({})", count(t.rejections as usize, "rejected answer")));
    }
    line.push_str(&format!(" · {}", records::spend(t.tokens, t.cost_usd(), t.priced())));
    line
}

/// What happened inside one operation, in order.
enum Step {
    Rejected(Rejected),
    Nudged(u32),
}

/// One operation of an agent, gathered from the records.
struct TurnView {
    attempt: u32,
    op_id: String,
    kind: String,
    stage: Option<String>,
    prompt: Option<String>,
    steps: Vec<Step>,
    replayed: bool,
    line: Option<TurnLine>,
    answer: Option<Value>,
    replies: Vec<String>,
}

impl TurnView {
    fn new(attempt: u32, op_id: String, kind: String) -> TurnView {
        TurnView {
            attempt,
            op_id,
            kind,
            stage: None,
            prompt: None,
            steps: Vec::new(),
            replayed: false,
            line: None,
            answer: None,
            replies: Vec::new(),
        }
    }
}

fn at<'v>(views: &'v mut [TurnView], attempt: u32, op_id: &str) -> Option<&'v mut TurnView> {
    views.iter_mut().rev().find(|v| v.attempt == attempt && v.op_id == op_id)
}

fn views(dir: &Path, key: &str) -> std::io::Result<Vec<TurnView>> {
    let mut views: Vec<TurnView> = Vec::new();
    for e in events::read(dir)? {
        if e.agent.as_deref() != Some(key) {
            continue;
        }
        match e.event {
            EventRecord::OpStarted { op_id, kind, stage, prompt, .. } => {
                let mut v = TurnView::new(e.attempt, op_id, kind);
                (v.stage, v.prompt) = (stage, prompt);
                views.push(v);
            }
            EventRecord::OpNudged { op_id, nudge, .. } => {
                if let Some(v) = at(&mut views, e.attempt, &op_id) {
                    v.steps.push(Step::Nudged(nudge));
                }
            }
            EventRecord::OpRejected(r) => {
                if let Some(v) = at(&mut views, e.attempt, &r.op_id.clone()) {
                    v.steps.push(Step::Rejected(r));
                }
            }
            EventRecord::OpReplayed { op_id, .. } => {
                let mut v = TurnView::new(e.attempt, op_id, "turn".into());
                v.replayed = true;
                views.push(v);
            }
            _ => {}
        }
    }
    for t in lines::turns(dir)?.into_iter().filter(|t| t.agent == key) {
        match at(&mut views, t.attempt, &t.op_id) {
            Some(v) => v.line = Some(t),
            None => {
                let mut v = TurnView::new(t.attempt, t.op_id.clone(), t.kind.clone());
                v.stage = t.stage.clone();
                v.line = Some(t);
                views.push(v);
            }
        }
    }
    for line in lines::journal(dir)? {
        let JournalRecord::Op(a) = line else { continue };
        if a.agent != key {
            continue;
        }
        if let Some(v) = at(&mut views, a.attempt, &a.op_id) {
            v.answer = a.value();
        }
    }
    replies(&mut views, &records::history(dir, key));
    Ok(views)
}

/// What an HTTP agent's history holds of each turn: the messages after the user message that
/// carries its prompt, up to the next turn's.
fn replies(views: &mut [TurnView], history: &[Msg]) {
    let mut starts: Vec<(usize, usize)> = Vec::new();
    let mut from = 0;
    for (i, v) in views.iter().enumerate() {
        let Some(prompt) = v.prompt.as_deref().filter(|_| !v.replayed) else { continue };
        let probe: String = prompt.chars().take(120).collect();
        let found = history[from..].iter().position(|m| matches!(m, Msg::User { text } if text.contains(&probe)));
        if let Some(p) = found {
            starts.push((i, from + p));
            from += p + 1;
        }
    }
    for (k, (view, start)) in starts.iter().enumerate() {
        let end = starts.get(k + 1).map(|(_, s)| *s).unwrap_or(history.len());
        let said = history[start + 1..end].iter().filter_map(|m| match m {
            Msg::Assistant { text, calls } => {
                let mut said = text.trim().to_string();
                for c in calls {
                    said.push_str(&format!(
                        "{}[calls {} {}]",
                        if said.is_empty() { "" } else { " " },
                        c.name,
                        c.arguments
                    ));
                }
                (!said.is_empty()).then_some(said)
            }
            Msg::User { text } => Some(format!("(engine) {}", text.trim())),
            Msg::Tool { name, text, .. } => Some(format!("({name} answered) {}", text.trim())),
        });
        views[*view].replies = said.collect();
    }
}

fn block(label: &str, text: &str) {
    let mut lines = text.lines();
    out!("  {label}: {}", lines.next().unwrap_or(""));
    let pad = " ".repeat(label.len() + 4);
    for l in lines {
        out!("{pad}{l}");
    }
}

/// Agent `key`'s operations in the run in `dir`, one by one.
pub fn agent(dir: &Path, run_id: &str, key: &str) -> std::io::Result<bool> {
    let views = views(dir, key)?;
    if views.is_empty() {
        return Ok(false);
    }
    let several = views.iter().any(|v| v.attempt > 1);
    out!("agent {key} of run {run_id}: {}", count(views.len(), "operation"));
    for v in &views {
        let head = match (&v.line, v.replayed) {
            (Some(t), _) => operation(t, several),
            (None, true) => format!("{} turn [attempt {}] replayed from the journal", v.op_id, v.attempt),
            (None, false) => format!("{} {} not settled: its attempt ended first", v.op_id, v.kind),
        };
        out!("{head}");
        if let Some(p) = &v.prompt {
            block("prompt", p);
        }
        for step in &v.steps {
            match step {
                Step::Rejected(r) => {
                    out!("  rejected ({} bytes submitted):", r.bytes);
                    for e in &r.errors {
                        out!("    - {e}");
                    }
                    if !r.answer.is_empty() {
                        block("  submitted", &r.answer);
                    }
                }
                Step::Nudged(n) => out!("  nudge {n}: the agent was checked in on (no accepted answer yet)"),
            }
        }
        for r in &v.replies {
            block("reply", r);
        }
        match &v.answer {
            Some(a) => block("answer", &a.to_string()),
            None if v.line.as_ref().is_some_and(|t| t.kind == "turn") => out!("  no answer"),
            None => {}
        }
    }
    Ok(true)
}

/// The run's agent worktrees: each agent's branch, folder and whether the folder is still there.
fn worktrees(run: &docs::RunDoc, run_id: &str) {
    let Some(w) = run.worktrees.as_ref().filter(|w| !w.agents.is_empty()) else { return };
    out!("worktrees (base {}):", w.base.as_deref().unwrap_or("?"));
    let mut left = false;
    for (agent, e) in &w.agents {
        let there = e.worktree.path.is_dir();
        left |= there;
        let state = if there { format!("{:?}", e.state).to_lowercase() } else { "removed".into() };
        out!("  {agent}: {} {state} {}", e.worktree.branch, e.worktree.path.display());
        if let Some(reason) = e.reason.as_ref().filter(|_| there) {
            out!("    kept: {reason}");
        }
    }
    let hint = if left { "its worktrees" } else { "nothing but branches" };
    out!("  what it left ({hint}): awf runs clean {run_id} [--branches]");
}
