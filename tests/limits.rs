//! Bounded inputs: a script file over the size limit is refused before it is compiled, and the
//! data guard that replaces rhai's size limits stops runaway nesting and memory with a clear error
//! at the script's position, while building a long list with `push` stays fast.

use crate::common;

use common::Env;
use std::time::{Duration, Instant};

#[test]
fn a_script_over_the_size_limit_is_refused_before_compiling() {
    let env = Env::new();
    // 4 MiB and a bit of statements: compiling them would take seconds.
    let line = "let x = 1;\n";
    let text = line.repeat((4 << 20) / line.len() + 1);
    let size = text.len();
    env.write("big.rhai", &text);
    let started = Instant::now();
    for cmd in ["run", "check"] {
        let out = env.awf(&["script", cmd, "big.rhai"]);
        out.expect_code(2)
            .stderr_has(&format!("script big.rhai is {size} bytes, over the limit of 4194304 bytes"))
            .stderr_has("--max-script-bytes");
    }
    assert!(started.elapsed() < Duration::from_secs(5), "refused without compiling: {:?}", started.elapsed());
    assert!(env.run_dirs().is_empty());
}

#[test]
fn max_script_bytes_moves_the_limit() {
    let env = Env::new();
    env.write("wf.rhai", "let greeting = \"hello\";\ngreeting\n");
    env.awf(&["script", "run", "wf.rhai", "--max-script-bytes", "10"])
        .expect_code(2)
        .stderr_has("script wf.rhai is 33 bytes, over the limit of 10 bytes");
    env.awf(&["script", "check", "--max-script-bytes", "10", "wf.rhai"]).expect_code(2);
    let out = env.awf(&["script", "run", "wf.rhai", "--max-script-bytes", "100"]);
    out.expect_code(0).stdout_has("hello");
}

#[test]
fn nesting_arrays_without_end_stops_fast_with_a_depth_error() {
    let env = Env::new();
    let started = Instant::now();
    let out = env.run("let x = [];\nfor i in 0..100000 { x = [x]; }\nx.len()\n", &[]);
    out.expect_code(1)
        .stderr_has("Nesting depth of `x` (limit: 256 levels of arrays and maps) too large")
        .stderr_has("--> wf.rhai:2:");
    assert!(started.elapsed() < Duration::from_secs(10), "it stopped fast: {:?}", started.elapsed());
}

#[test]
fn a_string_growing_past_100_mb_stops_with_the_memory_error() {
    let env = Env::new();
    // A 1 MiB piece, appended until the guard stops it; and a string that doubles each turn.
    let out = env.run("let c = \"x\";\nfor i in 0..20 { c += c; }\nlet s = \"\";\nloop { s += c; }\n", &[]);
    out.expect_code(1).stderr_has("Data held by `s` (memory limit: 64 MiB) too large").stderr_has("--> wf.rhai:4:");
    let out = env.run("let s = \"x\";\nloop { s += s; }\n", &[]);
    out.expect_code(1).stderr_has("(memory limit: 64 MiB) too large").stderr_has("--> wf.rhai:2:");
}

#[test]
fn an_array_growing_past_100_mb_stops_with_the_memory_error() {
    let env = Env::new();
    let script = "let c = \"0123456789\";\nfor i in 0..7 { c += c; }\nlet a = [];\nlet i = 0;\nloop { a.push(c + i); i += 1; }\n";
    let out = env.run(script, &[]);
    out.expect_code(1).stderr_has("(memory limit: 64 MiB) too large").stderr_has("--> wf.rhai:5:");
    let script = "let c = \"0123456789\";\nfor i in 0..7 { c += c; }\nlet m = #{};\nlet i = 0;\nloop { m[`k${i}`] = [c + i]; i += 1; }\n";
    let out = env.run(script, &[]);
    out.expect_code(1).stderr_has("(memory limit: 64 MiB) too large").stderr_has("--> wf.rhai:5:");
}

#[test]
fn a_huge_pad_or_blob_is_refused_before_it_is_allocated() {
    let env = Env::new();
    for (script, what) in [
        ("let a = [];\na.pad(1000000000000, 0);\n", "`pad` of 1000000000000 items"),
        ("let s = \"\";\ns.pad(100000000, 'x');\n", "`pad` of 100000000 items"),
        ("let b = blob(100000000000);\n", "`blob` of 100000000000 items"),
    ] {
        env.run(script, &[]).expect_code(1).stderr_has(what).stderr_has("(memory limit: 64 MiB) too large");
    }
    let out = env.run("let a = [];\na.pad(3, 7);\nlet s = \"ab\";\ns.pad(5, \"xy\");\n[a, s, blob(2, 1).len()]\n", &[]);
    out.expect_code(0);
    assert_eq!(out.json(), serde_json::json!([[7, 7, 7], "abxyx", 2]), "the guarded built-ins still work");
}

#[test]
fn a_hundred_thousand_pushes_complete() {
    let env = Env::new();
    let out = env.run("let a = [];\nfor i in 0..100000 { a.push(`item ${i}`); }\n[a.len(), a[99999]]\n", &[]);
    out.expect_code(0);
    assert_eq!(out.json(), serde_json::json!([100000, "item 99999"]));
}

/// The tests below lower the soft limit to 1024 under a hard one that leaves room above it.
fn needs_a_hard_open_file_limit_of_2048() {
    use nix::sys::resource::{getrlimit, Resource};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("the open-file limit");
    assert!(hard >= 2048, "this test needs a hard open-file limit of 2048 or more, it is {hard}");
}

/// A run holding more agents open than a common soft limit on open files (1024) allows: awf
/// raises its soft limit to the hard one, so every agent's socket opens and each agent answers;
/// the agents' processes get the limit awf started with (1024), as from the operator's shell.
#[test]
fn a_run_holds_more_agents_open_than_a_1024_file_limit_allows() {
    needs_a_hard_open_file_limit_of_2048();
    let env = Env::new();
    env.write(
        "wf.rhai",
        r#"
        let spec = #{ runtime: #{ harness: "command", command: ["sh", "-c", "cat >/dev/null; echo 7 | \"$AWF_LAUNCHER\" result \"$AWF_OP\""] } };
        let agents = [];
        for i in 0..1100 { agents.push(ctx.agents.open(spec + #{ key: `a${i}` })); }
        let own = ctx.agents.open(#{ key: "own", runtime: #{ harness: "command", command: ["sh", "-c", "cat >/dev/null; ulimit -n | \"$AWF_LAUNCHER\" result \"$AWF_OP\""] } });
        [agents[0].ask("go", #{ type: "integer" }) + agents[1099].ask("go", #{ type: "integer" }), own.ask("go", #{ type: "integer" })]
        "#,
    );
    let out = common::awf_after(
        env.path(),
        "ulimit -S -n 1024",
        &["script", "run", "wf.rhai", "--max-agents", "1200", "--json"],
    );
    out.expect_code(0);
    assert_eq!(out.json()["value"], serde_json::json!([14, 1024]));
}

/// A detached run is an awf started by awf, which raised its own limit: its agents' processes
/// still get the limit the operator's shell gave the first awf, not the raised one.
#[test]
fn a_detached_runs_agents_get_the_open_file_limit_the_first_awf_started_with() {
    needs_a_hard_open_file_limit_of_2048();
    let env = Env::new();
    env.write(
        "wf.rhai",
        r#"
        let a = ctx.agents.open(#{ key: "u", runtime: #{ harness: "command", command: ["sh", "-c", "cat >/dev/null; ulimit -S -n | \"$AWF_LAUNCHER\" result \"$AWF_OP\""] } });
        a.ask("go", #{ type: "integer" })
        "#,
    );
    let out = common::awf_after(env.path(), "ulimit -S -n 1024", &["script", "run", "wf.rhai", "--detach", "-q"]);
    out.expect_code(0);
    let result = env.runs_root().join(out.stdout.trim()).join("result.json");
    // result.json is put in place by a rename: it exists whole or not at all.
    common::poll("the detached run's result", common::TIMEOUT, || result.exists().then_some(()));
    assert_eq!(common::read_json(&result)["value"], 1024);
}
