//! No garbage called success (issue 26 row 4): every strategy applies the unusable-answer rule
//! (blank, lone punctuation, a copy of the schema or of awf's own instructions) to each member's
//! answer and to its final output, map's split refuses items that are the schema's words, and a
//! parallel group's log line counts a failed operation as failed.

use crate::common;

use common::council::{call, council, output};

/// Every member answers `{`, as a small model out of its depth does.
const BRACE: &str = r#"fn respond(turn) { #{ answer: "{" } }"#;

#[test]
fn pair_and_pipeline_whose_members_answer_a_brace_are_not_ok() {
    let env = council(BRACE);
    let r = call(&env, "pair", r#"#{ task: "Write a haiku" }"#);
    assert_eq!(r["ok"], false, "{r:#}");
    assert_eq!(r["failure_kind"], "unusable");
    assert_eq!(r["error"], "pair: the driver (driver) gave no usable work — the answer has no words (\"{\")");

    let env = council(BRACE);
    let r = call(&env, "pipeline", r#"#{ task: "Write a haiku", roster: ["drafter", "editor"] }"#);
    assert_eq!(r["ok"], false, "{r:#}");
    assert_eq!(r["failure_kind"], "unusable");
    assert_eq!(r["error"], "pipeline: step 1/2 (drafter) gave no usable output — the answer has no words (\"{\")");
    assert_eq!(
        env.turns().iter().filter(|t| t["op_id"].as_str().is_some_and(|o| o.starts_with("pipeline-editor"))).count(),
        0,
        "the editor never got garbage"
    );

    // From the command line: exit 1, not 0.
    env.awf(&["council", "run", "pair", "--task", "Write a haiku", "-q"])
        .expect_code(1)
        .stderr_has("gave no usable work");
}

#[test]
fn a_copy_of_the_schema_or_of_awfs_instructions_is_not_work() {
    let env = council(
        r#"fn respond(turn) {
    switch turn.agent {
        "pipeline-drafter" => #{ answer: "{\"type\": \"string\"}" },
        "pair-driver" => #{ answer: "When the answer is ready, run: wf result pair-driver#1 <<'WF_JSON'" },
        _ => #{ answer: "A real draft of the haiku, in three lines." },
    }
}"#,
    );
    let r = call(&env, "pipeline", r#"#{ task: "Write a haiku", roster: ["drafter", "editor"] }"#);
    assert_eq!(r["failure_kind"], "unusable", "{r:#}");
    assert!(r["error"].as_str().expect("error").contains("the schema's own words"), "{r:#}");
    let r = call(&env, "pair", r#"#{ task: "Write a haiku" }"#);
    assert_eq!(r["failure_kind"], "unusable", "{r:#}");
    assert!(r["error"].as_str().expect("error").contains("copies awf's answer instructions (\"WF_JSON\")"), "{r:#}");
}

#[test]
fn pairs_review_or_revision_that_is_not_work_leaves_the_draft_standing_and_says_so() {
    let env = council(
        r#"fn respond(turn) {
    if turn.prompt.contains("You are the driver") { return #{ answer: "The first draft of the haiku." }; }
    if turn.prompt.contains("You are the navigator") { return #{ answer: #{ verdict: "revise", review: "Tighten the second line." } }; }
    #{ answer: #{ work: "?", reply: "done" } }
}"#,
    );
    let r = call(&env, "pair", r#"#{ task: "Write a haiku" }"#);
    assert_eq!(r["ok"], true, "{r:#}");
    let out = output(&r);
    assert!(out.starts_with("The first draft of the haiku."), "{out}");
    assert!(
        out.contains(
            "the driver's answer to review 1 was not work (the answer has no words (\"?\")); the previous draft stands"
        ),
        "{out}"
    );

    let env = council(
        r#"fn respond(turn) {
    if turn.prompt.contains("You are the navigator") { return #{ answer: #{ verdict: "approve", review: "  " } }; }
    #{ answer: "The first draft of the haiku." }
}"#,
    );
    let r = call(&env, "pair", r#"#{ task: "Write a haiku" }"#);
    assert_eq!(r["structured"]["reviewed"], false, "a blank review is no review: {r:#}");
    assert!(
        output(&r).contains("unreviewed: navigator gave no usable review in review round 1 (the notes were blank)"),
        "{}",
        output(&r)
    );
}

#[test]
fn maps_split_refuses_items_that_are_the_schemas_words() {
    // SmolLM2 listed the words of the schema awf put in the prompt.
    let env = council(
        r#"fn respond(turn) {
    if turn.agent == "map-splitter" { return #{ answer: ["type", "items", "items[0]"] }; }
    #{ answer: `${turn.agent} did the item well` }
}"#,
    );
    let r = call(&env, "map", r#"#{ task: "Review the three modules" }"#);
    assert_eq!(r["ok"], false, "{r:#}");
    assert_eq!(r["failure_kind"], "split-failed");
    assert!(
        r["error"].as_str().expect("error").contains(
            "3 item(s) that are the split schema's own words or placeholders (\"type\", \"items\", \"items[0]\")"
        ),
        "{r:#}"
    );
    assert!(
        env.turns().iter().all(|t| t["op_id"].as_str().is_some_and(|o| o.starts_with("map-splitter"))),
        "no worker ran"
    );

    // Mixed in with real items, they are removed and named.
    let env = council(
        r#"fn respond(turn) {
    if turn.agent == "map-splitter" { return #{ answer: ["review auth.py", "string", "review db.py"] }; }
    #{ answer: `${turn.agent} did the item well` }
}"#,
    );
    let r = call(&env, "map", r#"#{ task: "Review the modules" }"#);
    assert_eq!(r["ok"], true, "{r:#}");
    assert_eq!(r["structured"]["schema_words"], serde_json::json!(["string"]));
    assert_eq!(r["structured"]["items"].as_array().expect("items").len(), 2, "{r:#}");
}

#[test]
fn a_magi_ballot_whose_reason_copies_the_schema_is_invalid() {
    let env = council(
        r#"fn respond(turn) {
    if turn.agent == "magi-melchior" { return #{ answer: #{ choice: "yes", confidence: 0.9, reason: "type string" } }; }
    #{ answer: #{ choice: "no", confidence: 0.6, reason: "Not on a Friday." } }
}"#,
    );
    let r = call(&env, "magi", r#"#{ task: "Ship it?", params: #{ reflect: false } }"#);
    assert_eq!(r["structured"]["tally"], serde_json::json!({ "no": 2 }), "{r:#}");
    assert!(output(&r).contains("1 invalid"), "{}", output(&r));
}

#[test]
fn a_parallel_groups_log_counts_a_failed_gatherer_as_failed() {
    let env = council(
        r#"fn respond(turn) {
    if turn.agent == "synthesize-security" { throw "the model server went away"; }
    #{ answer: `${turn.agent} found that the retry loop never backs off` }
}"#,
    );
    let r = call(&env, "synthesize", r#"#{ task: "Review auth.py" }"#);
    assert!(r["headline"].as_str().expect("headline").starts_with("Incomplete coverage: 3/4"), "{r:#}");
    let finished = env.events_of("parallel-finished");
    let gather = finished.iter().find(|e| e["data"]["label"] == "synthesize: gather").expect("the gather group");
    assert_eq!((&gather["data"]["items"], &gather["data"]["failed"]), (&4.into(), &1.into()), "{gather:#}");
}

#[test]
fn copies_of_the_prompts_examples_and_descriptions_and_repetition_are_not_work() {
    // Seen on SmolLM2: map's split listing the prompt's example items, a magi choice that is the
    // ballot schema's description, a pair driver repeating one phrase.
    let env = council(
        r#"fn respond(turn) {
    if turn.agent == "map-splitter" { return #{ answer: ["first item", "second item", "third item"] }; }
    #{ answer: `${turn.agent} did the item well` }
}"#,
    );
    let r = call(&env, "map", r#"#{ task: "List fruits" }"#);
    assert_eq!(r["failure_kind"], "split-failed", "{r:#}");

    let env = council(
        r#"fn respond(turn) {
    if turn.agent == "magi-melchior" { return #{ answer: #{ choice: "your pick, named as the question names the options (e.g. yes or no, A or B)", confidence: 1.0, reason: "It is what it is." } }; }
    #{ answer: #{ choice: "no", confidence: 0.6, reason: "Not on a Friday." } }
}"#,
    );
    let r = call(&env, "magi", r#"#{ task: "Ship it?", params: #{ reflect: false } }"#);
    assert_eq!(r["structured"]["tally"], serde_json::json!({ "no": 2 }), "{r:#}");

    let env = council(
        r#"fn respond(turn) {
    let phrase = "The work you do, the work you do. ";
    let text = "";
    for i in 0..10 { text += phrase; }
    #{ answer: text }
}"#,
    );
    let r = call(&env, "pair", r#"#{ task: "Write a haiku" }"#);
    assert_eq!(r["failure_kind"], "unusable", "{r:#}");
    assert!(r["error"].as_str().expect("error").contains("the answer repeats itself (4 distinct words in 80"), "{r:#}");
}
