//! The context as the server counts it (issue 26, rows 2 and 3), against fake llama-servers on
//! 127.0.0.1 that count a token every 2 characters: `/tokenize` where the server has it, else the
//! replies' `prompt_tokens` calibrating later requests; `max_tokens` cut to the room left; errors
//! about the context carrying the numbers and a fix not already applied; and a request waiting for
//! its first byte counting toward the stall timeout.

use crate::common;
use crate::common::fake_model;

use common::Env;
use fake_model::{Counting, FakeModel, Reply};
use serde_json::Value;

const VERDICT: &str = "{\"verdict\":\"ok\"}";

fn counting(tokenize: bool, context: u64) -> Counting {
    Counting { chars_per_token: 2, tokenize, context, reply_tokens: 500 }
}

/// A structured runtime against `server`, with `extra` lines.
fn setup(server: &FakeModel, extra: &str) -> Env {
    let env = Env::new();
    env.write(
        "awf.toml",
        &format!(
            "{}[limits]\nstall_timeout = \"5s\"\n",
            fake_model::http_config("openai", server, &format!("answer = \"structured\"\n{extra}"))
        ),
    );
    env
}

/// Agents `one`, `two`... each given one turn with a prompt of `words[i]` words.
fn turns(words: &[usize]) -> String {
    let mut script = String::from(
        "let schema = #{ type: \"object\", properties: #{ verdict: #{ type: \"string\" } }, required: [\"verdict\"] };\nlet out = [];\n",
    );
    for (i, n) in words.iter().enumerate() {
        let prompt = "word ".repeat(*n);
        script.push_str(&format!(
            "let o = ctx.agents.open(#{{ key: \"a{i}\" }}).turn(#{{ prompt: \"{prompt}\", schema: schema }});\nout.push(#{{ kind: o.kind, reason: o.reason }});\n"
        ));
    }
    script.push_str("out\n");
    script
}

fn max_tokens(body: &Value) -> u64 {
    body["max_tokens"].as_u64().unwrap_or(0)
}

/// Issue 26, row 3: without `/tokenize` the first request is estimated at 3 characters a token,
/// low for this text, so the reply runs into the context; the error gives the server's count,
/// the `max_tokens` asked and the declared context, and does not say to declare it. The next
/// agent's request is sized from the server's count: its `max_tokens` fits the room left.
#[test]
fn without_tokenize_the_replies_counts_size_later_requests_to_the_room_left() {
    let c = counting(false, 3500);
    let server = FakeModel::start(vec![Reply::text(VERDICT), Reply::text(VERDICT)]);
    server.count_tokens(c);
    let env = setup(&server, "context_tokens = 3500");
    let out = env.run(&turns(&[1200, 1100]), &[]);
    out.expect_code(0);
    let v = out.json();
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 2, "{v}");
    let (p1, max1) = (c.prompt(&bodies[0]), max_tokens(&bodies[0]));
    assert!(p1 + max1 > 3500, "the regression's setting: the first estimate is low ({p1} + {max1})");
    assert_eq!(v[0]["kind"], "failed", "{v}");
    let reason = v[0]["reason"].as_str().unwrap_or("");
    for part in [
        format!("cut off by the model's context after {} tokens", 3500 - p1),
        format!("the prompt held {p1} tokens as the server counted them"),
        format!("max_tokens asked {max1}, context 3500 (context_tokens)"),
        "estimated at 3.0 characters a token".to_string(),
        "later requests to this server are sized from its count".to_string(),
    ] {
        assert!(reason.contains(&part), "no {part:?} in {reason}");
    }
    assert!(!reason.contains("declare"), "context_tokens is declared: {reason}");
    let (p2, max2) = (c.prompt(&bodies[1]), max_tokens(&bodies[1]));
    assert!(p2 + max2 <= 3500 && p2 + max2 >= 3500 - 40, "max_tokens {max2} cut to the room left by {p2}");
    assert_eq!(v[1]["kind"], "answered", "{v}");
    assert_eq!(server.tokenized.lock().expect("lock").len(), 1, "a server without /tokenize is asked once");
}

/// With `/tokenize` the first request is counted as the server counts it: `max_tokens` is the
/// room left, and a prompt past the context (the 40 KB one) is refused before it is sent,
/// saying how it was counted.
#[test]
fn with_tokenize_the_first_request_is_counted_by_the_server() {
    let c = counting(true, 4000);
    let server = FakeModel::start(vec![Reply::text(VERDICT)]);
    server.count_tokens(c);
    let env = setup(&server, "context_tokens = 4000");
    let out = env.run(&turns(&[1200, 8000]), &[]);
    out.expect_code(0);
    let v = out.json();
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 1, "the second prompt is not sent: {v}");
    assert_eq!(v[0]["kind"], "answered", "{v}");
    let (p, max) = (c.prompt(&bodies[0]), max_tokens(&bodies[0]));
    assert!(p + max <= 4000 && p + max >= 4000 - 40, "max_tokens {max} cut to the room left by {p}");
    let tokenized = server.tokenized.lock().expect("lock").clone();
    assert_eq!(tokenized.len(), 2, "each request's text is counted");
    assert!(tokenized[0].contains("word word") && tokenized[1].len() > 40_000, "{:?}", tokenized[0]);
    assert_eq!(v[1]["kind"], "failed", "{v}");
    let reason = v[1]["reason"].as_str().unwrap_or("");
    let counted = c.prompt(&serde_json::json!({ "messages": [tokenized[1]] }));
    assert!(
        reason.starts_with("the conversation no longer fits the model's context: the prompt is ")
            && reason
                .contains("tokens (counted by the server's /tokenize), context_tokens = 4000, which leaves 0 tokens")
            && reason.contains("shorten the prompt"),
        "{reason}"
    );
    let said: u64 = reason["the conversation no longer fits the model's context: the prompt is ".len()..]
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(said >= counted && said <= counted + 16, "the server's count {counted}, and the template's: {said}");
}

/// A server that refuses a prompt past its context (llama-server's 400), with no context_tokens
/// declared: the error gives the server's numbers and awf's, and says to declare it.
#[test]
fn a_servers_refusal_gives_both_counts_and_says_to_declare_the_context() {
    let c = counting(false, 2048);
    let server = FakeModel::start(vec![]);
    server.count_tokens(c);
    let env = setup(&server, "");
    let out = env.run(&turns(&[1200]), &[]);
    out.expect_code(0);
    let v = out.json();
    let p = c.prompt(&server.bodies()[0]);
    let reason = v[0]["reason"].as_str().unwrap_or("");
    for part in [
        format!("the server counted {p} tokens for the prompt against its context of 2048"),
        "awf had counted ".to_string(),
        "with max_tokens 4096".to_string(),
        "the prompt alone is past the context: shorten it, or give the server a larger context; declare context_tokens = 2048 so such a request fails before it is sent".to_string(),
    ] {
        assert!(reason.contains(&part), "no {part:?} in {reason}");
    }
}

/// Issue 26, row 2: a request queued on a busy server (no first byte) is waiting, not progress:
/// its tries' waits add up to the stall timeout, not to the stall timeout each.
#[test]
fn waits_for_a_first_byte_add_up_to_the_stall_timeout() {
    let port = fake_model::silent_server();
    let env = Env::new();
    env.write(
        "awf.toml",
        &fake_model::openai_on(port, "request_timeout = \"400ms\"\n[limits]\nstall_timeout = \"1s\"\n"),
    );
    let out = env.run("let a = ctx.agents.open(#{ key: \"q\" }); let o = a.run(#{ prompt: \"hi\" }); o.reason", &[]);
    out.expect_code(0);
    let reason = out.stdout.trim();
    assert!(reason.contains("its waits for a first byte reached the stall timeout (1s)"), "{reason}");
    assert!(reason.contains("(tried 3 times: 1) no response from"), "400 ms, 400 ms, then the 200 ms left: {reason}");
    assert!(reason.contains("within 200ms"), "{reason}");
}
