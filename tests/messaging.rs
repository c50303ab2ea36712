//! Messages between agents: routes granted with `ctx.messages.allow`, idle agents woken in message
//! operations, messages held for busy agents and shown with their next turn, asks and replies,
//! refusals, routes closing with their stage, stages waiting for owed answers, and what is left
//! undelivered when a run ends. Agents are fake responders and `command` programs
//! (`tests/fixtures/agents/msg_*`), which talk through `awf wf send/ask/reply/inbox`.

use crate::common;

use common::{agent_fixture, read_jsonl, Env};
use serde_json::{json, Value};
use std::path::PathBuf;

/// Writes `plans/<key>.json` and returns the Rhai that opens `key` as a `msg_agent.py` command
/// agent following that plan (see the fixture for the steps).
fn planned(env: &Env, key: &str, plan: Value) -> String {
    let path = env.write(&format!("plans/{key}.json"), &plan.to_string());
    format!(
        r#"ctx.agents.open(#{{ key: "{key}", runtime: #{{ harness: "command", command: ["python3", "{}", "{}"] }} }})"#,
        agent_fixture("msg_agent.py"),
        path.display()
    )
}

/// The Rhai that opens `key` as a `msg_record.sh` command agent (saves each prompt, answers "seen").
fn recorder(key: &str) -> String {
    format!(
        r#"ctx.agents.open(#{{ key: "{key}", runtime: #{{ harness: "command", command: ["sh", "{}"] }} }})"#,
        agent_fixture("msg_record.sh")
    )
}

fn state_dir(env: &Env, key: &str) -> PathBuf {
    env.run_dir().join("agents").join(key).join("state")
}

/// A file a command agent left in its state folder (e.g. `a#1.stdin`).
#[track_caller]
fn state(env: &Env, key: &str, file: &str) -> String {
    let path = state_dir(env, key).join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The steps a `msg_agent.py` agent ran, with their exit codes and output.
fn steps(env: &Env, key: &str) -> Vec<Value> {
    read_jsonl(&state_dir(env, key).join("log.jsonl"))
}

/// The first step named `name` that `key` ran.
#[track_caller]
fn step(env: &Env, key: &str, name: &str) -> Value {
    let all = steps(env, key);
    all.iter().find(|s| s["step"][0] == name).cloned().unwrap_or_else(|| panic!("{key} ran no {name} step: {all:#?}"))
}

/// The index of the first event of type `ty` whose data has `field` equal to `value`.
#[track_caller]
fn index_of(events: &[Value], ty: &str, field: &str, value: Value) -> usize {
    events
        .iter()
        .position(|e| e["type"] == ty && e["data"][field] == value)
        .unwrap_or_else(|| panic!("no {ty} event with {field} = {value}: {events:#?}"))
}

fn op_ids(env: &Env) -> Vec<String> {
    env.turns().iter().map(|t| t["op_id"].as_str().unwrap_or_default().to_string()).collect()
}

// ---------------------------------------------------------------------------------------------
// Sends, wakes and held messages

#[test]
fn a_send_wakes_an_idle_agent_and_a_chain_of_three_is_recorded() {
    let env = Env::new();
    env.with_responder(
        r#"fn respond(turn) {
            if turn.agent == "a" && turn.kind == "turn" { return #{ send: #{ to: "b", text: "hello from a" } }; }
            if turn.agent == "b" && turn.kind == "message" {
                let m = turn.messages[0];
                return #{ send: #{ to: "c", text: `b heard "${m.text}" from ${m.from}` } };
            }
            ()
        }"#,
    );
    let script = format!(
        r#"
        let a = ctx.agents.open(#{{ key: "a" }});
        let b = ctx.agents.open(#{{ key: "b" }});
        let c = {c};
        ctx.stage("talk", || {{
            ctx.messages.allow(#{{ from: a, to: b, purpose: "pass notes" }});
            ctx.messages.allow(#{{ from: b, to: c, purpose: "pass notes on" }});
            a.ask("Start the chain.");
            ()
        }});
        "done"
        "#,
        c = recorder("c")
    );
    env.run(&script, &[]).expect_code(0);

    // a's turn, then b and c each woken in a message operation owned by the stage.
    for op in ["b#m1", "c#m1"] {
        let t = env.turn(op);
        assert_eq!(t["kind"], "message", "{t}");
        assert_eq!(t["outcome"], "answered", "{t}");
        assert_eq!(t["stage"], "talk", "{t}");
    }
    assert_eq!(env.turn("a#1")["kind"], "turn");
    let forwarded = r#"b heard "hello from a" from a"#;
    let sent = env.events_of("message-sent");
    assert_eq!(sent.len(), 2, "{sent:#?}");
    assert_eq!(sent[0]["data"], json!({ "n": 1, "route": 1, "from": "a", "to": "b", "bytes": 12, "asks": false }));
    assert_eq!(
        sent[1]["data"],
        json!({ "n": 2, "route": 2, "from": "b", "to": "c", "bytes": forwarded.len(), "asks": false })
    );
    let delivered = env.events_of("message-delivered");
    assert_eq!(delivered.len(), 2, "{delivered:#?}");
    assert_eq!(delivered[0]["data"], json!({ "n": 1, "route": 1, "from": "a", "to": "b", "bytes": 12 }));
    assert_eq!(delivered[1]["data"]["to"], "c");
    assert_eq!(delivered[1]["data"]["bytes"], forwarded.len());

    // c (a command agent) read b's message, which quoted a's, on its stdin.
    let stdin = state(&env, "c", "c#m1.stdin");
    assert!(stdin.starts_with("You have new messages from other agents."), "{stdin}");
    assert!(stdin.contains(&format!("- #2 from b:\n{forwarded}\n")), "{stdin}");
    assert!(!stdin.contains("You may message other agents"), "c has no route to send on: {stdin}");

    // The stage ended after the last message operation settled, then closed its routes.
    let events = env.events();
    let settled_c = index_of(&events, "op-settled", "op_id", json!("c#m1"));
    let closed = index_of(&events, "route-closed", "stage", json!("talk"));
    let finished = index_of(&events, "stage-finished", "name", json!("talk"));
    assert!(settled_c < closed && closed < finished, "{events:#?}");
}

#[test]
fn command_agents_exchange_messages_both_ways() {
    let env = Env::new();
    // a sends to b (idle: woken); b answers with a message of its own while a is still working,
    // and a reads it from its inbox.
    let a = planned(
        &env,
        "a",
        json!({ "turn": [
            ["send", "b", "hello b"],
            ["wait", "b.sent"],
            ["inbox_json"],
            ["answer_last"],
        ] }),
    );
    let b = planned(&env, "b", json!({ "message": [["send", "a", "hello a"], ["touch", "b.sent"]] }));
    let script = format!(
        r#"
        let a = {a};
        let b = {b};
        ctx.messages.allow(#{{ between: [a, b], purpose: "say hello" }});
        a.ask("Greet b.")
        "#
    );
    let out = env.run(&script, &[]);
    out.expect_code(0);
    let got: Value = serde_json::from_str(out.stdout.trim()).expect("a's inbox line is JSON");
    assert_eq!(got, json!({ "n": 2, "from": "b", "text": "hello a", "asks": false, "status": "new" }));

    assert_eq!(step(&env, "a", "send")["out"], "sent #1");
    assert_eq!(step(&env, "b", "send")["out"], "sent #2");
    let stdin = state(&env, "b", "b#m1.stdin");
    assert!(stdin.contains("- #1 from a:\nhello b\n"), "{stdin}");
    // Routes without `max_messages` carry at most 20, both ways together (a's message used one).
    assert!(stdin.contains("- a: say hello (19 messages left)"), "b is told its route back: {stdin}");
    assert_eq!(env.turn("b#m1")["kind"], "message");
    // a read its message during its turn: nothing was left to wake it for.
    assert_eq!(op_ids(&env).iter().filter(|id| id.starts_with("a#m")).count(), 0, "{:?}", op_ids(&env));
    let delivered = env.events_of("message-delivered");
    assert_eq!(delivered.len(), 2);
    assert!(delivered.iter().any(|e| e["data"]["n"] == 2 && e["data"]["to"] == "a" && e["data"]["bytes"] == 7));
}

#[test]
fn a_message_to_a_busy_fake_agent_is_held_and_shown_with_its_check_in() {
    let env = Env::new();
    // b asks a and waits (so b is busy); a, woken, sends b a note and then replies. The note is
    // held and shown with b's next turn: the check-in after b ends its first turn silently.
    env.with_responder(
        r#"fn respond(turn) {
            if turn.agent == "b" && turn.kind == "turn" {
                if turn.nudge == 0 && turn.replies.len() == 0 { return #{ ask: #{ to: "a", text: "are you there?" } }; }
                if turn.nudge == 0 { return #{ silent: true }; }
                return #{ answer: #{ nudge: turn.nudge, messages: turn.messages, shown: turn.shown, kind: turn.kind } };
            }
            if turn.agent == "a" && turn.kind == "message" {
                return #{ send: #{ to: "b", text: "a note while you work" },
                          reply: #{ n: turn.messages[0].n, text: "yes" } };
            }
            ()
        }"#,
    );
    let script = r#"
        let a = ctx.agents.open(#{ key: "a" });
        let b = ctx.agents.open(#{ key: "b" });
        ctx.messages.allow(#{ between: [a, b], purpose: "coordinate" });
        b.ask("Work.", #{ type: "object" })
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["nudge"], 1, "{v}");
    assert_eq!(v["kind"], "turn");
    assert_eq!(
        v["messages"],
        json!([{ "n": 2, "from": "a", "text": "a note while you work", "asks": false, "status": "new" }])
    );
    let shown = v["shown"].as_str().expect("shown");
    assert!(shown.starts_with("Messages for you:\n- #2 from a:\na note while you work\n"), "{shown}");

    // Held, not a wake: b got no message operation, and the note was delivered after it was sent.
    assert!(!op_ids(&env).iter().any(|id| id.starts_with("b#m")), "{:?}", op_ids(&env));
    let events = env.events();
    let sent = index_of(&events, "message-sent", "n", json!(2));
    let delivered = index_of(&events, "message-delivered", "n", json!(2));
    let nudged = index_of(&events, "op-nudged", "op_id", json!("b#1"));
    assert!(sent < nudged && nudged < delivered, "{events:#?}");
}

#[test]
fn a_message_to_a_busy_command_agent_is_shown_on_its_check_in_stdin() {
    let env = Env::new();
    // b's first turn waits until a has sent, then ends without answering; its check-in sees the message.
    let b = planned(
        &env,
        "b",
        json!({ "turn": [["touch", "b.busy"], ["wait", "a.sent"]], "nudge": [["answer", "checked in"]] }),
    );
    let a = planned(
        &env,
        "a",
        json!({ "turn": [["wait", "b.busy"], ["send", "b", "while you were busy"], ["touch", "a.sent"], ["answer_last"]] }),
    );
    let script = format!(
        r#"
        let a = {a};
        let b = {b};
        ctx.stage("work", #{{ result: #{{ type: "array" }} }}, || {{
            ctx.messages.allow(#{{ from: a, to: b, purpose: "status updates" }});
            ctx.parallel(["b", "a"], |key, i| ctx.agents.get(key).ask(`Go, ${{key}}.`))
        }})
        "#
    );
    let out = env.run(&script, &[]);
    out.expect_code(0);
    assert_eq!(out.json(), json!(["checked in", "sent #1"]));
    let first = state(&env, "b", "b#1.stdin");
    assert!(!first.contains("while you were busy"), "{first}");
    let check_in = state(&env, "b", "b#1.nudge1.stdin");
    assert!(check_in.starts_with("Messages for you:\n- #1 from a:\nwhile you were busy\n"), "{check_in}");
    assert!(!op_ids(&env).iter().any(|id| id.starts_with("b#m")), "{:?}", op_ids(&env));
    let delivered = env.events_of("message-delivered");
    assert_eq!(delivered.len(), 1);
    assert_eq!(delivered[0]["data"]["bytes"], "while you were busy".len());
}

#[test]
fn a_busy_command_agent_reads_its_inbox_as_text_and_json() {
    let env = Env::new();
    let b = planned(
        &env,
        "b",
        json!({ "turn": [
            ["touch", "b.busy"],
            ["wait", "a.sent1"],
            ["inbox"],
            ["touch", "b.read"],
            ["wait", "a.sent2"],
            ["inbox_json"],
            ["inbox"],
            ["answer", "read"],
        ] }),
    );
    let a = planned(
        &env,
        "a",
        json!({ "turn": [
            ["wait", "b.busy"],
            ["send", "b", "one"],
            ["touch", "a.sent1"],
            ["wait", "b.read"],
            ["send", "b", "two\nlines"],
            ["touch", "a.sent2"],
            ["answer", "sent"],
        ] }),
    );
    let script = format!(
        r#"
        let a = {a};
        let b = {b};
        ctx.messages.allow(#{{ from: a, to: b, purpose: "news" }});
        ctx.parallel(["b", "a"], |key, i| ctx.agents.get(key).ask("Go."))
        "#
    );
    env.run(&script, &[]).expect_code(0);
    let inboxes: Vec<Value> = steps(&env, "b")
        .into_iter()
        .filter(|s| s["step"][0].as_str().is_some_and(|n| n.starts_with("inbox")))
        .collect();
    assert_eq!(inboxes.len(), 3, "{inboxes:#?}");
    assert!(inboxes.iter().all(|s| s["code"] == 0), "{inboxes:#?}");
    assert_eq!(inboxes[0]["out"], "#1 from a:\none");
    let line: Value = serde_json::from_str(inboxes[1]["out"].as_str().expect("out")).expect("one JSON line");
    assert_eq!(line, json!({ "n": 2, "from": "a", "text": "two\nlines", "asks": false, "status": "new" }));
    // Reading delivers: the inbox is then empty, and nothing is left to wake b for.
    assert_eq!(inboxes[2]["out"], "no messages");
    assert_eq!(env.events_of("message-delivered").len(), 2);
    assert!(!op_ids(&env).iter().any(|id| id.contains("#m")), "{:?}", op_ids(&env));
}

/// a sends b a note while b works on its turn (b waits until the note is sent, then answers
/// without reading its inbox); a answers only once b's turn has settled, so that b is idle for a
/// while before the script's next step. Returns the Rhai that opens both.
fn note_while_working(env: &Env) -> (String, String) {
    let b = planned(env, "b", json!({ "turn": [["touch", "b.busy"], ["wait", "a.sent"], ["answer", "done"]] }));
    let a = planned(
        env,
        "a",
        json!({ "turn": [
            ["wait", "b.busy"], ["send", "b", "while you work"], ["touch", "a.sent"],
            ["wait_event", "op-settled", "b#1"], ["answer_last"]
        ] }),
    );
    (a, b)
}

#[test]
fn a_message_to_a_working_agent_waits_for_its_next_turn() {
    let env = Env::new();
    let (a, b) = note_while_working(&env);
    let script = format!(
        r#"
        let a = {a};
        let b = {b};
        ctx.messages.allow(#{{ from: a, to: b, purpose: "news" }});
        let first = ctx.parallel(["b", "a"], |key, i| ctx.agents.get(key).ask("Go."));
        #{{ first: first, second: b.ask("Again.") }}
        "#
    );
    let out = env.run(&script, &[]);
    out.expect_code(0);
    assert_eq!(out.json()["first"], json!(["done", "sent #1"]));
    // No paid message operation when b's turn ended: the note waited for b's next turn.
    assert!(!op_ids(&env).iter().any(|id| id.contains("#m")), "{:?}", op_ids(&env));
    assert!(!state(&env, "b", "b#1.stdin").contains("while you work"));
    let second = state(&env, "b", "b#2.stdin");
    assert!(second.starts_with("Messages for you:\n- #1 from a:\nwhile you work\n"), "{second}");
    let events = env.events();
    let settled = index_of(&events, "op-settled", "op_id", json!("b#1"));
    let next = index_of(&events, "op-started", "op_id", json!("b#2"));
    let delivered = index_of(&events, "message-delivered", "n", json!(1));
    assert!(settled < next && next < delivered, "{events:#?}");
    assert!(env.events_of("message-undelivered").is_empty());
}

#[test]
fn a_message_still_held_when_its_stage_ends_is_recorded_undelivered() {
    let env = Env::new();
    let (a, b) = note_while_working(&env);
    let script = format!(
        r#"
        let a = {a};
        let b = {b};
        ctx.stage("work", || {{
            ctx.messages.allow(#{{ from: a, to: b, purpose: "news" }});
            ctx.parallel(["b", "a"], |key, i| ctx.agents.get(key).ask("Go."));
            ()
        }});
        b.ask("Later.")
        "#
    );
    env.run(&script, &[]).expect_code(0);
    assert!(!op_ids(&env).iter().any(|id| id.contains("#m")), "{:?}", op_ids(&env));
    let undelivered = env.events_of("message-undelivered");
    assert_eq!(undelivered.len(), 1, "{undelivered:#?}");
    assert_eq!(
        undelivered[0]["data"],
        json!({ "n": 1, "from": "a", "to": "b", "bytes": 14, "reason": "stage work ended before b had another turn" })
    );
    // It belonged to the stage: b's turn after it is not shown it.
    assert!(!state(&env, "b", "b#2.stdin").contains("while you work"));
    assert!(env.events_of("message-delivered").is_empty());
    let events = env.events();
    let dropped = index_of(&events, "message-undelivered", "n", json!(1));
    let finished = index_of(&events, "stage-finished", "name", json!("work"));
    assert!(dropped < finished, "{events:#?}");
    assert_eq!(env.stages()[0]["status"], "succeeded");
}

#[test]
fn a_message_held_on_a_run_level_route_when_the_run_ends_is_recorded_undelivered() {
    let env = Env::new();
    let (a, b) = note_while_working(&env);
    // b never has another turn: the note is not paid for with a message operation, and the run
    // ends without waiting for it.
    let script = format!(
        r#"
        let a = {a};
        let b = {b};
        ctx.messages.allow(#{{ from: a, to: b, purpose: "news" }});
        ctx.parallel(["b", "a"], |key, i| ctx.agents.get(key).ask("Go."))
        "#
    );
    let out = env.run(&script, &[]);
    out.expect_code(0);
    assert_eq!(out.json(), json!(["done", "sent #1"]));
    assert!(!op_ids(&env).iter().any(|id| id.contains("#m")), "{:?}", op_ids(&env));
    let undelivered = env.events_of("message-undelivered");
    assert_eq!(undelivered.len(), 1, "{undelivered:#?}");
    assert_eq!(undelivered[0]["data"]["reason"], "the run ended before b had another turn");
    let events = env.events();
    assert!(
        index_of(&events, "message-undelivered", "n", json!(1))
            < index_of(&events, "run-finished", "status", json!("succeeded"))
    );
}

#[test]
fn an_ask_to_a_working_agent_wakes_it_once_its_turn_ends() {
    let env = Env::new();
    // b's turn ends without reading its inbox, after a asked; a waits, so b is woken to reply.
    let b = planned(
        &env,
        "b",
        json!({ "turn": [["touch", "b.busy"], ["wait_message", 1], ["answer", "done"]], "message": [["reply_asks", "yes"]] }),
    );
    let a = planned(&env, "a", json!({ "turn": [["wait", "b.busy"], ["ask", "b", "ready?"], ["answer_last"]] }));
    let script = format!(
        r#"
        let a = {a};
        let b = {b};
        ctx.stage("s", #{{ result: #{{ type: "array" }} }}, || {{
            ctx.messages.allow(#{{ from: a, to: b, purpose: "questions" }});
            ctx.parallel(["b", "a"], |key, i| ctx.agents.get(key).ask("Go."))
        }})
        "#
    );
    let out = env.run(&script, &[]);
    out.expect_code(0);
    assert_eq!(out.json(), json!(["done", "yes"]));
    assert!(!state(&env, "b", "b#1.stdin").contains("ready?"));
    assert!(state(&env, "b", "b#m1.stdin").contains("- #1 from a (asks for a reply):\nready?\n"));
    let woken = env.turn("b#m1");
    assert_eq!((woken["kind"].as_str(), woken["stage"].as_str()), (Some("message"), Some("s")), "{woken}");
    let events = env.events();
    assert!(
        index_of(&events, "op-settled", "op_id", json!("b#1"))
            < index_of(&events, "op-started", "op_id", json!("b#m1"))
    );
}

// ---------------------------------------------------------------------------------------------
// Asks and replies

#[test]
fn a_fake_ask_is_answered_by_the_woken_agent() {
    let env = Env::new();
    env.with_responder(
        r#"fn respond(turn) {
            if turn.agent == "a" && turn.kind == "turn" {
                if turn.replies.len() == 0 { return #{ ask: #{ to: "b", text: "what is 2+2?" } }; }
                return #{ answer: turn.replies };
            }
            if turn.agent == "b" && turn.kind == "message" {
                let m = turn.messages[0];
                return #{ reply: #{ n: m.n, text: `4 (you asked "${m.text}", asks: ${m.asks})` } };
            }
            ()
        }"#,
    );
    let script = r#"
        let a = ctx.agents.open(#{ key: "a" });
        let b = ctx.agents.open(#{ key: "b" });
        ctx.stage("sum", #{ result: #{ type: "array" } }, || {
            ctx.messages.allow(#{ between: [a, b], purpose: "check sums" });
            a.ask("Add.", #{ type: "array" })
        })
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let reply = r#"4 (you asked "what is 2+2?", asks: true)"#;
    assert_eq!(out.json(), json!([{ "ask": "b", "ok": true, "text": reply, "error": null }]));
    assert_eq!(env.events_of("message-sent")[0]["data"]["asks"], true);
    let replied = env.events_of("message-replied");
    assert_eq!(replied.len(), 1);
    assert_eq!(replied[0]["data"], json!({ "n": 1, "from": "b", "to": "a", "bytes": reply.len() }));
    assert_eq!(env.turn("b#m1")["kind"], "message");
    assert_eq!(env.turn("b#m1")["stage"], "sum");
}

#[test]
fn wf_ask_prints_the_reply_of_a_command_agent() {
    let env = Env::new();
    let a = planned(&env, "a", json!({ "turn": [["ask", "b", "what is 2+2?"], ["answer_last"]] }));
    let b = planned(
        &env,
        "b",
        json!({ "message": [["reply_asks", "four"], ["reply", 1, "four again"], ["reply", 99, "what?"]] }),
    );
    let script = format!(
        r#"
        let a = {a};
        let b = {b};
        ctx.messages.allow(#{{ from: a, to: b, purpose: "arithmetic" }});
        a.ask("Ask b.")
        "#
    );
    let out = env.run(&script, &[]);
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "four");
    let ask = step(&env, "a", "ask");
    assert_eq!((ask["code"].clone(), ask["out"].clone()), (json!(0), json!("four")));
    let reply = step(&env, "b", "reply");
    assert_eq!((reply["code"].clone(), reply["out"].clone()), (json!(0), json!("replied to #1")));
    // A message is answered once; an unknown one cannot be.
    let refused: Vec<(Value, Value)> = steps(&env, "b")
        .into_iter()
        .filter(|s| s["step"][0] == "reply" && s["step"].get(2).is_some())
        .map(|s| (s["code"].clone(), s["out"].clone()))
        .collect();
    assert_eq!(
        refused,
        vec![
            (json!(3), json!("refused: message 1 is not waiting for a reply")),
            (json!(3), json!("refused: message 99 is not waiting for a reply")),
        ]
    );
    // b was shown the question and how to answer it; a one-way route needs no reverse route to reply.
    let stdin = state(&env, "b", "b#m1.stdin");
    let launcher = env.run_dir().join("agents/b/wf");
    assert!(stdin.contains("- #1 from a (asks for a reply):\nwhat is 2+2?\n"), "{stdin}");
    assert!(stdin.contains(&format!("Reply with: {} reply 1 <<'WF_MSG'", launcher.display())), "{stdin}");
}

#[test]
fn an_ask_to_an_agent_whose_message_operation_fails_fails_with_the_reason() {
    let env = Env::new();
    env.with_responder(
        r#"fn respond(turn) {
            if turn.agent == "a" {
                if turn.replies.len() == 0 { return #{ ask: #{ to: "b", text: "still there?" } }; }
                return #{ answer: turn.replies[0] };
            }
            if turn.agent == "b" && turn.kind == "message" { return #{ fail: "model crashed" }; }
            ()
        }"#,
    );
    let script = r#"
        let a = ctx.agents.open(#{ key: "a" });
        let b = ctx.agents.open(#{ key: "b" });
        ctx.messages.allow(#{ from: a, to: b, purpose: "status" });
        let r = a.ask("Ask b.", #{ type: "object" });
        let again = "b answered";
        try { b.ask("Anything?"); } catch (e) { again = `${e}`; }
        #{ reply: r, again: again }
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["reply"]["ok"], false, "{v}");
    assert_eq!(v["reply"]["error"], "b's message operation failed: model crashed", "{v}");
    // The failed message operation closed b.
    assert!(v["again"].as_str().expect("again").contains("b is closed"), "{v}");
    let t = env.turn("b#m1");
    assert_eq!((t["kind"].clone(), t["outcome"].clone()), (json!("message"), json!("failed")));
    let failed = env.events_of("message-ask-failed");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["data"]["asker"], "a");
    assert!(env.events_of("agent-closed").iter().any(|e| e["data"]["agent"] == "b"));
}

/// b is in a turn; it reads a's question from its inbox and then crashes (exit 7). Returns the
/// outcomes of b's and a's turns, and what `wf ask` printed for a.
fn ask_an_agent_that_crashes(env: &Env) -> (Value, String) {
    let b = planned(env, "b", json!({ "turn": [["touch", "b.busy"], ["wait_ask"], ["exit", 7]] }));
    let a = planned(env, "a", json!({ "turn": [["wait", "b.busy"], ["ask", "b", "ready?"], ["answer_last"]] }));
    let script = format!(
        r#"
        let a = {a};
        let b = {b};
        ctx.messages.allow(#{{ from: a, to: b, purpose: "status" }});
        ctx.parallel(["b", "a"], |key, i| ctx.agents.get(key).run(#{{ prompt: "Go." }}))
        "#
    );
    let out = env.run(&script, &[]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v[0]["kind"], "failed", "{v}");
    let ask = step(env, "a", "ask");
    assert_eq!(ask["code"], 3, "{ask}");
    let text = ask["out"].as_str().expect("out").to_string();
    assert_eq!(v[1]["value"], text.as_str(), "{v}");
    (v, text)
}

#[test]
fn wf_ask_to_an_agent_whose_turn_fails_exits_3() {
    let env = Env::new();
    let (_, text) = ask_an_agent_that_crashes(&env);
    assert!(text.starts_with("ask failed: b "), "{text}");
    let failed = env.events_of("message-ask-failed");
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(failed[0]["data"]["asker"], "a");
}

#[test]
fn wf_ask_to_an_agent_whose_turn_fails_gives_the_reason() {
    let env = Env::new();
    let (_, text) = ask_an_agent_that_crashes(&env);
    assert!(text.contains("exited with exit status: 7"), "the ask should fail with why b stopped: {text}");
}

#[test]
fn a_reply_after_its_asker_stopped_waiting_is_refused() {
    let env = Env::new();
    // a's turn passes its 1.5 s deadline while it waits; b replies only after that.
    let a = planned(&env, "a", json!({ "turn": [["ask", "b", "quick?"], ["answer_last"]] }))
        .replace(r#"key: "a","#, r#"key: "a", timeout_ms: 1500,"#);
    let b = planned(&env, "b", json!({ "message": [["wait_event", "op-settled", "a#1"], ["reply_asks", "too late"]] }));
    let script = format!(
        r#"
        let a = {a};
        let b = {b};
        ctx.messages.allow(#{{ from: a, to: b, purpose: "questions" }});
        a.run(#{{ prompt: "Ask b." }}).kind
        "#
    );
    let out = env.run(&script, &[]);
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "timed-out");
    let reply = step(&env, "b", "reply");
    assert_eq!(reply["code"], 3, "{reply}");
    let text = reply["out"].as_str().expect("out");
    assert!(text.starts_with("refused: nobody waits for a reply to message 1 any more"), "{text}");
    assert!(env.events_of("message-replied").is_empty());
}

// ---------------------------------------------------------------------------------------------
// Refusals

#[test]
fn sends_beyond_max_messages_are_refused() {
    let env = Env::new();
    let a = planned(
        &env,
        "a",
        json!({ "turn": [["send", "b", "one"], ["send", "b", "two"], ["send", "b", "three"], ["answer", "done"]] }),
    );
    let script = format!(
        r#"
        let a = {a};
        let b = {b};
        ctx.messages.allow(#{{ from: a, to: b, purpose: "news", max_messages: 2 }});
        a.ask("Send three.")
        "#,
        b = recorder("b")
    );
    env.run(&script, &[]).expect_code(0);
    let sends: Vec<(Value, Value)> = steps(&env, "a")
        .into_iter()
        .filter(|s| s["step"][0] == "send")
        .map(|s| (s["code"].clone(), s["out"].clone()))
        .collect();
    assert_eq!(
        sends,
        vec![
            (json!(0), json!("sent #1")),
            (json!(0), json!("sent #2")),
            (json!(3), json!("refused: the route from a to b allows 2 messages and all were sent")),
        ]
    );
    assert_eq!(env.events_of("message-sent").len(), 2);
    let refused = env.events_of("control-refused");
    assert_eq!(refused.len(), 1, "{refused:#?}");
    assert_eq!(refused[0]["data"]["agent"], "a");
}

#[test]
fn a_route_without_max_messages_carries_twenty() {
    let env = Env::new();
    env.with_responder(
        r#"fn respond(turn) {
            if turn.agent == "a" && turn.rejection == () {
                let notes = [];
                for i in 1..=21 { notes.push(#{ to: "b", text: `note ${i}` }); }
                return #{ send: notes, json: "not json" };
            }
            if turn.agent == "a" { return #{ answer: turn.replies }; }
            ()
        }"#,
    );
    let script = r#"
        let a = ctx.agents.open(#{ key: "a" });
        let b = ctx.agents.open(#{ key: "b" });
        ctx.messages.allow(#{ from: a, to: b, purpose: "notes" });
        a.ask("Send.", #{ type: "array" })
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let replies = out.json();
    assert_eq!(replies[19], json!({ "send": "b", "ok": true, "n": 20, "error": null }));
    assert_eq!(replies[20]["error"], "refused: the route from a to b allows 20 messages and all were sent");
    assert_eq!(env.events_of("message-sent").len(), 20);
    assert_eq!(env.events_of("route-granted")[0]["data"]["max_messages"], 20);
}

#[test]
fn two_agents_messaging_each_other_stop_at_the_route_cap() {
    let env = Env::new();
    // Each message operation answers with a message back: without a cap they would talk forever.
    env.with_responder(
        r#"fn respond(turn) {
            let peer = if turn.agent == "a" { "b" } else { "a" };
            if turn.kind == "message" { return #{ send: #{ to: peer, text: "and you?" } }; }
            #{ send: #{ to: peer, text: "hello" }, answer: "started" }
        }"#,
    );
    let script = r#"
        let a = ctx.agents.open(#{ key: "a" });
        let b = ctx.agents.open(#{ key: "b" });
        ctx.messages.allow(#{ between: [a, b], purpose: "chat" });
        a.ask("Start.")
    "#;
    let out = env.run(script, &["--deadline", "15s"]);
    out.expect_code(0);
    let sent = env.events_of("message-sent").len();
    assert!((1..=20).contains(&sent), "{sent} messages on a route of 20");
    let woken = op_ids(&env).iter().filter(|id| id.contains("#m")).count();
    assert!(woken <= 20, "{woken} message operations");
}

#[test]
fn a_send_without_a_route_is_refused() {
    let env = Env::new();
    // The route goes from a to b only: a cannot send to c, and b cannot send back to a.
    let a = planned(&env, "a", json!({ "turn": [["send", "c", "psst"], ["send", "b", "hi"], ["answer", "done"]] }));
    let b = planned(&env, "b", json!({ "message": [["send", "a", "hi back"]] }));
    let script = format!(
        r#"
        let a = {a};
        let b = {b};
        let c = ctx.agents.open(#{{ key: "c" }});
        ctx.stage("s", || {{
            ctx.messages.allow(#{{ from: a, to: b, purpose: "one way" }});
            a.ask("Send.");
            ()
        }});
        "#
    );
    env.run(&script, &[]).expect_code(0);
    let to_c = step(&env, "a", "send");
    assert_eq!(to_c["code"], 3);
    assert_eq!(to_c["out"], "refused: no route from a to c (your routes go to: b)");
    let back = step(&env, "b", "send");
    assert_eq!(back["code"], 3);
    assert_eq!(back["out"], "refused: no route from b to a (your routes go to: none)");
    let sent = env.events_of("message-sent");
    assert_eq!(sent.len(), 1, "only a's message to b went out: {sent:#?}");
    assert_eq!(env.events_of("control-refused").len(), 2);
}

#[test]
fn a_fake_agent_sees_refused_sends_in_its_replies() {
    let env = Env::new();
    // Sends carry no reply; a rejected answer makes the responder see `turn.replies` on its retry.
    env.with_responder(
        r#"fn respond(turn) {
            if turn.agent == "a" && turn.rejection == () {
                return #{ send: [#{ to: "b", text: "one" }, #{ to: "c", text: "psst" }, #{ to: "b", text: "two" },
                                 #{ to: "d", text: "hello?" }],
                          json: "not json" };
            }
            if turn.agent == "a" { return #{ answer: turn.replies }; }
            ()
        }"#,
    );
    let script = r#"
        let a = ctx.agents.open(#{ key: "a" });
        let b = ctx.agents.open(#{ key: "b" });
        let c = ctx.agents.open(#{ key: "c" });
        let d = ctx.agents.open(#{ key: "d" });
        ctx.messages.allow(#{ from: a, to: b, purpose: "one note", max_messages: 1 });
        ctx.messages.allow(#{ from: a, to: d, purpose: "to d" });
        ctx.agents.stop("d", "done");
        a.ask("Send.", #{ type: "array" })
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let replies = out.json();
    assert_eq!(replies[0], json!({ "send": "b", "ok": true, "n": 1, "error": null }));
    assert_eq!(replies[1]["ok"], false);
    let no_route = replies[1]["error"].as_str().expect("error");
    assert!(no_route.starts_with("refused: no route from a to c (your routes go to: b"), "{no_route}");
    assert_eq!(replies[2]["error"], "refused: the route from a to b allows 1 message and all were sent");
    assert_eq!(replies[3]["error"], "refused: d is not open (stopped or closed)");
    assert_eq!(env.events_of("message-sent").len(), 1);
}

#[test]
fn a_route_closes_with_its_stage() {
    let env = Env::new();
    let a = planned(&env, "a", json!({ "turn": [["send", "b", "hi"], ["answer_last"]] }));
    let script = format!(
        r#"
        let a = {a};
        let b = {b};
        let first = ctx.stage("one", #{{ result: #{{ type: "string" }} }}, || {{
            ctx.messages.allow(#{{ from: a, to: b, purpose: "while stage one lasts" }});
            a.ask("Send in the stage.")
        }});
        let second = a.ask("Send after the stage.");
        #{{ first: first, second: second }}
        "#,
        b = recorder("b")
    );
    let out = env.run(&script, &[]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["first"], "sent #1");
    assert_eq!(v["second"], "refused: no route from a to b (your routes go to: none)");
    assert!(state(&env, "a", "a#1.stdin").contains("- b: while stage one lasts"));
    assert!(!state(&env, "a", "a#2.stdin").contains("You may message other agents"));
    let events = env.events();
    let closed = index_of(&events, "route-closed", "stage", json!("one"));
    let second = index_of(&events, "op-started", "op_id", json!("a#2"));
    assert!(closed < second, "{events:#?}");
    // The message sent inside the stage was delivered (b woken) before the stage ended.
    let woken = index_of(&events, "op-settled", "op_id", json!("b#m1"));
    assert!(woken < closed, "{events:#?}");
}

// ---------------------------------------------------------------------------------------------
// Stages and the end of the run

#[test]
fn a_stage_waits_for_an_owed_answer_before_ending() {
    let env = Env::new();
    // Inside the stage, a's turn sends b a note and ends: the stage's closure is done. b, woken,
    // asks c; c replies only once a's turn has settled. The stage must wait for that reply.
    let a = planned(&env, "a", json!({ "turn": [["send", "b", "start"], ["answer", "started"]] }));
    let b = planned(&env, "b", json!({ "message": [["ask", "c", "what next?"]] }));
    let c = planned(&env, "c", json!({ "message": [["wait_event", "op-settled", "a#1"], ["reply_asks", "carry on"]] }));
    let script = format!(
        r#"
        let a = {a};
        let b = {b};
        let c = {c};
        ctx.stage("relay", || {{
            ctx.messages.allow(#{{ from: a, to: b, purpose: "kick off" }});
            ctx.messages.allow(#{{ from: b, to: c, purpose: "ask for directions" }});
            a.ask("Start.");
            ()
        }});
        "#
    );
    env.run(&script, &[]).expect_code(0);
    assert_eq!(step(&env, "b", "ask")["out"], "carry on");
    let events = env.events();
    let a_done = index_of(&events, "op-settled", "op_id", json!("a#1"));
    let replied = index_of(&events, "message-replied", "n", json!(2));
    let b_done = index_of(&events, "op-settled", "op_id", json!("b#m1"));
    let finished = index_of(&events, "stage-finished", "name", json!("relay"));
    assert!(a_done < replied && replied < finished && b_done < finished, "{events:#?}");
    assert_eq!(env.stages()[0]["status"], "succeeded");
}

#[test]
fn an_ask_left_unanswered_fails_and_the_stage_still_ends() {
    let env = Env::new();
    let a = planned(&env, "a", json!({ "turn": [["ask", "b", "anyone?"], ["answer_last"]] }));
    let b = planned(&env, "b", json!({ "message": [] }));
    let script = format!(
        r#"
        let a = {a};
        let b = {b};
        ctx.stage("s", #{{ result: #{{ type: "string" }} }}, || {{
            ctx.messages.allow(#{{ from: a, to: b, purpose: "questions" }});
            a.ask("Ask b.")
        }})
        "#
    );
    let out = env.run(&script, &[]);
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "ask failed: b ended its turn without replying");
    assert_eq!(step(&env, "a", "ask")["code"], 3);
    assert_eq!(env.events_of("message-ask-failed").len(), 1);
    assert_eq!(env.stages()[0]["status"], "succeeded");
}

#[test]
fn a_message_held_when_the_run_stops_is_recorded_undelivered() {
    let env = Env::new();
    // b is busy until the run stops; a's message to it is held and never shown.
    let b = planned(&env, "b", json!({ "turn": [["touch", "b.busy"], ["wait", "never"]] }));
    let a = planned(&env, "a", json!({ "turn": [["wait", "b.busy"], ["send", "b", "too late"], ["answer_last"]] }));
    let script = format!(
        r#"
        let a = {a};
        let b = {b};
        ctx.messages.allow(#{{ from: a, to: b, purpose: "news" }});
        ctx.parallel(["b", "a"], |key, i| {{
            let o = ctx.agents.get(key).run(#{{ prompt: "Go." }});
            if key == "a" {{ ctx.stop(`a said: ${{o.value}}`); }}
            o
        }})
        "#
    );
    let out = env.run(&script, &[]);
    out.expect_code(3);
    assert_eq!(env.result()["status"], "stopped");
    assert_eq!(step(&env, "a", "send")["out"], "sent #1");
    assert!(env.events_of("message-delivered").is_empty(), "{:#?}", env.events_of("message-delivered"));
    let undelivered = env.events_of("message-undelivered");
    assert_eq!(undelivered.len(), 1);
    assert_eq!(
        undelivered[0]["data"],
        json!({ "n": 1, "from": "a", "to": "b", "bytes": 8, "reason": "the run ended before b had another turn" })
    );
    assert_eq!(env.turn("b#1")["outcome"], "cancelled");
    assert!(!op_ids(&env).iter().any(|id| id.starts_with("b#m")), "no message operation after the stop");
}

#[test]
fn a_message_that_arrives_after_the_budget_is_spent_is_undelivered_and_the_stage_ends() {
    let env = Env::new();
    // a's turn is running when x spends the whole budget; a then sends to b, which is idle. No
    // operation can start any more, so b cannot be woken: the message is dropped, not retried.
    // w's cheap turn first gives the budget an estimate, so that x and a may run at once.
    let w = planned(&env, "w", json!({ "turn": [["usage", 1, 0], ["answer", "warm"]] }));
    let x = planned(
        &env,
        "x",
        json!({ "turn": [["wait_event", "op-started", "a#1"], ["usage", 50, 50], ["answer", "spent"]] }),
    );
    let a = planned(
        &env,
        "a",
        json!({ "turn": [["wait_event", "op-settled", "x#1"], ["send", "b", "hi"], ["answer_last"]] }),
    );
    let script = format!(
        r#"
        {w}.ask("Warm up.");
        let x = {x};
        let a = {a};
        let b = {b};
        ctx.stage("s", #{{ result: #{{ type: "array" }} }}, || {{
            ctx.messages.allow(#{{ from: a, to: b, purpose: "news" }});
            ctx.parallel(["x", "a"], |key, i| ctx.agents.get(key).ask("Go."))
        }})
        "#,
        b = recorder("b")
    );
    let out = env.run(&script, &["--budget-tokens", "10"]);
    out.expect_code(0);
    assert_eq!(out.json(), json!(["spent", "sent #1"]));
    let undelivered = env.events_of("message-undelivered");
    assert_eq!(undelivered.len(), 1, "{undelivered:#?}");
    assert_eq!(undelivered[0]["data"]["n"], 1);
    assert!(undelivered[0]["data"]["reason"].as_str().unwrap_or_default().starts_with("budget exhausted"));
    assert!(!op_ids(&env).iter().any(|id| id.starts_with("b#")), "{:?}", op_ids(&env));
    assert_eq!(env.stages()[0]["status"], "succeeded");
}

#[test]
fn a_message_operation_on_a_run_level_route_is_settled_before_the_run_ends() {
    let env = Env::new();
    let a = planned(&env, "a", json!({ "turn": [["send", "b", "hi"], ["answer_last"]] }));
    let b = planned(&env, "b", json!({ "message": [["wait_event", "op-settled", "a#1"], ["touch", "b.done"]] }));
    let script = format!(
        r#"
        let a = {a};
        let b = {b};
        ctx.messages.allow(#{{ from: a, to: b, purpose: "news" }});
        a.ask("Send.")
        "#
    );
    env.run(&script, &[]).expect_code(0);
    let started = env.events_of("op-started").len();
    let settled = env.events_of("op-settled").len();
    assert_eq!(started, settled, "every operation that started must settle: {:#?}", env.events());
    assert!(op_ids(&env).contains(&"b#m1".to_string()), "{:?}", op_ids(&env));
}

#[test]
fn a_message_operation_obeys_its_agents_timeout() {
    let env = Env::new();
    env.with_responder(
        r#"fn respond(turn) {
            if turn.agent == "a" { return #{ send: #{ to: "b", text: "wake up" }, answer: "sent" }; }
            #{ hang: true }
        }"#,
    );
    let script = r#"
        let a = ctx.agents.open(#{ key: "a" });
        let b = ctx.agents.open(#{ key: "b", timeout_ms: 300 });
        ctx.stage("s", || { ctx.messages.allow(#{ from: a, to: b, purpose: "news" }); a.ask("Send."); () });
        "done"
    "#;
    let started = std::time::Instant::now();
    let out = env.run(script, &["--deadline", "10s"]);
    out.expect_code(0);
    assert!(started.elapsed() < std::time::Duration::from_secs(8), "took {:?}", started.elapsed());
    let t = env.turn("b#m1");
    assert_eq!((t["kind"].as_str(), t["outcome"].as_str()), (Some("message"), Some("timed-out")), "{t}");
    assert!(t["reason"].as_str().is_some_and(|r| r.starts_with("the operation passed its deadline")), "{t}");
}

#[test]
fn stopping_an_agent_cancels_its_running_turn() {
    let env = Env::new();
    // b works until stopped (its program would give up after 15 s); w's turn says when b is busy.
    let b = planned(&env, "b", json!({ "turn": [["touch", "b.busy"], ["wait", "never"]] }));
    let w = planned(&env, "w", json!({ "turn": [["wait", "b.busy"], ["answer", "b is busy"]] }));
    let script = format!(
        r#"
        let b = {b};
        let w = {w};
        ctx.parallel(["b", "w"], |key, i| {{
            if key == "b" {{ return ctx.agents.get("b").run(#{{ prompt: "Work." }}); }}
            let seen = ctx.agents.get("w").ask("Watch b.");
            ctx.agents.stop("b", "enough");
            seen
        }})
        "#
    );
    let started = std::time::Instant::now();
    let out = env.run(&script, &[]);
    out.expect_code(0);
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "took {:?}", started.elapsed());
    let v = out.json();
    assert_eq!(v[0]["kind"], "cancelled", "{v}");
    assert_eq!(v[0]["reason"], "stopped: enough", "{v}");
    assert_eq!(env.turn("b#1")["outcome"], "cancelled");
    assert!(env.events_of("agent-stopped").iter().any(|e| e["data"]["agent"] == "b"));
}

#[test]
fn a_route_granted_outside_any_stage_closes_at_the_run_end() {
    let env = Env::new();
    let script = r#"
        let a = ctx.agents.open(#{ key: "a" });
        let b = ctx.agents.open(#{ key: "b" });
        ctx.messages.allow(#{ from: a, to: b, purpose: "news" });
        a.ask("Work.")
    "#;
    env.run(script, &[]).expect_code(0);
    let closed = env.events_of("route-closed");
    assert_eq!(closed.len(), 1, "{closed:#?}");
    assert_eq!(closed[0]["data"], json!({ "route": 1, "stage": null }));
    let events = env.events();
    assert!(
        index_of(&events, "route-closed", "route", json!(1))
            < index_of(&events, "run-finished", "status", json!("succeeded"))
    );
}

#[test]
fn an_ask_is_answered_with_a_concurrency_of_one() {
    let env = Env::new();
    // The asker holds the only operation slot while it waits: the reply must not need another.
    env.with_responder(
        r#"fn respond(turn) {
            if turn.agent == "a" {
                if turn.replies.len() == 0 { return #{ ask: #{ to: "b", text: "ping" } }; }
                return #{ answer: turn.replies[0].text };
            }
            if turn.kind == "message" { return #{ reply: #{ n: turn.messages[0].n, text: "pong" } }; }
            ()
        }"#,
    );
    let script = r#"
        let a = ctx.agents.open(#{ key: "a" });
        let b = ctx.agents.open(#{ key: "b" });
        ctx.messages.allow(#{ from: a, to: b, purpose: "ping" });
        a.ask("Ping b.")
    "#;
    let out = env.run(script, &["--max-concurrency", "1", "--deadline", "5s"]);
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "pong");
}

// ---------------------------------------------------------------------------------------------
// ctx.messages.allow and the prompt

#[test]
fn allow_refuses_bad_routes_with_clear_errors() {
    let env = Env::new();
    let script = r#"
        let a = ctx.agents.open(#{ key: "a" });
        let b = ctx.agents.open(#{ key: "b" });
        let gone = ctx.agents.open(#{ key: "gone" });
        ctx.agents.stop("gone");
        let tries = [
            || ctx.messages.allow(#{ from: "a", to: "b", purpose: "keys" }),
            || ctx.messages.allow(#{ from: a, to: gone, purpose: "stopped" }),
            || ctx.messages.allow(#{ from: a, to: b }),
            || ctx.messages.allow(#{ from: a, to: b, purpose: "  " }),
            || ctx.messages.allow(#{ from: a, to: a, purpose: "myself" }),
            || ctx.messages.allow(#{ between: [a], purpose: "alone" }),
            || ctx.messages.allow(#{ between: [a, b], to: b, purpose: "both forms" }),
            || ctx.messages.allow(#{ from: a, to: b, purpose: "none", max_messages: 0 }),
            || ctx.messages.allow(#{ from: a, to: b, purpose: "typo", max_mesages: 2 }),
        ];
        let errors = [];
        for t in tries {
            try { t.call(); errors.push("allowed"); } catch (e) { errors.push(`${e}`); }
        }
        errors
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let errors: Vec<String> =
        out.json().as_array().expect("array").iter().map(|e| e.as_str().unwrap_or_default().to_string()).collect();
    let expect = [
        "`from` must be an agent handle (the value ctx.agents.open returned), not a string",
        "`to`: agent gone is not open in this run (stopped or closed)",
        "a route needs a `purpose` (shown to the agents)",
        "a route needs a `purpose` (shown to the agents)",
        "a route needs two different agents, got a twice",
        "`between` must name two agents, got 1",
        "give `from` and `to`, or `between: [a, b]`",
        "`max_messages` must be at least 1, got 0",
        "max_mesages",
    ];
    assert_eq!(errors.len(), expect.len());
    for (got, want) in errors.iter().zip(expect) {
        assert!(got.contains("ctx.messages.allow") && got.contains(want), "expected {want:?} in {got:?}");
    }
    assert!(env.events_of("route-granted").is_empty());
}

#[test]
fn an_allow_error_is_reported_with_its_position() {
    let env = Env::new();
    let script =
        "let a = ctx.agents.open(#{ key: \"a\" });\nctx.messages.allow(#{ between: [a, \"b\"], purpose: \"x\" });\n";
    let out = env.run(script, &[]);
    out.expect_code(1);
    out.stderr_has("ctx.messages.allow: `between[1]` must be an agent handle").stderr_has("wf.rhai:2:");
}

#[test]
fn the_prompt_tells_an_agent_its_routes_purpose_and_messages_left() {
    let env = Env::new();
    // a sends once and ends its first turn silently: its check-in shows one message fewer.
    env.with_responder(
        r#"fn respond(turn) {
            if turn.agent == "a" && turn.nudge == 0 { return #{ send: #{ to: "b", text: "first" }, silent: true }; }
            if turn.kind == "turn" { return #{ answer: turn.shown }; }
            ()
        }"#,
    );
    let script = r#"
        let a = ctx.agents.open(#{ key: "a" });
        let b = ctx.agents.open(#{ key: "b" });
        let c = ctx.agents.open(#{ key: "c" });
        ctx.messages.allow(#{ from: a, to: b, purpose: "share findings", max_messages: 2 });
        ctx.messages.allow(#{ between: [a, c], purpose: "compare notes" });
        let first = a.run(#{ prompt: "Work." });
        #{ a: first.value, b: b.ask("Work."), c: c.ask("Work.") }
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let v = out.json();
    let a = v["a"].as_str().expect("a's check-in prompt");
    assert!(a.contains("You may message other agents:\n"), "{a}");
    assert!(a.contains("- b: share findings (1 message left)\n"), "{a}");
    assert!(a.contains("- c: compare notes (20 messages left)\n"), "{a}");
    assert!(a.contains("Send with: wf send <agent> <<'WF_MSG'"), "{a}");
    assert!(a.contains("Ask and wait for the reply with: wf ask <agent>"), "{a}");
    // b only receives on its route; c may answer a on theirs.
    let b = v["b"].as_str().expect("b's prompt");
    assert!(!b.contains("You may message other agents"), "{b}");
    let c = v["c"].as_str().expect("c's prompt");
    assert!(c.contains("- a: compare notes (20 messages left)"), "{c}");
    assert!(!c.contains("share findings"), "{c}");
    assert_eq!(env.events_of("op-nudged").len(), 1);
}

#[test]
fn a_command_agent_reads_its_routes_on_stdin() {
    let env = Env::new();
    let script = format!(
        r#"
        let a = {a};
        let b = ctx.agents.open(#{{ key: "b" }});
        ctx.messages.allow(#{{ from: a, to: b, purpose: "report problems to the lead", max_messages: 2 }});
        a.ask("Work.")
        "#,
        a = recorder("a")
    );
    env.run(&script, &[]).expect_code(0);
    let stdin = state(&env, "a", "a#1.stdin");
    let launcher = env.run_dir().join("agents/a/wf").display().to_string();
    assert!(
        stdin.starts_with("You may message other agents:\n- b: report problems to the lead (2 messages left)\n"),
        "{stdin}"
    );
    assert!(stdin.contains(&format!("Send with: {launcher} send <agent> <<'WF_MSG'")), "{stdin}");
    assert!(stdin.contains(&format!("See held messages with: {launcher} inbox")), "{stdin}");
    // Then how to answer, as every prompt ends.
    assert!(stdin.contains(&format!("{launcher} result a#1")), "{stdin}");
}

// ---------------------------------------------------------------------------------------------
// The example

fn cooperate() -> String {
    format!("{}/scripts/cooperate.rhai", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_cooperate_example_exchanges_messages_offline() {
    let env = Env::new();
    let out = env.awf(&["script", "run", &cooperate(), "--arg", "topic=Why tests matter"]);
    out.expect_code(0).stderr_has("awf: simulated");
    let v = out.json();
    assert_eq!(v["topic"], "Why tests matter");
    assert_eq!(v["consulted"], 1, "{v}");
    assert!(v["feedback"].as_str().expect("feedback").starts_with("critic:"), "{v}");
    assert!(v["verdict"]["decision"].is_string(), "{v}");
    assert_eq!(env.events_of("message-sent").len(), 1);
    assert_eq!(env.events_of("message-replied").len(), 1);
    let woken = env.turn("critic#m1");
    assert_eq!((woken["kind"].clone(), woken["stage"].clone()), (json!("message"), json!("draft")));
    assert!(env.events_of("route-closed").iter().any(|e| e["data"]["stage"] == "draft"));
}

#[test]
fn the_cooperate_example_completes_on_the_default_fake_runtime() {
    let env = Env::new();
    let out = env.awf(&["script", "run", &cooperate(), "--arg", "runtime=fake"]);
    out.expect_code(0).stderr_has("awf: simulated");
    let v = out.json();
    assert_eq!(v["consulted"], 0, "default answers send nothing: {v}");
    assert!(env.events_of("message-sent").is_empty());
    let check = env.awf(&["script", "check", &cooperate()]);
    check.expect_code(0).stdout_has("(cooperate; fn run(args))");
}

// ---------------------------------------------------------------------------------------------
// What message operations spend

#[test]
fn an_agents_usage_counts_its_message_operations_too() {
    let env = Env::new();
    env.with_responder(
        r#"fn respond(turn) {
            let spend = #{ input_tokens: 100, output_tokens: 10, cost_usd: 0.5 };
            if turn.agent == "a" && turn.kind == "turn" { return #{ send: #{ to: "b", text: "note" }, answer: "ok", usage: spend }; }
            if turn.agent == "b" && turn.kind == "message" { return #{ usage: spend }; }
            ()
        }"#,
    );
    let script = r#"
        let a = ctx.agents.open(#{ key: "a" });
        let b = ctx.agents.open(#{ key: "b" });
        ctx.stage("talk", || {
            ctx.messages.allow(#{ from: a, to: b, purpose: "notes" });
            a.ask("Start.");
            ()
        });
        #{ a: a.usage, b: b.usage, spent: ctx.spent() }
    "#;
    let v = env.run(script, &[]).expect_code(0).json();
    assert_eq!(v["b"]["operations"], 1, "b's message operation is counted: {v}");
    assert_eq!(v["b"]["tokens"], 110, "{v}");
    assert_eq!(v["a"]["operations"], 1, "{v}");
    let total = v["a"]["tokens"].as_u64().unwrap_or(0) + v["b"]["tokens"].as_u64().unwrap_or(0);
    assert_eq!(total, v["spent"]["tokens"].as_u64().unwrap_or(0), "the agents' usage is the run's spend: {v}");
}

#[test]
fn a_question_shown_in_the_prompt_stays_in_the_inbox_until_it_is_answered() {
    let env = Env::new();
    // b is idle when a asks, so b is woken in a message operation whose prompt shows the question;
    // b, a program, reads the question from its inbox instead, answers it, then lists everything.
    let b =
        planned(&env, "b", json!({ "message": [["inbox_json"], ["reply_inbox", "four"], ["inbox_all"], ["inbox"]] }));
    let a = planned(&env, "a", json!({ "turn": [["ask", "b", "what is 2+2?"], ["answer_last"]] }));
    let script = format!(
        r#"
        let a = {a};
        let b = {b};
        ctx.messages.allow(#{{ between: [a, b], purpose: "sums" }});
        a.ask("Go.")
        "#
    );
    let out = env.run(&script, &[]);
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "four");
    let seen: Value = serde_json::from_str(step(&env, "b", "inbox_json")["out"].as_str().expect("out")).expect("JSON");
    assert_eq!(seen, json!({ "n": 1, "from": "a", "text": "what is 2+2?", "asks": true, "status": "awaits-reply" }));
    assert_eq!(step(&env, "b", "reply_inbox")["code"], 0);
    // --all lists the whole history, the answered question closed; the plain inbox is then empty.
    assert_eq!(step(&env, "b", "inbox_all")["out"], "#1 from a (a question, closed):\nwhat is 2+2?");
    let plain: Vec<Value> = steps(&env, "b").into_iter().filter(|s| s["step"] == json!(["inbox"])).collect();
    assert_eq!(plain[0]["out"], "no messages");
}
