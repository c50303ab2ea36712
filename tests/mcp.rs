//! `awf mcp`: the MCP server on stdio, driven by the official MCP Python SDK
//! (tests/fixtures/mcp_client.py) and by Claude Code, plus a raw handshake that needs no SDK.

use crate::common;
use crate::common::fake_model;

use common::mcp::{send, RawMcp};
use common::{read_json, wait_with_timeout, wait_within, Env};
use fake_model::{FakeModel, Reply};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;

const NEEDS_SDK: &str = "needs the MCP Python SDK (pip install mcp==1.30.0; .ci/setup installs it)";

/// Runs the SDK client in `env` with `steps` (see the fixture); panics when the SDK is missing.
fn sdk(env: &Env, steps: Value) -> Value {
    sdk_with(env, steps, &[])
}

/// As `sdk`, with extra environment for the client (MCP_HTTP_URL/MCP_HTTP_TOKEN: over HTTP).
fn sdk_with(env: &Env, steps: Value, vars: &[(&str, &str)]) -> Value {
    let probe = Command::new("python3").args(["-c", "import mcp"]).output().expect("run python3");
    assert!(probe.status.success(), "{NEEDS_SDK}: {}", String::from_utf8_lossy(&probe.stderr));
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/mcp_client.py");
    let child = Command::new("python3")
        .args([fixture, common::bin(), &env.path().display().to_string(), &steps.to_string()])
        .current_dir(env.path())
        .env("XDG_CONFIG_HOME", env.path().join(".xdg-config"))
        .env("XDG_STATE_HOME", env.path().join(".xdg-state"))
        .env("NO_COLOR", "1")
        .env_remove("AWF_RUNTIME")
        .env_remove("AWF_LOG")
        .envs(vars.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the MCP client");
    let out = wait_with_timeout(child);
    assert_eq!(out.code, Some(0), "the MCP client failed: {out:#?}");
    serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("client output is not JSON ({e}): {out:#?}"))
}

fn call(tool: &str, arguments: Value) -> Value {
    json!({ "tool": tool, "arguments": arguments })
}

/// A workflow that naps `args.ms` in a stage, then says so.
const NAP: &str = "ctx.stage(\"nap\", || { ctx.sleep(args.ms); });\n\"woke after \" + args.ms\n";

#[test]
#[ignore = "needs the MCP Python SDK (pip install mcp==1.30.0; .ci/setup installs it)"]
fn sdk_lists_the_tools_and_runs_magi_on_the_fake_harness_with_progress() {
    let env = Env::new();
    let report = sdk(
        &env,
        json!([
            call("list_strategies", json!({})),
            call(
                "run_council",
                json!({ "name": "magi", "task": "Ship it on Friday?", "params": { "choices": ["yes", "no"] } })
            ),
        ]),
    );
    assert_eq!(report["server"], "awf");
    let tools = json!([
        "list_strategies",
        "run_council",
        "run_workflow",
        "plan_council",
        "plan_workflow",
        "run_status",
        "run_wait",
        "run_result",
        "run_stop",
        "run_answer"
    ]);
    assert_eq!(report["tools"], tools);
    assert_eq!(report["schemas"]["run_council"]["required"], json!(["name", "task"]));
    let list = &report["calls"][0];
    assert_eq!(list["is_error"], false, "{list}");
    let magi = list["structured"]["strategies"].as_array().expect("strategies").iter().find(|s| s["name"] == "magi");
    let magi = magi.expect("magi is listed");
    assert_eq!(magi["meta"]["params"]["aggregate"]["enum"], json!(["majority", "unanimity"]));
    let council = &report["calls"][1];
    assert_eq!(council["is_error"], false, "{council}");
    let text = council["text"].as_str().expect("text");
    assert!(text.starts_with("Ruling: yes\n"), "{text}");
    assert!(text.ends_with("— magi: unanimous (after 1 reflection round) · tally yes: 3"), "{text}");
    assert_eq!(council["structured"]["status"], "succeeded");
    let id = council["structured"]["run_id"].as_str().expect("run id");
    let result = read_json(&env.runs_root().join(id).join("result.json"));
    assert_eq!(result["value"]["output"].as_str(), Some(text), "the output is the run's own");
    let progress: Vec<&str> =
        council["progress"].as_array().expect("progress").iter().filter_map(Value::as_str).collect();
    assert_eq!(progress.iter().filter(|p| p.ends_with(" answered")).count(), 6, "{progress:?}");
    assert_eq!(progress.last(), Some(&"run succeeded"), "{progress:?}");
}

#[test]
#[ignore = "needs the MCP Python SDK (pip install mcp==1.30.0; .ci/setup installs it)"]
fn sdk_bad_calls_are_tool_errors_with_the_cli_texts_and_the_connection_stays() {
    let env = Env::new();
    env.write("ok.rhai", "\"ok\"\n");
    env.write("scripts/x.rhai", "export const META = #{ name: \"x\", args: #{ type: \"object\", required: [\"n\"], properties: #{ n: #{ type: \"integer\" } } } };\nfn run(args) { args.n + 1 }\n");
    let bad_args = env.awf(&["script", "run", "scripts/x.rhai", "--args", r#"{"n":"a"}"#]);
    bad_args.expect_code(2);
    let outside = tempfile::tempdir().expect("tempdir");
    std::fs::write(outside.path().join("x.rhai"), "\"outside\"\n").expect("write");
    std::os::unix::fs::symlink(outside.path().join("x.rhai"), env.path().join("link.rhai")).expect("symlink");
    let cli = env.awf(&["council", "run", "magi", "--task", "x", "--param", "aggregate=bogus"]);
    cli.expect_code(2);
    let report = sdk(
        &env,
        json!([
            call("run_council", json!({ "name": "nope", "task": "x" })),
            call("run_council", json!({ "name": "magi", "task": "x", "params": { "aggregate": "bogus" } })),
            call("run_council", json!({ "name": "magi" })),
            call("run_workflow", json!({ "script": "../x.rhai" })),
            call("run_workflow", json!({ "script": outside.path().join("x.rhai") })),
            call("run_workflow", json!({ "script": "link.rhai" })),
            call("run_status", json!({ "run_id": "../etc" })),
            call("run_wait", json!({ "run_id": "nope" })),
            call("run_workflow", json!({ "script": "ok.rhai", "wait_s": -1 })),
            call("run_workflow", json!({ "script": "scripts/x.rhai", "args": { "n": "a" } })),
            call("run_workflow", json!({ "script": "ok.rhai" })),
        ]),
    );
    let calls = report["calls"].as_array().expect("calls");
    let texts: Vec<&str> = calls.iter().map(|c| c["text"].as_str().unwrap_or("")).collect();
    for c in &calls[..10] {
        assert_eq!(c["is_error"], true, "{c}");
    }
    assert!(texts[0].starts_with("error: unknown strategy \"nope\" (installed: magi,"), "{}", texts[0]);
    assert_eq!(texts[1], cli.stderr.trim(), "the CLI's text for a bad param");
    assert!(texts[1].contains("params.aggregate"), "{}", texts[1]);
    assert_eq!(texts[2], "error: \"task\" is required");
    assert_eq!(
        texts[3],
        "error: script \"../x.rhai\" is refused: `..` is not accepted; name a file inside the project folder"
    );
    assert!(texts[4].contains("is refused: absolute paths are not accepted"), "{}", texts[4]);
    assert_eq!(texts[5], "error: script \"link.rhai\" is refused: it leads outside the project folder (a symlink)");
    assert!(texts[6].starts_with("error: no run ../etc in "), "{}", texts[6]);
    assert!(texts[7].starts_with("error: no run nope in "), "{}", texts[7]);
    assert!(texts[8].starts_with("error: \"wait_s\" must be a number of seconds"), "{}", texts[8]);
    assert_eq!(texts[9], bad_args.stderr.trim(), "the CLI's text for arguments that fail META.args");
    assert!(texts[9].contains("at /n: \"a\" is not of type \"integer\""), "{}", texts[9]);
    assert_eq!(calls[10]["is_error"], false, "{}", calls[10]);
    assert_eq!(texts[10], "ok", "the connection outlived every refusal");
    assert_eq!(env.run_dirs().len(), 1, "no refused call left a run folder: {:?}", env.run_dirs());
}

#[test]
#[ignore = "needs the MCP Python SDK (pip install mcp==1.30.0; .ci/setup installs it)"]
fn sdk_a_client_gone_mid_run_leaves_the_run_going_and_a_new_connection_waits_on_it() {
    let env = Env::new();
    env.write("nap.rhai", NAP);
    let first = sdk(
        &env,
        json!([{ "tool": "run_workflow", "arguments": { "script": "nap.rhai", "args": { "ms": 10000 }, "wait_s": 60 },
                 "abandon_after_s": 1.5 }]),
    );
    assert_eq!(first["calls"][0]["abandoned"], true, "{first}");
    let dirs = env.run_dirs();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let id = dirs[0].file_name().expect("name").to_string_lossy().to_string();
    let second = sdk(
        &env,
        json!([call("run_status", json!({ "run_id": id })), call("run_wait", json!({ "run_id": id, "wait_s": 30 }))]),
    );
    let status = &second["calls"][0];
    assert_eq!(status["structured"]["status"], "running", "the run went on after its client left: {status}");
    let waited = &second["calls"][1];
    assert_eq!(waited["is_error"], false, "{waited}");
    assert_eq!(waited["text"], "woke after 10000");
    assert_eq!(waited["structured"]["status"], "succeeded");
    assert_eq!(env.result()["status"], "succeeded");
}

#[test]
#[ignore = "needs the MCP Python SDK (pip install mcp==1.30.0; .ci/setup installs it)"]
fn sdk_a_run_not_done_within_wait_s_gives_its_id_and_run_stop_cancels_it() {
    let env = Env::new();
    env.write("nap.rhai", NAP);
    let started =
        sdk(&env, json!([call("run_workflow", json!({ "script": "nap.rhai", "args": { "ms": 60000 }, "wait_s": 0 }))]));
    let call0 = &started["calls"][0];
    assert_eq!(call0["is_error"], false, "{call0}");
    let status = call0["structured"]["status"].as_str().unwrap_or("");
    assert!(status == "queued" || status == "running", "a background run not ended yet: {call0}");
    let id = call0["structured"]["run_id"].as_str().expect("run id").to_string();
    assert!(call0["text"].as_str().expect("text").contains(&format!("call run_wait with run_id \"{id}\"")), "{call0}");
    let report = sdk(
        &env,
        json!([
            call("run_result", json!({ "run_id": id })),
            call("run_stop", json!({ "run_id": id })),
            call("run_wait", json!({ "run_id": id, "wait_s": 30 })),
            call("run_result", json!({ "run_id": id })),
            call("run_stop", json!({ "run_id": id })),
        ]),
    );
    let calls = report["calls"].as_array().expect("calls");
    let text = calls[0]["text"].as_str().unwrap_or("");
    assert!(text.starts_with(&format!("error: run {id} has no result yet: it is ")), "{text}");
    assert_eq!(calls[1]["is_error"], false, "{}", calls[1]);
    assert!(calls[1]["text"].as_str().unwrap_or("").ends_with(&format!("run {id}: cancelled")), "{}", calls[1]);
    assert_eq!(calls[2]["is_error"], true, "a cancelled run is not a success: {}", calls[2]);
    assert_eq!(calls[2]["structured"]["status"], "cancelled");
    assert_eq!(calls[2]["structured"]["error"], "stopped by awf runs stop");
    assert_eq!(calls[3]["structured"]["status"], "cancelled", "run_result is result.json");
    assert_eq!(calls[4]["text"], format!("awf: run {id} is not in flight: it has already ended (cancelled)"));
}

/// One JSON-RPC message on the server's stdin.

#[test]
fn a_raw_client_gets_the_tools_and_a_refusal_as_a_tool_error() {
    let env = Env::new();
    let mut child =
        common::command(env.path(), &["mcp"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let reply = |id: u64| -> Value {
        loop {
            let line = rx.recv_timeout(common::TIMEOUT).expect("a reply within the timeout");
            let v: Value = serde_json::from_str(&line).expect("JSON-RPC line");
            if v["id"] == id {
                return v;
            }
        }
    };
    let client = json!({ "name": "raw", "version": "0" });
    send(
        &mut stdin,
        json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client } }),
    );
    assert_eq!(reply(1)["result"]["serverInfo"]["name"], "awf");
    send(&mut stdin, json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
    send(&mut stdin, json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" }));
    assert_eq!(reply(2)["result"]["tools"].as_array().map(Vec::len), Some(10));
    send(
        &mut stdin,
        json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": { "name": "run_council", "arguments": { "name": "nope", "task": "x" } } }),
    );
    let refused = reply(3);
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    let text = refused["result"]["content"][0]["text"].as_str().unwrap_or("");
    assert!(text.starts_with("error: unknown strategy \"nope\""), "{refused}");
    drop(stdin);
    let out = wait_with_timeout(child);
    assert_eq!(out.code, Some(0), "awf mcp ends when its client closes stdin: {out:#?}");
}

#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn claude_code_with_awf_mcp_runs_magi_and_receives_its_output() {
    let probe = Command::new("claude").arg("--version").stdin(Stdio::null()).output();
    assert!(
        probe.is_ok_and(|o| o.status.success()),
        "`claude` is not installed (.ci/setup installs the pinned version)"
    );
    let env = Env::new();
    let home = env.path().join("operator-home");
    std::fs::create_dir_all(&home).expect("home");
    // The model asks for the tool; Claude Code calls awf mcp; the fake ends the turn on the result.
    let args = json!({ "name": "magi", "task": "Ship it on Friday?", "params": { "choices": ["yes", "no"] } });
    let server = FakeModel::start_cli(vec![Reply::tool("mcp__awf__run_council", args)]);
    let config = json!({ "mcpServers": { "awf": { "command": common::bin(), "args": ["mcp"] } } });
    let mut cmd = Command::new("claude");
    cmd.args(["-p", "--output-format", "json", "--model", "claude-sonnet-4-5", "--strict-mcp-config"])
        .args(["--mcp-config", &config.to_string(), "--allowedTools", "mcp__awf__run_council"])
        .args(["--", "Convene magi on whether to ship on Friday."])
        .current_dir(env.path())
        .env("HOME", &home)
        .env("CLAUDE_CONFIG_DIR", home.join(".claude"))
        .env("XDG_CONFIG_HOME", env.path().join(".xdg-config"))
        .env("XDG_STATE_HOME", env.path().join(".xdg-state"))
        .env("ANTHROPIC_BASE_URL", server.base())
        .env("ANTHROPIC_API_KEY", "dummy")
        .env("CLAUDE_CODE_MAX_RETRIES", "1")
        .env_remove("AWF_RUNTIME")
        .env_remove("CLAUDECODE")
        .env_remove("ANTHROPIC_AUTH_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for var in [
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
        "DISABLE_TELEMETRY",
        "DISABLE_AUTOUPDATER",
        "DISABLE_ERROR_REPORTING",
    ] {
        cmd.env(var, "1");
    }
    let out = wait_within(cmd.spawn().expect("spawn claude"), std::time::Duration::from_secs(120));
    assert_eq!(out.code, Some(0), "claude failed: {out:#?}");
    let result = env.result();
    assert_eq!(result["status"], "succeeded", "the council ran through awf mcp");
    let output = result["value"]["output"].as_str().expect("the council's output").to_string();
    assert!(output.starts_with("Ruling: yes\n"), "{output}");
    // The tool's result Claude Code sent back to the model is the council's output.
    let tool_result = server
        .bodies()
        .into_iter()
        .filter_map(|b| b["messages"].as_array().and_then(|m| m.last()).cloned())
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|c| c["type"] == "tool_result")
        .unwrap_or_else(|| panic!("no tool result reached the model: {:#?}", server.bodies()));
    assert!(tool_result.to_string().contains("Ruling: yes"), "{tool_result}");
    assert_ne!(tool_result["is_error"], true, "{tool_result}");
}

#[test]
#[ignore = "needs the MCP Python SDK (pip install mcp==1.30.0; .ci/setup installs it)"]
fn sdk_over_streamable_http_on_serve_runs_magi_behind_the_servers_token() {
    let env = Env::new();
    let server = common::serve::serve(&env, &[]);
    let common::serve::Addr::Tcp(port) = server.addr else { panic!("a TCP server") };
    let url = format!("http://127.0.0.1:{port}/mcp");
    let report = sdk_with(
        &env,
        json!([call(
            "run_council",
            json!({ "name": "magi", "task": "Ship it on Friday?", "params": { "choices": ["yes", "no"] } })
        )]),
        &[("MCP_HTTP_URL", &url), ("MCP_HTTP_TOKEN", &server.token)],
    );
    assert_eq!(report["server"], "awf");
    assert_eq!(report["tools"].as_array().map(Vec::len), Some(10), "{report}");
    let council = &report["calls"][0];
    assert_eq!(council["is_error"], false, "{council}");
    assert!(council["text"].as_str().unwrap_or("").starts_with("Ruling: yes\n"), "{council}");
    // The same authentication as the rest of the server: no token, no MCP.
    let host = server.host();
    let headers = [("Host", host.as_str()), ("Authorization", "Bearer wrong-token-0123456789")];
    let (status, _) = server.send("POST", "/mcp", &headers, Some(&json!({})));
    assert_eq!(status, 401);
}

#[test]
fn run_wait_from_a_cursor_sends_no_progress_twice() {
    let env = Env::new();
    env.write(
        "wf.rhai",
        r#"ctx.stage("one", || { ctx.log("one"); });
let a = ctx.checkpoint("Go on?", #{ type: "boolean" }, #{ timeout_ms: 60000 });
ctx.stage("two", || { ctx.log("two"); });
a"#,
    );
    let mut mcp = RawMcp::start(&env);
    let (started, _) = mcp.call("run_workflow", json!({ "script": "wf.rhai", "wait_s": 30 }));
    let id = started["structuredContent"]["run_id"].as_str().expect("a run id").to_string();
    assert_eq!(started["structuredContent"]["status"], "waiting", "{started}");
    // The first wait, from the start, sees everything so far.
    let (first, first_lines) = mcp.call("run_wait", json!({ "run_id": id, "wait_s": 30 }));
    assert!(first_lines.contains(&"stage one started".to_string()), "{first_lines:?}");
    let mut cursor = first["structuredContent"]["cursor"].as_u64().expect("a cursor");
    assert!(cursor > 0, "{first}");
    // Bad cursors are refused, naming the argument.
    for bad in [json!(1), json!("x"), json!(cursor + 1_000_000)] {
        let (refused, _) = mcp.call("run_wait", json!({ "run_id": id, "since": bad, "wait_s": 0 }));
        assert_eq!(refused["isError"], true, "{refused}");
        assert!(refused["content"][0]["text"].as_str().is_some_and(|t| t.contains("\"since\"")), "{refused}");
    }
    let (answered, _) = mcp.call("run_answer", json!({ "run_id": id, "value": true }));
    assert_eq!(answered["isError"], false, "{answered}");
    // Waits in chunks, each from the last cursor, until the run ends.
    let mut later = Vec::new();
    let mut last = json!(null);
    for _ in 0..50 {
        let (waited, lines) = mcp.call("run_wait", json!({ "run_id": id, "since": cursor, "wait_s": 1 }));
        later.extend(lines);
        cursor = waited["structuredContent"]["cursor"].as_u64().expect("a cursor");
        last = waited;
        if last["structuredContent"]["status"] == "succeeded" {
            break;
        }
    }
    assert_eq!(last["structuredContent"]["status"], "succeeded", "{last}");
    assert_eq!(later.last().map(String::as_str), Some("run succeeded"), "{later:?}");
    assert!(later.contains(&"stage two started".to_string()), "{later:?}");
    for line in &later {
        assert!(!first_lines.contains(line), "{line:?} was sent twice: first {first_lines:?}, then {later:?}");
    }
    let distinct: std::collections::HashSet<&String> = later.iter().collect();
    assert_eq!(distinct.len(), later.len(), "no line repeats between the chunks: {later:?}");
    drop(mcp.stdin);
    let _ = wait_with_timeout(mcp.child);
}
