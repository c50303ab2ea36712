//! Every example under scripts/ runs offline on the default (fake) runtime, from any folder.

use crate::common;

use common::Env;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn scripts_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts")
}

fn example(name: &str) -> String {
    scripts_dir().join(name).display().to_string()
}

/// Runs an example by absolute path in a fresh folder; checks exit 0, JSON on stdout and the
/// simulated notice; returns the value and the folder.
fn run_example(path: &str, extra: &[&str]) -> (Value, Env) {
    let env = Env::new();
    let mut args = vec!["script", "run", path];
    args.extend_from_slice(extra);
    let out = env.awf(&args);
    out.expect_code(0).stderr_has("awf: simulated: answers came from the fake harness; no model was called");
    let value = out.json();
    assert_eq!(env.result()["status"], "succeeded");
    assert_eq!(env.result()["value"], value);
    (value, env)
}

/// Copies `from` into `to`, recursively.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create folder");
    for entry in std::fs::read_dir(from).expect("read folder").filter_map(Result::ok) {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy file");
        }
    }
}

#[test]
fn every_example_runs_with_exit_0() {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(scripts_dir())
        .expect("scripts/")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "rhai"))
        .collect();
    entries.sort();
    assert!(entries.len() >= 3, "expected at least review, debate and triage in scripts/");
    for path in entries {
        let env = Env::new();
        // Examples that run programs (e.g. scripts/agents/stats.py) name them relative to the
        // project folder: give the temporary working folder the same scripts/ layout.
        copy_tree(&scripts_dir(), &env.path().join("scripts"));
        let out = env.awf(&["script", "run", &path.display().to_string()]);
        out.expect_code(0).stderr_has("awf: simulated");
        let value = out.json();
        assert!(!value.is_null(), "{} returned null", path.display());
        assert_eq!(env.result()["status"], "succeeded", "{}", path.display());
        assert!(!env.turns().is_empty(), "{} ran no agent turn", path.display());
    }
}

#[test]
fn review_reviews_every_file_then_merges() {
    let (v, env) = run_example(&example("review.rhai"), &[]);
    let reviews = v["reviews"].as_array().expect("reviews");
    assert_eq!(reviews.len(), 3);
    assert_eq!(reviews[0]["file"], "auth.py");
    assert!(reviews.iter().all(|r| r["verdict"] == "approve"), "{v}");
    assert_eq!(v["decision"], "ship");
    assert!(v["top_fixes"].is_array());
    assert!(v["spent"]["tokens"].as_u64().expect("tokens") > 0);
    let stages = env.stages();
    assert_eq!(stages[0]["name"], "review");
    assert_eq!(stages[0]["summary"], "3 of 3 files reviewed");
    assert_eq!(env.turns().len(), 4);
}

#[test]
fn a_reviewer_that_fails_leaves_its_file_unreviewed_and_the_lead_reads_text() {
    let env = Env::new();
    env.with_responder(
        r##"fn respond(turn) {
    if turn.agent == "reviewer-0" { throw "cut off at max_tokens"; }
    if turn.agent == "lead" {
        let text = turn.prompt.contains("auth.py: not reviewed") && turn.prompt.contains("cache.rs: approve") && !turn.prompt.contains("#{");
        return #{ answer: #{ decision: if text { "fix-first" } else { "ship" }, top_fixes: [turn.prompt] } };
    }
    #{ answer: #{ verdict: "approve", issues: [] } }
}"##,
    );
    let out = env.awf(&["script", "run", &example("review.rhai")]);
    let v = out.expect_code(0).stderr_has("auth.py was not reviewed").json();
    assert_eq!(v["decision"], "fix-first", "the lead's prompt: {}", v["top_fixes"][0]);
    assert_eq!(v["reviews"][0]["verdict"], "not reviewed");
    assert_eq!(env.stages()[0]["summary"], "2 of 3 files reviewed");
}

#[test]
fn review_takes_files_as_args() {
    let args = r#"{"files": [{"name": "one.py", "text": "print(1)"}], "focus": "style"}"#;
    let (v, _env) = run_example(&example("review.rhai"), &["--args", args]);
    assert_eq!(v["reviews"].as_array().map(Vec::len), Some(1));
    assert_eq!(v["reviews"][0]["file"], "one.py");
}

#[test]
fn debate_runs_its_rounds_and_a_judge_rules() {
    let (v, env) = run_example(&example("debate.rhai"), &["--arg", "question=Tabs or spaces?", "--arg", "rounds=3"]);
    assert_eq!(v["question"], "Tabs or spaces?");
    assert_eq!(v["rounds"], 3);
    assert_eq!(v["ruling"]["winner"], "pro");
    let names: Vec<Value> = env.stages().iter().map(|s| s["name"].clone()).collect();
    assert_eq!(names, vec!["round-1", "round-2", "round-3"]);
    // Two sides per round, then the judge.
    assert_eq!(env.turns().len(), 7);
}

#[test]
fn debates_judge_reads_the_transcript_as_text_not_as_a_rhai_map() {
    let env = Env::new();
    env.with_responder(
        r##"fn respond(turn) {
    if turn.agent != "judge" { return #{ answer: `${turn.agent} argues its case well` }; }
    let text = turn.prompt.contains("Round 1\nFOR: pro argues its case well\nAGAINST: con argues its case well");
    #{ answer: #{ winner: if text && !turn.prompt.contains("#{") { "con" } else { "tie" }, reason: turn.prompt, confidence: 0.5 } }
}"##,
    );
    let out = env.awf(&["script", "run", &example("debate.rhai"), "--arg", "rounds=1"]);
    let v = out.expect_code(0).json();
    assert_eq!(v["ruling"]["winner"], "con", "the judge's prompt: {}", v["ruling"]["reason"]);
}

#[test]
fn debate_refuses_bad_rounds() {
    let env = Env::new();
    let out = env.awf(&["script", "run", &example("debate.rhai"), "--arg", "rounds=9"]);
    out.expect_code(2).stderr_has("/rounds");
}

#[test]
fn triage_rates_every_report() {
    let (v, env) = run_example(&example("triage.rhai"), &["--args", r#"{"reports": ["a crash", "a typo"]}"#]);
    let sorted = v["sorted"].as_array().expect("sorted");
    assert_eq!(sorted.len(), 2);
    assert_eq!(sorted[0]["report"], "a crash");
    assert_eq!(v["unrated"], serde_json::json!([]));
    assert!(env.events_of("log").iter().any(|e| e["data"]["text"] == "rated 2 of 2 reports"));
}

#[test]
fn examples_pass_script_check() {
    let env = Env::new();
    let out = env.awf(&["script", "check", &example("review.rhai"), &example("debate.rhai"), &example("triage.rhai")]);
    out.expect_code(0)
        .stdout_has("(review; fn run(args))")
        .stdout_has("(debate; fn run(args))")
        .stdout_has("(triage; fn run(args))");
}

#[test]
fn triage_fails_when_no_report_was_rated() {
    let env = Env::new();
    env.with_responder(r#"fn respond(turn) { #{ fail: "model offline" } }"#);
    let out = env.awf(&["script", "run", &example("triage.rhai"), "--args", r#"{"reports": ["a crash", "a typo"]}"#]);
    out.expect_code(1).stderr_has("triage: none of the 2 reports was rated").stderr_has("model offline");
    assert!(env.events_of("log").iter().any(|e| e["data"]["text"] == "rated 0 of 2 reports"));
}
