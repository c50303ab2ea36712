//! The `fake` harness: default answers built from the schema, and responder scripts that answer
//! badly, stay silent, fail, block, hang (until a deadline, a stop or the stall timeout), and
//! report usage.

use crate::common;

use common::Env;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

#[test]
fn default_answers_are_built_from_the_schema() {
    let env = Env::new();
    let script = r#"
        let a = ctx.agents.open(#{ key: "bot" });
        a.ask("Describe the weather today in detail please", #{
            type: "object",
            properties: #{
                mood: #{ enum: ["sunny", "rainy"] },
                text: #{ type: "string" },
                temp: #{ type: "number", minimum: 12.5 },
                count: #{ type: "integer", minimum: 4 },
                tags: #{ type: "array", items: #{ type: "string" }, minItems: 2 },
                flag: #{ type: "boolean" },
                fixed: #{ "const": "always" },
                optional: #{ type: "string" },
            },
            required: ["mood", "text", "temp", "count", "tags", "flag", "fixed"],
        })
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["mood"], "sunny");
    assert_eq!(v["text"], "bot: Describe the weather today in detail please");
    assert_eq!(v["temp"], 12.5);
    assert_eq!(v["count"], 4);
    assert_eq!(v["tags"].as_array().map(Vec::len), Some(2));
    assert_eq!(v["flag"], false);
    assert_eq!(v["fixed"], "always");
    out.stderr_has("awf: simulated");
    let t = env.turn("bot#1");
    assert_eq!(t["simulated"], true);
    assert_eq!(t["cost_source"], "simulated");
    assert_eq!(t["cost_usd"], 0.0);
    assert!(t["input_tokens"].as_u64().expect("input") > 0 && t["output_tokens"].as_u64().expect("output") > 0);
}

#[test]
fn the_responder_sees_the_turn() {
    let env = Env::new();
    env.with_responder(r#"fn respond(turn) { #{ answer: turn } }"#);
    let script = r#"
        let a = ctx.agents.open(#{ key: "echo", instructions: "persona", labels: #{ team: "x" } });
        a.ask("first prompt", #{ type: "object" });
        a.run(#{ prompt: "second prompt", schema: #{ type: "object" }, id: "custom" }).value
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let t = out.json();
    assert_eq!(t["agent"], "echo");
    assert_eq!(t["op_id"], "custom");
    assert_eq!(t["prompt"], "second prompt");
    assert_eq!(t["schema"], json!({ "type": "object" }));
    assert_eq!(t["instructions"], "persona");
    assert_eq!(t["model"], "fake");
    assert_eq!(t["labels"], json!({ "team": "x" }));
    assert_eq!(t["n"], 2);
    assert_eq!(t["nudge"], 0);
    assert_eq!(t["rejection"], Value::Null);
    let shown = t["shown"].as_str().expect("shown");
    assert!(shown.starts_with("second prompt"), "{shown}");
    assert!(shown.contains("custom") && shown.contains(r#"{"type":"object"}"#), "{shown}");
}

#[test]
fn invalid_json_is_rejected_then_the_agent_retries() {
    let env = Env::new();
    env.with_responder(
        r#"fn respond(turn) {
            if turn.rejection == () { return #{ json: "{not json" }; }
            #{ answer: #{ n: 1, seen: turn.rejection } }
        }"#,
    );
    let script = r#"
        let a = ctx.agents.open(#{ key: "flaky" });
        a.run(#{ prompt: "x", schema: #{ type: "object", properties: #{ n: #{ type: "integer" }, seen: #{ type: "string" } }, required: ["n"] } })
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let o = out.json();
    assert_eq!(o["kind"], "answered");
    assert_eq!(o["value"]["n"], 1);
    let seen = o["value"]["seen"].as_str().expect("rejection text");
    assert!(seen.starts_with("rejected:") && seen.contains("not valid JSON"), "{seen}");
    let t = env.turn("flaky#1");
    assert_eq!(t["outcome"], "answered");
    assert!(t["rejections"].as_u64().expect("rejections") >= 1, "turns.jsonl must count the rejected answer: {t}");
}

#[test]
fn an_answer_not_matching_the_schema_is_rejected_with_pointers_then_retried() {
    let env = Env::new();
    env.with_responder(
        r#"fn respond(turn) {
            if turn.rejection == () { return #{ answer: #{ n: "one" } }; }
            #{ answer: #{ n: 1, seen: turn.rejection } }
        }"#,
    );
    let script = r#"
        ctx.agents.open(#{ key: "w" }).ask("x", #{ type: "object", properties: #{ n: #{ type: "integer" } }, required: ["n"] })
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["n"], 1);
    assert!(v["seen"].as_str().expect("seen").contains("at /n:"), "{v}");
    let t = env.turn("w#1");
    assert_eq!(t["outcome"], "answered");
    assert_eq!(t["rejections"], 1, "{t}");
    let journal = env.jsonl("journal");
    assert_eq!(journal.len(), 1);
    assert_eq!(journal[0]["outcome"]["value"]["n"], 1);
}

#[test]
fn answers_that_are_always_rejected_end_unanswered_and_nothing_is_journaled() {
    let env = Env::new();
    env.with_responder(r#"fn respond(turn) { #{ json: "[]" } }"#);
    let out = env.run(r#"ctx.agents.open(#{ key: "bad" }).run(#{ prompt: "x", schema: #{ type: "object" } })"#, &[]);
    out.expect_code(0);
    let o = out.json();
    assert_eq!(o["kind"], "unanswered");
    assert_eq!(o["ok"], false);
    assert_eq!(o["value"], Value::Null);
    assert!(o["reason"].as_str().expect("reason").contains("rejected"), "{o}");
    assert!(env.jsonl("journal").is_empty(), "a rejected answer must not be journaled");
    assert_eq!(env.turn("bad#1")["outcome"], "unanswered");
}

#[test]
fn a_silent_agent_is_nudged_and_can_then_answer() {
    let env = Env::new();
    env.with_responder(
        r#"fn respond(turn) {
            if turn.nudge < 2 { return #{ silent: true }; }
            #{ answer: `answered at nudge ${turn.nudge}` }
        }"#,
    );
    let out = env.run(r#"ctx.agents.open(#{ key: "shy" }).ask("x")"#, &[]);
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "answered at nudge 2");
    let nudges: Vec<Value> = env.events_of("op-nudged").iter().map(|e| e["data"]["nudge"].clone()).collect();
    assert_eq!(nudges, vec![json!(1), json!(2)]);
}

#[test]
fn a_silent_agent_ends_unanswered_after_the_nudges() {
    let env = Env::new();
    env.with_responder(r#"fn respond(turn) { #{ silent: true } }"#);
    let out = env.run(
        r#"let a = ctx.agents.open(#{ key: "quiet" }); let o = a.run(#{ prompt: "x" }); [o, a.ask("again?") ?? 0]"#,
        &[],
    );
    // The second call throws (unanswered): the run fails, but the first outcome is recorded.
    out.expect_code(1).stderr_has("agent quiet did not answer (unanswered)");
    let t = env.turn("quiet#1");
    assert_eq!(t["outcome"], "unanswered");
    assert_eq!(t["reason"], "no answer after 2 nudges");
    assert_eq!(env.events_of("op-nudged").iter().filter(|e| e["data"]["op_id"] == "quiet#1").count(), 2);
    // Unanswered does not close the agent: the second turn ran.
    assert_eq!(env.turn("quiet#2")["outcome"], "unanswered");
}

#[test]
fn nudge_false_means_no_nudge() {
    let env = Env::new();
    env.with_responder(
        r#"fn respond(turn) { if turn.nudge == 0 { #{ silent: true } } else { #{ answer: "nudged" } } }"#,
    );
    let out = env.run(r#"ctx.agents.open(#{ key: "q" }).run(#{ prompt: "x", nudge: false })"#, &[]);
    out.expect_code(0);
    let o = out.json();
    assert_eq!(o["kind"], "unanswered");
    assert_eq!(o["reason"], "no answer after 0 nudges");
    assert!(env.events_of("op-nudged").is_empty());
}

#[test]
fn a_custom_nudge_prompt_and_max_are_used() {
    let env = Env::new();
    env.with_responder(
        r#"fn respond(turn) { if turn.nudge == 0 { #{ silent: true } } else { #{ answer: turn.shown } } }"#,
    );
    let out = env.run(
        r#"ctx.agents.open(#{ key: "q" }).run(#{ prompt: "x", nudge: #{ prompt: "Hurry up, please.", max: 1 } })"#,
        &[],
    );
    out.expect_code(0);
    let o = out.json();
    assert_eq!(o["kind"], "answered");
    assert!(o["value"].as_str().expect("shown").starts_with("Hurry up, please."), "{o}");
    assert_eq!(env.events_of("op-nudged").len(), 1);
}

#[test]
fn the_nudges_limit_comes_from_config() {
    let env = Env::new();
    env.write(
        "awf.toml",
        "default_runtime = \"s\"\n[runtimes.s]\nharness = \"fake\"\nresponder = \"r.rhai\"\n[limits]\nnudges = 4\n",
    );
    env.write("r.rhai", r#"fn respond(turn) { #{ silent: true } }"#);
    let out = env.run(r#"ctx.agents.open(#{ key: "q" }).run(#{ prompt: "x" }).reason"#, &[]);
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "no answer after 4 nudges");
    assert_eq!(env.events_of("op-nudged").len(), 4);
}

#[test]
fn a_failing_agent_settles_failed_and_is_closed() {
    let env = Env::new();
    env.with_responder(r#"fn respond(turn) { #{ fail: "model crashed" } }"#);
    let script = r#"
        let a = ctx.agents.open(#{ key: "broken" });
        let o = a.run(#{ prompt: "x" });
        let again = ();
        try { a.run(#{ prompt: "y" }); } catch (e) { again = e; }
        let reopened = ctx.agents.open(#{ key: "broken" });
        let third = ();
        try { reopened.ask("z"); } catch (e) { third = e; }
        #{ o: o, again: again, third: third }
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["o"]["kind"], "failed");
    assert_eq!(v["o"]["reason"], "model crashed");
    assert_eq!(v["again"], "agent broken is closed: its operation broken#1 failed: model crashed");
    assert!(v["third"].as_str().expect("third").contains("agent broken is closed"), "{v}");
    assert_eq!(env.turns().len(), 1, "no turn may run on a closed agent");
    let closed = env.events_of("agent-closed");
    assert_eq!(closed.len(), 1);
    assert_eq!(closed[0]["data"]["agent"], "broken");
    assert_eq!(env.turn("broken#1")["outcome"], "failed");
}

#[test]
fn a_hanging_agent_with_a_turn_timeout_times_out_and_is_closed() {
    let env = Env::new();
    env.with_responder(r#"fn respond(turn) { #{ hang: true } }"#);
    let script = r#"
        let a = ctx.agents.open(#{ key: "stuck" });
        let o = a.run(#{ prompt: "x", timeout_ms: 150 });
        let again = ();
        try { a.ask("y"); } catch (e) { again = e; }
        #{ o: o, again: again }
    "#;
    let started = Instant::now();
    let out = env.run(script, &[]);
    assert!(started.elapsed() < Duration::from_secs(10));
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["o"]["kind"], "timed-out");
    assert_eq!(v["o"]["ok"], false);
    assert!(v["o"]["usage"]["duration_ms"].as_u64().expect("duration") >= 150, "{v}");
    let again = v["again"].as_str().expect("again");
    assert!(again.contains("agent stuck is closed") && again.contains("timed-out"), "{again}");
    let t = env.turn("stuck#1");
    assert_eq!(t["outcome"], "timed-out");
}

#[test]
fn a_fake_turn_that_times_out_is_still_recorded_as_simulated() {
    let env = Env::new();
    env.with_responder(r#"fn respond(turn) { #{ hang: true } }"#);
    env.run(r#"ctx.agents.open(#{ key: "stuck" }).run(#{ prompt: "x", timeout_ms: 50 }).kind"#, &[]).expect_code(0);
    let t = env.turn("stuck#1");
    assert_eq!(t["harness"], "fake");
    assert_eq!(t["simulated"], true, "a fake turn is simulated however it ends: {t}");
    assert_eq!(t["cost_source"], "simulated", "{t}");
}

#[test]
fn a_hanging_fake_turn_or_message_operation_fails_stalled_after_the_stall_timeout() {
    let env = Env::new();
    // Like a process that goes quiet: no deadline, no stop, only the stall timeout ends it.
    env.write(
        "awf.toml",
        "default_runtime = \"s\"\n[runtimes.s]\nharness = \"fake\"\nresponder = \"r.rhai\"\n[limits]\nstall_timeout = \"300ms\"\n",
    );
    env.write(
        "r.rhai",
        r#"fn respond(turn) {
            if turn.agent == "a" && turn.kind == "turn" { return #{ send: #{ to: "b", text: "hi" }, answer: "sent" }; }
            #{ hang: true }
        }"#,
    );
    let script = r#"
        let a = ctx.agents.open(#{ key: "a" });
        let b = ctx.agents.open(#{ key: "b" });
        let c = ctx.agents.open(#{ key: "c" });
        ctx.stage("talk", || { ctx.messages.allow(#{ from: a, to: b, purpose: "news" }); a.ask("Send."); () });
        c.run(#{ prompt: "x" })
    "#;
    let started = Instant::now();
    let out = env.run(script, &["--deadline", "15s"]);
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["kind"], "failed", "{v}");
    assert_eq!(v["reason"], "stalled: no output or event for 300 ms", "{v}");
    let woken = env.turn("b#m1");
    assert_eq!((woken["kind"].as_str(), woken["outcome"].as_str()), (Some("message"), Some("failed")), "{woken}");
    assert_eq!(woken["reason"], "stalled: no output or event for 300 ms");
}

#[test]
fn an_agent_timeout_applies_to_each_of_its_turns() {
    let env = Env::new();
    env.with_responder(r#"fn respond(turn) { if turn.prompt == "hang" { #{ hang: true } } else { () } }"#);
    let script = r#"
        let a = ctx.agents.open(#{ key: "t", timeout_ms: 150 });
        [a.run(#{ prompt: "quick" }).kind, a.run(#{ prompt: "hang" }).kind]
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    assert_eq!(out.json(), json!(["answered", "timed-out"]));
}

#[test]
fn a_blocked_agent_settles_blocked_and_stays_open() {
    let env = Env::new();
    env.with_responder(r#"fn respond(turn) { if turn.n == 1 { #{ blocked: "needs approval" } } else { () } }"#);
    let script = r#"
        let a = ctx.agents.open(#{ key: "wall" });
        let o = a.run(#{ prompt: "x" });
        [o.kind, o.reason, a.ask("second")]
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    assert_eq!(out.json(), json!(["blocked", "needs approval", "wall: second"]));
    assert!(env.events_of("agent-closed").is_empty());
}

#[test]
fn responder_usage_is_recorded_and_accounted() {
    let env = Env::new();
    env.with_responder(
        r#"fn respond(turn) { #{ answer: "ok", usage: #{ input_tokens: 100, output_tokens: 20, cache_read_tokens: 5, cost_usd: 0.01 } } }"#,
    );
    let out = env.run(r#"let a = ctx.agents.open(#{ key: "a" }); a.ask("1"); a.ask("2"); ctx.spent()"#, &[]);
    out.expect_code(0);
    let spent = out.json();
    assert_eq!(spent["tokens"], 250);
    assert!((spent["cost_usd"].as_f64().expect("usd") - 0.02).abs() < 1e-9, "{spent}");
    let t = env.turn("a#1");
    assert_eq!(t["input_tokens"], 100);
    assert_eq!(t["output_tokens"], 20);
    assert_eq!(t["cache_read_tokens"], 5);
    assert_eq!(t["tokens"], 125);
    assert!((t["cost_usd"].as_f64().expect("usd") - 0.01).abs() < 1e-9);
    let totals = &env.result()["accounting"]["totals"];
    assert_eq!(totals["tokens"], 250);
    assert_eq!(totals["operations"], 2);
    out.stderr_has("2 operations · 250 tokens · $0.0200");
}

#[test]
fn an_inline_runtime_can_name_a_responder() {
    let env = Env::new();
    env.write("agents/r.rhai", r#"fn respond(turn) { #{ answer: "from inline responder" } }"#);
    let out = env.run(
        r#"ctx.agents.open(#{ key: "x", runtime: #{ harness: "fake", responder: "agents/r.rhai" } }).ask("hi")"#,
        &[],
    );
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "from inline responder");
}

#[test]
fn a_responder_beside_the_script_is_found_before_the_working_folder() {
    let env = Env::new();
    env.write("flows/r.rhai", r#"fn respond(turn) { #{ answer: "beside the script" } }"#);
    env.write("r.rhai", r#"fn respond(turn) { #{ answer: "working folder" } }"#);
    env.write(
        "flows/wf.rhai",
        r#"ctx.agents.open(#{ key: "x", runtime: #{ harness: "fake", responder: "r.rhai" } }).ask("hi")"#,
    );
    let out = env.awf(&["script", "run", "flows/wf.rhai"]);
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "beside the script");
}

#[test]
fn a_missing_responder_says_where_it_was_looked_for() {
    let env = Env::new();
    let out = env.run(r#"ctx.agents.open(#{ key: "x", runtime: #{ harness: "fake", responder: "nope.rhai" } })"#, &[]);
    out.expect_code(1).stderr_has("nope.rhai").stderr_has("not found");
}

#[test]
fn a_responder_without_respond_is_refused() {
    let env = Env::new();
    env.write("r.rhai", "fn answer(turn) { () }");
    let out = env.run(r#"ctx.agents.open(#{ key: "x", runtime: #{ harness: "fake", responder: "r.rhai" } })"#, &[]);
    out.expect_code(1).stderr_has("must define fn respond(turn)");
}

#[test]
fn a_responder_that_errors_or_returns_nonsense_fails_the_turn() {
    let env = Env::new();
    env.with_responder(
        r#"fn respond(turn) {
            if turn.agent == "throws" { throw "responder bug"; }
            if turn.agent == "oddkey" { return #{ answr: "x" }; }
            if turn.agent == "notmap" { return 42; }
            ()
        }"#,
    );
    let script = r#"
        ["throws", "oddkey", "notmap"].map(|k| ctx.agents.open(#{ key: k }).run(#{ prompt: "x" }))
    "#;
    let out = env.run(script, &[]);
    out.expect_code(0);
    let v = out.json();
    for (i, needle) in ["responder bug", "unknown key `answr`", "must return a map"].iter().enumerate() {
        assert_eq!(v[i]["kind"], "failed", "{v}");
        assert!(v[i]["reason"].as_str().expect("reason").contains(needle), "{needle}: {v}");
    }
}
