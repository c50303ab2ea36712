//! Sandboxes a workflow opens (`ctx.sandboxes.open`, handles shared by agents, closed) and a
//! network that reaches only what is listed (awf's proxy, `sandbox-net-denied`), through the real
//! binary: `command` agents running `sh` and `curl`, and a sandboxed `claude` agent against the
//! fake model server with `network = "model"`.

use crate::common;

use common::cli::{installed, rerun_in_netns, runtime, OPERATOR_VARS};
use common::fake_model::{FakeModel, Reply};
use common::Env;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A tiny HTTP server on 127.0.0.1 answering `200 ok` to every request; counts its connections.
fn http_server() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let seen = Arc::new(AtomicUsize::new(0));
    let count = seen.clone();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            count.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).is_ok_and(|n| n == 1) {
                    head.push(byte[0]);
                }
                let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
            });
        }
    });
    (port, seen)
}

/// `curl`'s status code for `url`, through the sandbox's proxy when `proxied`, as a shell word.
fn curl(url: &str, proxied: bool) -> String {
    let proxy = if proxied { r#"-x "$HTTP_PROXY" "# } else { "--noproxy '*' " };
    format!("$(curl -s -o /dev/null -w '%{{http_code}}' {proxy}{url})")
}

/// A `command` agent answering with the codes of: the listed server directly, the listed server
/// through the proxy, the unlisted one through the proxy, the unlisted one directly, and a listed
/// port where nothing listens, through the proxy.
fn probe_script(network: &str, listed: u16, unlisted: u16, dead: u16) -> String {
    let (l, u) = (format!("http://127.0.0.1:{listed}/"), format!("http://127.0.0.1:{unlisted}/"));
    let sh = format!(
        r#"printf '"%s %s %s %s %s"' "{}" "{}" "{}" "{}" "{}" | "$AWF_LAUNCHER" result "$AWF_OP""#,
        curl(&l, false),
        curl(&l, true),
        curl(&u, true),
        curl(&u, false),
        curl(&format!("http://127.0.0.1:{dead}/"), true),
    );
    format!(
        r#"let sb = ctx.sandboxes.open(#{{ name: "team", network: {network} }});
let a = ctx.agents.open(#{{ key: "a", sandbox: sb, runtime: #{{ harness: "command", command: ["sh", "-c", {sh}] }} }});
#{{ codes: a.run(#{{ prompt: "go" }}).value }}"#,
        sh = serde_json::to_string(&sh).expect("json")
    )
}

#[test]
#[ignore = "needs bubblewrap (.ci/setup installs it; the README's test command runs these)"]
fn a_listed_network_reaches_only_what_is_listed_and_records_each_refusal() {
    let (listed, listed_seen) = http_server();
    let (unlisted, unlisted_seen) = http_server();
    let dead = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
    // With the host's network the same program reaches both servers: the checks below are not vacuous.
    let env = Env::new();
    let out = env.run(&probe_script(r#""host""#, listed, unlisted, dead), &[]);
    out.expect_code(0);
    assert_eq!(out.json()["codes"], "200 200 200 200 000", "{}", out.stderr);
    let before = unlisted_seen.load(Ordering::SeqCst);

    let env = Env::new();
    let network = format!(r#"["127.0.0.1:{listed}", "127.0.0.1:{dead}"]"#);
    let out = env.run(&probe_script(&network, listed, unlisted, dead), &[]);
    out.expect_code(0);
    // Listed: reached directly (the bridge forwards the port) and through the proxy; unlisted:
    // refused by the proxy (403), and nothing listens on it inside the sandbox (000); listed but
    // down: the proxy says it cannot reach it (502).
    assert_eq!(out.json()["codes"], "200 200 403 000 502", "{}", out.stderr);
    assert_eq!(unlisted_seen.load(Ordering::SeqCst), before, "nothing reached the unlisted server");
    assert!(listed_seen.load(Ordering::SeqCst) >= 4, "the listed server was reached twice per run");
    let denied = env.events_of("sandbox-net-denied");
    assert_eq!(denied.len(), 1, "{denied:?}");
    let d = &denied[0]["data"];
    assert_eq!(
        (d["sandbox"].as_str(), d["agent"].as_str(), d["op_id"].as_str()),
        (Some("team"), Some("a"), Some("a#1"))
    );
    assert_eq!((d["host"].as_str(), d["port"].as_u64()), (Some("127.0.0.1"), Some(unlisted as u64)), "{d}");
    let s = &env.result()["sandboxes"][0];
    assert_eq!((s["name"].as_str(), s["scope"].as_str()), (Some("team"), Some("workflow")), "{s}");
    assert_eq!(s["policy"]["network"], json!([format!("127.0.0.1:{listed}"), format!("127.0.0.1:{dead}")]));
    assert!(!env.run_dir().join("agents/a/net.sock").exists(), "the proxy's socket is gone after the turn");
}

#[test]
#[ignore = "needs bubblewrap (.ci/setup installs it; the README's test command runs these)"]
fn agents_of_one_opened_sandbox_share_its_workspace_each_with_a_home_until_it_closes() {
    let env = Env::new();
    let sh = r#"echo "$AWF_AGENT" > "seen-$AWF_AGENT"; printf '"%s"' "$HOME" | "$AWF_LAUNCHER" result "$AWF_OP""#;
    env.write("sub/.keep", "");
    env.write(
        "wf.rhai",
        &format!(
            r#"let rt = #{{ harness: "command", command: ["sh", "-c", {sh}] }};
let sb = ctx.sandboxes.open(#{{ name: "team" }});
let a = ctx.agents.open(#{{ key: "a", sandbox: sb, runtime: rt }});
let b = ctx.agents.open(#{{ key: "b", sandbox: sb, runtime: rt, cwd: "sub" }});
let homes = [a.run(#{{ prompt: "go" }}).value, b.run(#{{ prompt: "go" }}).value];
let stopped = sb.close();
let errors = [];
try {{ ctx.agents.open(#{{ key: "c", sandbox: sb, runtime: rt }}); }} catch (e) {{ errors.push(e); }}
try {{ a.run(#{{ prompt: "again" }}); }} catch (e) {{ errors.push(e); }}
#{{ homes: homes, stopped: stopped, errors: errors, name: sb.name }}"#,
            sh = serde_json::to_string(sh).expect("json")
        ),
    );
    let out = env.awf(&["script", "run", "wf.rhai"]);
    out.expect_code(0);
    let v = out.json();
    let home = |k: &str| env.run_dir().join(format!("agents/{k}/home")).display().to_string();
    assert_eq!(v["homes"], json!([home("a"), home("b")]), "each has its own home: {v}");
    assert!(env.path().join("seen-a").is_file() && env.path().join("sub/seen-b").is_file(), "one shared workspace");
    assert_eq!(v["stopped"], json!(["a", "b"]), "{v}");
    assert_eq!(v["name"], "team");
    let errors: Vec<String> = v["errors"].as_array().expect("errors").iter().map(|e| e.to_string()).collect();
    assert!(errors[0].contains("sandbox `team` is closed (closed by the workflow)"), "{errors:?}");
    assert!(errors.len() == 2 && errors[1].contains("stopped"), "a stopped agent says so: {errors:?}");
    let sandboxes = env.result()["sandboxes"].clone();
    assert_eq!(sandboxes.as_array().map(Vec::len), Some(1), "{sandboxes:#}");
    let agents: Vec<&str> =
        sandboxes[0]["agents"].as_array().expect("agents").iter().filter_map(|a| a["agent"].as_str()).collect();
    assert_eq!(agents, ["a", "b"]);
    assert_eq!(sandboxes[0]["agents"][1]["seat"]["workspace"], env.path().display().to_string());
    let closed = env.events_of("sandbox-closed");
    assert_eq!(closed.len(), 1);
    assert_eq!(closed[0]["data"], json!({ "sandbox": "team", "agents": ["a", "b"] }));
}

#[test]
#[ignore = "needs bubblewrap (.ci/setup installs it; the README's test command runs these)"]
fn bad_sandboxes_and_networks_are_refused_before_anything_runs() {
    let env = Env::new();
    env.write("awf.toml", "[sandboxes.one]\n[sandboxes.two]\n");
    env.write(
        "wf.rhai",
        r#"let cmd = #{ harness: "command", command: ["true"] };
let errors = [];
try { ctx.sandboxes.open(#{ name: "x", network: ["api.anthropic.com"] }); } catch (e) { errors.push(e); }
try { ctx.sandboxes.open(#{ network: "none" }); } catch (e) { errors.push(e); }
try { ctx.sandboxes.open(#{ name: "x", network: "lan" }); } catch (e) { errors.push(e); }
let listed = ctx.sandboxes.open(#{ name: "listed", network: ["127.0.0.1:9"] });
try { ctx.sandboxes.open(#{ name: "listed" }); } catch (e) { errors.push(e); }
try { ctx.agents.open(#{ key: "f", sandbox: listed }); } catch (e) { errors.push(e); }
let model = ctx.sandboxes.open(#{ name: "model", network: "model" });
try { ctx.agents.open(#{ key: "m", sandbox: model, runtime: cmd }); } catch (e) { errors.push(e); }
let other = ctx.sandboxes.open(#{ name: "other" });
ctx.agents.open(#{ key: "a", sandbox: listed, runtime: cmd });
try { ctx.agents.open(#{ key: "a", sandbox: other, runtime: cmd }); } catch (e) { errors.push(e); }
try { ctx.agents.open(#{ key: "a", sandbox: "one", runtime: cmd }); } catch (e) { errors.push(e); }
errors"#,
    );
    let out = env.awf(&["script", "run", "wf.rhai"]);
    out.expect_code(0);
    let errors: Vec<String> = out.json().as_array().expect("errors").iter().map(|e| e.to_string()).collect();
    let want = [
        "ctx.sandboxes.open: sandbox `x` cannot be made: network entry `api.anthropic.com` is not host:port (no port",
        "ctx.sandboxes.open: the spec needs `name`",
        "unknown network `lan`",
        "a sandbox named `listed` was already opened in this run",
        "sandbox `listed` lists its network, which means nothing to the `fake` harness",
        "network = \\\"model\\\": a `command` agent has no model server awf knows of",
        "agent a is already open with different sandbox",
        "agent a is already open with different sandbox",
    ];
    assert_eq!(errors.len(), want.len(), "{errors:#?}");
    for (got, want) in errors.iter().zip(want) {
        assert!(got.contains(want), "{got}\n  does not say: {want}");
    }
    assert!(env.events_of("agent-opened").iter().all(|e| e["data"]["agent"] == "a"), "no refused agent opened");

    // A bad entry in awf.toml stops the run before it starts.
    let env = Env::new();
    env.write("awf.toml", "[sandboxes.bad]\nnetwork = [\"127.0.0.1:http\"]\n");
    env.write("wf.rhai", "1");
    let out = env.awf(&["script", "run", "wf.rhai"]);
    out.expect_code(2).stderr_has("sandboxes.bad.network").stderr_has("`127.0.0.1:http` is not host:port");
    assert!(env.run_dirs().is_empty(), "no run was started");
}

const SCHEMA: &str = r#"#{ type: "object", properties: #{ verdict: #{ type: "string" } }, required: ["verdict"] }"#;

/// Runs `script` in a folder whose default runtime is `cli` at `server`, with the operator's home
/// outside the workspace and /tmp (so that the sandbox can hide it) and the operator's keys kept out.
fn run_cli(cli: &str, server: &FakeModel, script: &str) -> (Env, common::Out) {
    let env = Env::new();
    env.write(
        "awf.toml",
        &format!(
            "default_runtime = \"m\"\n[runtimes.m]\n{}\n[limits]\nstall_timeout = \"30s\"\n",
            runtime(cli, &server.base())
        ),
    );
    env.write("wf.rhai", script);
    let operator = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("the operator's home");
    if cli == "pi" {
        std::fs::create_dir_all(operator.path().join(".pi/agent")).expect("mkdir");
        std::fs::write(operator.path().join(".pi/agent/auth.json"), "{}").expect("credential");
    }
    let mut cmd = common::command(env.path(), &["script", "run", "wf.rhai"]);
    cmd.env("HOME", operator.path());
    for var in OPERATOR_VARS {
        cmd.env_remove(var);
    }
    let child = cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().expect("awf");
    let out = common::wait_within(child, std::time::Duration::from_secs(120));
    (env, out)
}

/// A CLI agent in a sandbox the workflow opened with `network = "model"` answers through the
/// fake model server (its runtime's `base_url`, reached through awf's proxy or the forwarded
/// port); its shell tool's request to another loopback port is refused (403) and recorded, and
/// never reaches it. Its fork sits in the same sandbox with a home of its own, behind a proxy of
/// its own. With a list that leaves the model server out, the turn fails, saying what is listed.
fn reaches_its_model_server_and_nothing_else(cli: &str, test: &str) {
    if !installed(cli, test) || rerun_in_netns(test) {
        return;
    }
    let (other, other_seen) = http_server();
    let probe = format!(
        r#"c=$(curl -s -o /dev/null -w '%{{http_code}}' -x "$HTTP_PROXY" http://127.0.0.1:{other}/); printf '{{"verdict":"%s"}}' "$c" | {{launcher}} result {{op}}"#
    );
    let server = FakeModel::start_cli(vec![Reply::shell(&probe), Reply::shell(&probe)]);
    let script = format!(
        r#"let sb = ctx.sandboxes.open(#{{ name: "model-only", network: "model" }});
let a = ctx.agents.open(#{{ key: "a", sandbox: sb }});
let o = a.run(#{{ prompt: "Give a verdict.", schema: {SCHEMA} }});
let f = a.fork(#{{ key: "f" }}).run(#{{ prompt: "Give another verdict.", schema: {SCHEMA} }});
#{{ kind: o.kind, value: o.value, reason: o.reason, fork: f.value }}"#
    );
    let (env, out) = run_cli(cli, &server, &script);
    out.expect_code(0);
    let v: Value = out.json();
    assert_eq!(v["kind"], "answered", "{cli}: {v}\n{}", out.stderr);
    assert_eq!(v["value"]["verdict"], "403", "{cli}: the proxy refused the unlisted port: {v}");
    assert_eq!(v["fork"]["verdict"], "403", "{cli}: the fork is refused alike: {v}");
    assert!(!server.bodies().is_empty(), "{cli} reached the fake model server");
    assert_eq!(other_seen.load(Ordering::SeqCst), 0, "nothing reached the unlisted port");
    let denied = env.events_of("sandbox-net-denied");
    let who: Vec<(&str, u64)> =
        denied.iter().filter_map(|d| Some((d["data"]["agent"].as_str()?, d["data"]["port"].as_u64()?))).collect();
    assert_eq!(who, [("a", other as u64), ("f", other as u64)], "{cli}: {denied:?}");
    assert_eq!(denied[0]["data"]["host"], "127.0.0.1");
    let result = env.result();
    let s = &result["sandboxes"][0];
    assert_eq!(result["sandboxes"].as_array().map(Vec::len), Some(1), "{result:#}");
    assert_eq!((s["scope"].as_str(), s["policy"]["network"].as_str()), (Some("workflow"), Some("model")), "{s}");
    let seats: Vec<(&str, &str)> = s["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .filter_map(|a| Some((a["agent"].as_str()?, a["seat"]["home"].as_str()?)))
        .collect();
    let home = |k: &str| env.run_dir().join(format!("agents/{k}/home")).display().to_string();
    assert_eq!(seats, [("a", home("a").as_str()), ("f", home("f").as_str())], "{s}");

    // The model server left out of the list: the CLI cannot reach it, and the turn says why.
    let server = FakeModel::start_cli(vec![Reply::shell(&probe)]);
    let script = format!(
        r#"let sb = ctx.sandboxes.open(#{{ name: "elsewhere", network: ["127.0.0.1:1"] }});
let o = ctx.agents.open(#{{ key: "a", sandbox: sb }}).run(#{{ prompt: "Give a verdict.", schema: {SCHEMA} }});
#{{ kind: o.kind, reason: o.reason }}"#
    );
    let (_env, out) = run_cli(cli, &server, &script);
    out.expect_code(0);
    let v: Value = out.json();
    assert_eq!(v["kind"], "failed", "{cli}: {v}");
    assert!(v["reason"].as_str().unwrap_or("").contains("sandbox `elsewhere` reaches only 127.0.0.1:1"), "{cli}: {v}");
    assert!(server.bodies().is_empty(), "{cli}: nothing reached the fake");
}

#[test]
#[ignore = "needs the pinned agent CLIs and bubblewrap (.ci/setup installs them; the README's test command runs these)"]
fn a_sandboxed_claude_reaches_its_model_server_and_nothing_else() {
    reaches_its_model_server_and_nothing_else("claude", "a_sandboxed_claude_reaches_its_model_server_and_nothing_else");
}

#[test]
#[ignore = "needs the pinned agent CLIs and bubblewrap (.ci/setup installs them; the README's test command runs these)"]
fn a_sandboxed_codex_reaches_its_model_server_and_nothing_else() {
    reaches_its_model_server_and_nothing_else("codex", "a_sandboxed_codex_reaches_its_model_server_and_nothing_else");
}

#[test]
#[ignore = "needs the pinned agent CLIs and bubblewrap (.ci/setup installs them; the README's test command runs these)"]
fn a_sandboxed_pi_reaches_its_model_server_and_nothing_else() {
    reaches_its_model_server_and_nothing_else("pi", "a_sandboxed_pi_reaches_its_model_server_and_nothing_else");
}
