//! DESIGN section 11: bad input gets a clear error, at the right time, and nothing is lost.

use crate::common;

use common::Env;
use serde_json::Value;
use std::time::{Duration, Instant};

/// A compile error: exit 2, rustc-style text, and no run folder.
#[track_caller]
fn assert_compile_error(env: &Env, script: &str, message: &str, at: &str, line: &str) {
    let out = env.run(script, &[]);
    out.expect_code(2).stderr_has(&format!("error: {message}")).stderr_has(&format!("--> {at}")).stderr_has(line);
    assert!(out.stderr.contains("^ here"), "{}", out.stderr);
    assert_eq!(out.stdout, "");
    assert!(env.run_dirs().is_empty(), "a compile error must not create a run folder");
}

#[test]
fn a_parse_error_is_reported_with_position_and_source_line() {
    let env = Env::new();
    assert_compile_error(&env, "let x = 1;\nlet y = (x + ;\n", "Unexpected ';'", "wf.rhai:2:14", "2 | let y = (x + ;");
}

#[test]
fn an_unknown_function_is_a_compile_error_before_any_agent_opens() {
    let env = Env::new();
    let script =
        "fn run(args) {\n    let a = ctx.agents.open(#{ key: \"a\" });\n    a.ask(\"x\");\n    frobnicate(a)\n}\n";
    assert_compile_error(&env, script, "unknown function `frobnicate`", "wf.rhai:4:5", "4 |     frobnicate(a)");
}

#[test]
fn a_misspelt_function_gets_a_suggestion() {
    let env = Env::new();
    let out = env.run("let n = parse_itn(\"5\");\nn\n", &[]);
    out.expect_code(2).stderr_has("unknown function `parse_itn` (did you mean `parse_int`?)").stderr_has("wf.rhai:1:9");
}

#[test]
fn a_misspelt_method_on_an_agent_is_a_compile_error() {
    let env = Env::new();
    let script = "let a = ctx.agents.open(#{ key: \"a\" });\na.asks(\"x\")\n";
    assert_compile_error(&env, script, "unknown function `asks`", "wf.rhai:2:3", "2 | a.asks(\"x\")");
}

#[test]
fn a_typo_in_a_variable_is_a_compile_error() {
    let env = Env::new();
    assert_compile_error(
        &env,
        "let count = 1;\nlet y = cuont + 1;\ny\n",
        "Undefined variable: cuont",
        "wf.rhai:2:9",
        "2 | let y = cuont + 1;",
    );
    let env = Env::new();
    let script = "fn helper(x) {\n    x + undefined_thing\n}\nfn run(args) { helper(1) }\n";
    assert_compile_error(
        &env,
        script,
        "Undefined variable: undefined_thing",
        "wf.rhai:2:9",
        "2 |     x + undefined_thing",
    );
}

#[test]
fn a_missing_script_is_a_usage_error() {
    let env = Env::new();
    env.awf(&["script", "run", "nowhere.rhai"]).expect_code(2).stderr_has("cannot read script nowhere.rhai");
    assert!(env.run_dirs().is_empty());
}

const WITH_ARGS: &str = r#"
export const META = #{
    name: "typed",
    args: #{ type: "object",
             properties: #{ n: #{ type: "integer" }, names: #{ type: "array", items: #{ type: "string" } } },
             required: ["n"] },
};
fn run(args) { ctx.agents.open(#{ key: "a" }).ask("x"); args.n }
"#;

#[test]
fn args_not_matching_meta_are_refused_with_json_pointers() {
    let env = Env::new();
    let out = env.run(WITH_ARGS, &["--args", r#"{"names": ["ok", 7]}"#]);
    out.expect_code(2).stderr_has("the arguments do not match META.args of wf.rhai");
    out.stderr_has("at /: \"n\" is a required property").stderr_has("at /names/1: 7 is not of type \"string\"");
    assert!(env.run_dirs().is_empty(), "refused before anything runs");

    let out = env.run(WITH_ARGS, &["--arg", "n=five"]);
    out.expect_code(2).stderr_has("at /n: \"five\" is not of type \"integer\"");
    assert!(env.run_dirs().is_empty());

    let out = env.run(WITH_ARGS, &["--arg", "n=5"]);
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "5");
}

#[test]
fn meta_args_that_is_not_a_schema_is_refused() {
    let env = Env::new();
    let out = env.run("export const META = #{ name: \"m\", args: #{ type: \"nonsense\" } };\n1\n", &[]);
    out.expect_code(2).stderr_has("META.args is not a valid JSON Schema").stderr_has("/type");
    assert!(env.run_dirs().is_empty());
}

#[test]
fn an_invalid_schema_in_a_turn_is_refused_before_spending() {
    let env = Env::new();
    let script = "let a = ctx.agents.open(#{ key: \"a\" });\na.ask(\"x\", #{ type: \"strang\" })\n";
    let out = env.run(script, &[]);
    out.expect_code(1).stderr_has("not a valid JSON Schema").stderr_has("/type").stderr_has("wf.rhai:2:");
    assert!(env.turns().is_empty(), "nothing may be spent");
    assert!(env.events_of("op-started").is_empty());
    assert_eq!(env.result()["accounting"]["totals"]["operations"], 0);
}

#[test]
fn a_bad_schema_given_to_ask_names_ask() {
    let env = Env::new();
    let out = env.run("let a = ctx.agents.open(#{ key: \"a\" });\na.ask(\"x\", #{ type: 5 })\n", &[]);
    out.expect_code(1).stderr_has("a.ask: `schema` is not a valid JSON Schema");
    assert!(!out.stderr.contains("a.run"), "{}", out.stderr);
}

#[test]
fn a_folder_named_awf_toml_is_an_error_naming_it() {
    let env = Env::new();
    std::fs::create_dir(env.path().join("awf.toml")).expect("mkdir awf.toml");
    let out = env.run("1\n", &[]);
    out.expect_code(2).stderr_has("awf.toml is not a file");
    assert!(env.run_dirs().is_empty());
}

#[test]
fn a_folder_given_as_the_script_is_named() {
    let env = Env::new();
    env.awf(&["script", "run", "."]).expect_code(2).stderr_has("cannot read script .: is a directory");
    std::fs::create_dir(env.path().join("sub")).expect("mkdir");
    env.awf(&["script", "check", "sub"]).expect_code(2).stderr_has("cannot read script sub: is a directory");
}

#[test]
fn an_invalid_schema_in_a_stage_is_refused_before_spending() {
    let env = Env::new();
    let script =
        "ctx.stage(\"s\", #{ result: #{ minimum: \"zero\" } }, || ctx.agents.open(#{ key: \"a\" }).ask(\"x\"))\n";
    let out = env.run(script, &[]);
    out.expect_code(1).stderr_has("not a valid JSON Schema").stderr_has("/minimum");
    assert!(env.turns().is_empty());
}

#[test]
fn a_tight_loop_is_stopped_by_the_deadline() {
    let env = Env::new();
    let started = Instant::now();
    let out = env.run("let i = 0;\nloop { i += 1; }\n", &["--deadline", "1s"]);
    assert!(started.elapsed() < Duration::from_secs(8), "took {:?}", started.elapsed());
    out.expect_code(4).stderr_has("run deadline exceeded");
    let result = env.result();
    assert_eq!(result["status"], "cancelled");
    assert_eq!(result["error"], "run deadline exceeded");
}

#[test]
fn a_doubling_string_is_stopped_with_an_error_not_a_crash() {
    let env = Env::new();
    let out = env.run("let s = \"x\";\nloop { s += s; }\n", &[]);
    out.expect_code(1).stderr_has("error: Data held by `s` (memory limit: 64 MiB) too large").stderr_has("wf.rhai:2:");
    assert_eq!(env.result()["status"], "failed");
}

#[test]
fn a_doubling_array_is_stopped_with_an_error_not_a_crash() {
    let env = Env::new();
    let out = env.run("let a = [1];\nloop { a += a; }\n", &[]);
    out.expect_code(1).stderr_has("too large").stderr_has("wf.rhai:2:");
    assert_eq!(env.result()["status"], "failed");
}

#[test]
fn runaway_recursion_is_stopped_with_an_error() {
    let env = Env::new();
    let out = env.run("fn f(n) { f(n + 1) }\nf(0)\n", &[]);
    out.expect_code(1).stderr_has("wf.rhai:");
    assert_eq!(env.result()["status"], "failed");
}

#[test]
fn the_deadline_cancels_a_run_whose_agent_hangs() {
    let env = Env::new();
    env.with_responder(r#"fn respond(turn) { #{ hang: true } }"#);
    let started = Instant::now();
    let out = env.run("let a = ctx.agents.open(#{ key: \"stuck\" });\na.ask(\"x\")\n", &["--deadline", "400ms"]);
    assert!(started.elapsed() < Duration::from_secs(8), "took {:?}", started.elapsed());
    out.expect_code(4).stderr_has("awf: run cancelled: run deadline exceeded");
    let result = env.result();
    assert_eq!(result["status"], "cancelled");
    assert_eq!(env.run_json()["attempts"][0]["status"], "cancelled");
    let t = env.turn("stuck#1");
    assert!(t["outcome"] == "timed-out" || t["outcome"] == "cancelled", "{t}");
    assert_eq!(t["reason"], "run deadline exceeded");
}

#[test]
fn the_deadline_cannot_be_caught_by_the_script() {
    let env = Env::new();
    env.with_responder(r#"fn respond(turn) { #{ hang: true } }"#);
    let script = r#"
        let caught = false;
        try { ctx.agents.open(#{ key: "stuck" }).ask("x"); } catch (e) { caught = true; }
        print(`caught=${caught}`);
        "finished anyway"
    "#;
    let out = env.run(script, &["--deadline", "300ms"]);
    out.expect_code(4);
    assert!(!out.stderr.contains("caught="), "{}", out.stderr);
    assert_eq!(out.stdout, "");
}

#[test]
fn a_token_budget_once_reached_fails_later_operations() {
    let env = Env::new();
    let script = r#"
        let a = ctx.agents.open(#{ key: "a" });
        let b = ctx.agents.open(#{ key: "b" });
        [a.run(#{ prompt: "first" }), a.run(#{ prompt: "second" }), b.run(#{ prompt: "third" })]
    "#;
    let out = env.run(script, &["--budget-tokens", "10"]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v[0]["kind"], "answered");
    for o in [&v[1], &v[2]] {
        assert_eq!(o["kind"], "failed", "{v}");
        assert!(o["reason"].as_str().expect("reason").starts_with("budget exhausted"), "{v}");
        assert!(o["reason"].as_str().expect("reason").contains("--budget-tokens"), "{v}");
    }
    // The log says so once.
    assert_eq!(out.stderr.matches("budget exhausted").count(), 1, "{}", out.stderr);
    assert_eq!(env.events_of("budget-exhausted").len(), 1);
    assert_eq!(env.turn("b#1")["outcome"], "failed");
    assert_eq!(env.turns().len(), 3);
}

#[test]
fn a_usd_budget_once_reached_fails_later_operations() {
    let env = Env::new();
    env.with_responder(
        r#"fn respond(turn) { #{ answer: "ok", usage: #{ input_tokens: 10, output_tokens: 10, cost_usd: 0.05 } } }"#,
    );
    let script = r#"
        let a = ctx.agents.open(#{ key: "a" });
        let kinds = [];
        for i in 0..4 { kinds.push(ctx.agents.open(#{ key: `k${i}` }).run(#{ prompt: "x" }).kind); }
        kinds
    "#;
    let out = env.run(script, &["--budget-usd", "0.1"]);
    out.expect_code(0);
    assert_eq!(out.json(), serde_json::json!(["answered", "answered", "failed", "failed"]));
    let t = env.turn("k2#1");
    assert!(t["reason"].as_str().expect("reason").contains("--budget-usd"), "{t}");
    let result = env.result();
    assert!((result["accounting"]["totals"]["cost_usd"].as_f64().expect("usd") - 0.1).abs() < 1e-9);
}

#[test]
fn an_unknown_runtime_alias_names_the_alias_and_where_it_was_looked_for() {
    let env = Env::new();
    let out = env.run("ctx.agents.open(#{ key: \"a\", runtime: \"smart\" })\n", &[]);
    out.expect_code(2)
        .stderr_has("unknown runtime alias `smart`")
        .stderr_has("built-in defaults")
        .stderr_has("known: fake");

    let env = Env::new();
    env.write("awf.toml", "[runtimes.quick]\nharness = \"fake\"\n");
    let out = env.run("ctx.agents.open(#{ key: \"a\", runtime: \"smart\" })\n", &[]);
    out.expect_code(2).stderr_has("unknown runtime alias `smart`").stderr_has("awf.toml").stderr_has("quick");
}

#[test]
fn an_unknown_default_runtime_is_refused_before_the_run() {
    let env = Env::new();
    let out = env.run("1", &["--runtime", "nope"]);
    out.expect_code(2).stderr_has("unknown runtime alias `nope`");
    assert!(env.run_dirs().is_empty());

    let env = Env::new();
    env.write("awf.toml", "default_runtime = \"missing\"\n");
    let out = env.run("1", &[]);
    out.expect_code(2).stderr_has("unknown runtime alias `missing`").stderr_has("awf.toml");
    assert!(env.run_dirs().is_empty());
}

#[test]
fn awf_runtime_overrides_the_default_runtime() {
    let env = Env::new();
    env.write("awf.toml", "[runtimes.alt]\nharness = \"fake\"\nmodel = \"alt-model\"\n");
    let mut cmd = common::command(env.path(), &["script", "run", "wf.rhai"]);
    env.write("wf.rhai", "ctx.agents.open(#{ key: \"a\" }).model");
    cmd.env("AWF_RUNTIME", "alt");
    let out = common::wait_with_timeout(
        cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().expect("spawn"),
    );
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "alt-model");
}

#[test]
fn a_bad_config_key_names_the_file() {
    let env = Env::new();
    env.write("awf.toml", "[limits]\nmax_concurency = 3\n");
    let out = env.run("1", &[]);
    out.expect_code(2).stderr_has("awf.toml").stderr_has("max_concurency");
    assert!(env.run_dirs().is_empty());
}

#[test]
fn a_bad_config_value_names_the_field_and_file() {
    let env = Env::new();
    env.write("awf.toml", "[limits]\ndeadline = \"whenever\"\n");
    let out = env.run("1", &[]);
    out.expect_code(2).stderr_has("limits.deadline").stderr_has("awf.toml").stderr_has("whenever");
}

#[test]
fn the_user_config_is_used_when_there_is_no_awf_toml() {
    let env = Env::new();
    env.write(
        ".xdg-config/awf/config.toml",
        "default_runtime = \"mine\"\n[runtimes.mine]\nharness = \"fake\"\nmodel = \"user-model\"\n",
    );
    let out = env.run("ctx.agents.open(#{ key: \"a\" }).model", &[]);
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "user-model");
    env.write(".xdg-config/awf/config.toml", "bogus = 1\n");
    env.run("1", &[]).expect_code(2).stderr_has("config.toml").stderr_has("bogus");
}

#[test]
fn imports_outside_the_allowed_folders_are_refused() {
    let env = Env::new();
    env.write("lib/helpers.rhai", "fn twice(x) { x * 2 }\n");
    env.write("scripts/shared.rhai", "fn thrice(x) { x * 3 }\n");
    let out = env.run("import \"lib/helpers\" as h;\nimport \"shared\" as s;\nh::twice(s::thrice(1))\n", &[]);
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "6");

    let env = Env::new();
    let out = env.run("import \"../escape\" as e;\n1\n", &[]);
    assert_eq!(out.code, Some(2), "{out:?}");
    out.stderr_has("not allowed");
    let out = env.run("import \"/etc/passwd\" as e;\n1\n", &[]);
    out.expect_code(2).stderr_has("not allowed");
    let out = env.run("import \"nowhere\" as e;\n1\n", &[]);
    out.expect_code(2).stderr_has("module \"nowhere\" not found");
    assert!(env.run_dirs().is_empty());
}

#[test]
fn an_error_inside_a_closure_shows_the_chain_of_calls() {
    let env = Env::new();
    let script =
        "fn work(items) {\n    items.map(|x| x.missing_field.len())\n}\nfn run(args) {\n    work([#{ a: 1 }])\n}\n";
    let out = env.run(script, &[]);
    out.expect_code(1).stderr_has("in call to fn work").stderr_has("wf.rhai:5:").stderr_has("wf.rhai:2:");
    let result = env.result();
    assert_eq!(result["status"], "failed");
    assert!(result["error"].is_string());
    assert_ne!(result["error"], Value::Null);
}
