//! The whole run's spend (issue 17, findings 2, 3 and 8): accounts that sum every attempt across a
//! kill and a resume, a finished run's accounts never erased, budgets kept in run.json and counted
//! over attempts, budgets that hold with operations in flight, and costs shown as micro-dollars.

use crate::common;

use common::{agent_fixture, read_jsonl, signal, wait_until, Env, Running};
use serde_json::{json, Value};

/// Every turn costs $0.01 (15 tokens); a prompt "hang" hangs.
const PAID: &str = r#"fn respond(turn) {
    if turn.prompt == "hang" { return #{ hang: true }; }
    #{ answer: "ok", usage: #{ input_tokens: 10, output_tokens: 5, cost_usd: 0.01 } }
}"#;

/// 14 turns of one agent, one after another; in attempt 1 the 11th hangs (`hang: true` in
/// args), so that the run can be killed after 10.
const FOURTEEN: &str = r#"
fn run(args) {
    let a = ctx.agents.open(#{ key: "a" });
    for i in 1..=14 {
        let hang = i == 11 && ctx.attempt == 1 && args.hang == true;
        a.ask(if hang { "hang" } else { `step ${i}` });
    }
    #{ spent: ctx.spent(), attempt: ctx.attempt }
}
"#;

/// The answered lines of turns.jsonl so far (a line being written is not counted).
fn answered(env: &Env) -> usize {
    let path = env.run_dir().join("turns.jsonl");
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().filter(|l| l.contains("\"outcome\":\"answered\"")).count()
}

/// The first number in `text` with more than six digits after its point, if any.
fn long_fraction(text: &str) -> Option<String> {
    let b = text.as_bytes();
    (0..b.len()).find_map(|i| {
        let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        (b[i] == b'.' && i > 0 && b[i - 1].is_ascii_digit() && digits > 6)
            .then(|| text[i - 1..i + 1 + digits].to_string())
    })
}

fn usd(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn the_accounts_sum_every_attempt_across_a_kill_and_a_resume() {
    let env = Env::new();
    env.with_responder(PAID);
    env.write("wf.rhai", FOURTEEN);
    let running = Running::start(env.path(), &["script", "run", "wf.rhai", "--arg", "hang=true"]);
    wait_until("the run folder", || env.run_dirs().len() == 1);
    wait_until("ten answered turns", || answered(&env) == 10);
    signal(running.pid, "-KILL");
    let _ = running.finish();
    let id = env.run_id();

    let out = env.awf(&["runs", "resume", &id]);
    out.expect_code(0);
    let v = out.json();
    // ctx.spent() is the run's, not the attempt's.
    assert_eq!(v["spent"], json!({ "tokens": 14 * 15, "cost_usd": 0.14 }), "{v}");
    let result = env.result();
    let acc = &result["accounting"];
    assert_eq!(acc["totals"]["operations"], 14, "{acc}");
    assert_eq!(acc["totals"]["cost_usd"], 0.14, "{acc}");
    assert_eq!(acc["by_attempt"]["1"]["operations"], 10, "{acc}");
    assert_eq!(acc["by_attempt"]["1"]["cost_usd"], 0.1, "{acc}");
    assert_eq!(acc["by_attempt"]["2"]["operations"], 4, "{acc}");
    assert_eq!(acc["by_attempt"]["2"]["cost_usd"], 0.04, "{acc}");
    assert_eq!(acc["by_agent"]["a"]["operations"], 14, "{acc}");
    assert_eq!(acc["by_model"]["fake"]["operations"], 14, "{acc}");
    assert_eq!(acc["by_stage"]["(none)"]["operations"], 14, "{acc}");
    // Every appended record says which attempt wrote it.
    let turns = env.turns();
    let attempts: Vec<u64> = turns.iter().map(|t| t["attempt"].as_u64().expect("attempt")).collect();
    assert_eq!(attempts, [vec![1; 10], vec![2; 4]].concat(), "{turns:#?}");
    let journal = env.jsonl("journal");
    assert!(journal.iter().all(|j| j["attempt"] == 1 || j["attempt"] == 2), "{journal:#?}");
    assert!(journal.iter().any(|j| j["attempt"] == 2 && j["op_id"] == "a#14"), "{journal:#?}");
    env.awf(&["runs", "show", &id])
        .expect_code(0)
        .stdout_has("spend (all attempts): 14 operations, 210 tokens, $0.1400")
        .stdout_has("attempt 1 spent: 10 operations, 150 tokens, $0.1000")
        .stdout_has("attempt 2 spent: 4 operations, 60 tokens, $0.0400");

    // A finished run is not started over by accident, and its accounts stay as they are.
    let before = std::fs::read_to_string(env.run_dir().join("result.json")).expect("result.json");
    env.awf(&["runs", "resume", &id]).expect_code(2).stderr_has("already succeeded").stderr_has("--again");
    let after = std::fs::read_to_string(env.run_dir().join("result.json")).expect("result.json");
    assert_eq!(before, after, "a refused resume leaves result.json as it was");
    assert_eq!(env.run_json()["attempts"].as_array().map(Vec::len), Some(2));
    // --again starts a new attempt on purpose: every turn comes from the journal, nothing is paid.
    let out = env.awf(&["runs", "resume", &id, "--again"]);
    out.expect_code(0);
    assert_eq!(out.json()["spent"]["cost_usd"], 0.14);
    let acc = env.result()["accounting"].clone();
    assert_eq!((acc["totals"]["operations"].clone(), acc["totals"]["cost_usd"].clone()), (json!(14), json!(0.14)));
    assert_eq!(acc["by_attempt"]["3"]["operations"], 0, "{acc}");
    assert_eq!(env.events_of("op-replayed").iter().filter(|e| e["attempt"] == 3).count(), 14);
}

/// The 14 paid turns, run until the budget stops them (the script fails then).
fn budgeted(env: &Env, flags: &[&str]) -> String {
    env.with_responder(PAID);
    env.write("wf.rhai", FOURTEEN);
    let mut args = vec!["script", "run", "wf.rhai"];
    args.extend_from_slice(flags);
    env.awf(&args).expect_code(1).stderr_has("budget exhausted");
    env.run_id()
}

#[test]
fn a_budget_is_kept_in_run_json_and_counts_every_attempt() {
    let env = Env::new();
    let id = budgeted(&env, &["--budget-usd", "0.05"]);
    assert_eq!(env.run_json()["limits"]["budget_usd"], 0.05);
    assert_eq!(usd(&env.result()["accounting"]["totals"]["cost_usd"]), 0.05);
    // Two resumes without the flag: the kept budget applies, and it counts what attempt 1 spent.
    for attempt in [2, 3] {
        let out = env.awf(&["runs", "resume", &id]);
        out.expect_code(1).stderr_has("budget exhausted: spent $0.0500 of $0.0500 (--budget-usd)");
        let acc = env.result()["accounting"].clone();
        assert_eq!(usd(&acc["totals"]["cost_usd"]), 0.05, "attempt {attempt} spent nothing: {acc}");
        assert_eq!(usd(&acc["by_attempt"][attempt.to_string()]["cost_usd"]), 0.0, "{acc}");
    }
    let started = env.events_of("run-started");
    assert_eq!(started.len(), 3);
    assert!(started.iter().all(|e| e["data"]["limits"]["budget_usd"] == 0.05), "{started:#?}");
    // A resume that sets a new budget uses it from then on, still counting the whole run.
    let out = env.awf(&["runs", "resume", &id, "--budget-usd", "0.08"]);
    out.expect_code(1).stderr_has("budget exhausted: spent $0.0800 of $0.0800");
    assert_eq!(usd(&env.result()["accounting"]["totals"]["cost_usd"]), 0.08);
    assert_eq!(usd(&env.result()["accounting"]["by_attempt"]["4"]["cost_usd"]), 0.03);
    assert_eq!(env.run_json()["limits"]["budget_usd"], 0.08);
}

#[test]
fn a_budget_holds_at_concurrency_8_with_command_agents_reporting_their_cost() {
    let env = Env::new();
    // 40 command agents, 8 at a time; each turn reports $0.01 and 120 tokens with `wf usage`.
    let script = format!(
        r#"
        let r = ctx.parallel_settled(0..40, |i| {{
            let a = ctx.agents.open(#{{ key: `p${{i}}`, runtime: #{{ harness: "command", command: ["sh", "{}"] }} }});
            a.ask("Go.", #{{ type: "object" }})
        }}, #{{ concurrency: 8 }});
        r.filter(|x| x.ok).len()
        "#,
        agent_fixture("paid.sh")
    );
    let out = env.run(&script, &["--budget-usd", "0.05", "--max-concurrency", "8"]);
    out.expect_code(0);
    let spent = usd(&env.result()["accounting"]["totals"]["cost_usd"]);
    // The budget is reached, and overshot by at most one operation ($0.01).
    assert!((0.05..=0.06 + 1e-9).contains(&spent), "spent ${spent} of $0.05");
    let paid = env.turns().iter().filter(|t| t["outcome"] == "answered").count();
    assert_eq!(out.json(), json!(paid), "each answered turn was paid");
    assert!(paid <= 6, "{paid} turns paid at $0.01 under a $0.05 budget");
    assert_eq!(env.events_of("budget-exhausted").len(), 1);
    let refused = env.turns().iter().filter(|t| t["reason"].as_str().is_some_and(|r| r.contains("budget"))).count();
    assert_eq!(paid + refused, 40, "every other turn was refused by the budget");
}

#[test]
fn a_token_budget_holds_with_eight_turns_in_flight() {
    let env = Env::new();
    // Each fake turn takes 30 ms and 120 tokens; 8 may run at once.
    env.with_responder(
        r#"fn respond(turn) { #{ answer: #{}, delay_ms: 30, usage: #{ input_tokens: 100, output_tokens: 20 } } }"#,
    );
    let script = r#"
        let r = ctx.parallel_settled(0..40, |i| ctx.agents.open(#{ key: `t${i}` }).ask("Go.", #{ type: "object" }),
                                     #{ concurrency: 8 });
        r.filter(|x| x.ok).len()
    "#;
    env.run(script, &["--budget-tokens", "500", "--max-concurrency", "8"]).expect_code(0);
    let tokens = env.result()["accounting"]["totals"]["tokens"].as_u64().expect("tokens");
    assert!((500..=620).contains(&tokens), "spent {tokens} of 500 tokens");
}

#[test]
fn costs_are_micro_dollars_in_values_and_records() {
    let env = Env::new();
    // 0.1 + 0.2 + 0.7 is 1.0000000000000002 in floating point.
    env.with_responder(
        r#"fn respond(turn) {
            let cost = if turn.n == 1 { 0.1 } else if turn.n == 2 { 0.2 } else { 0.7 };
            #{ answer: "ok", usage: #{ input_tokens: 1, cost_usd: cost } }
        }"#,
    );
    let script = r#"
        let a = ctx.agents.open(#{ key: "a" });
        let outcomes = [a.run(#{ prompt: "one" }), a.run(#{ prompt: "two" })];
        let two = ctx.spent();
        outcomes.push(a.run(#{ prompt: "three" }));
        #{ two: two, spent: ctx.spent(), usage: a.usage, budget: ctx.budget, last: outcomes[2].usage.cost_usd }
    "#;
    let out = env.run(script, &["--budget-usd", "5"]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["two"]["cost_usd"], 0.3, "{v}");
    assert_eq!(v["spent"]["cost_usd"], 1.0, "{v}");
    assert_eq!(v["usage"]["cost_usd"], 1.0, "{v}");
    assert_eq!(v["budget"]["remaining_usd"], 4.0, "{v}");
    assert_eq!(v["last"], 0.7, "{v}");
    let result = env.result();
    assert_eq!(result["accounting"]["totals"]["cost_usd"], 1.0);
    // No record shows a floating-point tail (0.30000000000000004, 1.0000000000000002).
    let dir = env.run_dir();
    for file in ["result.json", "turns.jsonl", "events.jsonl", "journal.jsonl"] {
        let text = std::fs::read_to_string(dir.join(file)).expect("a record");
        assert_eq!(long_fraction(&text), None, "{file} shows a floating-point tail:\n{text}");
    }
    assert_eq!(long_fraction(&out.stdout), None, "{}", out.stdout);
    // Every record field is JSON: the limits are an object, not a debug string.
    let started = read_jsonl(&dir.join("events.jsonl")).into_iter().find(|e| e["type"] == "run-started");
    let limits = started.map(|e| e["data"]["limits"].clone()).unwrap_or_default();
    assert_eq!(limits["budget_usd"], 5.0, "{limits}");
    assert_eq!(limits["max_concurrency"], 16, "{limits}");
}
