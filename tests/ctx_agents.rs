//! `ctx.agents.open/get/stop` and the Agent handle: run, ask, fork, set, compact, stop, facts.

use crate::common;

use common::Env;
use serde_json::{json, Value};

#[test]
fn open_twice_with_the_same_spec_returns_the_same_agent() {
    let env = Env::new();
    let script = r#"
        let a = ctx.agents.open(#{ key: "a", instructions: "be brief", cwd: "sub" });
        let b = ctx.agents.open(#{ key: "a", instructions: "be brief", cwd: "sub" });
        let r1 = a.run(#{ prompt: "one" });
        let r2 = b.run(#{ prompt: "two" });
        [b.key, r1.op_id, r2.op_id]
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    // One agent: the second handle continues the first one's operation count.
    assert_eq!(out.json(), json!(["a", "a#1", "a#2"]));
    assert_eq!(env.events_of("agent-opened").len(), 1);
}

#[test]
fn open_again_with_a_different_spec_names_the_field() {
    let env = Env::new();
    let script = r#"
        let a = ctx.agents.open(#{ key: "a", instructions: "be brief" });
        let errors = [];
        try { ctx.agents.open(#{ key: "a", instructions: "be verbose" }); } catch (e) { errors.push(e); }
        try { ctx.agents.open(#{ key: "a", instructions: "be brief", runtime: #{ harness: "fake", model: "other" } }); } catch (e) { errors.push(e); }
        try { ctx.agents.open(#{ key: "a", instructions: "be brief", cwd: "elsewhere" }); } catch (e) { errors.push(e); }
        errors
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    assert_eq!(
        out.json(),
        json!([
            "agent a is already open with different instructions",
            "agent a is already open with different runtime",
            "agent a is already open with different cwd",
        ])
    );
}

#[test]
fn an_incompatible_open_that_is_not_caught_fails_the_run_at_the_call() {
    let env = Env::new();
    let script = "let a = ctx.agents.open(#{ key: \"a\" });\nctx.agents.open(#{ key: \"a\", instructions: \"x\" });\n";
    let out = env.run(script, &[]);
    out.expect_code(1).stderr_has("agent a is already open with different instructions").stderr_has("wf.rhai:2:");
}

#[test]
fn bad_specs_are_refused_with_the_field_named() {
    let env = Env::new();
    let script = r#"
        let errors = [];
        try { ctx.agents.open(#{ instructions: "no key" }); } catch (e) { errors.push(e); }
        try { ctx.agents.open(#{ key: "a", colour: "blue" }); } catch (e) { errors.push(e); }
        try { ctx.agents.open(#{ key: "a", runtime: 5 }); } catch (e) { errors.push(e); }
        try { ctx.agents.open(#{ key: "a", sandbox: "default" }); } catch (e) { errors.push(e); }
        try { ctx.agents.open(#{ key: "a", runtime: #{ harness: "nosuch" } }); } catch (e) { errors.push(e); }
        try { ctx.agents.open(#{ key: "a", timeout_ms: 5, deadline: 5 }); } catch (e) { errors.push(e); }
        errors
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let v = out.json();
    let errors: Vec<&str> = v.as_array().expect("array").iter().map(|e| e.as_str().expect("string")).collect();
    assert_eq!(errors.len(), 6, "{errors:#?}");
    assert!(errors[0].contains("key"), "{}", errors[0]);
    assert!(errors[1].contains("colour"), "{}", errors[1]);
    assert!(errors[2].contains("runtime"), "{}", errors[2]);
    assert!(errors[3].contains("sandbox"), "{}", errors[3]);
    assert!(errors[4].contains("nosuch"), "{}", errors[4]);
    assert!(errors[5].contains("not both"), "{}", errors[5]);
}

#[test]
fn get_returns_unit_for_an_unknown_key_and_the_agent_for_a_known_one() {
    let env = Env::new();
    let script = r#"
        let before = ctx.agents.get("a");
        let a = ctx.agents.open(#{ key: "a" });
        a.ask("first");
        let g = ctx.agents.get("a");
        let r = g.run(#{ prompt: "second" });
        #{ before: before, unknown: ctx.agents.get("zzz"), key: g.key, op: r.op_id }
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    assert_eq!(out.json(), json!({ "before": null, "unknown": null, "key": "a", "op": "a#2" }));
}

#[test]
fn a_stopped_key_cannot_be_opened_again_or_used() {
    let env = Env::new();
    let script = r#"
        let a = ctx.agents.open(#{ key: "a" });
        a.ask("hi");
        let out = #{ stopped: ctx.agents.stop("a", "done with it"), again: ctx.agents.stop("a"), never: ctx.agents.stop("never-opened") };
        try { ctx.agents.open(#{ key: "a" }); } catch (e) { out.reopen = e; }
        try { a.ask("still there?"); } catch (e) { out.used = e; }
        out.get = ctx.agents.get("a");
        let b = ctx.agents.open(#{ key: "b" });
        out.b_stop = b.stop("bye");
        try { b.ask("x"); } catch (e) { out.b_use = e; }
        out
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["stopped"], true);
    assert_eq!(v["again"], false);
    assert_eq!(v["never"], false);
    let reopen = v["reopen"].as_str().expect("reopen error");
    assert!(
        reopen.contains("agent a was stopped")
            && reopen.contains("done with it")
            && reopen.contains("cannot be opened again"),
        "{reopen}"
    );
    let used = v["used"].as_str().expect("use error");
    assert!(used.contains("agent a is closed") && used.contains("done with it"), "{used}");
    assert_eq!(v["get"], Value::Null);
    assert_eq!(v["b_stop"], true);
    assert!(v["b_use"].as_str().expect("b error").contains("bye"), "{v}");
    let stopped = env.events_of("agent-stopped");
    assert_eq!(stopped.len(), 2);
    assert_eq!(stopped[0]["data"], json!({ "agent": "a", "reason": "done with it" }));
    // The refused call ran no turn.
    assert_eq!(env.turns().len(), 1);
}

#[test]
fn run_returns_the_full_outcome_map() {
    let env = Env::new();
    let script = r#"
        let a = ctx.agents.open(#{ key: "writer" });
        a.run(#{ prompt: "Write a haiku about tests", label: "poem",
                 schema: #{ type: "object", properties: #{ lines: #{ type: "array", items: #{ type: "string" }, minItems: 3 }, mood: #{ enum: ["calm", "wild"] } }, required: ["lines", "mood"] } })
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let o = out.json();
    assert_eq!(o["kind"], "answered");
    assert_eq!(o["ok"], true);
    assert_eq!(o["reason"], Value::Null);
    assert_eq!(o["op_id"], "writer#1");
    assert_eq!(o["value"]["mood"], "calm");
    assert_eq!(o["value"]["lines"].as_array().map(Vec::len), Some(3));
    assert!(o["value"]["lines"][0].as_str().expect("line").starts_with("writer: Write a haiku"), "{o}");
    let u = &o["usage"];
    for k in ["input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "duration_ms"] {
        assert!(u[k].is_u64(), "usage.{k} missing: {u}");
    }
    assert!(u["cost_usd"].is_f64(), "{u}");
    assert!(u["input_tokens"].as_u64().expect("input") > 0);
    let t = env.turn("writer#1");
    assert_eq!(t["label"], "poem");
    assert_eq!(t["input_tokens"], u["input_tokens"]);
    assert_eq!(t["output_tokens"], u["output_tokens"]);
}

#[test]
fn op_ids_are_key_hash_n_per_agent() {
    let env = Env::new();
    let script = r#"
        let a = ctx.agents.open(#{ key: "a" });
        let b = ctx.agents.open(#{ key: "b" });
        [a.run(#{ prompt: "1" }).op_id, b.run(#{ prompt: "1" }).op_id, a.run(#{ prompt: "2" }).op_id,
         a.run(#{ prompt: "3" }).op_id, b.run(#{ prompt: "2" }).op_id]
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    assert_eq!(out.json(), json!(["a#1", "b#1", "a#2", "a#3", "b#2"]));
    let ids: Vec<Value> = env.turns().iter().map(|t| t["op_id"].clone()).collect();
    assert_eq!(ids, vec![json!("a#1"), json!("b#1"), json!("a#2"), json!("a#3"), json!("b#2")]);
}

#[test]
fn the_same_explicit_id_and_turn_replays_the_outcome_without_a_second_turn() {
    let env = Env::new();
    let script = r#"
        let a = ctx.agents.open(#{ key: "a" });
        let first = a.run(#{ prompt: "decide", id: "decision" });
        let again = a.run(#{ prompt: "decide", id: "decision" });
        [first, again]
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v[0], v[1]);
    assert_eq!(v[0]["op_id"], "decision");
    let turns = env.turns();
    assert_eq!(turns.len(), 1, "a replay must not run a second turn: {turns:#?}");
    assert_eq!(turns[0]["op_id"], "decision");
    assert_eq!(env.events_of("op-started").len(), 1);
}

#[test]
fn the_same_explicit_id_with_a_different_turn_is_an_error() {
    let env = Env::new();
    let script = "let a = ctx.agents.open(#{ key: \"a\" });\na.run(#{ prompt: \"one\", id: \"x\" });\na.run(#{ prompt: \"two\", id: \"x\" });\n";
    let out = env.run(script, &[]);
    out.expect_code(1);
    out.stderr_has("op id x was already used with a different turn").stderr_has("wf.rhai:3:");
    assert_eq!(env.turns().len(), 1);
}

#[test]
fn bad_turns_are_refused_before_any_turn_runs() {
    let env = Env::new();
    let script = r#"
        let a = ctx.agents.open(#{ key: "a" });
        let errors = [];
        try { a.run(#{ schema: #{ type: "string" } }); } catch (e) { errors.push(e); }
        try { a.run(#{ prompt: "x", tone: "warm" }); } catch (e) { errors.push(e); }
        try { a.run(#{ prompt: "x", timeout_ms: 10, deadline: 10 }); } catch (e) { errors.push(e); }
        try { a.run(#{ prompt: "x", nudge: 3 }); } catch (e) { errors.push(e); }
        try { a.run(#{ prompt: "x", schema: #{ type: "strang" } }); } catch (e) { errors.push(e); }
        errors
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let v = out.json();
    let errors: Vec<&str> = v.as_array().expect("array").iter().map(|e| e.as_str().expect("string")).collect();
    assert_eq!(errors.len(), 5, "{errors:#?}");
    assert!(errors[0].contains("prompt"), "{}", errors[0]);
    assert!(errors[1].contains("tone"), "{}", errors[1]);
    assert!(errors[2].contains("not both"), "{}", errors[2]);
    assert!(errors[3].contains("nudge"), "{}", errors[3]);
    assert!(errors[4].contains("not a valid JSON Schema") && errors[4].contains("/type"), "{}", errors[4]);
    assert!(env.turns().is_empty(), "no turn may run: {:#?}", env.turns());
}

#[test]
fn ask_returns_the_value() {
    let env = Env::new();
    let script = r#"
        let a = ctx.agents.open(#{ key: "a" });
        #{ text: a.ask("Name a colour please"),
           obj: a.ask("Rate it", #{ type: "object", properties: #{ score: #{ type: "integer", minimum: 3 } }, required: ["score"] }) }
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    assert_eq!(out.json(), json!({ "text": "a: Name a colour please", "obj": { "score": 3 } }));
}

#[test]
fn ask_throws_a_catchable_error_carrying_the_outcome() {
    let env = Env::new();
    env.with_responder(r#"fn respond(turn) { if turn.agent == "quiet" { return #{ silent: true }; } () }"#);
    let script = r#"
        let q = ctx.agents.open(#{ key: "quiet" });
        let caught = ();
        try { q.ask("anything?"); } catch (e) { caught = e; }
        caught
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let e = out.json();
    assert_eq!(e["kind"], "unanswered");
    assert_eq!(e["op_id"], "quiet#1");
    let msg = e["message"].as_str().expect("message");
    assert!(msg.contains("agent quiet did not answer (unanswered)"), "{msg}");
    assert!(e["reason"].as_str().expect("reason").contains("no answer"), "{e}");
    assert_eq!(e["outcome"]["kind"], "unanswered");
    assert_eq!(e["outcome"]["ok"], false);
}

#[test]
fn an_uncaught_ask_error_fails_the_run_with_its_message() {
    let env = Env::new();
    env.with_responder(r#"fn respond(turn) { #{ blocked: "no access to the repo" } }"#);
    let out = env.run("let a = ctx.agents.open(#{ key: \"a\" });\na.ask(\"go\")\n", &[]);
    out.expect_code(1);
    out.stderr_has("agent a did not answer (blocked): no access to the repo").stderr_has("wf.rhai:2:");
    assert_eq!(env.result()["error"], "agent a did not answer (blocked): no access to the repo");
}

#[test]
fn agent_facts_come_from_the_runtime() {
    let env = Env::new();
    let script = r#"
        let d = ctx.agents.open(#{ key: "d" });
        let m = ctx.agents.open(#{ key: "m", runtime: #{ harness: "fake", model: "big-model", effort: "high" } });
        let e = ctx.agents.open(#{ key: "e", runtime: #{ alias: "fake", effort: "low" } });
        let s = ctx.agents.open(#{ key: "s", runtime: "fake" });
        [[d.key, d.harness, d.model, d.effort], [m.key, m.harness, m.model, m.effort], [e.model, e.effort], [s.harness, s.model]]
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    assert_eq!(
        out.json(),
        json!([["d", "fake", "fake", null], ["m", "fake", "big-model", "high"], ["fake", "low"], ["fake", "fake"]])
    );
}

#[test]
fn set_changes_model_and_effort_for_later_turns() {
    let env = Env::new();
    let script = r#"
        let a = ctx.agents.open(#{ key: "a" });
        a.ask("before");
        a.set(#{ model: "fake-2", effort: "high" });
        a.ask("after");
        let err = ();
        try { a.set(#{ temperature: 1 }); } catch (e) { err = e; }
        [a.model, a.effort, err]
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v[0], "fake-2");
    assert_eq!(v[1], "high");
    assert!(v[2].as_str().expect("error").contains("temperature"), "{v}");
    assert_eq!(env.turn("a#1")["model"], "fake");
    assert_eq!(env.turn("a#2")["model"], "fake-2");
    let set = env.events_of("agent-set");
    assert_eq!(set.len(), 1);
    assert_eq!(set[0]["data"]["model"], "fake-2");
}

#[test]
fn compact_returns_a_summary() {
    let env = Env::new();
    let script = r#"
        let a = ctx.agents.open(#{ key: "a" });
        a.ask("one");
        a.ask("two");
        a.compact(#{ prompt: "Keep the decisions only" })
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let summary = out.stdout.trim();
    assert!(summary.starts_with("a: simulated summary of 2 turns"), "{summary}");
    assert!(summary.contains("Keep the decisions only"), "{summary}");
    assert_eq!(env.events_of("agent-compacted").len(), 1);
}

#[test]
fn fork_copies_the_session_under_a_new_key() {
    let env = Env::new();
    let script = r#"
        let a = ctx.agents.open(#{ key: "a", instructions: "original" });
        a.ask("one");
        a.ask("two");
        let f = a.fork(#{ key: "f", instructions: "forked", effort: "low" });
        let r = f.run(#{ prompt: "three" });
        let err = ();
        try { a.fork(#{ key: "f" }); } catch (e) { err = e; }
        #{ key: f.key, harness: f.harness, effort: f.effort, op: r.op_id, value: r.value,
           history: f.compact(#{ prompt: "sum" }), same: ctx.agents.get("f").key, err: err }
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["key"], "f");
    assert_eq!(v["harness"], "fake");
    assert_eq!(v["effort"], "low");
    assert_eq!(v["op"], "f#1");
    assert_eq!(v["value"], "f: three");
    // The fork carries the parent's two turns plus its own.
    assert!(v["history"].as_str().expect("summary").contains("3 turns"), "{v}");
    assert_eq!(v["same"], "f");
    assert!(v["err"].as_str().expect("error").contains("cannot fork into f"), "{v}");
    let opened = env.events_of("agent-opened");
    assert!(opened.iter().any(|e| e["data"]["agent"] == "f" && e["data"]["forked_from"] == "a"), "{opened:#?}");
}

#[test]
fn max_agents_is_enforced() {
    let env = Env::new();
    let script = "for i in 0..3 {\n    ctx.agents.open(#{ key: `a${i}` });\n}\n";
    let out = env.run(script, &["--max-agents", "2"]);
    out.expect_code(1).stderr_has("max agents reached").stderr_has("2").stderr_has("wf.rhai:2:");
    assert_eq!(env.events_of("agent-opened").len(), 2);
    // Reopening an open key does not count.
    let env = Env::new();
    let out = env.run("for i in 0..5 { ctx.agents.open(#{ key: \"same\" }); }\n1", &["--max-agents", "1"]);
    out.expect_code(0);
}
