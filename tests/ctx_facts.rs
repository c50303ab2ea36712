//! The small `ctx` calls: run_id, attempt, cwd, deadline, log, warn, print, usage, spent, budget
//! and sleep.

use crate::common;

use common::Env;
use serde_json::{json, Value};
use std::time::{SystemTime, UNIX_EPOCH};

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_millis() as i64
}

#[test]
fn run_id_attempt_and_cwd_are_the_runs_facts() {
    let env = Env::new();
    let out = env.run("#{ id: ctx.run_id, attempt: ctx.attempt, cwd: ctx.cwd, deadline: ctx.deadline }", &[]);
    out.expect_code(0);
    let v = out.json();
    let dir = env.run_dir();
    assert_eq!(v["id"], dir.file_name().and_then(|n| n.to_str()).expect("id"));
    assert_eq!(v["attempt"], 1);
    let cwd = std::fs::canonicalize(env.path()).expect("canonical");
    let got = std::fs::canonicalize(v["cwd"].as_str().expect("cwd string")).expect("cwd exists");
    assert_eq!(got, cwd);
    assert_eq!(v["deadline"], Value::Null, "no --deadline means ctx.deadline is ()");
}

#[test]
fn deadline_is_unix_ms_when_the_run_has_one() {
    let env = Env::new();
    let before = now_ms();
    let out = env.run("ctx.deadline", &["--deadline", "60s"]);
    let after = now_ms();
    out.expect_code(0);
    let d = out.json().as_i64().expect("an integer deadline");
    assert!(d >= before + 59_000 && d <= after + 60_000, "deadline {d} not ~60 s after {before}..{after}");
}

#[test]
fn facts_are_read_only() {
    let env = Env::new();
    let out = env.run(r#"ctx.run_id = "mine"; 1"#, &[]);
    out.expect_code(1).stderr_has("run_id").stderr_has("wf.rhai:1:5");
}

#[test]
fn log_warn_print_and_debug_reach_events_and_stderr() {
    let env = Env::new();
    let script = r#"
        ctx.log("plain note");
        ctx.log("with fields", #{ n: 2, tags: ["a"] });
        ctx.warn("watch out");
        ctx.warn("warn fields", #{ level: "high" });
        print("printed line");
        debug("debugged");
        1
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    out.stderr_has("info: plain note").stderr_has("info: with fields").stderr_has("warn: watch out");
    out.stderr_has("\nprinted line\n").stderr_has("debug: wf.rhai:");
    let logs: Vec<Value> = env.events_of("log").into_iter().map(|e| e["data"].clone()).collect();
    let find = |text: &str| {
        logs.iter().find(|l| l["text"] == text).cloned().unwrap_or_else(|| panic!("no log {text:?} in {logs:#?}"))
    };
    assert_eq!(find("plain note")["level"], "info");
    assert_eq!(find("with fields")["fields"], json!({ "n": 2, "tags": ["a"] }));
    assert_eq!(find("watch out")["level"], "warn");
    assert_eq!(find("warn fields")["fields"], json!({ "level": "high" }));
    assert_eq!(find("printed line")["level"], "print");
    assert!(logs.iter().any(|l| l["level"] == "debug" && l["text"].as_str().is_some_and(|t| t.contains("debugged"))));
    // Logs are not the value.
    assert_eq!(out.stdout.trim(), "1");
}

#[test]
fn usage_and_spent_follow_settled_operations() {
    let env = Env::new();
    let script = r#"
        let out = #{ before: ctx.usage().len(), spent0: ctx.spent() };
        let a = ctx.agents.open(#{ key: "a" });
        a.ask("one two three four");
        let b = ctx.agents.open(#{ key: "b" });
        b.ask("five");
        out.usage = ctx.usage();
        out.spent = ctx.spent();
        out
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["before"], 0);
    assert_eq!(v["spent0"], json!({ "tokens": 0, "cost_usd": 0.0 }));
    let usage = v["usage"].as_array().expect("usage array");
    assert_eq!(usage.len(), 2);
    assert_eq!(usage[0]["op_id"], "a#1");
    assert_eq!(usage[1]["op_id"], "b#1");
    assert_eq!(usage[0]["outcome"], "answered");
    let sum: u64 = usage.iter().map(|u| u["tokens"].as_u64().expect("tokens")).sum();
    assert!(sum > 0);
    assert_eq!(v["spent"]["tokens"], sum);
    assert_eq!(v["spent"]["cost_usd"], 0.0);
    // ctx.usage() has the same lines as turns.jsonl.
    let turns = env.turns();
    assert_eq!(turns.len(), 2);
    assert_eq!(turns[0]["op_id"], usage[0]["op_id"]);
    assert_eq!(env.result()["accounting"]["totals"]["tokens"], sum);
}

#[test]
fn budget_is_unit_without_one_and_reports_remaining_with_one() {
    let env = Env::new();
    env.run("ctx.budget", &[]).expect_code(0);
    assert_eq!(env.result()["value"], Value::Null);

    let env = Env::new();
    let script = r#"
        let b0 = ctx.budget;
        let a = ctx.agents.open(#{ key: "a" });
        a.ask("spend a little");
        [b0, ctx.budget, ctx.spent().tokens]
    "#;
    let out = env.run(script, &["--budget-tokens", "100000", "--budget-usd", "2.5"]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v[0], json!({ "usd": 2.5, "tokens": 100000, "remaining_usd": 2.5, "remaining_tokens": 100000 }));
    let spent = v[2].as_i64().expect("spent tokens");
    assert!(spent > 0);
    assert_eq!(v[1]["remaining_tokens"], 100000 - spent);
    assert_eq!(v[1]["tokens"], 100000);
}

#[test]
fn sleep_waits_and_refuses_negative_times() {
    let env = Env::new();
    let script = r#"
        let t = timestamp();
        ctx.sleep(120);
        t.elapsed
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let waited = out.json().as_f64().expect("seconds");
    assert!((0.11..5.0).contains(&waited), "ctx.sleep(120) waited {waited} s");

    let env = Env::new();
    env.run("ctx.sleep(-1)", &[]).expect_code(1).stderr_has("must not be negative");
}

#[test]
fn sleep_is_cut_short_by_the_run_deadline() {
    let env = Env::new();
    let started = std::time::Instant::now();
    let out = env.run("ctx.sleep(60000); 1", &["--deadline", "300ms"]);
    out.expect_code(4).stderr_has("run deadline exceeded");
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "took {:?}", started.elapsed());
    assert_eq!(env.result()["status"], "cancelled");
}

#[test]
fn messages_allow_refuses_keys_instead_of_handles() {
    let env = Env::new();
    env.run(r#"ctx.messages.allow(#{ from: "a", to: "b", purpose: "p" })"#, &[])
        .expect_code(1)
        .stderr_has("`from` must be an agent handle");
}
