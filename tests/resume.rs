//! `awf runs resume`: a new attempt reuses the stages recorded `succeeded`, replays answered
//! operations from the journal without calling a harness, honours `--from-stage`, refuses a
//! changed script unless told, and completes a run killed with SIGKILL.

use crate::common;

use common::{read_jsonl, signal, Env};
use std::io::{BufRead, BufReader};
use std::process::Stdio;

const TWO_STAGES: &str = r#"
fn run(args) {
    let a = ctx.agents.open(#{ key: "a" });
    let first = ctx.stage("gather", #{ result: #{ type: "string" } }, || a.ask("gather facts"));
    let b = ctx.agents.open(#{ key: "b" });
    let second = ctx.stage("judge", #{ result: #{ type: "string" } }, || {
        let x = b.ask("judge one");
        if ctx.attempt == 1 { throw "the judge tripped"; }
        x
    });
    #{ first: first, second: second, attempt: ctx.attempt }
}
"#;

#[test]
fn a_resumed_run_reuses_succeeded_stages_and_replays_answered_operations() {
    let env = Env::new();
    env.run(TWO_STAGES, &[]).expect_code(1).stderr_has("the judge tripped");
    let id = env.run_id();
    let out = env.awf(&["runs", "resume", &id]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["attempt"], 2);
    assert_eq!(v["second"], "b: judge one");
    let stages = read_jsonl(&env.run_dir().join("stages.jsonl"));
    let attempt2: Vec<_> =
        stages.iter().filter(|s| s["attempt"] == 2).map(|s| (s["name"].clone(), s["status"].clone())).collect();
    assert_eq!(attempt2, vec![("gather".into(), "reused".into()), ("judge".into(), "succeeded".into())]);
    // b#1 was answered in attempt 1 (then the stage threw): it is replayed, not asked again.
    let replayed = env.events_of("op-replayed");
    assert_eq!(replayed.len(), 1);
    assert_eq!(replayed[0]["data"]["op_id"], "b#1");
    assert!(env.events_of("op-started").iter().all(|e| e["attempt"] == 1), "no operation started in attempt 2");
    let run = common::read_json(&env.run_dir().join("run.json"));
    assert_eq!(run["attempts"].as_array().map(|a| a.len()), Some(2));
    assert_eq!(run["attempts"][1]["status"], "succeeded");
    let result = common::read_json(&env.run_dir().join("result.json"));
    assert_eq!(result["status"], "succeeded");
    // The accounts cover the whole run: attempt 1's operations once, attempt 2 spent nothing.
    assert_eq!(result["accounting"]["by_attempt"]["2"]["operations"], 0, "nothing was spent twice: {result}");
    assert_eq!(result["accounting"]["totals"]["operations"], result["accounting"]["by_attempt"]["1"]["operations"]);
}

#[test]
fn from_stage_runs_that_stage_again_and_unknown_stages_are_listed() {
    let env = Env::new();
    env.run(TWO_STAGES, &[]).expect_code(1);
    let id = env.run_id();
    let out = env.awf(&["runs", "resume", &id, "--from-stage", "nope"]);
    out.expect_code(2);
    out.stderr_has("--from-stage nope: the run never recorded a stage of that name (recorded: gather, judge)");
    env.awf(&["runs", "resume", &id, "--from-stage", "gather"]).expect_code(0);
    let stages = read_jsonl(&env.run_dir().join("stages.jsonl"));
    let gather: Vec<_> = stages.iter().filter(|s| s["name"] == "gather" && s["attempt"] == 2).collect();
    assert_eq!(gather[0]["status"], "succeeded", "gather ran again: {stages:?}");
    // DESIGN section 7: S and everything after run fresh, so nothing is replayed from the journal.
    assert_eq!(env.events_of("op-replayed").len(), 0, "from --from-stage on, nothing comes from the journal");
    assert!(
        env.events_of("op-started").iter().any(|e| e["attempt"] == 2 && e["data"]["op_id"] == "b#1"),
        "b#1 was asked again"
    );
}

#[test]
fn a_changed_script_is_refused_unless_allowed() {
    let env = Env::new();
    env.run(TWO_STAGES, &[]).expect_code(1);
    let id = env.run_id();
    env.write("wf.rhai", &TWO_STAGES.replace("judge one", "judge two"));
    let out = env.awf(&["runs", "resume", &id]);
    out.expect_code(2);
    out.stderr_has("changed since run");
    out.stderr_has("--allow-changed");
    let out = env.awf(&["runs", "resume", &id, "--allow-changed"]);
    out.expect_code(0);
    assert_eq!(out.json()["second"], "b: judge two", "the changed turn ran fresh");
}

#[test]
fn a_run_killed_with_sigkill_resumes_to_completion() {
    let env = Env::new();
    env.with_responder(r#"fn respond(turn) { if turn.prompt == "hang" { return #{ hang: true }; } () }"#);
    env.write(
        "wf.rhai",
        r#"
        let a = ctx.agents.open(#{ key: "a" });
        let facts = ctx.stage("facts", #{ result: #{ type: "array" } }, || {
            ctx.parallel([1, 2, 3], |n, i| ctx.agents.open(#{ key: `f${n}` }).ask(`fact ${n}`))
        });
        print("facts recorded");
        let last = a.ask(if ctx.attempt == 1 { "hang" } else { "conclude" });
        #{ facts: facts, last: last }
        "#,
    );
    let mut child = common::command(env.path(), &["script", "run", "wf.rhai"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn awf");
    let stderr = child.stderr.take().expect("stderr");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("facts recorded") {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(common::TIMEOUT).expect("the run reached its hanging turn");
    signal(pid, "-KILL");
    let _ = child.wait();
    let id = env.run_id();
    assert!(!env.run_dir().join("result.json").exists(), "a killed run writes no result");
    let out = env.awf(&["runs", "resume", &id]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["last"], "a: conclude");
    assert_eq!(v["facts"].as_array().map(|a| a.len()), Some(3));
    let stages = read_jsonl(&env.run_dir().join("stages.jsonl"));
    assert!(stages.iter().any(|s| s["name"] == "facts" && s["status"] == "reused"), "{stages:?}");
}

#[test]
fn runs_list_and_show_read_the_records_and_unknown_runs_are_refused() {
    let env = Env::new();
    env.run(TWO_STAGES, &[]).expect_code(1);
    let id = env.run_id();
    let out = env.awf(&["runs", "list"]);
    out.expect_code(0);
    assert!(out.stdout.contains(&id) && out.stdout.contains("failed"), "{}", out.stdout);
    let out = env.awf(&["runs", "show", &id]);
    out.expect_code(0);
    out.stdout_has("stage gather: succeeded");
    out.stdout_has("error: the judge tripped");
    env.awf(&["runs", "show", "20990101-000000000-ffffff"]).expect_code(2).stderr_has("no run 20990101");
    env.awf(&["runs", "resume", "../etc"]).expect_code(2);
    env.awf(&["runs", "stop", &id]).expect_code(0).stderr_has("already ended (failed)");
}

/// One agent asked the same prompt in stages round-1..round-4, killed in round 4: the resumed
/// round 4 runs its own turn (`namer#4`), never round 1's answer again, and the ids of the
/// reused rounds' turns count on (regression: round 4 got `namer#1`'s answer, spending nothing).
#[test]
fn a_resume_never_answers_a_turn_with_an_earlier_turns_answer() {
    let env = Env::new();
    env.with_responder(
        r#"fn respond(turn) { if turn.prompt == "hang" { return #{ hang: true }; } if turn.prompt == "name it" { return #{ answer: turn.op_id }; } () }"#,
    );
    env.write(
        "wf.rhai",
        r#"
        let a = ctx.agents.open(#{ key: "namer" });
        let names = [];
        for r in 1..=4 {
            names.push(ctx.stage(`round-${r}`, #{ result: #{ type: "string" } }, || {
                if r == 4 && ctx.attempt == 1 {
                    print("round 4 started");
                    ctx.agents.open(#{ key: "staller" }).ask("hang");
                }
                a.ask("name it")
            }));
        }
        names
        "#,
    );
    let mut run = common::Running::start(env.path(), &["script", "run", "wf.rhai"]);
    let end = std::time::Instant::now() + common::TIMEOUT;
    while !run.seen.iter().any(|l| l.contains("round 4 started")) {
        let left = end.saturating_duration_since(std::time::Instant::now());
        assert!(!left.is_zero(), "round 4 did not start: {:?}", run.seen);
        if let Ok(l) = run.lines.recv_timeout(left) {
            run.seen.push(l);
        }
    }
    signal(run.pid, "-KILL");
    let _ = run.finish();
    let id = env.run_id();
    let out = env.awf(&["runs", "resume", &id, "--json"]);
    out.expect_code(0).stderr_has("3 stages reused, 0 given with --values, 3 answered operations on record");
    assert_eq!(out.json()["value"], serde_json::json!(["namer#1", "namer#2", "namer#3", "namer#4"]));
    let turns: Vec<_> = env.turns().into_iter().filter(|t| t["attempt"] == 2).collect();
    assert_eq!(turns.len(), 1, "attempt 2 ran round 4's turn, and only it: {turns:?}");
    assert_eq!(turns[0]["op_id"], "namer#4");
    assert!(env.events_of("op-replayed").is_empty(), "rounds 1-3 are reused stages, nothing is replayed");
}

/// The same loop resumed from every stage (`--from-stage`, then `--again`): each attempt ends with
/// every round's own answer (the op ids of the reused rounds' turns count on).
#[test]
fn identical_prompts_resumed_from_every_stage_keep_their_own_answers() {
    let env = Env::new();
    env.with_responder(r#"fn respond(turn) { if turn.prompt == "name it" { return #{ answer: turn.op_id }; } () }"#);
    let script = r#"
        let a = ctx.agents.open(#{ key: "namer" });
        let names = [];
        for r in 1..=3 { names.push(ctx.stage(`round-${r}`, #{ result: #{ type: "string" } }, || a.ask("name it"))); }
        names
        "#;
    env.write("wf.rhai", script);
    env.awf(&["script", "run", "wf.rhai"]).expect_code(0);
    let id = env.run_id();
    let want = serde_json::json!(["namer#1", "namer#2", "namer#3"]);
    for from in ["round-1", "round-2", "round-3"] {
        let out = env.awf(&["runs", "resume", &id, "--from-stage", from, "--again", "--json"]);
        out.expect_code(0);
        assert_eq!(out.json()["value"], want, "--from-stage {from}");
    }
    let out = env.awf(&["runs", "resume", &id, "--again", "--json"]);
    out.expect_code(0);
    assert_eq!(out.json()["value"], want, "--again");
}

/// A journal entry answers only a turn of its own stage: an answer given in a stage that then
/// failed is not replayed for the same op id asked outside it; the record says why it ran again.
#[test]
fn a_journal_entry_answers_only_a_turn_of_its_own_stage() {
    let env = Env::new();
    env.with_responder(r#"fn respond(turn) { if turn.prompt == "name it" { return #{ answer: turn.op_id }; } () }"#);
    let script = r#"
        let a = ctx.agents.open(#{ key: "namer" });
        if ctx.attempt == 1 {
            ctx.stage("r1", || { a.ask("name it"); throw "fails after its answer"; });
        }
        a.ask("name it")
        "#;
    env.write("wf.rhai", script);
    env.awf(&["script", "run", "wf.rhai"]).expect_code(1);
    let out = env.awf(&["runs", "resume", &env.run_id(), "--json"]);
    out.expect_code(0);
    assert_eq!(out.json()["value"], "namer#1");
    assert!(env.events_of("op-replayed").is_empty(), "the stage's answer was not replayed outside it");
    let rerun = env.events_of("op-rerun");
    assert_eq!(rerun.len(), 1, "{rerun:?}");
    let why = rerun[0]["data"]["why"].as_str().unwrap_or_default();
    assert_eq!(why, "it was answered in stage `r1`, and this turn is outside any stage");
    let turns: Vec<_> = env.turns().into_iter().filter(|t| t["attempt"] == 2).collect();
    assert_eq!(turns.len(), 1, "the turn ran again in attempt 2: {turns:?}");
}
