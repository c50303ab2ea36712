//! Strategies that do not call empty work done (issue 18 item 6: synthesize's and map's usable
//! answers, map's split deduplicated and checked against the count the task states) and params
//! coerced from META once, by the host (`awf council run` and `awf serve`), with the strategy helpers in
//! one place (issue 14 item 11).

use crate::common;

use common::council::{call, council, output};
use common::Env;
use serde_json::json;
use std::path::Path;

// ---------------------------------------------------------------------------------------------
// Empty work is not work

#[test]
fn synthesize_counts_digits_punctuation_and_one_word_as_missing_not_as_findings() {
    let env = council(
        r#"fn respond(turn) {
    switch turn.agent {
        "synthesize-security" => #{ answer: "123" },
        "synthesize-correctness" => #{ answer: ", " },
        "synthesize-performance" => #{ answer: "Synthesis" },
        "synthesize-maintainability" => #{ answer: "The retry loop in auth.py never backs off." },
        _ => #{ answer: "Merged: the retry loop in auth.py never backs off." },
    }
}"#,
    );
    let r = call(&env, "synthesize", r#"#{ task: "Review auth.py" }"#);
    assert_eq!(r["structured"]["coverage"]["usable"], 1);
    assert_eq!(
        r["structured"]["coverage"]["missing"],
        json!([
            { "member": "reviewer · SECURITY", "status": "unusable", "detail": "the answer has no words (\"123\")" },
            { "member": "reviewer · CORRECTNESS", "status": "unusable", "detail": "the answer has no words (\",\")" },
            { "member": "reviewer · PERFORMANCE", "status": "unusable", "detail": "the answer is too short to be work (\"Synthesis\")" },
        ])
    );
    assert!(r["headline"].as_str().expect("headline").starts_with("Incomplete coverage: 1/4 · "), "{r:#}");
    assert!(output(&r).ends_with("— synthesize: 1/4 gatherers usable · merged by reviewer · SECURITY"), "{r:#}");

    // A merge that is not work fails the strategy, the findings kept unmerged.
    let env = council(
        r#"fn respond(turn) {
    if turn.agent == "synthesize-synthesizer" { return #{ answer: ",  " }; }
    #{ answer: `${turn.agent} found the retry loop never backs off` }
}"#,
    );
    let r = call(&env, "synthesize", r#"#{ task: "Review auth.py" }"#);
    assert_eq!(r["ok"], false);
    assert_eq!(r["failure_kind"], "failed");
    assert_eq!(
        r["error"],
        "synthesize: the synthesiser (reviewer · SECURITY) gave no usable answer — the answer has no words (\",\")"
    );
    assert!(output(&r).contains("Unmerged findings:"), "{}", output(&r));
}

#[test]
fn map_lists_a_worker_answer_that_is_not_work_as_failed() {
    let env = council(
        r#"fn respond(turn) {
    if turn.agent == "map-splitter" { return #{ answer: ["first part", "second part", "third part"] }; }
    if turn.agent == "map-worker-1" { return #{ answer: "ok." }; }
    if turn.agent == "map-worker-2" { return #{ answer: " " }; }
    #{ answer: `${turn.agent} rewrote the third part` }
}"#,
    );
    let r = call(&env, "map", r#"#{ task: "Three parts" }"#);
    assert_eq!(
        output(&r),
        "item 1: first part
FAILED — unusable: the answer is too short to be work (\"ok.\")

item 2: second part
FAILED — unusable: the answer was blank

item 3: third part
map-worker-3 rewrote the third part

— map: 1/3 items done · 2 failed"
    );
    assert_eq!(r["headline"], "map: 1/3 items done · 2 failed");
}

const REPEATING_SPLIT: &str = r#"fn respond(turn) {
    if turn.agent == "map-splitter" { return #{ answer: ["alpha task", "Alpha  task", "beta task", " , ", "gamma task", "beta task"] }; }
    #{ answer: `${turn.agent} did its item` }
}"#;

#[test]
fn maps_split_is_deduplicated_and_checked_against_the_count_the_task_states() {
    let env = council(REPEATING_SPLIT);
    let r = call(&env, "map", r#"#{ task: "Do these three things" }"#);
    assert_eq!(r["ok"], true);
    assert!(output(&r).ends_with("— map: 3/3 items done · 2 repeated item(s) removed"), "{}", output(&r));
    assert_eq!(r["structured"]["duplicates"], json!(["Alpha  task", "beta task"]));
    assert_eq!(env.turns().len(), 4, "the splitter and one worker per distinct item");

    let env = council(REPEATING_SPLIT);
    let r = call(&env, "map", r#"#{ task: "Do these 4 things" }"#);
    assert_eq!(r["ok"], false);
    assert_eq!(r["failure_kind"], "split-failed");
    assert_eq!(
        r["error"],
        "map: the split failed (splitter) — the task states 4 items; the splitter listed 3 once 3 repeated or blank one(s) were removed"
    );
    assert_eq!(env.turns().len(), 1, "no worker starts on a split of the wrong size");
}

// ---------------------------------------------------------------------------------------------
// Params coerced once, by the host; helpers once, in common.rhai

#[test]
fn the_host_coerces_params_to_metas_types_and_refuses_what_does_not_fit() {
    let env = Env::new();
    let out = env.awf(&["council", "run", "magi", "--task", "Ship?", "--param", "reflect=off", "--json"]);
    out.expect_code(0);
    assert_eq!(out.json()["value"]["structured"]["reflected"], false);
    assert_eq!(env.turns().len(), 3, "reflect=off means no reflection round");

    for (param, want) in [
        ("ownership=strict", "error: map: params.ownership must be \"off\", \"warn\" or \"enforce\", got \"strict\""),
        ("max_items=many", "error: map: params.max_items must be a whole number, got \"many\""),
        ("peers=maybe", "error: map: params.peers must be true or false, got \"maybe\""),
    ] {
        let env = Env::new();
        let out = env.awf(&["council", "run", "map", "--task", "x", "--param", param]);
        out.expect_code(2);
        assert_eq!(out.stderr.trim(), want);
        assert!(!env.path().join(".awf").exists(), "a run folder was created for {param}");
    }
}

#[test]
fn strategy_helpers_live_once_in_common() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("stdlib/council");
    let shared =
        ["fn round_refusal(", "fn why(", "fn failed(", "fn flag(", "fn collapse(", "Agent turns are called as"];
    for entry in std::fs::read_dir(&dir).expect("stdlib/council") {
        let path = entry.expect("an entry").path();
        if path.file_name().and_then(|n| n.to_str()) == Some("common.rhai") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("a strategy file");
        for s in shared {
            assert!(!text.contains(s), "{} repeats `{s}`: it belongs in common.rhai", path.display());
        }
        assert!(!text.contains("does not apply\n// yet"), "{} keeps an internal note", path.display());
    }
}

#[test]
fn awf_serve_coerces_a_strategys_params_and_refuses_a_blank_roster_member() {
    let env = Env::new();
    let s = common::serve::serve(&env, &[]);
    for (body, want) in [
        (
            json!({ "strategy": "map", "task": "x", "params": { "ownership": "strict" } }),
            "error: map: params.ownership must be \"off\", \"warn\" or \"enforce\", got \"strict\"",
        ),
        (
            json!({ "strategy": "magi", "task": "x", "roster": ["melchior", " "] }),
            "error: roster member 2 has a blank name: name every member",
        ),
    ] {
        let (status, v) = s.json("POST", "/runs", Some(&body));
        assert_eq!(status, 400, "{v}");
        assert_eq!(v["error"], want);
    }
    let id = s.start(json!({ "strategy": "magi", "task": "Ship?", "params": { "reflect": "off" } }));
    let result = s.until(&id, "succeeded");
    assert_eq!(result["value"]["structured"]["reflected"], false, "{result}");
    assert_eq!(result["value"]["usage"]["operations"], 3, "{result}");
}

#[test]
fn an_unknown_param_is_refused_with_the_strategys_params() {
    let env = common::Env::new();
    let out = env.awf(&["council", "run", "magi", "--task", "Ship it?", "--param", "reflct=false"]);
    out.expect_code(2)
        .stderr_has("magi: unknown param `reflct` (its params: aggregate, reflect, choices, fork_caller, tie_break)");
    assert!(env.run_dirs().is_empty(), "refused before any run folder");
}
