//! The agents' board: a run's view (`record::view`) drawn as lines for a terminal of a given
//! width: a row per agent, working or in trouble first (key, runtime and model, state, its
//! operation and how long it has run, last activity, spend), the rest counted; stages, groups,
//! open checkpoints with the command that answers them, and the spend against the budget. The
//! live view, `awf runs watch` and `awf runs show` draw with it.

use crate::record::view::{AgentRow, AgentState, RunView};
use std::time::{Duration, SystemTime};

/// How the board is drawn.
pub struct Frame {
    pub width: usize,
    pub color: bool,
    /// Agent rows shown before the rest are counted.
    pub rows: usize,
    pub now: SystemTime,
}

fn ago(now: SystemTime, t: Option<SystemTime>) -> Option<Duration> {
    t.and_then(|t| now.duration_since(t).ok())
}

fn secs(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// Whether a busy agent has said nothing for half its stall timeout or more (one that said it
/// waits is not quiet).
fn quiet(row: &AgentRow, view: &RunView, now: SystemTime) -> Option<Duration> {
    let busy = row.state.busy() && !matches!(row.state, AgentState::Waiting(_));
    let half = view.stall_ms? / 2;
    ago(now, row.last).filter(|q| busy && q.as_millis() as u64 >= half)
}

/// An agent's state in words.
pub fn state_text(row: &AgentRow, view: &RunView, now: SystemTime) -> String {
    if let Some(q) = quiet(row, view, now) {
        return format!("quiet {}", secs(q));
    }
    match &row.state {
        AgentState::Idle => "idle".into(),
        AgentState::Working => "working".into(),
        AgentState::Waiting(r) if r.is_empty() => "waiting".into(),
        AgentState::Waiting(r) => format!("waiting: {r}"),
        AgentState::AwaitingReply { to } => format!("waiting on {to}"),
        AgentState::AskingOperator { key } => format!("asking the operator ({key})"),
        AgentState::Nudged(n) => format!("nudged x{n}"),
        AgentState::Answered => "answered".into(),
        AgentState::Failed(k) => k.clone(),
        AgentState::Closed(_) => "closed".into(),
    }
}

/// Cuts `text` to `width` characters on the screen, marking the cut; colour codes take no room
/// and are kept (a cut line ends them).
pub fn cut(text: &str, width: usize) -> String {
    let mut out = String::new();
    let (mut shown, mut escape, mut colored) = (0, false, false);
    if visible_width(text) <= width {
        return text.to_string();
    }
    for c in text.chars() {
        if c == '\x1b' {
            escape = true;
            colored = true;
        }
        if escape {
            out.push(c);
            escape = c != 'm';
            continue;
        }
        if shown + 1 >= width {
            break;
        }
        out.push(c);
        shown += 1;
    }
    out.push('…');
    if colored {
        out.push_str("\x1b[0m");
    }
    out
}

/// The characters of `text` a terminal shows (colour codes left out).
fn visible_width(text: &str) -> usize {
    let mut escape = false;
    text.chars()
        .filter(|&c| {
            if c == '\x1b' {
                escape = true;
            }
            let shown = !escape;
            if escape && c == 'm' {
                escape = false;
            }
            shown
        })
        .count()
}

fn spend(tokens: u64, usd: f64) -> String {
    let t = if tokens >= 10_000 { format!("{:.1}k tok", tokens as f64 / 1000.0) } else { format!("{tokens} tok") };
    if usd > 0.0 {
        format!("{t} ${usd:.4}")
    } else {
        t
    }
}

/// The order rows are shown in: in trouble or quiet, then working, idle, the rest; by key within.
fn rank(row: &AgentRow, quiet: bool) -> u8 {
    match &row.state {
        s if s.troubled() || quiet => 0,
        s if s.busy() => 1,
        AgentState::Idle => 2,
        _ => 3,
    }
}

/// One line per agent shown, then a count of the rest by state.
pub fn agent_lines(view: &RunView, f: &Frame) -> Vec<String> {
    let mut rows: Vec<&AgentRow> = view.agents.values().collect();
    rows.sort_by_key(|r| (rank(r, quiet(r, view, f.now).is_some()), r.key.clone()));
    let key_w = rows.iter().take(f.rows).map(|r| r.key.chars().count()).max().unwrap_or(0).min(24);
    let mut out = Vec::new();
    for row in rows.iter().take(f.rows) {
        let state = state_text(row, view, f.now);
        let text = if f.width < 40 {
            format!("{} {state}", row.key)
        } else {
            let op = match &row.current {
                Some(c) => {
                    let long = ago(f.now, c.since).map(secs).unwrap_or_default();
                    format!("  {} {long}", c.label.clone().unwrap_or_else(|| c.op_id.clone()))
                }
                None => String::new(),
            };
            let last = ago(f.now, row.last).map(|d| format!("  last {} ago", secs(d))).unwrap_or_default();
            let pane = row.pane.as_ref().map(|p| format!(" in pane {p}")).unwrap_or_default();
            format!(
                "  {:<key_w$}  {}/{}{pane}  {state}{op}{last}  {}",
                cut(&row.key, key_w),
                row.harness,
                row.model,
                spend(row.tokens, row.usd)
            )
        };
        let text = cut(&text, f.width);
        let warn = row.state.troubled() || quiet(row, view, f.now).is_some();
        out.push(if warn && f.color { format!("\x1b[33m{text}\x1b[0m") } else { text });
    }
    if rows.len() > f.rows {
        let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
        for r in &rows[f.rows..] {
            let word = match r.state {
                AgentState::Idle => "idle",
                AgentState::Answered => "answered",
                AgentState::Closed(_) => "closed",
                AgentState::Failed(_) => "failed",
                _ => "working",
            };
            *counts.entry(word).or_default() += 1;
        }
        let parts: Vec<String> = counts.iter().map(|(w, n)| format!("{n} {w}")).collect();
        out.push(cut(&format!("  … and {} more ({})", rows.len() - f.rows, parts.join(", ")), f.width));
    }
    out
}

/// The whole board of a run read from its records: a head line, the agents, stages, groups,
/// checkpoints and spend.
pub fn lines(view: &RunView, f: &Frame) -> Vec<String> {
    let working = view.agents.values().filter(|r| r.state.busy()).count();
    let took = ago(f.now, view.started).map(secs).unwrap_or_default();
    let status = view.finished.as_ref().map(|s| s.as_str().to_string()).unwrap_or_else(|| "running".into());
    let head = format!("run {} · {status} · {took} · agents {} ({working} working)", view.run_id, view.agents.len());
    let mut out = vec![cut(&head, f.width)];
    out.extend(agent_lines(view, f));
    out.extend(stage_line(view, f.width));
    for g in &view.groups {
        let state = if g.done { format!("done, {} failed", g.failed) } else { "running".into() };
        out.push(cut(&format!("  {} ({} items): {state}", g.label, g.total), f.width));
    }
    for a in &view.asked {
        let answer = format!("awf runs answer {} --key {} --json VALUE", view.run_id, a.key);
        out.push(cut(&format!("  waiting for the operator ({}): {} · {answer}", a.key, a.question), f.width));
    }
    out.push(cut(&format!("  spent {}", spent_line(view)), f.width));
    out
}

/// The stages so far, each with its status.
pub fn stage_line(view: &RunView, width: usize) -> Option<String> {
    if view.stages.is_empty() {
        return None;
    }
    let parts: Vec<String> = view
        .stages
        .iter()
        .map(|s| format!("{} {}", s.name, s.status.as_ref().map(|s| s.as_str()).unwrap_or("running")))
        .collect();
    Some(cut(&format!("  stages: {}", parts.join(", ")), width))
}

/// The spend against the budget.
pub fn spent_line(view: &RunView) -> String {
    let s = spend(view.tokens, view.usd);
    match (view.budget_usd, view.budget_tokens) {
        (Some(b), _) => format!("{s} of ${b:.2} budget"),
        (None, Some(t)) => format!("{s} of {t} tokens budget"),
        _ => s,
    }
}

#[cfg(test)]
#[path = "board_tests.rs"]
mod tests;
