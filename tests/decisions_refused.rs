//! `ctx.decisions.decide` refuses bad input by name, before the model is asked: no decision model
//! configured (with the fix), options empty, duplicated or blank, a floor outside 0..1, an unknown
//! fallback, a default that is no option, a `timeout_ms` that is not a positive number, a key used twice in one attempt (both call sites named),
//! fields of the wrong type; and a `[decisions]` table that is not one.

use crate::common;

use super::decisions::env_with_decider;
use common::Env;

/// Runs `call` (a `decide` call) inside `try` and returns what it threw; the run must succeed.
fn refusal(env: &Env, call: &str) -> String {
    let out = env.run(&format!("let e = \"\"; try {{ {call}; }} catch (x) {{ e = `${{x}}`; }} e"), &[]);
    out.expect_code(0);
    assert!(env.turns().is_empty(), "the model was asked: {:?}", env.turns());
    std::fs::remove_dir_all(env.runs_root()).expect("clear the runs");
    out.stdout.trim().to_string()
}

fn decide(fields: &str) -> String {
    format!(r#"ctx.decisions.decide(#{{ key: "k", question: "Q?", {fields} }})"#)
}

#[test]
fn without_a_decision_model_decide_is_refused_with_the_fix() {
    let env = Env::new();
    let out = env.run(&decide(r#"options: ["a", "b"]"#), &[]);
    out.expect_code(2)
        .stderr_has("ctx.decisions.decide `k`: no decision model is configured: add a [decisions] table to awf.toml")
        .stderr_has("runtime = \"NAME\"");
    let out = env.run("ctx.decisions.configured", &[]);
    out.expect_code(0).stdout_has("false");
    std::fs::remove_dir_all(env.runs_root()).expect("clear the runs");
    // A workflow that handles it goes on.
    assert!(refusal(&env, &decide(r#"options: ["a"]"#)).contains("no decision model is configured"));
    let env = env_with_decider("fn respond(turn) { () }");
    env.run("ctx.decisions.configured()", &[]).expect_code(0).stdout_has("true");
}

#[test]
fn every_bad_spec_is_refused_by_name_before_the_model_is_asked() {
    let env = env_with_decider("fn respond(turn) { () }");
    for (fields, said) in [
        ("options: []", "`options` must not be empty"),
        (r#"options: ["a", "b", "a"]"#, "option `a` is given twice"),
        (r#"options: ["a", #{ id: "a", doc: "again" }]"#, "option `a` is given twice"),
        (r#"options: ["a", " "]"#, "option 1 has an empty id"),
        ("options: [\"a\", \"b\\nc\"]", "option \"b\\nc\" has a line break or a control character in its id"),
        (r#"options: ["a"], min_confidence: 1.5"#, "`min_confidence` must be between 0 and 1, got 1.5"),
        (r#"options: ["a"], min_confidence: -1"#, "`min_confidence` must be between 0 and 1, got -1"),
        (r#"options: ["a"], min_confidence: "high""#, "`min_confidence` must be a number from 0 to 1"),
        (
            r#"options: ["a"], fallback: "ask""#,
            "unknown fallback `ask`: give \"operator\", \"default:<option>\" or \"fail\"",
        ),
        (r#"options: ["a", "b"], fallback: "default:c""#, "fallback `default:c` names no option (the options: a, b)"),
        (r#"options: "a, b""#, "`options` must be a list"),
        (r#"options: [#{ doc: "no id" }]"#, "an option must be an id string or #{ id, doc }"),
        (r#"options: [1]"#, "an option must be an id string"),
        (r#"options: ["a"], floor: 0.5"#, "spec: unknown field `floor`"),
        (r#"options: ["a"], timeout_ms: 0"#, "`timeout_ms` must be a positive number of milliseconds, got 0"),
        (r#"options: ["a"], timeout_ms: -5"#, "`timeout_ms` must be a positive number of milliseconds, got -5"),
        (r#"options: ["a"], timeout_ms: "1s""#, "spec: `timeout_ms` must be an integer, got string"),
    ] {
        let thrown = refusal(&env, &decide(fields));
        assert!(thrown.contains(&format!("ctx.decisions.decide: {said}")), "{fields}: {thrown}");
    }
    let thrown = refusal(&env, r#"ctx.decisions.decide(#{ question: "Q?", options: ["a"] })"#);
    assert!(thrown.contains("`key` must not be empty"), "{thrown}");
    let thrown = refusal(&env, r#"ctx.decisions.decide(#{ key: "k", options: ["a"] })"#);
    assert!(thrown.contains("`question` must not be empty"), "{thrown}");
}

#[test]
fn a_key_used_twice_in_one_attempt_is_refused_naming_both_call_sites() {
    let env = env_with_decider(r#"fn respond(turn) { #{ answer: #{ choice: "a", confidence: 1.0 } } }"#);
    let out = env.run(
        "let first = ctx.decisions.decide(#{ key: \"k\", question: \"Q?\", options: [\"a\"] });\n\
         let again = \"\";\n\
         try {\n    ctx.decisions.decide(#{ key: \"k\", question: \"Other?\", options: [\"a\"] });\n} catch (e) { again = `${e}`; }\n\
         again",
        &[],
    );
    out.expect_code(0);
    out.stdout_has("ctx.decisions.decide `k`: key `k` was already used by the decision at wf.rhai:1:")
        .stdout_has("the one at wf.rhai:4:");
    assert_eq!(env.turns().len(), 1, "the second was not asked");
}

#[test]
fn a_decisions_table_that_is_no_runtime_is_refused_with_the_file() {
    let env = Env::new();
    env.write("awf.toml", "[decisions]\nruntime = \"local\"\nharness = \"fake\"\n");
    env.run("1", &[])
        .expect_code(2)
        .stderr_has("awf.toml")
        .stderr_has("give `runtime` (a runtime's name) or the runtime's own keys, not both");
    env.write("awf.toml", "[decisions]\nlogprobs = true\n");
    env.run("1", &[]).expect_code(2).stderr_has("name the decision model's runtime");
    env.write("awf.toml", "[decisions]\nharness = \"fake\"\nmodle = \"x\"\n");
    env.run("1", &[]).expect_code(2).stderr_has("modle");
    env.write("awf.toml", "[decisions]\nruntime = \"fake\"\nlogprobs = \"yes\"\n");
    env.run("1", &[]).expect_code(2).stderr_has("`logprobs` must be true or false");
    // A runtime name that resolves to nothing is a configuration error when a decision is asked.
    env.write("awf.toml", "[decisions]\nruntime = \"local\"\n");
    env.run(&decide(r#"options: ["a"]"#), &[])
        .expect_code(2)
        .stderr_has("[decisions] runtime: unknown runtime alias `local`");
}
