//! `awf script check` and `awf init`.

use crate::common;

use common::Env;

#[test]
fn check_reports_ok_for_good_files() {
    let env = Env::new();
    env.write("a.rhai", "export const META = #{ name: \"alpha\" };\nfn run(args) { 1 }\n");
    env.write("b.rhai", "let x = 1;\nx + 1\n");
    let out = env.awf(&["script", "check", "a.rhai", "b.rhai"]);
    out.expect_code(0);
    assert_eq!(out.stdout, "ok a.rhai (alpha; fn run(args))\nok b.rhai ((no META name); top-level script)\n");
    assert!(env.run_dirs().is_empty(), "check runs nothing");
}

#[test]
fn check_reports_each_bad_file_and_exits_2() {
    let env = Env::new();
    env.write("good.rhai", "1\n");
    env.write("parse.rhai", "let = 5;\n");
    env.write("unknown.rhai", "let y = frobnicate(1);\n");
    env.write("meta.rhai", "export const META = #{ args: #{ type: 5 } };\n1\n");
    env.write("typo.rhai", "let count = 1;\ncuont\n");
    let out = env.awf(&[
        "script",
        "check",
        "good.rhai",
        "parse.rhai",
        "unknown.rhai",
        "meta.rhai",
        "typo.rhai",
        "absent.rhai",
    ]);
    out.expect_code(2);
    out.stdout_has("ok good.rhai");
    out.stderr_has("--> parse.rhai:1:").stderr_has("unknown function `frobnicate`").stderr_has("--> unknown.rhai:1:9");
    out.stderr_has("meta.rhai: META.args is not a valid JSON Schema");
    out.stderr_has("Undefined variable: cuont").stderr_has("--> typo.rhai:2:1");
    out.stderr_has("absent.rhai");
    assert!(!out.stdout.contains("ok parse.rhai") && !out.stdout.contains("ok typo.rhai"), "{}", out.stdout);
    assert!(env.run_dirs().is_empty());
}

#[test]
fn check_flags_an_unknown_function_called_as_a_statement() {
    let env = Env::new();
    env.write("stmt.rhai", "fn run(args) {\n    frobnicate(1);\n    2\n}\n");
    let out = env.awf(&["script", "check", "stmt.rhai"]);
    out.expect_code(2).stderr_has("unknown function `frobnicate`").stderr_has("--> stmt.rhai:2:5");
}

#[test]
fn check_needs_a_file() {
    let env = Env::new();
    env.awf(&["script", "check"]).expect_code(2);
}

#[test]
fn init_writes_config_and_an_example_that_runs() {
    let env = Env::new();
    let out = env.awf(&["init"]);
    out.expect_code(0).stdout_has("awf.toml").stdout_has("hello.rhai");
    let config = std::fs::read_to_string(env.path().join("awf.toml")).expect("awf.toml");
    assert!(config.contains("default_runtime = \"fake\""), "{config}");
    assert!(env.path().join("scripts/hello.rhai").is_file());

    env.awf(&["script", "check", "scripts/hello.rhai"])
        .expect_code(0)
        .stdout_has("ok scripts/hello.rhai (hello; fn run(args))");
    let out = env.awf(&["script", "run", "scripts/hello.rhai", "--arg", "topic=a test tool"]);
    out.expect_code(0).stderr_has("awf: simulated");
    let v = out.json();
    assert_eq!(v["ideas"].as_array().map(Vec::len), Some(3));
    assert!(v["pick"]["name"].is_string() && v["pick"]["why"].is_string(), "{v}");
    assert_eq!(env.result()["status"], "succeeded");
    assert_eq!(env.stages()[0]["name"], "ideas");
}

#[test]
fn init_refuses_to_overwrite() {
    let env = Env::new();
    env.write("awf.toml", "# mine\n");
    let out = env.awf(&["init"]);
    out.expect_code(2).stderr_has("awf.toml already exists");
    assert_eq!(std::fs::read_to_string(env.path().join("awf.toml")).expect("read"), "# mine\n");
    assert!(!env.path().join("scripts/hello.rhai").exists(), "nothing written when refusing");

    let env = Env::new();
    env.awf(&["init"]).expect_code(0);
    env.awf(&["init"]).expect_code(2).stderr_has("already exists");
}

#[test]
fn init_into_another_folder() {
    let env = Env::new();
    env.awf(&["init", "proj"]).expect_code(0);
    assert!(env.path().join("proj/awf.toml").is_file());
    assert!(env.path().join("proj/scripts/hello.rhai").is_file());
    let out = common::awf(&env.path().join("proj"), &["script", "run", "scripts/hello.rhai"]);
    out.expect_code(0);
}

#[test]
fn the_hello_that_init_writes_goes_on_when_one_idea_fails() {
    let env = Env::new();
    env.awf(&["init"]).expect_code(0);
    env.write(
        "awf.toml",
        "default_runtime = \"f\"\n[runtimes.f]\nharness = \"fake\"\nresponder = \"responder.rhai\"\n",
    );
    env.write(
        "responder.rhai",
        r#"fn respond(turn) {
    if turn.agent == "ideas-2" { throw "cut off at max_tokens"; }
    if turn.agent == "judge" { return #{ answer: #{ name: "Relay", why: "short" } }; }
    #{ answer: `Name ${turn.agent}` }
}"#,
    );
    let out = env.awf(&["script", "run", "scripts/hello.rhai"]);
    out.expect_code(0).stderr_has("an idea failed");
    assert_eq!(out.json()["ideas"], serde_json::json!(["Name ideas-1", "Name ideas-3"]));
}
