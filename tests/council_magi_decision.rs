//! magi's `tie_break: "decision"`: a vote that decided nothing is ruled by the decision model
//! (`[decisions]`) among the choices voted for; without a decision model, or when it fails, the
//! most confident ballot stands exactly as by default (COUNCILS.md "magi" point 6 holds), and a
//! vote that decided is never put to it.

use crate::common;

use super::council_magi::{council, magi, HOLD, SPLIT};
use common::council::output;
use common::Env;
use serde_json::{json, Value};

/// What the default tie-break gives for SPLIT under unanimity, pinned in council_magi.rs too.
const BY_CONFIDENCE: &str = "Ruling: yes

Why:
- Melchior · scientist (confidence 0.9): Friday ships are tested and the numbers hold.

Dissent:
- Balthasar · mother chose no (confidence 0.7): A Friday release leaves on-call people fixing it all weekend.
- Casper · woman chose no (confidence 0.6): I would rather have my weekend.

— magi: not unanimous · fell back to best-by-confidence · tally no: 2, yes: 1";

const UNANIMITY: &str = r#"#{ aggregate: "unanimity", reflect: false, tie_break: "decision" }"#;

/// Adds a decision model answered by `responder` to the council's folder.
fn with_decider(env: &Env, responder: &str) {
    let path = env.path().join("awf.toml");
    let config = std::fs::read_to_string(&path).expect("awf.toml");
    env.write(
        "awf.toml",
        &format!("{config}\n[decisions]\nharness = \"fake\"\nmodel = \"decider\"\nresponder = \"decider.rhai\"\n"),
    );
    env.write("decider.rhai", responder);
}

fn decision_turns(env: &Env) -> usize {
    env.turns().iter().filter(|t| t["agent"] == "decisions").count()
}

#[test]
fn without_a_decision_model_the_most_confident_ballot_stands_as_by_default() {
    let env = council(SPLIT, HOLD);
    let r = magi(&env, UNANIMITY, "#{}", &[]);
    assert_eq!(output(&r), BY_CONFIDENCE);
    assert_eq!(r["headline"], "magi: yes — not unanimous 1/3, fell back to best-by-confidence");
    assert_eq!(r["structured"]["used_fallback"], true);
    assert_eq!(r["structured"]["tie_break"], json!({ "by": "confidence", "why": "no decision model" }));
    let logged = env.events_of("log");
    assert!(logged
        .iter()
        .any(|e| e["data"]["text"].as_str().is_some_and(|t| t.contains("no decision model is configured"))));
    assert_eq!(decision_turns(&env), 0);
}

#[test]
fn the_decision_model_rules_among_the_choices_voted_for() {
    let env = council(SPLIT, HOLD);
    with_decider(
        &env,
        r#"fn respond(turn) {
            if turn.schema.properties.choice.enum != ["no", "yes"] { return #{ fail: `options ${turn.schema.properties.choice.enum}` }; }
            if !turn.prompt.contains("not unanimous") || !turn.prompt.contains("Ship the release on Friday?") { return #{ fail: "question" }; }
            if !turn.prompt.contains("```untrusted state") || !turn.prompt.contains("I would rather have my weekend.") { return #{ fail: "ballots" }; }
            #{ answer: #{ choice: "no", confidence: 0.8, reason: "two of three and the weekend" } }
        }"#,
    );
    let r = magi(&env, UNANIMITY, "#{}", &[]);
    assert_eq!(
        output(&r),
        "Ruling: no

Why:
- Balthasar · mother (confidence 0.7): A Friday release leaves on-call people fixing it all weekend.
- Casper · woman (confidence 0.6): I would rather have my weekend.

Dissent:
- Melchior · scientist chose yes (confidence 0.9): Friday ships are tested and the numbers hold.

— magi: not unanimous · tie broken by the decision model (decider, confidence 0.8) · tally no: 2, yes: 1"
    );
    assert_eq!(r["headline"], "magi: no — not unanimous 2/3, tie broken by the decision model");
    let s = &r["structured"];
    assert_eq!((s["winner"].as_str(), s["status"].as_str()), (Some("no"), Some("not unanimous")));
    assert_eq!(s["tie_break"], json!({ "by": "decision", "winner": "no", "model": "decider", "confidence": 0.8 }));
    assert_eq!(s["dissent"][0]["member"], "Melchior · scientist");
    let result = env.result();
    assert_eq!(result["decisions"][0]["key"], "magi-tie-break", "{result}");
    assert!(result["accounting"]["by_agent"]["decisions"]["operations"] == 1, "billed: {result}");
}

#[test]
fn a_vote_that_decided_is_not_put_to_the_decision_model() {
    let env = council(SPLIT, HOLD);
    with_decider(&env, r#"fn respond(turn) { #{ fail: "never asked" } }"#);
    let r = magi(&env, r#"#{ reflect: false, tie_break: "decision" }"#, "#{}", &[]);
    assert!(output(&r).ends_with("— magi: majority · tally no: 2, yes: 1"), "{}", output(&r));
    assert_eq!(r["structured"]["tie_break"], Value::Null);
    assert_eq!(decision_turns(&env), 0);
}

#[test]
fn a_decision_model_that_fails_leaves_the_most_confident_ballot() {
    let env = council(SPLIT, HOLD);
    with_decider(&env, r#"fn respond(turn) { #{ fail: "the model is down" } }"#);
    let r = magi(&env, UNANIMITY, "#{}", &[]);
    assert_eq!(output(&r), BY_CONFIDENCE);
    assert_eq!(r["structured"]["tie_break"], json!({ "by": "confidence", "why": "the decision model failed" }));
    let warned = env.events_of("log");
    assert!(
        warned.iter().any(|e| e["data"]["text"].as_str().is_some_and(|t| t.contains("the model is down"))),
        "{warned:?}"
    );
    assert_eq!(decision_turns(&env), 1);
}
