//! The board drawn from folded events: order, the quiet mark, narrow terminals, counting the rest.

use super::*;
use crate::record::events::EventLine;
use serde_json::{json, Value};

fn view(events: &[(&str, &str, Value)]) -> RunView {
    let mut v = RunView::default();
    for (ty, at, data) in events {
        let line = json!({ "v": 1, "type": ty, "at": at, "attempt": 1, "data": data });
        v.apply(&EventLine::parse(&line).expect("envelope"));
    }
    v
}

fn at(s: &str) -> SystemTime {
    humantime::parse_rfc3339_weak(s).expect("time")
}

fn open(k: &str) -> (&'static str, &'static str, Value) {
    ("agent-opened", "2026-12-02T10:00:00Z", json!({ "agent": k, "harness": "fake", "model": "m" }))
}

fn start(k: &str, t: &'static str) -> (&'static str, &'static str, Value) {
    ("op-started", t, json!({ "agent": k, "op_id": format!("{k}#1"), "kind": "turn", "label": "review" }))
}

fn started() -> (&'static str, &'static str, Value) {
    let limits = json!({ "stall_timeout_ms": 60000, "budget_usd": 1.5 });
    ("run-started", "2026-12-02T10:00:00Z", json!({ "run_id": "r1", "script": "s", "attempt": 1, "limits": limits }))
}

#[test]
fn a_quiet_agent_past_half_its_stall_timeout_comes_first_and_is_marked() {
    let v = view(&[
        started(),
        open("busy"),
        start("busy", "2026-12-02T10:00:50Z"),
        open("stuck"),
        start("stuck", "2026-12-02T10:00:00Z"),
        open("idle"),
    ]);
    let f = Frame { width: 120, color: false, rows: 10, now: at("2026-12-02T10:01:00Z") };
    let lines = agent_lines(&v, &f);
    assert!(lines[0].contains("stuck") && lines[0].contains("quiet 1m00s"), "{lines:?}");
    assert!(lines[1].contains("busy") && lines[1].contains("working  review 10.0s"), "{lines:?}");
    assert!(lines[2].contains("idle"), "{lines:?}");
    let colored = agent_lines(&v, &Frame { color: true, ..f });
    assert!(colored[0].starts_with("\x1b[33m") && !colored[1].starts_with("\x1b["), "{colored:?}");
}

#[test]
fn a_narrow_terminal_gets_one_cut_line_per_agent_and_many_agents_are_counted() {
    let mut events = vec![started()];
    for k in 0..30 {
        events.push(open(&format!("worker-{k:02}")));
    }
    events.push(start("worker-07", "2026-12-02T10:00:59Z"));
    let v = view(&events);
    let f = Frame { width: 30, color: false, rows: 5, now: at("2026-12-02T10:01:00Z") };
    let lines = agent_lines(&v, &f);
    assert_eq!(lines.len(), 6, "{lines:?}");
    assert_eq!(lines[0], "worker-07 working");
    assert!(lines.iter().all(|l| l.chars().count() <= 30), "{lines:?}");
    assert_eq!(lines[5], "  … and 25 more (25 idle)");
}

#[test]
fn the_board_shows_the_head_stages_checkpoints_and_spend_against_the_budget() {
    let v = view(&[
        started(),
        ("stage-started", "2026-12-02T10:00:01Z", json!({ "name": "plan" })),
        ("checkpoint-asked", "2026-12-02T10:00:02Z", json!({ "key": "go", "question": "ship it?" })),
    ]);
    let f = Frame { width: 200, color: false, rows: 10, now: at("2026-12-02T10:00:03Z") };
    let lines = lines(&v, &f);
    assert_eq!(lines[0], "run r1 · running · 3.0s · agents 0 (0 working)");
    assert!(lines.contains(&"  stages: plan running".to_string()), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("ship it? · awf runs answer r1 --key go --json VALUE")), "{lines:?}");
    assert_eq!(lines.last().map(String::as_str), Some("  spent 0 tok of $1.50 budget"));
}

#[test]
fn a_cut_counts_what_the_terminal_shows_and_ends_its_colour() {
    assert_eq!(cut("abcdef", 6), "abcdef");
    assert_eq!(cut("abcdefg", 6), "abcde…");
    assert_eq!(cut("\x1b[36mawf\x1b[0m 12345", 9), "\x1b[36mawf\x1b[0m 12345");
    assert_eq!(cut("\x1b[36mawf\x1b[0m 123456", 9), "\x1b[36mawf\x1b[0m 1234…\x1b[0m");
}

#[test]
fn a_pane_agent_shows_its_pane_and_a_released_one_says_kept() {
    let pane = |k: &str, target: &str| {
        (
            "pane-opened",
            "2026-12-02T10:00:00Z",
            json!({ "agent": k, "target": target, "session": "awf-r1", "window": "run" }),
        )
    };
    let closed = |k: &str, target: &str, state: &str| {
        ("pane-closed", "2026-12-02T10:00:09Z", json!({ "agent": k, "target": target, "state": state }))
    };
    let mut v = view(&[started(), open("a"), pane("a", "%3"), open("b"), pane("b", "%4"), open("h")]);
    let f = Frame { width: 120, color: false, rows: 10, now: at("2026-12-02T10:01:00Z") };
    let lines = agent_lines(&v, &f);
    let of =
        |k: &str, lines: &[String]| lines.iter().find(|l| l.trim_start().starts_with(k)).cloned().unwrap_or_default();
    assert!(of("a", &lines).contains("fake/m in pane %3"), "{lines:?}");
    assert!(!of("h", &lines).contains("pane"), "a headless agent shows none: {lines:?}");
    for (ty, at, data) in [closed("a", "%3", "kept"), closed("b", "%4", "closed")] {
        let line = json!({ "v": 1, "type": ty, "at": at, "attempt": 1, "data": data });
        v.apply(&EventLine::parse(&line).expect("envelope"));
    }
    let lines = agent_lines(&v, &f);
    assert!(of("a", &lines).contains("in pane %3 kept"), "{lines:?}");
    assert!(!of("b", &lines).contains("pane"), "a closed pane is no more: {lines:?}");
}
