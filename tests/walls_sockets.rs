//! awf's own sockets against a sandboxed agent (issue 46, rows 1 and 5): `awf serve`'s Unix
//! socket and a run's `control.sock` refuse a process of another user or pid namespace (a
//! sandbox) before reading its request, while the operator's own processes keep being served;
//! and an agent flooding its own control socket does not balloon awf's memory.

use crate::common;

use common::hostile;
use common::serve::{start, Addr};
use common::{wait_for_file, Env, Running};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A client run inside `bwrap --unshare-all` (other user, pid, network... namespaces, the host's
/// files bound as they are): it sends `argv[2]` (escaped newlines) on the Unix socket `argv[1]`
/// and prints `ran`, then the first line it got back or the error that ended it.
const CLIENT: &str = r#"
import socket, sys
print("ran", flush=True)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(10)
got = b""
try:
    s.connect(sys.argv[1])
    s.sendall(sys.argv[2].encode().decode("unicode_escape").encode())
    while True:
        c = s.recv(65536)
        if not c:
            break
        got += c
except OSError as e:
    if not got:
        print("error", type(e).__name__, e.strerror or e)
        sys.exit(0)
print(got.split(b"\n", 1)[0].decode(errors="replace").strip())
"#;

/// What `CLIENT`, sandboxed by bubblewrap in namespaces of its own, got from socket `socket`
/// for `request`: its first line, or `error ...`.
fn from_another_namespace(socket: &Path, request: &str) -> String {
    let out = Command::new("bwrap")
        .args(["--unshare-all", "--bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--", "python3", "-c"])
        .arg(CLIENT)
        .arg(socket)
        .arg(request)
        .output()
        .expect("run bwrap");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("ran"), "the client ran in bwrap: {out:?}");
    lines.next().unwrap_or_default().to_string()
}

/// Whether `code` (a status, or an error's text) is a 2xx answer.
fn is_success(code: &Value) -> bool {
    code.as_u64().is_some_and(|c| (200..300).contains(&c))
}

/// Whether what the hostile agent got for a request is a refusal it met on the socket: a 403,
/// or a connection closed on it; not a socket it could not see (that would prove nothing).
fn met_a_refusal(code: &Value) -> bool {
    match code {
        Value::Number(n) => n.as_u64() == Some(403),
        Value::String(s) => {
            ["ConnectionReset", "BrokenPipe", "Connection reset", "Broken pipe"].iter().any(|e| s.contains(e))
        }
        _ => false,
    }
}

#[test]
#[ignore = "needs bubblewrap (.ci/setup installs it; the README's test command runs these)"]
fn a_sandboxed_agent_cannot_start_a_run_through_serves_socket() {
    let env = Env::new();
    // The socket in a folder of the project the sandbox shows (not `.awf/`, which a sandbox may
    // hide): the wall tested is the socket's own.
    let socket = env.path().join("sock/serve.sock");
    let cmd = common::command(env.path(), &["serve", "--socket", "sock/serve.sock"]);
    let s = start(&env, cmd, Addr::Unix(socket.clone()), |_| None);
    let turn = hostile::turn(&["serve_socket"], json!({ "serve_socket": [socket] }));
    env.write("wf.rhai", &hostile::workflow("intruder", r#"sandbox: #{ network: "none" }"#, &[turn]));

    let id = s.start(json!({ "script": "wf.rhai" }));
    let result = s.until(&id, "succeeded");
    let report = &result["value"][0];
    let tried: Value =
        serde_json::from_str(report["serve_socket"]["detail"].as_str().expect("a detail")).expect("detail is JSON");
    let ours = &tried[socket.display().to_string()];
    for what in ["post", "get"] {
        assert!(!is_success(&ours[what]), "the sandboxed agent's {what} was served: {report:#}");
        assert!(met_a_refusal(&ours[what]), "the agent reached the socket and was refused: {report:#}");
    }
    assert!(!hostile::reached(report, "serve_socket"), "{report:#}");
    assert!(s.stderr().contains("refused a connection"), "serve logs the refusal: {}", s.stderr());

    // The operator's own client is still served, and no second run exists.
    let (status, listed) = s.json("GET", "/runs", None);
    assert_eq!(status, 200, "{listed}");
    let runs: Vec<&Value> = listed["runs"].as_array().expect("runs").iter().collect();
    assert_eq!(runs.len(), 1, "only the test's run: {listed:#}");
    assert_eq!(env.run_dirs().len(), 1, "no run folder besides the test's run");

    // Any process of another user and pid namespace is refused, whatever it sends.
    let got =
        from_another_namespace(&socket, "GET /runs HTTP/1.1\\r\\nHost: localhost\\r\\nConnection: close\\r\\n\\r\\n");
    assert!(!got.starts_with("HTTP/1.1 2"), "a sandboxed process was served: {got}");
    assert!(got.starts_with("HTTP/1.1 403") || got.starts_with("error"), "{got}");
    // MCP's `run_workflow` is behind the same socket: refused before the route is looked at.
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}"#;
    let mcp = format!(
        "POST /mcp HTTP/1.1\\r\\nHost: localhost\\r\\nAccept: application/json, text/event-stream\\r\\nContent-Type: application/json\\r\\nContent-Length: {}\\r\\nConnection: close\\r\\n\\r\\n{init}",
        init.len()
    );
    let got = from_another_namespace(&socket, &mcp);
    assert!(got.starts_with("HTTP/1.1 403") || got.starts_with("error"), "{got}");
    assert_eq!(s.json("GET", "/runs", None).0, 200, "and the operator still is");
}

/// Starts a run whose one agent hangs (the fake harness), and waits for its control socket; the
/// running awf and the run's folder.
fn start_hanging(env: &Env) -> (Running, PathBuf) {
    env.with_responder(r#"fn respond(turn) { #{ hang: true } }"#);
    env.write("wf.rhai", "let a = ctx.agents.open(#{ key: \"a\" });\na.ask(\"wait\")\n");
    let running = Running::start(env.path(), &["script", "run", "wf.rhai"]);
    let dir = common::poll("a run folder", common::TIMEOUT, || env.run_dirs().pop());
    wait_for_file(&dir.join("control.sock"));
    (running, dir)
}

/// One request line to a run's control socket from this process; the answer line.
fn ask_run(dir: &Path, line: &str) -> Value {
    let mut s = std::os::unix::net::UnixStream::connect(dir.join("control.sock")).expect("connect");
    s.set_read_timeout(Some(common::TIMEOUT)).expect("a timeout");
    s.write_all(format!("{line}\n").as_bytes()).expect("send");
    let mut answer = String::new();
    BufReader::new(s).read_line(&mut answer).expect("an answer");
    serde_json::from_str(&answer).unwrap_or_else(|e| panic!("not JSON ({e}): {answer}"))
}

#[test]
#[ignore = "needs bubblewrap (.ci/setup installs it; the README's test command runs these)"]
fn a_runs_control_socket_refuses_a_process_of_another_namespace() {
    let env = Env::new();
    let (running, dir) = start_hanging(&env);
    let got = from_another_namespace(&dir.join("control.sock"), r#"{"cmd":"kill","by":"a sandbox"}\n"#);
    assert!(got.starts_with("{") || got.starts_with("error"), "{got}");
    if got.starts_with('{') {
        let reply: Value = serde_json::from_str(&got).expect("a JSON reply");
        assert_eq!(reply["ok"], false, "{reply}");
        assert!(reply["error"].as_str().is_some_and(|e| e.contains("namespace")), "{reply}");
    }
    // The run lives on, and answers the operator's own processes.
    let status = ask_run(&dir, r#"{"cmd":"status"}"#);
    assert_eq!((&status["ok"], &status["state"]), (&json!(true), &json!("running")), "{status}");
    let refused = common::read_jsonl(&dir.join("events.jsonl"));
    assert!(
        refused.iter().any(|e| e["type"] == "log" && e["data"]["text"].as_str().is_some_and(|t| t.contains("refused"))),
        "the refusal is logged in the run's events: {refused:#?}"
    );
    env.awf(&["runs", "stop", &dir.file_name().expect("an id").to_string_lossy(), "--now"]).expect_code(0);
    running.finish();
}

#[test]
fn a_runs_control_socket_closes_connections_past_its_cap_and_keeps_serving() {
    let env = Env::new();
    let (running, dir) = start_hanging(&env);
    // Connections that send nothing hold their places for the read's 5 s; those past the cap are
    // closed at once, unanswered. Each is watched for 2.5 s, all at the same time.
    let held: Vec<_> =
        (0..40).map(|_| std::os::unix::net::UnixStream::connect(dir.join("control.sock")).expect("connect")).collect();
    let watchers: Vec<_> = held
        .iter()
        .map(|s| {
            let mut s = s.try_clone().expect("a second handle");
            std::thread::spawn(move || {
                s.set_read_timeout(Some(Duration::from_millis(2500))).expect("a timeout");
                match s.read(&mut [0u8; 1]) {
                    Ok(n) => n == 0,
                    Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
                }
            })
        })
        .collect();
    let closed = watchers.into_iter().map(|w| w.join().expect("a watcher")).filter(|c| *c).count();
    assert_eq!(closed, 40 - 16, "the connections past the cap were closed at once, the others kept");
    drop(held);
    // The server counts a connection out once it sees it closed: the places come back shortly.
    let status = common::poll("a place on the control socket again", common::TIMEOUT, || {
        let mut s = std::os::unix::net::UnixStream::connect(dir.join("control.sock")).ok()?;
        s.set_read_timeout(Some(common::TIMEOUT)).ok()?;
        s.write_all(b"{\"cmd\":\"status\"}\n").ok()?;
        let mut answer = String::new();
        BufReader::new(s).read_line(&mut answer).ok().filter(|n| *n > 0)?;
        serde_json::from_str::<Value>(&answer).ok()
    });
    assert_eq!(status["ok"], true, "{status}");
    env.awf(&["runs", "stop", &dir.file_name().expect("an id").to_string_lossy(), "--now"]).expect_code(0);
    running.finish();
}

/// `VmRSS` or `VmHWM` of process `pid`, in KiB.
fn memory_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc/PID/status");
    let line = status.lines().find(|l| l.starts_with(field)).unwrap_or_else(|| panic!("no {field} in {status}"));
    line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("a number of kB")
}

#[test]
#[ignore = "needs bubblewrap (.ci/setup installs it; the README's test command runs these)"]
fn an_agent_flooding_its_own_control_socket_leaves_awfs_memory_flat() {
    let env = Env::new();
    let marker = env.path().join("flooded");
    let release = env.path().join("release");
    // Each connection sends 15 MiB, under the longest frame, with no newline, and stays open: a
    // socket that reads every connection at once holds them all.
    let flood = json!({ "flood": {
        "connections": 24, "mib": 15, "send_timeout_s": 0.25, "marker": marker, "release": release, "hold_s": 20,
    } });
    let turns = [hostile::turn(&["control_flood"], flood), hostile::turn(&[], json!({}))];
    env.write("wf.rhai", &hostile::workflow("flooder", r#"sandbox: #{ network: "none" }"#, &turns));
    let running = Running::start(env.path(), &["script", "run", "wf.rhai"]);
    let pid = running.pid;
    common::poll("a run folder", common::TIMEOUT, || env.run_dirs().pop());
    let start = memory_kib(pid, "VmRSS");
    let until = Instant::now() + common::TIMEOUT;
    while !marker.exists() {
        if Instant::now() > until {
            common::signal(pid, "-KILL");
            panic!("the flood never finished: {:?}", running.finish());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let (rss, peak) = (memory_kib(pid, "VmRSS"), memory_kib(pid, "VmHWM"));
    std::fs::write(&release, "").expect("release the flood");
    let out = running.finish();
    out.expect_code(0);
    let reports = out.json();
    let flood = &reports[0]["control_flood"];
    let sent = flood["sent_mib"].as_u64().expect("sent_mib");
    eprintln!("awf's memory: {start} KiB at its start, {rss} KiB after {sent} MiB sent, peak {peak} KiB");
    assert!(sent >= 15, "the flood reached the socket: {reports:#}");
    assert!(peak.saturating_sub(start) < 100 * 1024, "awf's memory rose {} MiB under the flood", (peak - start) / 1024);
    assert!(reports[1]["root"].is_array(), "the agent still answers after its flood: {reports:#}");
}
