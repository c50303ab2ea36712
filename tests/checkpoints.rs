//! Operator checkpoints through the binary: `ctx.checkpoint` parks a run `waiting` (run.json,
//! `runs list/show`, `GET /runs/{id}`, MCP `run_status`) until `awf runs answer` (or `POST
//! /runs/{id}/answer`, MCP `run_answer`) gives an answer valid against the schema; timeouts, several
//! open checkpoints, a run killed while parked and resumed, and `wf ask-operator` from an agent.

use crate::common;

use common::mcp::RawMcp;
use common::{read_json, run_id_of, wait_for_attempt_waiting, wait_for_run_dir, wait_until, Env, Running};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const SHIP: &str = r#"
let a = ctx.checkpoint("Ship it?", #{ type: "object", properties: #{ ship: #{ type: "boolean" } }, required: ["ship"] });
if a.ship { "shipped" } else { "held" }
"#;

/// run.json, or null while it is not written yet.
fn run_json(dir: &Path) -> Value {
    std::fs::read_to_string(dir.join("run.json")).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default()
}

fn attempts_of(events: &[Value]) -> Vec<u64> {
    events.iter().map(|e| e["attempt"].as_u64().unwrap_or(0)).collect()
}

#[test]
fn an_answer_flows_into_the_result_and_a_bad_one_is_refused_with_its_reasons() {
    let env = Env::new();
    env.write("wf.rhai", SHIP);
    let mut running = Running::start(env.path(), &["script", "run", "wf.rhai"]);
    let dir = wait_for_run_dir(&env);
    let id = run_id_of(&dir);
    let doc = wait_for_attempt_waiting(&dir, 1);
    assert_eq!(doc["waiting"][0]["question"], "Ship it?", "{doc}");
    assert_eq!(doc["waiting"][0]["key"], "checkpoint-1", "{doc}");
    running.wait_for_line("warn: waiting for the operator (checkpoint-1): Ship it?");
    running.wait_for_line(&format!("answer with: awf runs answer {id} --key checkpoint-1 --json VALUE"));
    env.awf(&["runs", "list"]).expect_code(0).stdout_has("waiting").stdout_has("(waiting: Ship it?");
    env.awf(&["runs", "show", &id])
        .expect_code(0)
        .stdout_has(&format!("run {id}: waiting"))
        .stdout_has("waiting for the operator (checkpoint-1): Ship it?");

    // An answer that fails the schema is refused with the reasons; the run stays parked.
    env.awf(&["runs", "answer", &id, "--json", r#"{"ship": "yes"}"#])
        .expect_code(2)
        .stderr_has("does not match checkpoint `checkpoint-1`'s schema")
        .stderr_has("at /ship: \"yes\" is not of type \"boolean\"");
    env.awf(&["runs", "answer", &id, "--json", "{}"]).expect_code(2).stderr_has("\"ship\" is a required property");
    env.awf(&["runs", "answer", &id, "--json", "not json"]).expect_code(2).stderr_has("not JSON");
    env.awf(&["runs", "answer", &id, "--json", "true", "--key", "other"])
        .expect_code(2)
        .stderr_has("no open checkpoint `other` (open: checkpoint-1)");
    assert_eq!(run_json(&dir)["attempts"][0]["status"], "waiting");

    env.write("answer.json", r#"{"ship": true}"#);
    env.awf(&["runs", "answer", &id, "--json", "@answer.json"]).expect_code(0).stdout_has("checkpoint-1 answered");
    let out = running.finish();
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "shipped");
    assert_eq!(env.events_of("checkpoint-asked").len(), 1);
    let answered = env.events_of("checkpoint-answered");
    assert_eq!(answered.len(), 1);
    assert_eq!(answered[0]["data"]["answer"], json!({ "ship": true }));
    let journal = common::read_jsonl(&dir.join("journal.jsonl"));
    assert_eq!(journal[0]["checkpoint"], "checkpoint-1");
    assert!(run_json(&dir).get("waiting").is_none(), "no waiting list once the run ended");
    env.awf(&["runs", "logs", &id])
        .expect_code(0)
        .stdout_has("asks the operator (checkpoint-1): Ship it?")
        .stdout_has(r#"checkpoint checkpoint-1 answered: {"ship":true}"#);

    // A run that is not waiting (it ended), and a run that does not exist.
    env.awf(&["runs", "answer", &id, "--json", r#"{"ship": true}"#])
        .expect_code(2)
        .stderr_has(&format!("run {id} is not waiting for the operator (status succeeded)"));
    env.awf(&["runs", "answer", "20990101-000000000-ffffff", "--json", "1"]).expect_code(2).stderr_has("no run");
}

#[test]
fn a_checkpoint_times_out_with_its_reason_caught_or_not() {
    let env = Env::new();
    let out = env.run(r#"ctx.checkpoint("Deploy now?", #{ type: "boolean" }, #{ timeout_ms: 200 })"#, &[]);
    out.expect_code(1);
    let result = env.result();
    let error = result["error"].as_str().unwrap_or_default();
    assert!(error.contains("timed out after 200 ms") && error.contains("Deploy now?"), "{result}");
    let dir = env.run_dir();
    let timed_out = env.events_of("checkpoint-timed-out");
    assert_eq!(timed_out.len(), 1);
    assert_eq!(timed_out[0]["data"]["timeout_ms"], 200);
    assert!(run_json(&dir).get("waiting").is_none());
    env.awf(&["runs", "logs", &run_id_of(&dir)]).expect_code(0).stdout_has("timed out after 200 ms: Deploy now?");

    let env = Env::new();
    let script = r#"
let v = "none";
try { v = ctx.checkpoint("Deploy now?", #{ type: "boolean" }, #{ timeout_ms: 100 }); } catch (e) { v = `fallback: ${e}`; }
v
"#;
    let out = env.run(script, &[]);
    out.expect_code(0).stdout_has("fallback: ctx.checkpoint `checkpoint-1` timed out after 100 ms");
}

#[test]
fn bad_checkpoint_calls_are_script_errors() {
    let env = Env::new();
    let cases = [
        (r#"ctx.checkpoint("q", #{ type: "boolean" }, #{ wait: 3 })"#, "unknown field `wait`"),
        (r#"ctx.checkpoint("", #{ type: "boolean" })"#, "the question must not be empty"),
        (r#"ctx.checkpoint("q", #{ type: 12 })"#, "`schema` is not a valid JSON Schema"),
        (r#"ctx.checkpoint("q", #{ type: "boolean" }, #{ timeout_ms: -1 })"#, "must not be negative"),
        (
            r#"ctx.parallel([1, 2], |n, i| ctx.checkpoint("Same?", #{ type: "string" }, #{ key: "same", timeout_ms: 3000 }))"#,
            "checkpoint `same` is already waiting for an answer",
        ),
    ];
    for (script, want) in cases {
        env.run(script, &[]).expect_code(1).stderr_has(want);
    }
}

#[test]
fn several_open_checkpoints_need_a_key() {
    let env = Env::new();
    env.write(
        "wf.rhai",
        r#"
let keys = ["a", "b"];
let got = ctx.parallel(keys, |k, i| ctx.checkpoint(`Answer ${k}?`, #{ type: "string" }, #{ key: k }));
got
"#,
    );
    let running = Running::start(env.path(), &["script", "run", "wf.rhai"]);
    let dir = wait_for_run_dir(&env);
    let id = run_id_of(&dir);
    wait_until("two checkpoints open", || run_json(&dir)["waiting"].as_array().is_some_and(|w| w.len() == 2));
    env.awf(&["runs", "answer", &id, "--json", r#""x""#])
        .expect_code(2)
        .stderr_has("several open checkpoints")
        .stderr_has("say which with --key");
    env.awf(&["runs", "answer", &id, "--key", "b", "--json", r#""for b""#]).expect_code(0);
    env.awf(&["runs", "answer", &id, "--json", r#""for a""#]).expect_code(0).stdout_has("checkpoint a answered");
    let out = running.finish();
    out.expect_code(0);
    assert_eq!(out.json(), json!(["for a", "for b"]));
}

#[test]
fn a_run_killed_while_parked_resumes_parked_and_is_never_asked_twice() {
    let env = Env::new();
    env.with_responder(r#"fn respond(turn) { #{ answer: "fine" } }"#);
    env.write(
        "wf.rhai",
        r#"
let a = ctx.agents.open(#{ key: "a" });
let first = a.ask("one");
let proceed = ctx.checkpoint("Go on?", #{ type: "boolean" }, #{ key: "proceed" });
`${first} ${proceed}`
"#,
    );
    let running = Running::start(env.path(), &["script", "run", "wf.rhai"]);
    let dir = wait_for_run_dir(&env);
    let id = run_id_of(&dir);
    wait_for_attempt_waiting(&dir, 1);
    common::signal(running.pid, "-KILL");
    let _ = running.finish();
    env.awf(&["runs", "answer", &id, "--json", "true"])
        .expect_code(2)
        .stderr_has("is not live")
        .stderr_has(&format!("`awf runs resume {id}` parks it again"));
    env.awf(&["runs", "list"]).expect_code(0).stdout_has("interrupted");

    let resumed = Running::start(env.path(), &["runs", "resume", &id]);
    let doc = wait_for_attempt_waiting(&dir, 2);
    assert_eq!(doc["attempts"][0]["status"], "interrupted", "{doc}");
    assert_eq!(doc["waiting"][0]["question"], "Go on?", "{doc}");
    env.awf(&["runs", "answer", &id, "--json", "true"]).expect_code(0);
    let out = resumed.finish();
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "fine true");
    assert_eq!(attempts_of(&env.events_of("checkpoint-asked")), [1, 2], "one ask per attempt that reached it");
    assert_eq!(attempts_of(&env.events_of("checkpoint-answered")), [2]);
    assert_eq!(attempts_of(&env.events_of("op-replayed")), [2], "the turn before is replayed");

    // Another attempt replays the answer: it is not asked again.
    let again = env.awf(&["runs", "resume", &id, "--again"]);
    again.expect_code(0);
    assert_eq!(again.stdout.trim(), "fine true");
    assert_eq!(attempts_of(&env.events_of("checkpoint-asked")), [1, 2]);
    assert_eq!(attempts_of(&env.events_of("checkpoint-replayed")), [3]);
}

#[test]
fn an_agent_asks_the_operator_from_its_turn() {
    let env = Env::new();
    // The turn waits on the operator past its stall timeout: it is not stalled meanwhile.
    env.write("awf.toml", "[limits]\nstall_timeout = \"300ms\"\n");
    env.write(
        "asker.sh",
        r#"#!/bin/sh
cat > prompt.txt
answer=$("$AWF_LAUNCHER" ask-operator "Which colour?") || exit 9
printf '{"verdict":%s}' "$answer" | "$AWF_LAUNCHER" result "$AWF_OP"
"#,
    );
    env.write(
        "wf.rhai",
        r#"
let a = ctx.agents.open(#{ key: "agent", operator: true, runtime: #{ harness: "command", command: ["sh", "asker.sh"] } });
let o = a.run(#{ prompt: "Pick a colour.", schema: #{ type: "object", properties: #{ verdict: #{ type: "string" } }, required: ["verdict"] } });
o.value.verdict
"#,
    );
    let running = Running::start(env.path(), &["script", "run", "wf.rhai"]);
    let dir = wait_for_run_dir(&env);
    let id = run_id_of(&dir);
    let doc = wait_for_attempt_waiting(&dir, 1);
    assert_eq!(doc["waiting"][0]["question"], "Which colour?", "{doc}");
    assert_eq!(doc["waiting"][0]["agent"], "agent", "{doc}");
    env.awf(&["runs", "answer", &id, "--json", "7"]).expect_code(2).stderr_has("is not of type \"string\"");
    // Not a synchronisation: time for the stall clock to pass its 300 ms.
    std::thread::sleep(std::time::Duration::from_millis(900));
    env.awf(&["runs", "answer", &id, "--json", r#""blue""#]).expect_code(0);
    let out = running.finish();
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "blue");
    let asked = env.events_of("checkpoint-asked");
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["data"]["agent"], "agent");
    assert!(asked[0]["data"]["key"].as_str().is_some_and(|k| k.starts_with("agent/") && k.ends_with("/ask-1")));
    // Granted the operator, the agent was told how to ask.
    let prompt = std::fs::read_to_string(env.path().join("prompt.txt")).expect("the prompt");
    assert!(prompt.contains("ask-operator \"<question>\""), "{prompt}");
}

#[test]
fn serve_shows_a_waiting_run_and_answers_it_over_http() {
    let env = Env::new();
    env.write("scripts/ship.rhai", SHIP);
    let server = common::serve::serve(&env, &[]);
    let id = server.start(json!({ "script": "scripts/ship.rhai" }));
    let shown = server.until(&id, "waiting");
    assert_eq!(shown["waiting"][0]["question"], "Ship it?", "{shown}");
    assert_eq!(server.listed_status(&id), "waiting");
    let path = format!("/runs/{id}/answer");
    let (status, v) = server.json("POST", &path, Some(&json!({ "value": { "ship": 1 } })));
    assert_eq!(status, 409, "{v}");
    assert!(v["error"].as_str().is_some_and(|e| e.contains("at /ship")), "{v}");
    let (status, v) = server.json("POST", &path, Some(&json!({ "answer": true })));
    assert_eq!(status, 400, "{v}");
    let (status, v) = server.json("POST", &path, Some(&json!({ "value": { "ship": false } })));
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["key"], "checkpoint-1");
    let done = server.until(&id, "succeeded");
    assert_eq!(done["value"], "held");
    let (status, v) = server.json("POST", &path, Some(&json!({ "value": { "ship": false } })));
    assert_eq!(status, 409, "{v}");
    assert!(v["error"].as_str().is_some_and(|e| e.contains("not waiting")), "{v}");
}

#[test]
fn mcp_run_status_shows_waiting_and_run_answer_answers() {
    let env = Env::new();
    env.write("wf.rhai", SHIP);
    let running = Running::start(env.path(), &["script", "run", "wf.rhai"]);
    let dir = wait_for_run_dir(&env);
    let id = run_id_of(&dir);
    wait_for_attempt_waiting(&dir, 1);
    let mut mcp = RawMcp::start(&env);
    let status = mcp.call("run_status", json!({ "run_id": id })).0;
    assert_eq!(status["structuredContent"]["status"], "waiting", "{status}");
    assert_eq!(status["structuredContent"]["waiting"][0]["question"], "Ship it?", "{status}");
    let waited = mcp.call("run_wait", json!({ "run_id": id, "wait_s": 30 })).0;
    let text = waited["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("waiting for the operator: Ship it?"), "{waited}");
    let refused = mcp.call("run_answer", json!({ "run_id": id, "value": { "ship": "no" } })).0;
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(refused["content"][0]["text"].as_str().is_some_and(|t| t.contains("at /ship")), "{refused}");
    let answered = mcp.call("run_answer", json!({ "run_id": id, "value": { "ship": true } })).0;
    assert_eq!(answered["isError"], false, "{answered}");
    assert_eq!(answered["structuredContent"]["key"], "checkpoint-1", "{answered}");
    let out = running.finish();
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "shipped");
    drop(mcp.stdin);
    let _ = mcp.child.wait();
    assert_eq!(read_json(&dir.join("result.json"))["status"], "succeeded");
}

/// Kills the background runs a failed test leaves parked.
struct Reaper(PathBuf);

impl Drop for Reaper {
    fn drop(&mut self) {
        for dir in std::fs::read_dir(&self.0).into_iter().flatten().flatten() {
            let pid = std::fs::read_to_string(dir.path().join("lock")).unwrap_or_default();
            if pid.trim().parse::<u32>().is_ok() {
                let _ = std::process::Command::new("kill").args(["-KILL", pid.trim()]).status();
            }
        }
    }
}

/// The status `awf runs list` shows for `id`.
fn listed(env: &Env, id: &str) -> String {
    let list = env.awf(&["runs", "list"]);
    let line = list.stdout.lines().find(|l| l.starts_with(id)).unwrap_or_default().to_string();
    line.split_whitespace().nth(1).unwrap_or_default().to_string()
}

#[test]
fn a_parked_background_run_keeps_its_slot() {
    let env = Env::new();
    let _reaper = Reaper(env.runs_root());
    env.write("awf.toml", "[limits]\nbackground = 1\n");
    env.write("wf.rhai", SHIP);
    let detach = || {
        let out = env.awf(&["script", "run", "wf.rhai", "--detach"]);
        out.expect_code(0);
        out.stdout.trim().to_string()
    };
    let one = detach();
    wait_until("the first run waiting", || listed(&env, &one) == "waiting");
    let two = detach();
    wait_until("the second run queued", || listed(&env, &two) == "queued");
    assert_eq!(listed(&env, &one), "waiting");
    assert!(!env.runs_root().join(&two).join("run.json").exists(), "the second run started beside a parked one");
    env.awf(&["runs", "answer", &one, "--json", r#"{"ship": true}"#]).expect_code(0);
    wait_until("the first run done", || listed(&env, &one) == "succeeded");
    wait_until("the second run waiting in its turn", || listed(&env, &two) == "waiting");
    env.awf(&["runs", "answer", &two, "--json", r#"{"ship": false}"#]).expect_code(0);
    wait_until("the second run done", || listed(&env, &two) == "succeeded");
    assert_eq!(read_json(&env.runs_root().join(&two).join("result.json"))["value"], "held");
}

#[test]
fn an_agents_ask_ends_with_its_operations_deadline() {
    let env = Env::new();
    env.write(
        "asker.sh",
        r#"#!/bin/sh
cat > /dev/null
"$AWF_LAUNCHER" ask-operator "Anyone there?" > /dev/null 2> ask.err
echo "exit $?" >> ask.err
sleep 5
"#,
    );
    env.write(
        "wf.rhai",
        r#"
let a = ctx.agents.open(#{ key: "agent", operator: true, runtime: #{ harness: "command", command: ["sh", "asker.sh"] } });
let o = a.run(#{ prompt: "Ask.", schema: #{ type: "string" }, timeout_ms: 500 });
o.kind
"#,
    );
    let out = env.awf(&["script", "run", "wf.rhai"]);
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "timed-out");
    let dir = env.run_dir();
    assert_eq!(env.events_of("checkpoint-asked").len(), 1);
    assert!(env.events_of("checkpoint-answered").is_empty());
    assert!(run_json(&dir).get("waiting").is_none(), "the ask closed with its operation");
}
