//! `ctx.parallel` and `ctx.parallel_settled`: order, concurrency, labels, nesting, errors,
//! deadlines, and agent handles shared between branches.

use crate::common;

use common::Env;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// A responder: `slow-N` answers its own key after N ms, `broken` fails after 300 ms, `stuck*` hangs,
/// `shared` answers after 200 ms; everyone else gets the default answer.
const RESPONDER: &str = r#"
fn respond(turn) {
    if turn.agent.starts_with("slow-") {
        let ms = parse_int(turn.agent.sub_string(5));
        return #{ answer: turn.agent, delay_ms: ms };
    }
    if turn.agent == "broken" { return #{ fail: "model crashed", delay_ms: 300 }; }
    if turn.agent.starts_with("stuck") { return #{ hang: true }; }
    if turn.agent == "shared" { return #{ answer: turn.prompt, delay_ms: 200 }; }
    ()
}
"#;

fn env() -> Env {
    let env = Env::new();
    env.with_responder(RESPONDER);
    env
}

#[test]
fn results_come_in_input_order_whatever_order_branches_finish_in() {
    let env = env();
    let script = r#"
        ctx.parallel([300, 150, 0], |ms, i| {
            let a = ctx.agents.open(#{ key: `slow-${ms}` });
            `${i}:${a.ask("go")}`
        })
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    assert_eq!(out.json(), json!(["0:slow-300", "1:slow-150", "2:slow-0"]));
    // They really ran at once and finished in reverse order.
    let settled: Vec<Value> = env.turns().iter().map(|t| t["agent"].clone()).collect();
    assert_eq!(settled, vec![json!("slow-0"), json!("slow-150"), json!("slow-300")]);
}

#[test]
fn a_one_parameter_closure_gets_the_item_only() {
    let env = env();
    let out = env.run(r#"ctx.parallel(["a", "b", "c"], |x| x + "!")"#, &[]);
    out.expect_code(0);
    assert_eq!(out.json(), json!(["a!", "b!", "c!"]));
}

#[test]
fn ranges_and_empty_arrays_are_items_too() {
    let env = env();
    let out =
        env.run("[ctx.parallel(0..3, |x, i| x * 10 + i), ctx.parallel(1..=2, |x| x), ctx.parallel([], |x| x)]", &[]);
    out.expect_code(0);
    assert_eq!(out.json(), json!([[0, 11, 22], [1, 2], []]));
}

#[test]
fn concurrency_one_runs_branches_one_after_another() {
    let env = env();
    let script = r#"
        ctx.parallel([1, 2, 3], |n, i| {
            let a = ctx.agents.open(#{ key: `slow-${20 + i}` });
            a.ask("go")
        }, #{ concurrency: 1, label: "one at a time" })
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    assert_eq!(out.json(), json!(["slow-20", "slow-21", "slow-22"]));
    let started = env.events_of("parallel-started");
    assert_eq!(started[0]["data"]["concurrency"], 1);
    assert_eq!(started[0]["data"]["label"], "one at a time");
    assert_eq!(started[0]["data"]["items"], 3);
    // No operation starts before the previous one settled.
    let seq: Vec<String> = env
        .events()
        .iter()
        .filter(|e| e["type"] == "op-started" || e["type"] == "op-settled")
        .map(|e| format!("{} {}", e["type"].as_str().unwrap_or(""), e["data"]["op_id"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(
        seq,
        vec![
            "op-started slow-20#1",
            "op-settled slow-20#1",
            "op-started slow-21#1",
            "op-settled slow-21#1",
            "op-started slow-22#1",
            "op-settled slow-22#1"
        ]
    );
}

#[test]
fn concurrency_is_capped_by_the_run_limit() {
    let env = env();
    let out = env.run("ctx.parallel(0..10, |x| x).len()", &["--max-concurrency", "3"]);
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "10");
    assert_eq!(env.events_of("parallel-started")[0]["data"]["concurrency"], 3);
}

#[test]
fn labels_and_nesting_are_recorded() {
    let env = env();
    let script = r#"
        ctx.parallel([1, 2], |x, i| {
            ctx.parallel([10, 20, 30], |y| x * y, #{ label: `inner ${x}` })
        }, #{ label: "outer" })
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    assert_eq!(out.json(), json!([[10, 20, 30], [20, 40, 60]]));
    let mut labels: Vec<String> = env
        .events_of("parallel-finished")
        .iter()
        .map(|e| e["data"]["label"].as_str().expect("label").to_string())
        .collect();
    labels.sort();
    assert_eq!(labels, vec!["inner 1", "inner 2", "outer"]);
}

#[test]
fn bad_options_are_refused() {
    let env = env();
    let script = r#"
        let errors = [];
        try { ctx.parallel([1], |x| x, #{ concurrency: 0 }); } catch (e) { errors.push(e); }
        try { ctx.parallel([1], |x| x, #{ width: 2 }); } catch (e) { errors.push(e); }
        try { ctx.parallel([1], |x| x, #{ timeout_ms: 5, deadline: 5 }); } catch (e) { errors.push(e); }
        errors
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let v = out.json();
    assert!(v[0].as_str().expect("e0").contains("concurrency"), "{v}");
    assert!(v[1].as_str().expect("e1").contains("width"), "{v}");
    assert!(v[2].as_str().expect("e2").contains("not both"), "{v}");
}

#[test]
fn the_first_error_cancels_the_siblings_turns_and_is_rethrown() {
    let env = env();
    let script = r#"
        fn run(args) {
            ctx.parallel(["broken", "stuck"], |key| {
                let a = ctx.agents.open(#{ key: key });
                a.ask("work")
            })
        }
    "#;
    let started = Instant::now();
    let out = env.run(script, &[]);
    assert!(started.elapsed() < Duration::from_secs(10), "the hanging sibling was not cancelled");
    out.expect_code(1).stderr_has("agent broken did not answer (failed): model crashed");
    assert_eq!(env.turn("broken#1")["outcome"], "failed");
    let stuck = env.turn("stuck#1");
    assert_eq!(stuck["outcome"], "cancelled", "{stuck}");
    assert_eq!(env.result()["status"], "failed");
}

#[test]
fn the_rethrown_error_is_catchable_with_its_map() {
    let env = env();
    let script = r#"
        let caught = ();
        try {
            ctx.parallel(["broken", "stuck-2"], |key| ctx.agents.open(#{ key: key }).ask("work"));
        } catch (e) { caught = e; }
        caught
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let e = out.json();
    assert_eq!(e["kind"], "failed");
    assert_eq!(e["reason"], "model crashed");
    assert_eq!(e["op_id"], "broken#1");
}

#[test]
fn branches_not_yet_started_do_not_start_after_an_error() {
    let env = env();
    let script = r#"
        let caught = ();
        try {
            ctx.parallel([0, 1, 2, 3], |x| { if x == 0 { throw "first fails"; } ctx.agents.open(#{ key: `k${x}` }).ask("x") },
                         #{ concurrency: 1 });
        } catch (e) { caught = e; }
        caught
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "first fails");
    assert!(env.turns().is_empty(), "{:#?}", env.turns());
}

#[test]
fn a_timeout_throws_parallel_deadline_exceeded_and_times_out_the_turns() {
    let env = env();
    let script = r#"
        let caught = ();
        try {
            ctx.parallel([1, 2], |x| ctx.agents.open(#{ key: `stuck-${x}` }).ask("x"), #{ timeout_ms: 200 });
        } catch (e) { caught = e; }
        caught
    "#;
    let started = Instant::now();
    let out = env.run(script, &[]);
    assert!(started.elapsed() < Duration::from_secs(10));
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "parallel deadline exceeded");
    // Both turns end at the deadline. The first branch to see it may cancel its sibling before the
    // sibling sees the deadline itself, so a turn settles `timed-out` or `cancelled`, never answered.
    let turns: Vec<_> = ["stuck-1#1", "stuck-2#1"].iter().map(|op| env.turn(op)).collect();
    assert!(turns.iter().all(|t| t["outcome"] == "timed-out" || t["outcome"] == "cancelled"), "{turns:#?}");
    assert!(
        turns.iter().any(|t| t["outcome"] == "timed-out" && t["reason"] == "parallel deadline exceeded"),
        "{turns:#?}"
    );
}

#[test]
fn an_uncaught_parallel_deadline_fails_the_run_and_names_the_label() {
    let env = env();
    let out = env.run(
        "ctx.parallel([1], |x| ctx.agents.open(#{ key: \"stuck\" }).ask(\"x\"), #{ timeout_ms: 100, label: \"waiters\" })",
        &[],
    );
    out.expect_code(1).stderr_has("parallel deadline exceeded (waiters)");
    assert_eq!(env.result()["status"], "failed");
}

#[test]
fn a_deadline_option_in_unix_ms_works_like_timeout_ms() {
    let env = env();
    // With --deadline 60s, ctx.deadline is now + 60 s in unix ms: 150 ms from now is 59,850 ms before it.
    let script = r#"
        let caught = ();
        let at = ctx.deadline - 59850;
        try { ctx.parallel([1], |x| ctx.agents.open(#{ key: "stuck" }).ask("x"), #{ deadline: at }); } catch (e) { caught = e; }
        caught
    "#;
    let started = Instant::now();
    let out = env.run(script, &["--deadline", "60s"]);
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "parallel deadline exceeded");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn parallel_settled_never_throws_for_a_branch() {
    let env = env();
    let script = r#"
        ctx.parallel_settled(["ok", "throws", "broken", "fine"], |what, i| {
            if what == "throws" { throw "branch threw"; }
            if what == "broken" { return ctx.agents.open(#{ key: "broken" }).ask("x"); }
            `${what}-${i}`
        })
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v[0], json!({ "ok": true, "value": "ok-0", "error": null }));
    assert_eq!(v[1], json!({ "ok": false, "value": null, "error": "branch threw" }));
    assert_eq!(v[2]["ok"], false);
    assert_eq!(v[2]["value"], Value::Null);
    assert!(
        v[2]["error"].as_str().expect("error").contains("agent broken did not answer (failed): model crashed"),
        "{v}"
    );
    assert_eq!(v[3], json!({ "ok": true, "value": "fine-3", "error": null }));
}

#[test]
fn parallel_settled_reports_a_deadline_per_branch() {
    let env = env();
    let script = r#"
        ctx.parallel_settled([0, 1], |x| { if x == 1 { ctx.agents.open(#{ key: "stuck" }).ask("x"); } x }, #{ timeout_ms: 150 })
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v[0], json!({ "ok": true, "value": 0, "error": null }));
    assert_eq!(v[1]["ok"], false);
    assert!(v[1]["error"].as_str().expect("error").contains("parallel deadline exceeded"), "{v}");
}

#[test]
fn a_captured_agent_handle_shared_by_branches_queues_its_turns() {
    let env = env();
    let script = r#"
        fn run(args) {
            let a = ctx.agents.open(#{ key: "shared" });
            ctx.parallel([1, 2, 3], |x| a.ask(`q${x}`))
        }
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    assert_eq!(out.json(), json!(["q1", "q2", "q3"]));
    let turns = env.turns();
    assert!(turns.iter().all(|t| t["outcome"] == "answered"), "{turns:?}");
    // Each turn takes 200 ms and they queue on the one agent.
    let longest = turns.iter().map(|t| t["duration_ms"].as_u64().expect("duration")).max().expect("max");
    assert!(longest >= 550, "turns of one agent overlapped (longest {longest} ms)");
}

#[test]
fn a_shared_handle_in_parallel_settled_answers_every_branch() {
    let env = env();
    let script = r#"
        let a = ctx.agents.open(#{ key: "shared" });
        ctx.parallel_settled([1, 2], |x| a.ask(`q${x}`))
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v[0], json!({ "ok": true, "value": "q1", "error": null }), "{v}");
    assert_eq!(v[1], json!({ "ok": true, "value": "q2", "error": null }), "{v}");
}

/// Regression: rhai takes a captured variable's write lock to read it, so a branch holding it
/// (here for a whole turn, on a loaded machine for a paused thread) made the others fail with a
/// data race though none of them changed it.
#[test]
fn branches_read_a_captured_variable_while_another_branch_holds_it() {
    let env = env();
    let script = r#"
        let names = ["slow-400"];
        let label = "read";
        ctx.parallel([0, 1], |x| {
            if x == 0 { names.map(|n| ctx.agents.open(#{ key: n }).ask("go")) }
            else { ctx.agents.open(#{ key: "slow-100" }).ask("go"); `${label} ${names.len()}` }
        })
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    assert_eq!(out.json(), json!([["slow-400"], "read 1"]));
}

#[test]
fn what_branches_change_in_captured_variables_is_seen_after_the_call() {
    let env = env();
    let script = r#"
        let seen = [];
        let count = 0;
        let totals = #{ sum: 0 };
        ctx.parallel([1, 2, 3], |x| {
            seen.push(x);
            count += 1;
            totals.sum += x;
            let later = || seen.push(x * 10);
            later.call();
        }, #{ concurrency: 1 });
        #{ seen: seen, count: count, sum: totals.sum }
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    assert_eq!(out.json(), json!({ "seen": [1, 10, 2, 20, 3, 30], "count": 3, "sum": 6 }));
}

#[test]
fn a_branch_changing_a_captured_variable_another_holds_gets_advice() {
    let env = env();
    let script = r#"
        let names = ["slow-400"];
        ctx.parallel([0, 1], |x| {
            if x == 0 { names.retain(|n| { ctx.agents.open(#{ key: n }).ask("go"); true }); 0 }
            else { ctx.agents.open(#{ key: "slow-100" }).ask("go"); names.len() }
        })
    "#;
    let out = env.run(script, &[]);
    out.expect_code(1);
    out.stderr_has("a branch changes it").stderr_has("combine the results after ctx.parallel");
    assert!(!out.stderr.contains("Data race"), "{}", out.stderr);
}

#[test]
fn fetching_the_agent_in_each_branch_queues_its_turns() {
    let env = env();
    let script = r#"
        ctx.agents.open(#{ key: "shared" });
        ctx.parallel([1, 2, 3], |x| ctx.agents.get("shared").ask(`q${x}`))
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    assert_eq!(out.json(), json!(["q1", "q2", "q3"]));
    let turns = env.turns();
    assert_eq!(turns.len(), 3);
    assert!(turns.iter().all(|t| t["outcome"] == "answered"));
    let mut ids: Vec<String> = turns.iter().map(|t| t["op_id"].as_str().expect("id").to_string()).collect();
    ids.sort();
    assert_eq!(ids, vec!["shared#1", "shared#2", "shared#3"]);
    // Each turn takes 200 ms and they queue: the last to settle waited for the other two.
    let longest = turns.iter().map(|t| t["duration_ms"].as_u64().expect("duration")).max().expect("max");
    assert!(longest >= 550, "turns of one agent overlapped (longest {longest} ms)");
}

#[test]
fn opening_the_agent_inside_each_branch_works() {
    let env = env();
    let script = r#"
        ctx.parallel([1, 2], |x| ctx.agents.open(#{ key: "shared" }).ask(`q${x}`))
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    assert_eq!(out.json(), json!(["q1", "q2"]));
}

/// Regression: rhai takes a write lock to read `global::X` and, under `sync`, panics after five
/// tries 10 ms apart; branches reading a large constant at once lost branches (and the run) to it.
#[test]
fn branches_reading_a_large_constant_at_once_all_finish() {
    let env = env();
    let big: Vec<String> = (0..20_000).map(|i| format!("\"item number {i}\"")).collect();
    let script = format!(
        r#"
        const BIG = [{}];
        fn run(args) {{
            let got = ctx.parallel(0..100, |i| {{
                let n = 0;
                for k in 0..5 {{ n += global::BIG.len(); }}
                n
            }}, #{{ concurrency: 16 }});
            got.filter(|n| n != 100000).len()
        }}
        "#,
        big.join(",")
    );
    let out = env.run(&script, &[]);
    out.expect_code(0);
    assert_eq!(out.json(), json!(0), "every branch read the whole constant 5 times");
}
