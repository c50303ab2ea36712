//! `awf serve` keeps what it accepted: a run is on disk before its 202, a serve killed with
//! SIGKILL leaves its queued and running runs for the next one, which runs and resumes each once,
//! in the order they were accepted; a second serve on the same folder leaves a live one's runs
//! alone; the queue has a bound. Runs block in a `command` agent until the test creates `go`.

use crate::common;

use common::serve::{serve, Serve};
use common::{read_jsonl, wait_until, Env};
use serde_json::{json, Value};

/// A workflow whose one agent waits for `go` (bounded: it gives up after 30 s) and answers; every
/// start of the agent appends a line to `started/<run id>`.
fn blocking(env: &Env) {
    let root = env.path().display().to_string();
    std::fs::create_dir_all(env.path().join("started")).expect("started/");
    env.write(
        "agent.sh",
        &format!(
            "echo x >> '{root}/started/'\"$AWF_RUN_ID\"\ni=0\nwhile [ ! -f '{root}/go' ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done\n\
             echo '{{\"done\": true}}' | \"$AWF_LAUNCHER\" result \"$AWF_OP\"\n"
        ),
    );
    env.write(
        "wf.rhai",
        &format!(
            "let a = ctx.agents.open(#{{ key: \"w\", runtime: #{{ harness: \"command\", command: [\"sh\", \"{root}/agent.sh\"] }} }});\n\
             a.ask(\"go\", #{{ type: \"object\" }})\n"
        ),
    );
}

/// How many times run `id`'s agent started.
fn starts(env: &Env, id: &str) -> usize {
    std::fs::read_to_string(env.path().join("started").join(id)).map(|t| t.lines().count()).unwrap_or(0)
}

fn run_json(env: &Env, id: &str) -> Value {
    let text = std::fs::read_to_string(env.runs_root().join(id).join("run.json")).expect("run.json");
    serde_json::from_str(&text).expect("run.json is JSON")
}

fn attempt_statuses(env: &Env, id: &str) -> Vec<String> {
    let run = run_json(env, id);
    run["attempts"].as_array().expect("attempts").iter().map(|a| a["status"].as_str().unwrap_or("?").into()).collect()
}

/// A serve of one slot with a run in it (its agent waiting for `go`) and one queued behind it:
/// the server and the two run ids.
fn one_running_one_queued(env: &Env, extra: &[&str]) -> (Serve, String, String) {
    let mut args = vec!["--max-runs", "1"];
    args.extend_from_slice(extra);
    let s = serve(env, &args);
    let running = s.start(json!({ "script": "wf.rhai" }));
    wait_until("the first run's agent running", || starts(env, &running) == 1);
    let queued = s.start(json!({ "script": "wf.rhai" }));
    (s, running, queued)
}

fn kill_9(mut s: Serve) {
    s.child.kill().expect("SIGKILL awf serve");
    s.child.wait().expect("reap awf serve");
}

#[test]
fn runs_queued_and_running_at_a_kill_9_each_end_succeeded_once_after_a_restart() {
    let env = Env::new();
    blocking(&env);
    let s = serve(&env, &["--max-runs", "2"]);
    let ids: Vec<String> = (0..5).map(|_| s.start(json!({ "script": "wf.rhai" }))).collect();
    // On disk before the 202: every accepted run has its folder and record.
    for id in &ids {
        let record = env.runs_root().join(id).join("serve.json");
        assert!(record.is_file(), "run {id} was accepted without {}", record.display());
    }
    wait_until("two runs' agents running", || ids.iter().filter(|id| starts(&env, id) == 1).count() == 2);
    let running: Vec<String> = ids.iter().filter(|id| starts(&env, id) == 1).cloned().collect();
    kill_9(s);
    let queued: Vec<&String> = ids.iter().filter(|id| !running.contains(id)).collect();
    for id in &queued {
        assert!(!env.runs_root().join(id).join("run.json").exists(), "queued run {id} had started");
    }

    // --no-recover leaves them, and says so; each is still known by its id.
    let left = serve(&env, &["--no-recover"]);
    assert!(
        left.stderr()
            .contains("--no-recover: 5 runs an earlier serve accepted are left as they are (3 queued, 2 interrupted)"),
        "{}",
        left.stderr()
    );
    for id in &ids {
        let (status, v) = left.json("GET", &format!("/runs/{id}"), None);
        assert_eq!((status, v["status"].as_str()), (200, Some("interrupted")), "{id}: {v}");
    }
    kill_9(left);
    assert!(ids.iter().all(|id| starts(&env, id) <= 1), "nothing ran under --no-recover");
    let list = env.awf(&["runs", "list"]);
    list.expect_code(0).stdout_has("(accepted by awf serve: the next awf serve takes it over)");
    env.awf(&["runs", "show", queued[0]]).expect_code(0).stdout_has("interrupted").stdout_has("script: wf.rhai");

    // The next serve runs the queued and resumes the interrupted, one at a time, in order.
    env.write("go", "");
    let s = serve(&env, &["--max-runs", "1"]);
    wait_until("the restarted serve says what it recovers", || s.stderr().contains("recovering 5 runs"));
    assert!(s.stderr().contains("(3 queued, 2 interrupted)"), "{}", s.stderr());
    for id in &ids {
        let result = s.until(id, "succeeded");
        assert_eq!(result["value"], json!({ "done": true }), "{id}: {result}");
    }
    for id in &running {
        assert_eq!(attempt_statuses(&env, id), ["interrupted", "succeeded"], "run {id}");
        assert_eq!(starts(&env, id), 2, "run {id}: its unanswered turn ran again in the new attempt only");
    }
    for id in &queued {
        assert_eq!(attempt_statuses(&env, id), ["succeeded"], "run {id}");
        assert_eq!(starts(&env, id), 1, "run {id} ran once");
    }
    for id in &ids {
        let turns = read_jsonl(&env.runs_root().join(id).join("turns.jsonl"));
        let answered = turns.iter().filter(|t| t["outcome"] == "answered").count();
        assert_eq!(answered, 1, "run {id} answered its turn once: {turns:?}");
    }
    // In the order they were accepted (run ids sort by acceptance): the last attempts started so.
    let started_at = |id: &String| {
        let run = run_json(&env, id);
        run["attempts"].as_array().and_then(|a| a.last()).expect("an attempt")["started_at"]
            .as_str()
            .expect("started_at")
            .to_string()
    };
    let order: Vec<String> = ids.iter().map(started_at).collect();
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(order, sorted, "recovered runs started in the order they were accepted");
}

#[test]
fn a_second_serve_on_the_same_runs_folder_leaves_a_live_serves_runs_alone() {
    let env = Env::new();
    blocking(&env);
    let (first, running, queued) = one_running_one_queued(&env, &[]);
    // It writes its own token over the first's file: the first client keeps the token it read.
    let second = serve(&env, &[]);
    assert!(!second.stderr().contains("recovering"), "{}", second.stderr());
    assert_eq!(second.listed_status(&queued), "queued", "the second serve sees the first's queue");
    env.write("go", "");
    first.until(&running, "succeeded");
    first.until(&queued, "succeeded");
    for id in [&running, &queued] {
        assert_eq!(attempt_statuses(&env, id), ["succeeded"], "run {id}");
        assert_eq!(starts(&env, id), 1, "run {id} ran once");
    }
}

#[test]
fn past_max_queued_a_run_is_refused_with_429_and_a_run_stopped_in_the_queue_stays_stopped() {
    let env = Env::new();
    blocking(&env);
    let (s, running, queued) = one_running_one_queued(&env, &["--max-queued", "1"]);
    let (status, v) = s.json("POST", "/runs", Some(&json!({ "script": "wf.rhai" })));
    assert_eq!(status, 429, "{v}");
    let why = v["error"].as_str().expect("an error");
    assert!(why.contains("the queue is full") && why.contains("--max-queued 1"), "{why}");
    assert_eq!(env.run_dirs().len(), 2, "a refused run leaves no folder");

    let (status, v) = s.json("POST", &format!("/runs/{queued}/stop"), None);
    assert_eq!((status, v["status"].as_str()), (202, Some("cancelled")), "{v}");
    let record = std::fs::read_to_string(env.runs_root().join(&queued).join("serve.json")).expect("serve.json");
    assert!(record.contains("\"cancelled\""), "{record}");
    // Its place is free again.
    let later = s.start(json!({ "script": "wf.rhai" }));
    kill_9(s);

    env.write("go", "");
    let s = serve(&env, &[]);
    wait_until("the restarted serve says what it recovers", || s.stderr().contains("recovering 2 runs"));
    s.until(&running, "succeeded");
    s.until(&later, "succeeded");
    let (_, v) = s.json("GET", &format!("/runs/{queued}"), None);
    assert_eq!(v["status"], "cancelled", "{v}");
    assert_eq!(starts(&env, &queued), 0, "a run stopped while queued never ran");
}

#[test]
fn a_left_run_that_no_longer_loads_is_said_so_and_kept_out_of_the_queue() {
    let env = Env::new();
    blocking(&env);
    let (s, running, queued) = one_running_one_queued(&env, &[]);
    kill_9(s);
    std::fs::remove_file(env.path().join("wf.rhai")).expect("remove the script");
    let s = serve(&env, &[]);
    wait_until("both runs reported", || {
        s.stderr().contains("is left interrupted") && s.stderr().contains("cannot start")
    });
    let err = s.stderr();
    assert!(err.contains(&format!("awf: run {queued} (accepted ")), "{err}");
    assert!(err.contains("cannot read script wf.rhai"), "{err}");
    assert!(err.contains(&format!("awf: run {running} is left interrupted: ")), "{err}");
    let record = std::fs::read_to_string(env.runs_root().join(&queued).join("serve.json")).expect("serve.json");
    assert!(record.contains("\"failed\"") && record.contains("cannot read script wf.rhai"), "{record}");
    assert_eq!(s.until(&queued, "failed")["status"], "failed");
    let (_, v) = s.json("GET", &format!("/runs/{running}"), None);
    assert_eq!(v["status"], "interrupted", "{v}");
    // The dead serve's agent is still waiting: let it go.
    env.write("go", "");
}

#[test]
fn a_run_that_cannot_be_kept_on_disk_is_refused_not_accepted() {
    let env = Env::new();
    blocking(&env);
    env.write("not-a-folder", "a file where the runs folder should be");
    let s = serve(&env, &["--runs-dir", "not-a-folder"]);
    let (status, v) = s.json("POST", "/runs", Some(&json!({ "script": "wf.rhai" })));
    assert_eq!(status, 500, "{v}");
    assert!(v["error"].as_str().is_some_and(|e| e.starts_with("cannot keep the run in ")), "{v}");
    let (_, list) = s.json("GET", "/runs", None);
    assert_eq!(list["runs"], json!([]), "nothing was accepted: {list}");
}

#[test]
fn a_left_run_whose_lock_cannot_be_taken_is_said_so_and_stays() {
    let env = Env::new();
    blocking(&env);
    let id = "20990101-000000000-aaaaaa";
    env.write(
        &format!(".awf/runs/{id}/serve.json"),
        &json!({ "v": 1, "id": id, "accepted_at": "2099-01-01T00:00:00.000Z", "status": "queued",
                 "request": { "script": "wf.rhai" } })
        .to_string(),
    );
    // A folder where the lock file should be: it cannot be opened as one.
    std::fs::create_dir_all(env.runs_root().join(id).join("serve.lock")).expect("serve.lock/");
    let s = serve(&env, &[]);
    assert!(
        s.stderr().contains(&format!("awf: run {id} cannot be taken over (it stays for a later serve): ")),
        "{}",
        s.stderr()
    );
    assert!(!s.stderr().contains("recovering"), "{}", s.stderr());
    assert_eq!(starts(&env, id), 0);
}

/// `awf runs stop` of a run queued in a live serve (another process): it is cancelled there, and
/// the serve, reading its record again before it starts it, never runs it.
#[test]
fn awf_runs_stop_cancels_a_run_queued_in_a_live_serve() {
    let env = Env::new();
    blocking(&env);
    let (s, running, queued) = one_running_one_queued(&env, &[]);
    let out = env.awf(&["runs", "stop", &queued]);
    out.expect_code(0)
        .stdout_has(&format!("run {queued}: cancelled (it was queued in awf serve, which will not start it)"));
    env.write("go", "");
    s.until(&running, "succeeded");
    s.until(&queued, "cancelled");
    assert_eq!(starts(&env, &queued), 0, "a run stopped while queued never ran");
    assert!(!env.runs_root().join(&queued).join("run.json").exists());
}
