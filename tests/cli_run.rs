//! `awf script run`: output streams, exit codes, flags, and the run folder's documents.

use crate::common;

use common::Env;
use serde_json::json;

#[test]
fn a_string_value_is_printed_as_is_and_a_map_as_json() {
    let env = Env::new();
    let out = env.run(r#""plain text""#, &[]);
    out.expect_code(0);
    assert_eq!(out.stdout, "plain text\n");

    let env = Env::new();
    let out = env.run("#{ a: 1, b: [true, ()] }", &[]);
    out.expect_code(0);
    assert_eq!(out.json(), json!({ "a": 1, "b": [true, null] }));
}

#[test]
fn fn_run_gets_args_from_args_and_arg_flags() {
    let env = Env::new();
    let script = "fn run(args) { args }";
    let out = env.run(
        script,
        &["--args", r#"{"x": 1, "y": "z"}"#, "--arg", "n=3", "--arg", "word=hello", "--arg", "list=[1,2]"],
    );
    out.expect_code(0);
    assert_eq!(out.json(), json!({ "x": 1, "y": "z", "n": 3, "word": "hello", "list": [1, 2] }));
    assert_eq!(env.run_json()["args"], json!({ "x": 1, "y": "z", "n": 3, "word": "hello", "list": [1, 2] }));
}

#[test]
fn args_can_come_from_a_file() {
    let env = Env::new();
    env.write("in/args.json", r#"{"from": "file"}"#);
    let out = env.run("fn run(args) { args.from }", &["--args", "@in/args.json"]);
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "file");
}

#[test]
fn bad_args_json_is_a_usage_error() {
    let env = Env::new();
    let out = env.run("fn run(args) { 1 }", &["--args", "{nope"]);
    out.expect_code(2).stderr_has("--args is not valid JSON");
    let out = env.run("fn run(args) { 1 }", &["--args", "@missing.json"]);
    out.expect_code(2).stderr_has("missing.json");
    let out = env.run("fn run(args) { 1 }", &["--arg", "novalue"]);
    out.expect_code(2).stderr_has("KEY=VALUE");
}

#[test]
fn success_writes_every_record_and_a_summary_on_stderr() {
    let env = Env::new();
    let script = r#"
        export const META = #{ name: "recorded", version: "7" };
        fn run(args) {
            let a = ctx.agents.open(#{ key: "a" });
            a.ask("say something")
        }
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "a: say something");
    out.stderr_has("awf: succeeded in").stderr_has("1 agent · 1 operation");
    out.stderr_has("awf: simulated: answers came from the fake harness; no model was called");

    let dir = env.run_dir();
    out.stderr_has(&format!("awf: records in {}", dir.display()));
    for f in ["run.json", "events.jsonl", "turns.jsonl", "stages.jsonl", "journal.jsonl", "result.json"] {
        assert!(dir.join(f).is_file(), "{f} missing in {}", dir.display());
    }

    let run = env.run_json();
    let id = dir.file_name().and_then(|n| n.to_str()).expect("run id");
    assert_eq!(run["id"], id);
    assert_eq!(run["meta"]["name"], "recorded");
    assert_eq!(run["meta"]["version"], "7");
    assert!(run["script"].as_str().expect("script").ends_with("wf.rhai"), "{run}");
    assert_eq!(run["script_sha256"].as_str().expect("sha").len(), 64);
    assert_eq!(run["attempts"][0]["n"], 1);
    assert_eq!(run["attempts"][0]["status"], "succeeded");
    assert!(run["attempts"][0]["finished_at"].is_string(), "{run}");

    let result = env.result();
    assert_eq!(result["run_id"], id);
    assert_eq!(result["status"], "succeeded");
    assert_eq!(result["value"], "a: say something");
    assert_eq!(result["error"], serde_json::Value::Null);
    assert_eq!(result["simulated"], true);
    assert_eq!(result["accounting"]["totals"]["operations"], 1);
    assert_eq!(result["accounting"]["by_agent"]["a"]["operations"], 1);
    assert_eq!(result["accounting"]["by_model"]["fake"]["operations"], 1);
    assert_eq!(result["accounting"]["by_stage"]["(none)"]["operations"], 1);
    assert!(result["accounting"]["totals"]["tokens"].as_u64().expect("tokens") > 0);

    let events = env.events();
    assert!(events.iter().all(|e| e["v"] == 1 && e["attempt"] == 1 && e["at"].is_string()), "{events:#?}");
    assert_eq!(events.first().map(|e| e["type"].clone()), Some(json!("run-started")));
    assert_eq!(events.last().map(|e| e["type"].clone()), Some(json!("run-finished")));
    for ty in ["agent-opened", "op-started", "op-settled"] {
        assert_eq!(env.events_of(ty).len(), 1, "{ty}");
    }

    let journal = env.jsonl("journal");
    assert_eq!(journal.len(), 1);
    assert_eq!(journal[0]["agent"], "a");
    assert_eq!(journal[0]["op_id"], "a#1");
    assert_eq!(journal[0]["outcome"]["kind"], "answered");
    assert!(journal[0]["turn_hash"].is_string());

    let turn = env.turn("a#1");
    for (k, v) in [
        ("agent", json!("a")),
        ("kind", json!("turn")),
        ("outcome", json!("answered")),
        ("harness", json!("fake")),
        ("model", json!("fake")),
        ("cost_source", json!("simulated")),
    ] {
        assert_eq!(turn[k], v, "turns.jsonl {k}: {turn}");
    }
    for k in ["delivered_at", "settled_at", "tokens", "cost_usd", "session", "reason", "stage", "label"] {
        assert!(turn.get(k).is_some(), "turns.jsonl lacks {k}: {turn}");
    }
}

#[test]
fn json_flag_prints_result_json() {
    let env = Env::new();
    let out = env.run("#{ answer: 42 }", &["--json"]);
    out.expect_code(0);
    let printed = out.json();
    assert_eq!(printed["status"], "succeeded");
    assert_eq!(printed["value"], json!({ "answer": 42 }));
    assert_eq!(printed, env.result());
}

#[test]
fn quiet_hides_log_lines_and_the_summary() {
    let env = Env::new();
    let out = env.run(r#"ctx.log("visible?"); print("printed?"); 1"#, &["-q"]);
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "1");
    assert!(!out.stderr.contains("visible?") && !out.stderr.contains("printed?"), "{}", out.stderr);
    assert!(!out.stderr.contains("awf: succeeded"), "{}", out.stderr);
    // The log still reaches the records.
    assert_eq!(env.events_of("log").len(), 2);
}

#[test]
fn runs_dir_moves_the_run_folder() {
    let env = Env::new();
    let out = env.run("1", &["--runs-dir", "elsewhere/runs"]);
    out.expect_code(0);
    assert!(env.run_dirs().is_empty(), "nothing under .awf/runs");
    let runs: Vec<_> = std::fs::read_dir(env.path().join("elsewhere/runs")).expect("runs dir").collect();
    assert_eq!(runs.len(), 1);
}

#[test]
fn an_uncaught_error_fails_with_exit_1_and_a_rendered_error() {
    let env = Env::new();
    let script = "fn inner(x) {\n    throw `bad thing ${x}`;\n}\nfn run(args) {\n    inner(5)\n}\n";
    let out = env.run(script, &[]);
    out.expect_code(1);
    out.stderr_has("error: bad thing 5").stderr_has("wf.rhai:2:5").stderr_has("throw `bad thing ${x}`;");
    out.stderr_has("in call to fn inner").stderr_has("awf: failed in");
    assert_eq!(out.stdout, "");
    let result = env.result();
    assert_eq!(result["status"], "failed");
    assert_eq!(result["error"], "bad thing 5");
    assert_eq!(env.run_json()["attempts"][0]["status"], "failed");
    assert_eq!(env.events_of("run-finished")[0]["data"]["status"], "failed");
}

#[test]
fn a_result_that_is_not_json_fails() {
    let env = Env::new();
    let out = env.run("let f = |x| x; f", &[]);
    out.expect_code(1).stderr_has("not JSON");
    assert_eq!(env.result()["status"], "failed");
}

#[test]
fn sleep_and_eval_are_not_available() {
    let env = Env::new();
    let out = env.run("sleep(10); 1", &[]);
    out.expect_code(1).stderr_has("use ctx.sleep(ms)");
    let env = Env::new();
    let out = env.run(r#"eval("1 + 1")"#, &[]);
    assert_eq!(out.code, Some(2), "eval must not compile: {out:?}");
    assert!(env.run_dirs().is_empty());
}

#[test]
fn bad_flag_values_are_usage_errors() {
    let env = Env::new();
    env.run("1", &["--deadline", "soon"]).expect_code(2).stderr_has("--deadline");
    env.run("1", &["--max-concurrency", "0"]).expect_code(2).stderr_has("--max-concurrency");
    env.run("1", &["--budget-usd=-1"]).expect_code(2).stderr_has("--budget-usd");
    env.awf(&["script", "run", "missing.rhai"]).expect_code(2).stderr_has("missing.rhai");
    env.awf(&["script", "frobnicate"]).expect_code(2);
}

#[test]
fn unknown_runs_and_non_loopback_serving_are_refused_plainly() {
    let env = Env::new();
    let out = env.awf(&["runs", "logs", "x"]);
    out.expect_code(2);
    out.stderr_has("no run x in");
    // awf serve is built; it refuses an address other machines could reach.
    let out = env.awf(&["serve", "--listen", "0.0.0.0:0"]);
    out.expect_code(2);
    out.stderr_has("awf serve listens on loopback addresses only");
}
