//! Background councils from inside a turn: `wf council --background NAME` answers at once with a
//! receipt, the council runs as a child run that outlives the turn (queued for a slot of the
//! machine's background pool), its agent is woken once with its output, `wf council --wait`
//! joins several and their spend is billed once, the run's end waits for them, and a stopped run
//! stops them. The agents are `msg_agent.py` command agents; the council is `gated`, a strategy
//! written here whose one member (a `command` agent) answers once a gate file exists.

use crate::common;
use crate::common::fake_model;

use common::council::{parent_and_children, GATED, MEMBER};
use common::{agent_fixture, events_so_far_of, read_json, read_jsonl, wait_until, Env, Running};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// A folder with the `gated` strategy and `extra` config, and a workflow `body` in which the
/// agents of `plans` (key → msg_agent.py plan, `@DIR` standing for the folder) are open as `key`
/// variables, granted `gated`.
fn setup(extra: &str, plans: &[(&str, Value)], body: &str) -> Env {
    let env = Env::new();
    let member = env.write("member.sh", MEMBER);
    env.write("stdlib/council/gated.rhai", &GATED.replace("MEMBER", &member.display().to_string()));
    env.write(
        "awf.toml",
        &format!("default_runtime = \"scripted\"\n[runtimes.scripted]\nharness = \"fake\"\nmodel = \"fake\"\n{extra}"),
    );
    let mut script = String::new();
    for (key, plan) in plans {
        let plan = plan.to_string().replace("@DIR", &env.path().display().to_string());
        let path = env.write(&format!("plans/{key}.json"), &plan);
        script.push_str(&format!(
            "let {key} = ctx.agents.open(#{{ key: \"{key}\", councils: [\"gated\"], runtime: #{{ harness: \"command\", command: [\"python3\", \"{}\", \"{}\"] }} }});\n",
            agent_fixture("msg_agent.py"),
            path.display()
        ));
    }
    script.push_str(body);
    env.write("wf.rhai", &script);
    env
}

/// The steps `key` ran (msg_agent.py's log).
fn steps(parent: &Path, key: &str) -> Vec<Value> {
    read_jsonl(&parent.join("agents").join(key).join("state/log.jsonl"))
}

/// A JSON document, or null while it does not exist (yet).
fn read_now(path: &Path) -> Value {
    std::fs::read_to_string(path).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or(Value::Null)
}

/// The only top-level run folder, once it exists.
fn top_level_run(env: &Env) -> PathBuf {
    let mut found = None;
    wait_until("the run folder", || {
        found = env.run_dirs().into_iter().find(|d| {
            let doc = read_now(&d.join("run.json"));
            doc.is_object() && doc.get("parent").is_none()
        });
        found.is_some()
    });
    found.expect("found")
}

#[test]
fn the_receipt_comes_at_once_and_the_agent_is_woken_once_with_the_output() {
    let env = setup(
        "",
        &[(
            "boss",
            json!({ "turn": [["council_bg", "gated", { "task": "Ship?", "gate": "@DIR/go" }], ["answer_last"]] }),
        )],
        "boss.ask(\"Start the council.\")",
    );
    let go = env.path().join("go");
    let mut run = Running::start(env.path(), &["script", "run", "wf.rhai", "--json"]);
    let parent = top_level_run(&env);
    // The turn ended with the receipt while the council waits for its gate.
    wait_until("the turn's end", || {
        events_so_far_of(&parent, "op-settled").iter().any(|e| e["data"]["op_id"] == "boss#1")
    });
    run.wait_for_line("info: waiting for 1 background council");
    assert!(events_so_far_of(&parent, "child-run-ended").is_empty(), "the council is still running");
    std::fs::write(&go, "").expect("open the gate");
    let out = run.finish();
    out.expect_code(0);

    let receipt: Value =
        serde_json::from_str(out.json()["value"].as_str().expect("the receipt, as text")).expect("JSON");
    let (_, children) = parent_and_children(&env);
    assert_eq!(children.len(), 1);
    let child_id = children[0].file_name().and_then(|n| n.to_str()).expect("id").to_string();
    assert_eq!(receipt["run_id"], child_id.as_str());
    assert_eq!(receipt["status"], "running");
    assert_eq!(receipt["note"], "you will be woken once with its output");
    let started = &events_so_far_of(&parent, "child-run-started")[0];
    assert_eq!(started["data"]["background"], true, "{started}");

    // Woken once: one message, delivered once, in one message operation that showed the output.
    let settled = events_so_far_of(&parent, "council-settled");
    assert_eq!(settled.len(), 1, "{settled:?}");
    assert_eq!(settled[0]["data"]["delivery"], "message");
    assert_eq!(settled[0]["data"]["status"], "succeeded");
    let n = settled[0]["data"]["message"].clone();
    let delivered: Vec<Value> =
        events_so_far_of(&parent, "message-delivered").into_iter().filter(|e| e["data"]["n"] == n).collect();
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    let woken: Vec<Value> =
        read_jsonl(&parent.join("turns.jsonl")).into_iter().filter(|t| t["kind"] == "message").collect();
    assert_eq!(woken.len(), 1, "{woken:?}");
    let shown =
        std::fs::read_to_string(parent.join("agents/boss/state/boss#m1.stdin")).expect("the message op's prompt");
    assert!(shown.contains("ruled: yes") && shown.contains(&child_id), "{shown}");

    // The run ended after the council settled, and billed its spend to the agent once.
    let all = read_jsonl(&parent.join("events.jsonl"));
    let at = |ty: &str| all.iter().position(|e| e["type"] == ty).unwrap_or_else(|| panic!("no {ty}"));
    assert!(at("council-settled") < at("run-finished"));
    let child = read_json(&children[0].join("result.json"));
    assert_eq!(child["status"], "succeeded");
    let result = read_json(&parent.join("result.json"));
    assert_eq!(child["accounting"]["totals"]["tokens"], 120);
    assert_eq!(result["accounting"]["by_agent"]["boss"]["tokens"], 120, "{result}");
    assert_eq!(result["children"], json!([child_id]));
}

#[test]
fn wait_joins_two_councils_prints_their_outputs_and_bills_them_once() {
    let env = setup(
        "",
        &[(
            "boss",
            json!({ "turn": [
                ["council_bg", "gated", { "task": "One?", "gate": "@DIR" }],
                ["council_bg", "gated", { "task": "Two?", "gate": "@DIR" }],
                ["council_wait"], ["answer_last"]] }),
        )],
        "boss.ask(\"Convene two.\")",
    );
    let out = env.awf(&["script", "run", "wf.rhai", "--json"]);
    out.expect_code(0);
    let (parent, children) = parent_and_children(&env);
    assert_eq!(children.len(), 2);
    let wait = steps(&parent, "boss").into_iter().find(|s| s["step"][0] == "council_wait").expect("the wait");
    assert_eq!(wait["code"], 0, "{wait}");
    let outputs: Value = serde_json::from_str(wait["out"].as_str().expect("out")).expect("a JSON list");
    assert_eq!(outputs.as_array().map(Vec::len), Some(2), "{outputs}");
    for o in outputs.as_array().into_iter().flatten() {
        assert_eq!(o["ok"], true, "{o}");
        assert_eq!(o["output"], "ruled: yes", "{o}");
        assert_eq!(o["strategy"], "gated");
    }
    // The wait took the outputs: no message operation woke the agent, none was delivered.
    assert!(events_so_far_of(&parent, "message-delivered").is_empty());
    let turns = read_jsonl(&parent.join("turns.jsonl"));
    assert!(!turns.iter().any(|t| t["kind"] == "message"), "{turns:?}");
    // Each council billed once: two `council` lines, and the run's spend is their sum.
    let billed: Vec<&Value> = turns.iter().filter(|t| t["kind"] == "council").collect();
    assert_eq!(billed.len(), 2, "{turns:?}");
    let sum: u64 = children
        .iter()
        .map(|c| read_json(&c.join("result.json"))["accounting"]["totals"]["tokens"].as_u64().expect("tokens"))
        .sum();
    assert_eq!(sum, 240);
    let result = out.json();
    assert_eq!(result["accounting"]["totals"]["tokens"], sum, "{result}");
    assert_eq!(result["accounting"]["by_agent"]["boss"]["tokens"], sum);
}

#[test]
fn wait_on_an_id_that_is_not_the_agents_is_refused_naming_it() {
    let env = setup(
        "",
        &[
            (
                "boss",
                json!({ "turn": [["council_bg", "gated", { "task": "Mine?", "gate": "@DIR" }], ["answer_last"]] }),
            ),
            (
                "other",
                json!({ "turn": [["council_wait_prompt"], ["council_wait_ids", ["no-such-run"]], ["answer", "done"]] }),
            ),
        ],
        "let r = boss.ask(\"Convene.\");\nother.ask(\"Wait for this one: \" + r)",
    );
    env.awf(&["script", "run", "wf.rhai"]).expect_code(0);
    let (parent, children) = parent_and_children(&env);
    let id = children[0].file_name().and_then(|n| n.to_str()).expect("id").to_string();
    let tried = steps(&parent, "other");
    let foreign = tried.iter().find(|s| s["step"][0] == "council_wait_prompt").expect("the foreign wait");
    assert_eq!(foreign["code"], 2, "{foreign}");
    let says = format!("{id} is not a background council started by other");
    assert!(foreign["out"].as_str().expect("out").contains(&says), "{foreign}");
    let unknown = tried.iter().find(|s| s["step"][0] == "council_wait_ids").expect("the unknown wait");
    assert_eq!(unknown["code"], 2, "{unknown}");
    assert!(unknown["out"].as_str().expect("out").contains("no-such-run is not a background council"), "{unknown}");
    let refused = events_so_far_of(&parent, "control-refused");
    assert!(refused.iter().any(|e| e["data"]["frame"]["cmd"] == "council-wait"), "{refused:?}");
    // The boss's council still woke the boss, whose wake the refused waits did not take.
    assert_eq!(events_so_far_of(&parent, "council-settled")[0]["data"]["delivery"], "message");
}

#[test]
fn an_agent_lists_its_councils_is_told_they_still_run_and_cancels_one_billed_what_it_spent() {
    let env = setup(
        "",
        &[(
            "boss",
            json!({
                "boss#1": [["council_bg", "gated", { "task": "Long?", "gate": "@DIR/never" }], ["answer_last"]],
                "boss#2": [["council_list"], ["council_cancel_id", "no-such-run"], ["council_cancel_last"], ["answer_last"]],
            }),
        )],
        "boss.ask(\"Start it.\");\nboss.ask(\"Check on it.\")",
    );
    let out = env.awf(&["script", "run", "wf.rhai"]);
    out.expect_code(0);
    let (parent, children) = parent_and_children(&env);
    let id = children[0].file_name().and_then(|n| n.to_str()).expect("id").to_string();
    let tried = steps(&parent, "boss");
    let step = |name: &str| tried.iter().find(|s| s["step"][0] == name).cloned().unwrap_or_else(|| panic!("no {name}"));
    let list = step("council_list");
    assert_eq!(list["code"], 0, "{list}");
    let listed: Value = serde_json::from_str(list["out"].as_str().expect("out")).expect("a JSON list");
    assert_eq!(listed[0]["run_id"], id.as_str(), "{listed}");
    assert_eq!(
        (listed[0]["strategy"].as_str(), listed[0]["status"].as_str()),
        (Some("gated"), Some("running")),
        "{listed}"
    );
    assert!(listed[0]["spent"]["tokens"].is_u64(), "{listed}");
    let prompt = std::fs::read_to_string(parent.join("agents/boss/state/boss#2.stdin")).expect("the second prompt");
    assert!(prompt.contains(&format!("Still active: the background councils you started: gated ({id})")), "{prompt}");
    assert!(prompt.contains("do not report them complete"), "{prompt}");
    let foreign = step("council_cancel_id");
    assert_eq!(foreign["code"], 2, "{foreign}");
    assert!(foreign["out"].as_str().expect("out").contains("no-such-run is not a background council started by boss"));
    let cancel = step("council_cancel_last");
    assert_eq!(cancel["code"], 0, "{cancel}");
    assert_eq!(
        serde_json::from_str::<Value>(cancel["out"].as_str().expect("out")).expect("JSON")["status"],
        "cancelling"
    );
    // It settled cancelled, woke the agent saying so, and was billed once.
    let settled = events_so_far_of(&parent, "council-settled");
    assert_eq!(settled.len(), 1, "{settled:?}");
    assert_eq!(settled[0]["data"]["status"], "cancelled", "{settled:?}");
    assert_eq!(settled[0]["data"]["delivery"], "message");
    assert_eq!(read_json(&children[0].join("result.json"))["status"], "cancelled");
    let billed: Vec<Value> =
        read_jsonl(&parent.join("turns.jsonl")).into_iter().filter(|t| t["kind"] == "council").collect();
    assert_eq!(billed.len(), 1, "{billed:?}");
}

#[test]
fn a_stopped_run_stops_its_background_council() {
    let env = setup(
        "",
        &[(
            "boss",
            json!({ "turn": [["council_bg", "gated", { "task": "Hang?", "gate": "@DIR/never" }], ["answer_last"]] }),
        )],
        "boss.ask(\"Convene.\");\nctx.stop(\"enough\")",
    );
    let out = env.awf(&["script", "run", "wf.rhai"]);
    out.expect_code(3);
    assert!(!out.stderr.contains("waiting for"), "a stopped run does not wait: {}", out.stderr);
    let (parent, children) = parent_and_children(&env);
    let child = read_json(&children[0].join("result.json"));
    assert_eq!(child["status"], "cancelled", "{child}");
    assert!(child["error"].as_str().expect("error").contains("run stopped: enough"), "{child}");
    let settled = events_so_far_of(&parent, "council-settled");
    assert_eq!(settled[0]["data"]["delivery"], "none", "{settled:?}");
    assert_eq!(read_json(&parent.join("result.json"))["status"], "stopped");
}

#[test]
fn a_council_waits_queued_for_the_machines_background_pool() {
    let env = setup(
        "[limits]\nbackground = 1\n",
        &[(
            "boss",
            json!({ "turn": [["council_bg", "gated", { "task": "Queued?", "gate": "@DIR" }], ["answer_last"]] }),
        )],
        "boss.ask(\"Convene.\")",
    );
    // A detached run holds the one slot until `free` exists.
    let free = env.path().join("free").display().to_string();
    let member = env.path().join("member.sh").display().to_string();
    env.write(
        "hold.rhai",
        &format!(r#"ctx.agents.open(#{{ key: "h", runtime: #{{ harness: "command", command: ["sh", "{member}", "{free}"] }} }}).ask("hold")"#),
    );
    let held = env.awf(&["script", "run", "hold.rhai", "--detach"]);
    held.expect_code(0);
    let holder = env.runs_root().join(held.stdout.trim());
    let _reap = Reap(holder.clone());
    wait_until("the detached run to start", || holder.join("run.json").exists());

    let mut run = Running::start(env.path(), &["script", "run", "wf.rhai", "--json"]);
    let child = {
        let mut found = None;
        wait_until("the council's run folder", || {
            found = env.run_dirs().into_iter().find(|d| read_now(&d.join("run.json")).get("parent").is_some());
            found.is_some()
        });
        found.expect("found")
    };
    wait_until("the council queued", || read_now(&child.join("run.json"))["attempts"][0]["status"] == "queued");
    let listed = env.awf(&["runs", "list"]);
    let id = child.file_name().and_then(|n| n.to_str()).expect("id");
    assert!(listed.stdout.lines().any(|l| l.starts_with(id) && l.contains("queued")), "{}", listed.stdout);
    run.wait_for_line("info: waiting for 1 background council");
    std::fs::write(&free, "").expect("free the slot");
    let out = run.finish();
    out.expect_code(0);
    let receipt: Value = serde_json::from_str(out.json()["value"].as_str().expect("text")).expect("JSON");
    assert_eq!(receipt["status"], "queued");
    assert_eq!(read_json(&child.join("result.json"))["status"], "succeeded");
    assert_eq!(read_json(&child.join("run.json"))["attempts"][0]["status"], "succeeded");
}

/// Kills the detached run's process if the test fails before it ends.
struct Reap(PathBuf);

impl Drop for Reap {
    fn drop(&mut self) {
        let pid = std::fs::read_to_string(self.0.join("lock")).unwrap_or_default();
        if pid.trim().parse::<u32>().is_ok() && !self.0.join("result.json").exists() {
            let _ = std::process::Command::new("kill").args(["-KILL", pid.trim()]).status();
        }
    }
}

#[test]
fn a_background_councils_budget_is_set_aside_so_a_second_finds_nothing_left() {
    let env = setup(
        "",
        &[(
            "boss",
            json!({ "turn": [
                ["council_bg", "gated", { "task": "First?", "gate": "@DIR/go" }],
                ["council_bg", "gated", { "task": "Second?", "gate": "@DIR" }],
                ["touch", "@DIR/go"], ["answer_last"]] }),
        )],
        "boss.ask(\"Convene two.\")",
    );
    env.awf(&["script", "run", "wf.rhai", "--budget-tokens", "1000"]).expect_code(0);
    let (parent, children) = parent_and_children(&env);
    assert_eq!(children.len(), 1, "the second council opened nothing");
    let child = read_json(&children[0].join("run.json"));
    assert_eq!(child["limits"]["budget_tokens"], 1000, "the first has all that was left: {child}");
    let second = steps(&parent, "boss").into_iter().filter(|s| s["step"][0] == "council_bg").nth(1).expect("second");
    assert_eq!(second["code"], 3, "{second}");
    let out = second["out"].as_str().expect("out");
    assert!(out.contains("council gated not started: the run's token budget is spent"), "{second}");
    // Settled, the first gave back what it did not spend: the run's accounts hold its 120 tokens.
    assert_eq!(read_json(&parent.join("result.json"))["accounting"]["totals"]["tokens"], 120);
}

#[test]
fn a_resumed_run_does_not_start_a_council_its_dead_attempt_left_running() {
    let env = setup(
        "",
        &[(
            "boss",
            json!({ "turn": [["council_bg", "gated", { "task": "Hang?", "gate": "@DIR/never" }], ["answer_last"]] }),
        )],
        "boss.ask(\"Convene.\")",
    );
    let mut run = Running::start(env.path(), &["script", "run", "wf.rhai"]);
    run.wait_for_line("info: waiting for 1 background council");
    common::signal(run.pid, "-KILL");
    let _ = run.finish();
    let (parent, children) = parent_and_children(&env);
    let id = parent.file_name().and_then(|n| n.to_str()).expect("id").to_string();
    let child_id = children[0].file_name().and_then(|n| n.to_str()).expect("id").to_string();

    let out = env.awf(&["runs", "resume", &id]);
    out.expect_code(0);
    assert!(!out.stderr.contains("waiting for"), "{}", out.stderr);
    let (_, again) = parent_and_children(&env);
    assert_eq!(again.len(), 1, "no council started again: {again:?}");
    let listed = env.awf(&["runs", "list"]);
    assert!(listed.stdout.lines().any(|l| l.starts_with(&child_id) && l.contains("interrupted")), "{}", listed.stdout);
    assert_eq!(read_json(&parent.join("result.json"))["status"], "succeeded");
}

#[test]
fn an_http_agent_starts_one_with_the_tools_background_flag_and_is_woken_with_its_output() {
    use fake_model::{FakeModel, Reply};
    let dir = tempfile::tempdir().expect("a folder for the gate");
    let server = FakeModel::start(vec![
        Reply::tool(
            "wf_council",
            json!({ "name": "gated", "params": { "task": "Ship?", "gate": dir.path().display().to_string() }, "background": true }),
        ),
        Reply::tool("wf_councils", json!({})),
        Reply::result(json!({ "verdict": "started" })),
        Reply::text("Noted."),
    ]);
    let config =
        format!("[runtimes.m]\nharness = \"openai\"\nmodel = \"gpt-5-mini\"\nbase_url = \"{}/v1\"\n", server.base());
    let env = setup(
        &config,
        &[],
        r#"let boss = ctx.agents.open(#{ key: "boss", runtime: "m", councils: ["gated"] });
boss.turn(#{ prompt: "Decide.", schema: #{ type: "object", properties: #{ verdict: #{ type: "string" } } } }).value"#,
    );
    let out = env.awf(&["script", "run", "wf.rhai", "--json"]);
    out.expect_code(0);
    assert_eq!(out.json()["value"]["verdict"], "started");
    let bodies = server.bodies();
    assert!(bodies[0]["tools"].to_string().contains("background"), "the tool offers the flag: {}", bodies[0]);
    assert!(bodies[0]["tools"].to_string().contains("wf_council_cancel"), "cancel is offered: {}", bodies[0]);
    assert!(bodies[1].to_string().contains("you will be woken once with its output"), "the receipt: {}", bodies[1]);
    assert!(bodies[2].to_string().contains(r#"\"strategy\": \"gated\""#), "the list: {}", bodies[2]);
    assert_eq!(bodies.len(), 4, "one message operation: {bodies:?}");
    assert!(bodies[3].to_string().contains("ruled: yes"), "woken with the output: {}", bodies[3]);
}

#[test]
fn a_detached_runs_council_runs_on_its_slot_with_one_slot_on_the_machine() {
    let env = setup(
        "[limits]\nbackground = 1\n",
        &[("boss", json!({ "turn": [["council_bg", "gated", { "task": "Mine?", "gate": "@DIR" }], ["answer_last"]] }))],
        "boss.ask(\"Convene.\")",
    );
    let out = env.awf(&["script", "run", "wf.rhai", "--detach"]);
    out.expect_code(0);
    let dir = env.runs_root().join(out.stdout.trim());
    let _reap = Reap(dir.clone());
    wait_until("the detached run's end", || dir.join("result.json").exists());
    assert_eq!(read_json(&dir.join("result.json"))["status"], "succeeded");
    let (_, children) = parent_and_children(&env);
    let receipt = steps(&dir, "boss").into_iter().find(|s| s["step"][0] == "council_bg").expect("the call");
    let receipt: Value = serde_json::from_str(receipt["out"].as_str().expect("out")).expect("JSON");
    assert_eq!(receipt["status"], "running", "it did not queue behind its own parent");
    assert_eq!(read_json(&children[0].join("result.json"))["status"], "succeeded");
}

#[test]
fn a_council_that_cannot_queue_runs_without_a_slot_and_the_run_says_why() {
    let env = setup(
        "",
        &[("boss", json!({ "turn": [["council_bg", "gated", { "task": "Slot?", "gate": "@DIR" }], ["answer_last"]] }))],
        "boss.ask(\"Convene.\")",
    );
    // The machine's queue lives under $XDG_STATE_HOME: a file there cannot hold it.
    let state = env.write("not-a-folder", "");
    let child = common::command(env.path(), &["script", "run", "wf.rhai"])
        .env("XDG_STATE_HOME", &state)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn awf");
    let out = common::wait_with_timeout(child);
    out.expect_code(0).stderr_has("no slot of the background pool (cannot create").stderr_has("it runs without one");
    let (_, children) = parent_and_children(&env);
    assert_eq!(read_json(&children[0].join("result.json"))["status"], "succeeded");
}

#[test]
fn a_working_agent_is_shown_the_output_once() {
    // The council settles while the boss's turn still runs (the turn waits for the message to be
    // sent): it is held, and shown once, in the next turn or in the operation that wakes the
    // boss as it goes idle, whichever gets its session first.
    let env = setup(
        "",
        &[(
            "boss",
            json!({
                "boss#1": [["council_bg", "gated", { "task": "Busy?", "gate": "@DIR" }], ["wait_message", 1], ["answer", "first"]],
                "turn": [["answer", "next"]],
            }),
        )],
        "boss.ask(\"Convene.\");\nboss.ask(\"Go on.\")",
    );
    env.awf(&["script", "run", "wf.rhai"]).expect_code(0);
    let (parent, _) = parent_and_children(&env);
    let delivered: Vec<Value> =
        events_so_far_of(&parent, "message-delivered").into_iter().filter(|e| e["data"]["n"] == 1).collect();
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    let shown: Vec<String> = std::fs::read_dir(parent.join("agents/boss/state"))
        .expect("state")
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
        .filter(|t| t.contains("ruled: yes"))
        .collect();
    assert_eq!(shown.len(), 1, "shown in one prompt: {shown:?}");
    assert_eq!(events_so_far_of(&parent, "council-settled")[0]["data"]["delivery"], "message");
}
