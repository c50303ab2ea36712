//! Records a resume can trust, and resume as documented (issue 17, findings 4 and 5): a torn last
//! line is cut before a new attempt appends (`records-healed`), a damaged line is named with
//! file:line and the fix, and `--allow-changed` keeps each attempt's script hash, runs a reused
//! stage again when its value no longer fits its schema, and records each operation re-run.

use crate::common;

use common::{read_jsonl, Env};
use serde_json::{json, Value};
use std::io::Write;

/// Stage `gather` succeeds; stage `judge` asks b, then throws in attempt 1.
const TWO_STAGES: &str = r#"
fn run(args) {
    let a = ctx.agents.open(#{ key: "a" });
    let first = ctx.stage("gather", #{ result: #{ type: "array" } }, || [a.ask("gather facts")]);
    let b = ctx.agents.open(#{ key: "b" });
    let second = ctx.stage("judge", #{ result: #{ type: "string" } }, || {
        let x = b.ask("judge one");
        if ctx.attempt == 1 { throw "the judge tripped"; }
        x
    });
    #{ first: first, second: second, attempt: ctx.attempt }
}
"#;

/// Appends `text` (no newline: a write cut short) to a record of the run.
fn tear(env: &Env, file: &str, text: &str) {
    let path = env.run_dir().join(file);
    let mut f = std::fs::OpenOptions::new().append(true).open(&path).expect("open a record");
    f.write_all(text.as_bytes()).expect("append");
}

#[test]
fn a_torn_last_line_is_cut_before_the_next_attempt_appends() {
    let env = Env::new();
    env.run(TWO_STAGES, &[]).expect_code(1).stderr_has("the judge tripped");
    let id = env.run_id();
    // A crash cut the last line of each record short.
    for file in ["stages.jsonl", "journal.jsonl", "turns.jsonl", "events.jsonl"] {
        tear(&env, file, r#"{"v":1,"name":"half a li"#);
    }
    let out = env.awf(&["runs", "resume", &id]);
    out.expect_code(0);
    assert_eq!(out.json()["second"], "b: judge one");
    // Every line of every record is whole again, and the new attempt's first lines are kept.
    let dir = env.run_dir();
    for file in ["stages.jsonl", "journal.jsonl", "turns.jsonl", "events.jsonl"] {
        let text = std::fs::read_to_string(dir.join(file)).expect("a record");
        assert!(!text.contains("half a li"), "{file} still holds the torn line:\n{text}");
        read_jsonl(&dir.join(file));
    }
    let stages: Vec<(Value, Value)> =
        env.stages().iter().filter(|s| s["attempt"] == 2).map(|s| (s["name"].clone(), s["status"].clone())).collect();
    assert_eq!(stages, vec![(json!("gather"), json!("reused")), (json!("judge"), json!("succeeded"))]);
    let healed: Vec<Value> = env.events_of("records-healed").iter().map(|e| e["data"].clone()).collect();
    let bytes = r#"{"v":1,"name":"half a li"#.len();
    for file in ["stages.jsonl", "journal.jsonl", "turns.jsonl", "events.jsonl"] {
        assert!(healed.contains(&json!({ "file": file, "bytes": bytes })), "{file} not in {healed:#?}");
    }
    // The next attempt reads the healed records as they are.
    let out = env.awf(&["runs", "resume", &id, "--again"]);
    out.expect_code(0);
    assert_eq!(out.json()["attempt"], 3);
    assert!(env.events_of("records-healed").iter().all(|e| e["attempt"] == 2), "nothing to heal in attempt 3");
}

#[test]
fn a_damaged_line_inside_a_record_is_named_with_its_place_and_the_fix() {
    let env = Env::new();
    env.run(TWO_STAGES, &[]).expect_code(1);
    let id = env.run_id();
    let path = env.run_dir().join("stages.jsonl");
    let text = std::fs::read_to_string(&path).expect("stages.jsonl");
    std::fs::write(&path, format!("{{\"name\": oops\n{text}")).expect("damage stages.jsonl");
    let out = env.awf(&["runs", "resume", &id]);
    out.expect_code(2)
        .stderr_has("cannot read stages.jsonl")
        .stderr_has("stages.jsonl:1: not a JSON record")
        .stderr_has("repair or delete it");
    assert_eq!(env.run_json()["attempts"].as_array().map(Vec::len), Some(1), "no attempt started");
}

#[test]
fn allow_changed_keeps_each_hash_runs_misfit_stages_again_and_records_reruns() {
    let env = Env::new();
    env.run(TWO_STAGES, &[]).expect_code(1);
    let id = env.run_id();
    let first_hash = env.run_json()["attempts"][0]["script_sha256"].as_str().expect("attempt 1's hash").to_string();
    // The edit makes `gather` return a string and asks b another question.
    let edited = TWO_STAGES
        .replace(
            r#"#{ result: #{ type: "array" } }, || [a.ask("gather facts")]"#,
            r#"#{ result: #{ type: "string" } }, || a.ask("gather facts")"#,
        )
        .replace("judge one", "judge two");
    env.write("wf.rhai", &edited);
    let out = env.awf(&["runs", "resume", &id, "--allow-changed"]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["first"], "a: gather facts", "gather ran again: its recorded [..] is not a string: {v}");
    assert_eq!(v["second"], "b: judge two", "{v}");
    // Each attempt keeps the hash of the script it ran; the run keeps the first.
    let run = env.run_json();
    let second_hash = run["attempts"][1]["script_sha256"].as_str().expect("attempt 2's hash");
    assert_eq!(run["script_sha256"], first_hash.as_str());
    assert_ne!(second_hash, first_hash);
    // The reused value was checked against the edited schema, and the log says why it ran again.
    let warned = env.events_of("log");
    let why = warned.iter().find(|e| e["data"]["text"].as_str().is_some_and(|t| t.contains("stage `gather`")));
    let why = why.unwrap_or_else(|| panic!("no log line about gather: {warned:#?}"));
    assert_eq!(why["data"]["level"], "warn");
    assert!(why["data"]["text"].as_str().is_some_and(|t| t.contains("no longer fits its result schema")), "{why}");
    let gather: Vec<Value> =
        env.stages().iter().filter(|s| s["name"] == "gather").map(|s| s["status"].clone()).collect();
    assert_eq!(gather, vec![json!("succeeded"), json!("succeeded")]);
    // b#1 was answered in attempt 1 with another prompt: it runs again, and the record says so.
    let reruns = env.events_of("op-rerun");
    assert_eq!(reruns.len(), 1, "{reruns:#?}");
    assert_eq!(reruns[0]["data"]["op_id"], "b#1");
    assert_eq!(reruns[0]["attempt"], 2);
    // gather's own turn did not change: it came from the journal, unpaid.
    let replayed: Vec<Value> = env.events_of("op-replayed").iter().map(|e| e["data"]["op_id"].clone()).collect();
    assert_eq!(replayed, vec![json!("a#1")]);
}
