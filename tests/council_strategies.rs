//! The map, pair, pipeline and synthesize council strategies (stdlib/council/*.rhai), driven
//! through real workflows on the fake harness with responder scripts: every point of COUNCILS.md
//! for these four, with the outputs pinned as exact text.

use crate::common;

use common::council::{call, council, op_ids, output, usage_matches_turns};
use serde_json::{json, Value};

// ---------------------------------------------------------------------------------------------
// map

const LONG_ITEM: &str = "write the migration that moves every user record to the new schema without any downtime";

fn five_items_responder() -> String {
    format!(
        r#"fn respond(turn) {{
    if turn.agent == "map-splitter" {{
        if turn.schema.items.type != "string" {{ return #{{ answer: ["wrong schema"] }}; }}
        return #{{ answer: ["parse the config", "validate the schema", "{LONG_ITEM}", "update the docs", "add a changelog entry"] }};
    }}
    let fenced = turn.prompt.contains("```untrusted item 2\nvalidate the schema\n```");
    #{{ answer: `${{turn.agent}} did it` + if turn.agent == "map-worker-2" {{ ` (item fenced: ${{fenced}})` }} else {{ "" }} }}
}}"#
    )
}

#[test]
fn map_clamps_items_to_max_children_and_names_what_was_left_out() {
    let env = council(&five_items_responder());
    let r = call(&env, "map", r#"#{ task: "Ship v2", params: #{ max_items: 10 }, limits: #{ max_children: 4 } }"#);
    assert_eq!(
        output(&r),
        "item 1: parse the config
map-worker-1 did it

item 2: validate the schema
map-worker-2 did it (item fenced: true)

item 3: write the migration that moves every user record to the new…
map-worker-3 did it

Left out (2 of 5 items past max_items 3; not worked on):
- item 4: update the docs
- item 5: add a changelog entry

— map: 3/3 items done · 2 left out (max_items 3)"
    );
    assert_eq!(r["ok"], true);
    assert_eq!(r["headline"], "map: 3/3 items done · 2 left out");
    assert_eq!(r["structured"]["limit"], 3);
    assert_eq!(r["structured"]["dropped"], json!(["update the docs", "add a changelog entry"]));
    assert_eq!(r["structured"]["items"][2]["item"], LONG_ITEM);
    // The splitter and three workers: the clamp leaves the splitter's slot free.
    assert_eq!(op_ids(&env), ["map-splitter#1", "map-worker-1#1", "map-worker-2#1", "map-worker-3#1"]);
    assert_eq!(env.events_of("agent-opened").len(), 4);
    usage_matches_turns(&env, &r);
}

#[test]
fn map_without_max_children_works_every_item() {
    let env = council(&five_items_responder());
    let r = call(&env, "map", r#"#{ task: "Ship v2" }"#);
    assert_eq!(r["headline"], "map: 5/5 items done");
    assert_eq!(r["structured"]["dropped"], json!([]));
    assert_eq!(r["structured"]["limit"], Value::Null);
    assert!(
        output(&r).ends_with("item 5: add a changelog entry\nmap-worker-5 did it\n\n— map: 5/5 items done"),
        "{r:#}"
    );
}

#[test]
fn map_lists_a_failed_item_as_failed_in_item_order() {
    let env = council(
        r#"fn respond(turn) {
    if turn.agent == "map-splitter" { return #{ answer: ["alpha", "beta", "gamma"] }; }
    if turn.agent == "map-worker-2" { return #{ fail: "model crashed" }; }
    #{ answer: `${turn.agent} finished` }
}"#,
    );
    let r = call(&env, "map", r#"#{ task: "Do three things" }"#);
    assert_eq!(
        output(&r),
        "item 1: alpha
map-worker-1 finished

item 2: beta
FAILED — failed: model crashed

item 3: gamma
map-worker-3 finished

— map: 2/3 items done · 1 failed"
    );
    assert_eq!(r["ok"], true);
    assert_eq!(r["headline"], "map: 2/3 items done · 1 failed");
    assert_eq!(
        r["structured"]["items"][1],
        json!({ "item": "beta", "ok": false, "output": null, "error": "failed: model crashed", "review": null })
    );
    usage_matches_turns(&env, &r);
}

#[test]
fn map_fails_when_every_item_fails() {
    let env = council(
        r#"fn respond(turn) {
    if turn.agent == "map-splitter" { return #{ answer: ["alpha", "beta"] }; }
    #{ fail: `${turn.agent} is down` }
}"#,
    );
    let r = call(&env, "map", r#"#{ task: "Do two things" }"#);
    assert_eq!(r["ok"], false);
    assert_eq!(r["error"], "map: every item failed (2)");
    assert_eq!(r["failure_kind"], "failed");
    assert_eq!(
        output(&r),
        "item 1: alpha
FAILED — failed: map-worker-1 is down

item 2: beta
FAILED — failed: map-worker-2 is down

— map: 0/2 items done · 2 failed"
    );
}

#[test]
fn map_fails_with_the_splitters_reason_when_the_split_fails_or_has_the_wrong_shape() {
    let env = council(r#"fn respond(turn) { #{ fail: "the splitter ran out of context" } }"#);
    let r = call(&env, "map", r#"#{ task: "Split me" }"#);
    let want = "map: the split failed (splitter) — failed: the splitter ran out of context";
    assert_eq!(r["ok"], false);
    assert_eq!(r["error"], want);
    assert_eq!(r["output"], want);
    assert_eq!(r["failure_kind"], "split-failed");
    assert_eq!(op_ids(&env), ["map-splitter#1"]);

    let env = council(r#"fn respond(turn) { #{ answer: "bad shape" } }"#);
    let r = call(&env, "map", r#"#{ task: "Split me" }"#);
    assert_eq!(
        r["error"],
        "map: the split failed (splitter) — unanswered: no accepted answer: the same answer was rejected 2 times \
         (the last rejection: at /: \"bad shape\" is not of type \"array\")"
    );
    assert_eq!(r["failure_kind"], "split-failed");
    assert_eq!(op_ids(&env), ["map-splitter#1"], "no worker may start after a failed split");
}

const OWNED_SPLIT: &str = r#"fn respond(turn) {
    if turn.agent == "map-splitter" {
        if turn.schema.items.type != "object" { return #{ answer: ["wrong schema"] }; }
        return #{ answer: [
            #{ item: "api", writeSet: ["src/api.rs", "src/lib.rs"] },
            #{ item: "db", writeSet: ["./src/db.rs", "src/lib.rs"] },
            #{ item: "docs", writeSet: [] },
            #{ item: "cli", writeSet: ["src/db.rs"] },
        ] };
    }
    let owns = turn.prompt.contains("write set: src/api.rs, src/lib.rs\n```");
    #{ answer: `${turn.agent} done` + if turn.agent == "map-worker-1" { ` (write set shown: ${owns})` } else { "" } }
}"#;

#[test]
fn map_ownership_enforce_refuses_overlapping_write_sets_before_any_worker() {
    let env = council(OWNED_SPLIT);
    let r = call(&env, "map", r#"#{ task: "Refactor", params: #{ ownership: "enforce" } }"#);
    let want = "map: ownership enforce: overlapping write sets, no worker started: src/db.rs (items 2, 4); src/lib.rs (items 1, 2)";
    assert_eq!(r["ok"], false);
    assert_eq!(r["error"], want);
    assert_eq!(r["output"], want);
    assert_eq!(r["failure_kind"], "refused");
    assert_eq!(
        r["structured"]["overlaps"],
        json!([{ "path": "src/db.rs", "items": [2, 4] }, { "path": "src/lib.rs", "items": [1, 2] }])
    );
    assert_eq!(op_ids(&env), ["map-splitter#1"], "no worker may start");
    assert_eq!(env.events_of("agent-opened").len(), 1);
}

#[test]
fn map_ownership_warn_logs_the_overlaps_and_goes_on() {
    let env = council(OWNED_SPLIT);
    let out = env
        .run("import \"council/map\" as s;\ns::run(#{ task: \"Refactor\", params: #{ ownership: \"warn\" } })\n", &[]);
    out.expect_code(0);
    out.stderr_has("map: ownership warn: overlapping write sets: src/db.rs (items 2, 4); src/lib.rs (items 1, 2)");
    let r = out.json();
    assert_eq!(
        output(&r),
        "item 1: api
map-worker-1 done (write set shown: true)

item 2: db
map-worker-2 done

item 3: docs
map-worker-3 done

item 4: cli
map-worker-4 done

— map: 4/4 items done · ownership warn: 2 overlapping path(s)"
    );
    assert_eq!(r["ok"], true);
    assert_eq!(r["structured"]["items"][1]["writeSet"], json!(["src/db.rs", "src/lib.rs"]));
    assert_eq!(r["structured"]["items"][2]["writeSet"], json!([]));
}

#[test]
fn map_reviewer_takes_a_slot_per_item_and_peers_get_routes() {
    let env = council(
        r#"fn respond(turn) {
    if turn.agent == "map-splitter" { return #{ answer: ["one", "two", "three"] }; }
    if turn.agent.starts_with("map-reviewer-") {
        if turn.agent == "map-reviewer-1" { return #{ answer: #{ verdict: "approve", notes: "complete" } }; }
        return #{ fail: "reviewer crashed" };
    }
    let routed = turn.shown.contains("You may message other agents");
    #{ answer: `${turn.agent} done (routes: ${routed})` }
}"#,
    );
    let r = call(
        &env,
        "map",
        r#"#{ task: "Three parts", params: #{ reviewer: "correctness", peers: true }, limits: #{ max_children: 5 } }"#,
    );
    assert_eq!(
        output(&r),
        "item 1: one
map-worker-1 done (routes: true)
review (reviewer · CORRECTNESS): approve — complete

item 2: two
map-worker-2 done (routes: true)
review (reviewer · CORRECTNESS) FAILED — failed: reviewer crashed

Left out (1 of 3 items past max_items 2; not worked on):
- item 3: three

— map: 2/2 items done · 1 left out (max_items 2) · peers · reviewed by reviewer · CORRECTNESS: 1 approved, 0 to revise, 1 review(s) failed"
    );
    let routes = env.events_of("route-granted");
    assert_eq!(routes.len(), 1, "{routes:#?}");
    assert_eq!(routes[0]["data"]["from"], "map-worker-1");
    assert_eq!(routes[0]["data"]["to"], "map-worker-2");
    assert_eq!(routes[0]["data"]["both"], true);
    assert_eq!(
        op_ids(&env),
        ["map-reviewer-1#1", "map-reviewer-2#1", "map-splitter#1", "map-worker-1#1", "map-worker-2#1"]
    );
    usage_matches_turns(&env, &r);
}

#[test]
fn map_refuses_a_max_children_with_no_room_for_a_worker() {
    let env = council("fn respond(turn) { () }");
    let r = call(&env, "map", r#"#{ task: "x", params: #{ reviewer: "correctness" }, limits: #{ max_children: 2 } }"#);
    assert_eq!(r["error"], "map: max_children 2 is too small: the splitter, one worker and its reviewer need 3 agents");
    assert_eq!(r["failure_kind"], "refused");
    assert!(env.turns().is_empty());
}

// ---------------------------------------------------------------------------------------------
// pair

const PAIR: &str = r#"fn respond(turn) {
    if turn.agent == "pair-driver" {
        if turn.n == 1 { return #{ answer: "draft: guard the cache with a mutex" }; }
        let seen = turn.prompt.contains("```untrusted navigator's review\n");
        return #{ answer: #{ work: `final v${turn.n}: guard the cache with a channel (review fenced: ${seen})`, reply: "switched to a channel" } };
    }
    if turn.n == 1 { return #{ answer: #{ verdict: "revise", review: "the mutex is held across an await" } }; }
    #{ answer: #{ verdict: "approve", review: "looks right" } }
}"#;

#[test]
fn pair_refuses_a_roster_shorter_than_two() {
    let env = council("fn respond(turn) { () }");
    let r = call(&env, "pair", r#"#{ task: "x", roster: ["driver"] }"#);
    assert_eq!(r["ok"], false);
    assert_eq!(r["error"], "pair: a roster of [driver, navigator] is required");
    assert_eq!(r["output"], "pair: a roster of [driver, navigator] is required");
    assert_eq!(r["failure_kind"], "refused");
    assert!(env.turns().is_empty());
    assert!(env.events_of("agent-opened").is_empty());
}

#[test]
fn pair_driver_answers_the_review_and_the_result_carries_the_last_verdict() {
    let env = council(PAIR);
    let r = call(&env, "pair", r#"#{ task: "Make the cache thread-safe" }"#);
    assert_eq!(
        output(&r),
        "final v2: guard the cache with a channel (review fenced: true)

Navigator's last verdict (on the previous draft; the final work answers it): revise
the mutex is held across an await

— pair: driven by driver, navigated by navigator · 1 review round(s) · last verdict: revise"
    );
    assert_eq!(r["ok"], true);
    assert_eq!(
        r["headline"],
        "pair: revise after 1 review round(s) · final v2: guard the cache with a channel (review fenced: true)"
    );
    assert_eq!(r["structured"]["verdict"], "revise");
    assert_eq!(r["structured"]["replies"], json!(["switched to a channel"]));
    assert_eq!(op_ids(&env), ["pair-driver#1", "pair-driver#2", "pair-navigator#1"]);
    let routes = env.events_of("route-granted");
    assert_eq!(routes.len(), 1);
    assert_eq!(routes[0]["data"]["from"], "pair-driver");
    assert_eq!(routes[0]["data"]["to"], "pair-navigator");
    assert_eq!(routes[0]["data"]["both"], true);
    usage_matches_turns(&env, &r);
}

#[test]
fn pair_stops_reviewing_once_the_navigator_approves() {
    let env = council(PAIR);
    let r = call(&env, "pair", r#"#{ task: "Make the cache thread-safe", params: #{ rounds: 3 } }"#);
    assert_eq!(
        output(&r),
        "final v2: guard the cache with a channel (review fenced: true)

Navigator's last verdict: approve
looks right

— pair: driven by driver, navigated by navigator · 2 review round(s) · last verdict: approve"
    );
    assert_eq!(op_ids(&env), ["pair-driver#1", "pair-driver#2", "pair-navigator#1", "pair-navigator#2"]);
}

#[test]
fn pair_keeps_the_work_unreviewed_when_the_navigator_fails() {
    let env = council(
        r#"fn respond(turn) {
    if turn.agent == "pair-navigator" { return #{ fail: "navigator offline" }; }
    #{ answer: "the work" }
}"#,
    );
    let r = call(&env, "pair", r#"#{ task: "x" }"#);
    assert_eq!(
        output(&r),
        "the work

Navigator's verdict: none — the work was not reviewed.

— pair: driven by driver, navigated by navigator · unreviewed: navigator failed in review round 1 (failed: navigator offline)"
    );
    assert_eq!(r["ok"], true);
    assert_eq!(r["headline"], "pair: unreviewed · the work");
}

// ---------------------------------------------------------------------------------------------
// pipeline

const PIPELINE: &str = r#"fn respond(turn) {
    if turn.agent == "pipeline-drafter" { return #{ answer: "draft v1 with ```code```" }; }
    if turn.agent == "pipeline-critic" {
        if turn.prompt.contains("critic crash") { return #{ fail: "critic crashed" }; }
        let fenced = turn.prompt.contains("````untrusted stage 1: drafter\ndraft v1 with ```code```\n````");
        return #{ answer: `draft v2 (v1 fenced: ${fenced})` };
    }
    let fenced = turn.prompt.contains("```untrusted stage 2: critic\ndraft v2 (v1 fenced: true)\n```");
    #{ answer: `final (v2 fenced: ${fenced})` }
}"#;

#[test]
fn pipeline_refuses_an_empty_roster() {
    let env = council(PIPELINE);
    let r = call(&env, "pipeline", r#"#{ task: "x", roster: [] }"#);
    assert_eq!(r["ok"], false);
    assert_eq!(r["error"], "pipeline: a non-empty roster is required");
    assert_eq!(r["failure_kind"], "refused");
    assert!(env.turns().is_empty());
}

#[test]
fn pipeline_passes_each_output_fenced_to_the_next_stage() {
    let env = council(PIPELINE);
    let r = call(&env, "pipeline", r#"#{ task: "Write it", roster: ["drafter", "critic", "editor"] }"#);
    assert_eq!(output(&r), "final (v2 fenced: true)\n\n— pipeline: 3 stage(s): drafter → critic → editor");
    assert_eq!(r["ok"], true);
    assert_eq!(r["headline"], "pipeline: 3 stage(s) · final (v2 fenced: true)");
    assert_eq!(
        r["structured"]["steps"][1],
        json!({ "step": 2, "member": "critic", "output": "draft v2 (v1 fenced: true)" })
    );
    assert_eq!(op_ids(&env), ["pipeline-critic#1", "pipeline-drafter#1", "pipeline-editor#1"]);
    usage_matches_turns(&env, &r);
}

#[test]
fn pipeline_fails_at_a_failed_step_naming_it_and_keeping_upstream_outputs() {
    let env = council(PIPELINE);
    let r = call(&env, "pipeline", r#"#{ task: "critic crash", roster: ["drafter", "critic", "editor"] }"#);
    let want = "pipeline: step 2/3 (critic) failed — failed: critic crashed";
    assert_eq!(r["ok"], false);
    assert_eq!(r["error"], want);
    assert_eq!(r["failure_kind"], "failed");
    assert_eq!(output(&r), format!("{want}\n\nUpstream output kept (step 1/3, drafter):\ndraft v1 with ```code```"));
    assert_eq!(
        r["structured"],
        json!({ "steps": [{ "step": 1, "member": "drafter", "output": "draft v1 with ```code```" }], "failed_step": 2 })
    );
    assert_eq!(op_ids(&env), ["pipeline-critic#1", "pipeline-drafter#1"], "no stage may run after a failed one");
    usage_matches_turns(&env, &r);
}

#[test]
fn pipeline_refuses_a_step_the_token_budget_cannot_fund_and_keeps_upstream_outputs() {
    let env = council(
        r#"fn respond(turn) { #{ answer: `${turn.agent} out`, usage: #{ input_tokens: 100, output_tokens: 20 } } }"#,
    );
    let r = call(&env, "pipeline", r#"#{ task: "x", roster: ["a", "b"], limits: #{ budget_tokens: 100 } }"#);
    let want = "pipeline: step 2/2 (b) was not started — token budget (120 tokens spent + 1 turn(s) × 120 estimated > budget 100)";
    assert_eq!(r["error"], want);
    assert_eq!(r["failure_kind"], "refused");
    assert_eq!(output(&r), format!("{want}\n\nUpstream output kept (step 1/2, a):\npipeline-a out"));
    assert_eq!(r["structured"]["failed_step"], 2);
    assert_eq!(op_ids(&env), ["pipeline-a#1"]);
}

// ---------------------------------------------------------------------------------------------
// synthesize

/// The synthesiser answers with the fence headers it saw (which lens found what) and the coverage
/// note its prompt carried, if any.
const SYNTH_ECHO: &str = r#"fn synth(turn) {
    let heads = [];
    for line in turn.prompt.split("\n") {
        if line.starts_with("```untrusted ") { heads.push(line.sub_string(13)); }
    }
    let text = "Merged: " + heads.reduce(|acc, h| if acc == "" { h } else { acc + ", " + h }, "");
    if turn.prompt.contains("resolve contradictions explicitly") { text += " (contradictions resolved)"; }
    let i = turn.prompt.index_of("Incomplete coverage");
    if i >= 0 {
        let rest = turn.prompt.sub_string(i);
        text += "\nThe prompt carried:\n" + rest.sub_string(0, rest.index_of("\n\n"));
    }
    #{ answer: text }
}"#;

fn synth_responder(gather: &str) -> String {
    format!(
        "{SYNTH_ECHO}\nfn respond(turn) {{\n    if turn.agent == \"synthesize-synthesizer\" {{ return synth(turn); }}\n    let who = turn.agent.sub_string(11);\n    {gather}\n}}"
    )
}

#[test]
fn synthesize_merges_every_lens_with_lens_aware_labels() {
    let env = council(&synth_responder(r#"#{ answer: `${who} finding` }"#));
    let r = call(&env, "synthesize", r#"#{ task: "Review auth.py", params: #{ synthesizer: 2, peers: true } }"#);
    assert_eq!(
        output(&r),
        "Merged: [1] reviewer · SECURITY, [2] reviewer · CORRECTNESS, [3] reviewer · PERFORMANCE, [4] reviewer · MAINTAINABILITY (contradictions resolved)

— synthesize: 4/4 gatherers usable · merged by reviewer · PERFORMANCE · peers"
    );
    assert_eq!(env.events_of("route-granted").len(), 6, "a route between every two gatherers");
    assert_eq!(r["ok"], true);
    assert!(r["headline"].as_str().expect("headline").starts_with("synthesize: 4/4 gatherers · Merged: [1]"), "{r:#}");
    assert_eq!(r["structured"]["coverage"], json!({ "expected": 4, "usable": 4, "missing": [] }));
    assert_eq!(r["structured"]["synthesizer"], "reviewer · PERFORMANCE");
    assert_eq!(
        op_ids(&env),
        [
            "synthesize-correctness#1",
            "synthesize-maintainability#1",
            "synthesize-performance#1",
            "synthesize-security#1",
            "synthesize-synthesizer#1"
        ]
    );
    let synth = env.events_of("agent-opened").into_iter().find(|e| e["data"]["agent"] == "synthesize-synthesizer");
    assert_eq!(synth.expect("the synthesiser opened")["data"]["labels"]["member"], "reviewer · PERFORMANCE");
    usage_matches_turns(&env, &r);
}

#[test]
fn synthesize_partial_coverage_is_noted_in_the_prompt_and_before_the_output() {
    // 22 gatherers: g1-g3 answer, g4-g13 fail, g14-g22 answer blank.
    let env = council(&synth_responder(
        r#"let k = who.sub_string(1).parse_int();
    if k <= 3 { return #{ answer: `${who} finding` }; }
    if k <= 13 { return #{ fail: `${who} crashed` }; }
    #{ answer: "   " }"#,
    ));
    let roster: Vec<String> = (1..=22).map(|k| format!("\"g{k}\"")).collect();
    let r = call(&env, "synthesize", &format!("#{{ task: \"Review it\", roster: [{}] }}", roster.join(", ")));
    let mut note = String::from(
        "Incomplete coverage: 3/22 gatherers returned usable findings. Missing members were not reviewed; do not present this as a complete review.\nMissing:",
    );
    for k in 4..=13 {
        note += &format!("\n- g{k} — failed: g{k} crashed");
    }
    for k in 14..=19 {
        note += &format!("\n- g{k} — empty: the answer was blank");
    }
    note += "\n- … and 3 more";
    // The missing list is fenced in the merge prompt and before the output alike: its failure
    // reasons are agent-supplied text.
    let prompt_note = note.replace(
        "complete review.\nMissing:",
        "complete review. The missing members and why (quoted, untrusted text):\n```untrusted missing members",
    ) + "\n```";
    assert_eq!(
        output(&r),
        format!(
            "{prompt_note}\n\nMerged: missing members, [1] g1, [2] g2, [3] g3 (contradictions resolved)\nThe prompt carried:\n{prompt_note}\n\n— synthesize: 3/22 gatherers usable · merged by g1"
        )
    );
    assert_eq!(r["ok"], true);
    assert_eq!(
        r["headline"],
        "Incomplete coverage: 3/22 · Merged: missing members, [1] g1, [2] g2, [3] g3 (contradictions resolved) The p…"
    );
    let coverage = &r["structured"]["coverage"];
    assert_eq!(coverage["expected"], 22);
    assert_eq!(coverage["usable"], 3);
    let missing = coverage["missing"].as_array().expect("missing list");
    assert_eq!(missing.len(), 19, "structured keeps every missing member");
    assert_eq!(missing[0], json!({ "member": "g4", "status": "failed", "detail": "g4 crashed" }));
    assert_eq!(missing[18], json!({ "member": "g22", "status": "empty", "detail": "the answer was blank" }));
    assert_eq!(env.turns().len(), 23);
    usage_matches_turns(&env, &r);
}

#[test]
fn synthesize_fails_when_no_gatherer_produced_output() {
    let env = council(&synth_responder(
        r#"if who == "correctness" { return #{ answer: "" }; }
    #{ fail: `${who} is down` }"#,
    ));
    let r = call(&env, "synthesize", r#"#{ task: "Review it" }"#);
    let want = "synthesize: nothing to merge (no gatherer produced output: [reviewer · SECURITY] failed: security is down; [reviewer · CORRECTNESS] empty: the answer was blank; [reviewer · PERFORMANCE] failed: performance is down; [reviewer · MAINTAINABILITY] failed: maintainability is down)";
    assert_eq!(r["ok"], false);
    assert_eq!(r["error"], want);
    assert_eq!(r["output"], want);
    assert_eq!(r["failure_kind"], "no-output");
    assert_eq!(r["structured"]["coverage"]["usable"], 0);
    assert_eq!(env.turns().len(), 4, "no synthesiser runs without findings");
    usage_matches_turns(&env, &r);
}

#[test]
fn synthesize_leaves_the_merge_slot_free_and_takes_an_index_never_a_name() {
    let env = council(&synth_responder(r#"#{ answer: "f" }"#));
    let r = call(&env, "synthesize", r#"#{ task: "Review it", limits: #{ max_children: 4 } }"#);
    assert_eq!(r["error"], "synthesize: 4 gatherers and the synthesiser need 5 agents; max_children is 4");
    assert_eq!(r["failure_kind"], "refused");
    assert!(env.turns().is_empty());

    let out = env.run(
        "import \"council/synthesize\" as s;\ns::run(#{ task: \"x\", params: #{ synthesizer: \"security\" } })\n",
        &[],
    );
    out.expect_code(1);
    out.stderr_has(r#"synthesize: params.synthesizer must be a whole number, got "security""#);
}
