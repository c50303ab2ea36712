//! `ctx.decisions.decide` through the binary on the fake decision model (`[decisions] harness =
//! "fake"` with a responder): the decision returned, recorded (`result.json` `decisions`, the
//! `decision-settled` event, `runs logs`, the live lines), billed like a turn under `decisions`; the
//! floor and each fallback; an answer that is no option re-asked, then the fallback; the operator
//! deciding at a checkpoint; a resumed run replaying decisions, and a killed one not asking the
//! model twice. Bad inputs are in `decisions_refused.rs`, HTTP models in `decisions_http.rs`.

use crate::common;

use common::{read_json, wait_for_attempt_waiting, wait_for_run_dir, Env, Running};
use serde_json::{json, Value};

/// A folder whose decision model is the fake harness answered by `responder`.
pub fn env_with_decider(responder: &str) -> Env {
    let env = Env::new();
    env.write(
        "awf.toml",
        "[decisions]\nharness = \"fake\"\nmodel = \"decider\"\nresponder = \"decider.rhai\"\n\n[limits]\nnudges = 1\n",
    );
    env.write("decider.rhai", responder);
    env
}

/// A responder answering `choice` with `confidence`, whatever it is asked.
fn always(choice: &str, confidence: f64) -> String {
    format!(
        r#"fn respond(turn) {{ #{{ answer: #{{ choice: "{choice}", confidence: {confidence}, reason: "because" }}, usage: #{{ input_tokens: 50, output_tokens: 5 }} }} }}"#
    )
}

const SHIP: &str = r#"ctx.decisions.decide(#{ key: "ship", question: "Ship the release?",
    options: ["yes", #{ id: "no", doc: "hold the release" }], state: #{ tests: "red" },
    min_confidence: 0.6, fallback: "fail" })"#;

#[test]
fn the_model_decides_and_the_decision_is_recorded_billed_and_shown() {
    let env = env_with_decider(
        r#"fn respond(turn) {
            if !turn.prompt.contains("```untrusted state") || !turn.prompt.contains("- no: hold the release") {
                return #{ fail: `unexpected prompt: ${turn.prompt}` };
            }
            if turn.schema.properties.choice.enum != ["yes", "no"] { return #{ fail: "no enum" }; }
            #{ answer: #{ choice: "no", confidence: 0.8, reason: "tests are red" }, usage: #{ input_tokens: 120, output_tokens: 9 } }
        }"#,
    );
    let out = env.run(&format!("let d = {SHIP}; d"), &["--json"]);
    out.expect_code(0);
    let d = &out.json()["value"];
    assert_eq!(d["choice"], "no", "{d}");
    assert_eq!(d["confidence"], 0.8);
    assert_eq!(d["decided_by"], "model");
    assert_eq!(d["source"], "claimed", "the fake sends no log-probabilities: the model's claim");
    assert_eq!(d["distribution"], json!({ "no": 0.8, "yes": 0.19999999999999996 }));
    assert_eq!((d["model"].as_str(), d["reason"].as_str()), (Some("decider"), Some("tests are red")));
    out.stderr_has("decision ship: no (decided by model; confidence 0.80 from claimed)");

    let result = env.result();
    let recorded = &result["decisions"][0];
    for field in ["key", "choice", "confidence", "distribution", "decided_by", "model", "reason"] {
        assert_eq!(recorded[field], d[field], "{field}: {recorded}");
    }
    assert_eq!(recorded["question"], "Ship the release?");
    assert_eq!(recorded["options"], json!(["yes", "no"]));
    assert_eq!(recorded["spend"], json!({ "tokens": 129, "cost_usd": 0.0 }));
    assert!(recorded["at"].as_str().is_some_and(|t| t.ends_with('Z')), "{recorded}");

    // Billed like a turn: a `decision` line under the agent `decisions`, in every fold.
    let turn = env.turn("decisions#ship");
    assert_eq!((turn["agent"].as_str(), turn["kind"].as_str()), (Some("decisions"), Some("decision")));
    assert_eq!(turn["tokens"], 129);
    assert_eq!(result["accounting"]["by_agent"]["decisions"]["tokens"], 129, "{result}");
    assert_eq!(result["accounting"]["by_model"]["decider"]["operations"], 1);
    let settled = env.events_of("decision-settled");
    assert_eq!(settled.len(), 1);
    assert_eq!(settled[0]["data"]["decided_by"], "model");
    assert_eq!(env.events_of("agent-opened")[0]["data"]["agent"], "decisions", "a row in the live view");
    env.awf(&["runs", "logs", &env.run_id()])
        .expect_code(0)
        .stdout_has("decision ship: no (decided by model; confidence 0.80 from claimed; decider) · 129 tokens");
}

#[test]
fn under_the_floor_the_fallback_decides_a_default_or_a_catchable_error() {
    let env = env_with_decider(&always("yes", 0.4));
    let script = r#"
        let d = ctx.decisions.decide(#{ key: "a", question: "Q?", options: ["yes", "no"], min_confidence: 0.5, fallback: "default:no" });
        let failed = "";
        try {
            ctx.decisions.decide(#{ key: "b", question: "Q?", options: ["yes", "no"], min_confidence: 0.5 });
        } catch (e) { failed = `${e}`; }
        #{ d: d, failed: failed }
    "#;
    let out = env.run(script, &["--json"]);
    out.expect_code(0);
    let v = &out.json()["value"];
    assert_eq!((v["d"]["choice"].as_str(), v["d"]["decided_by"].as_str()), (Some("no"), Some("default")), "{v}");
    assert_eq!(v["d"]["model_choice"], "yes", "the model's pick is kept beside the decision");
    assert_eq!(v["d"]["confidence"], 0.6, "the model's probability of the default: 1 - 0.4 spread over one other");
    let failed = v["failed"].as_str().unwrap_or_default();
    assert!(
        failed.contains("ctx.decisions.decide `b`: the model's confidence 0.400 in `yes` is under min_confidence 0.5 and the fallback is \"fail\""),
        "{failed}"
    );
    // A failed decision is recorded too, with its error, in the order asked.
    let decisions = env.result()["decisions"].clone();
    assert_eq!(decisions.as_array().map(Vec::len), Some(2), "{decisions}");
    assert_eq!(decisions[1]["key"], "b");
    assert_eq!(decisions[1]["choice"], Value::Null);
    assert!(decisions[1]["error"].as_str().is_some_and(|e| e.contains("under min_confidence")), "{decisions}");
    assert_eq!(env.events_of("decision-settled")[1]["data"]["decided_by"], Value::Null);
}

#[test]
fn an_answer_that_is_no_option_is_asked_again_then_the_fallback_decides() {
    // Asked again after the rejection: the second answer counts.
    let env = env_with_decider(
        r#"fn respond(turn) {
            if turn.rejection == () && turn.nudge == 0 { return #{ answer: #{ choice: "maybe", confidence: 0.9 } }; }
            #{ answer: #{ choice: "yes", confidence: 0.9 } }
        }"#,
    );
    let out = env.run(
        r#"ctx.decisions.decide(#{ key: "k", question: "Q?", options: ["yes", "no"], fallback: "default:no" })"#,
        &["--json"],
    );
    out.expect_code(0);
    assert_eq!(out.json()["value"]["decided_by"], "model", "{}", out.stdout);
    assert_eq!(env.turn("decisions#k")["rejections"], 1);
    let rejected = env.events_of("op-rejected");
    assert!(rejected[0]["data"]["errors"][0].as_str().is_some_and(|e| e.contains("\"maybe\"")), "{rejected:?}");

    // Never an option within the run's nudges: the fallback decides.
    let env = env_with_decider(r#"fn respond(turn) { #{ answer: #{ choice: "maybe", confidence: 0.9 } } }"#);
    let out = env.run(
        r#"ctx.decisions.decide(#{ key: "k", question: "Q?", options: ["yes", "no"], fallback: "default:no" })"#,
        &["--json"],
    );
    out.expect_code(0);
    let d = &out.json()["value"];
    assert_eq!(
        (d["choice"].as_str(), d["decided_by"].as_str(), d["source"].as_str()),
        (Some("no"), Some("default"), Some("none"))
    );
    assert_eq!(d["model_choice"], Value::Null);
    assert_eq!(env.turn("decisions#k")["outcome"], "unanswered");
}

const OPERATOR: &str = r#"let d = ctx.decisions.decide(#{ key: "ship", question: "Ship the release?",
    options: ["yes", "no"], min_confidence: 0.9, fallback: "operator" });
`${d.choice} by ${d.decided_by} (model: ${d.model_choice})`"#;

#[test]
fn under_the_floor_the_operator_decides_at_a_checkpoint_showing_the_model_pick() {
    let env = env_with_decider(&always("yes", 0.55));
    env.write("wf.rhai", OPERATOR);
    let running = Running::start(env.path(), &["script", "run", "wf.rhai"]);
    let dir = wait_for_run_dir(&env);
    let id = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let doc = wait_for_attempt_waiting(&dir, 1);
    let waiting = &doc["waiting"][0];
    assert_eq!(waiting["key"], "decision-ship", "{doc}");
    let question = waiting["question"].as_str().unwrap_or_default();
    assert!(question.contains("Ship the release?"), "{question}");
    assert!(
        question.contains("decider picked `yes` with confidence 0.55 (from claimed), under the floor 0.9"),
        "{question}"
    );
    env.awf(&["runs", "answer", &id, "--key", "decision-ship", "--json", "\"maybe\""])
        .expect_code(2)
        .stderr_has("does not match");
    env.awf(&["runs", "answer", &id, "--key", "decision-ship", "--json", "\"no\""]).expect_code(0);
    let out = running.finish();
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "no by operator (model: yes)");
    assert_eq!(read_json(&dir.join("result.json"))["decisions"][0]["decided_by"], "operator");
}

#[test]
fn a_run_killed_waiting_for_the_operator_does_not_ask_the_model_again() {
    let env = env_with_decider(&always("yes", 0.55));
    env.write("wf.rhai", OPERATOR);
    let running = Running::start(env.path(), &["script", "run", "wf.rhai"]);
    let dir = wait_for_run_dir(&env);
    let id = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    wait_for_attempt_waiting(&dir, 1);
    common::signal(running.pid, "-KILL");
    let _ = running.finish();

    let resumed = Running::start(env.path(), &["runs", "resume", &id]);
    wait_for_attempt_waiting(&dir, 2);
    env.awf(&["runs", "answer", &id, "--key", "decision-ship", "--json", "\"no\""]).expect_code(0);
    let out = resumed.finish();
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "no by operator (model: yes)");
    let turns = common::read_jsonl(&dir.join("turns.jsonl"));
    assert_eq!(turns.iter().filter(|t| t["agent"] == "decisions").count(), 1, "the model was asked once: {turns:?}");
    let replayed: Vec<Value> = common::read_jsonl(&dir.join("events.jsonl"))
        .into_iter()
        .filter(|e| e["type"] == "decision-replayed")
        .map(|e| e["data"].clone())
        .collect();
    assert_eq!(replayed, [json!({ "key": "ship", "settled": false })]);
}

#[test]
fn a_resumed_run_replays_a_decision_and_asks_again_only_a_changed_one() {
    let env = env_with_decider(&always("yes", 0.9));
    let script = |question: &str| {
        format!(
            r#"let d = ctx.decisions.decide(#{{ key: "ship", question: "{question}", options: ["yes", "no"], state: ctx.attempt }});
            if ctx.attempt == 1 {{ throw "crash after deciding"; }}
            `${{d.choice}} replayed=${{d.replayed}}`"#
        )
    };
    env.run(&script("Ship?"), &[]).expect_code(1);
    let id = env.run_id();
    // The state changed (it is the attempt), the question did not: replayed, the model not asked.
    let out = env.awf(&["runs", "resume", &id]);
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "yes replayed=true");
    assert_eq!(env.turns().iter().filter(|t| t["agent"] == "decisions").count(), 1);
    assert_eq!(env.events_of("decision-replayed")[0]["data"], json!({ "key": "ship", "settled": true }));
    assert_eq!(env.result()["decisions"][0]["replayed"], true);

    // A changed question is asked again, and the record says why.
    env.write("wf.rhai", &script("Ship it now?"));
    let out = env.awf(&["runs", "resume", &id, "--allow-changed", "--again"]);
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "yes replayed=false");
    assert_eq!(env.turns().iter().filter(|t| t["agent"] == "decisions").count(), 2);
    let rerun = env.events_of("decision-rerun");
    assert!(rerun[0]["data"]["why"].as_str().is_some_and(|w| w.contains("question or options changed")), "{rerun:?}");
}

#[test]
fn a_command_runtime_decides_through_its_launcher_and_a_fresh_session_each_time() {
    let env = Env::new();
    // The program answers `b` and counts the turns its state folder saw: a fresh session per
    // decision sees one each.
    env.write(
        "decider.sh",
        "cat > /dev/null\nn=$(cat \"$AWF_STATE_DIR/n\" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > \"$AWF_STATE_DIR/n\"\n\
         \"$AWF_LAUNCHER\" usage --input 30 --output 4 > /dev/null\n\
         printf '{\"choice\":\"b\",\"confidence\":0.75,\"reason\":\"turn %s\"}' \"$n\" | \"$AWF_LAUNCHER\" result \"$AWF_OP\" > /dev/null\n",
    );
    env.write(
        "awf.toml",
        "[runtimes.program]\nharness = \"command\"\nmodel = \"program\"\ncommand = [\"sh\", \"decider.sh\"]\n\n[decisions]\nruntime = \"program\"\n",
    );
    let out = env.run(
        r#"[ctx.decisions.decide(#{ key: "one", question: "Q?", options: ["a", "b"] }),
            ctx.decisions.decide(#{ key: "two", question: "Q?", options: ["a", "b"] })]"#,
        &["--json"],
    );
    out.expect_code(0);
    let v = &out.json()["value"];
    for d in v.as_array().cloned().unwrap_or_default() {
        assert_eq!(
            (d["choice"].as_str(), d["source"].as_str(), d["model"].as_str()),
            (Some("b"), Some("claimed"), Some("program"))
        );
        assert_eq!(d["reason"], "turn 1", "each decision is a session of its own: {d}");
    }
    assert_eq!(env.result()["accounting"]["by_agent"]["decisions"]["tokens"], 68);
}

#[test]
fn a_decision_runs_under_its_scope_deadline_like_an_operation() {
    let env = env_with_decider(r#"fn respond(turn) { #{ hang: true } }"#);
    let out = env.run(
        r#"let said = "";
        try {
            ctx.parallel([1], |i| ctx.decisions.decide(#{ key: "slow", question: "Q?", options: ["a", "b"] }), #{ timeout_ms: 300 });
        } catch (e) { said = `${e}`; }
        said"#,
        &[],
    );
    out.expect_code(0).stdout_has("parallel deadline exceeded");
    assert_eq!(env.turn("decisions#slow")["outcome"], "timed-out");
    let recorded = &env.result()["decisions"][0];
    assert_eq!(recorded["choice"], Value::Null);
    assert!(recorded["error"].as_str().is_some_and(|e| e.contains("deadline")), "{recorded}");
}
