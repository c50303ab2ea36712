//! A decision model that tries to talk its way past a decision's floor (issue 46, row 7): answers
//! whose log-probabilities do not yield the choice they write (a choice or its key spelled with
//! escapes, tokens that spell another text), answers with a key given twice, and the spellings the
//! decision's schema refuses. Each is served by the fake `openai` server of `common::fake_model`
//! to a decision with `min_confidence: 0.7`: none may be decided by the model on its own claim.
//! The confidence is 0, the record says why (`source`, `no_answer`), and the fallback decides
//! (the default, an error, or the operator at a checkpoint).

use crate::common;

use common::fake_model::{FakeModel, Reply, Token};
use common::{read_json, wait_for_run_dir, Env, Running};
use serde_json::Value;

/// A folder whose decision model is the `openai` runtime `m` on `server`.
fn env_on(server: &FakeModel) -> Env {
    env_with(server, "")
}

/// As [`env_on`], with `extra` lines in the runtime's table.
fn env_with(server: &FakeModel, extra: &str) -> Env {
    let env = Env::new();
    env.write(
        "awf.toml",
        &format!(
            "[runtimes.m]\nharness = \"openai\"\nmodel = \"judge\"\nbase_url = \"{}/v1\"\n{extra}\n\n[decisions]\nruntime = \"m\"\n",
            server.base()
        ),
    );
    env
}

/// "Ship it?" (yes or no) under the floor 0.7, with `fallback`.
fn ship(fallback: &str) -> String {
    format!(
        r#"ctx.decisions.decide(#{{ key: "ship", question: "Ship it?", options: ["yes", "no"], min_confidence: 0.7, fallback: "{fallback}" }})"#
    )
}

/// Tokens the model was sure of, one per piece.
fn sure(pieces: &[&str]) -> Vec<Token> {
    pieces.iter().map(|p| Token::sure(p)).collect()
}

/// `before`, then `token` sampled at `p` beside `others`, then `after`.
fn around(before: &[&str], token: &str, p: f64, others: &[(&str, f64)], after: &[&str]) -> Vec<Token> {
    let mut out = sure(before);
    out.push(Token::among(token, p, others));
    out.extend(sure(after));
    out
}

/// What a case must end in.
enum Expect {
    /// The fallback (`default:no`) decided, with confidence 0; the record's `source` is this and
    /// its `no_answer` holds this text.
    Fallback { source: &'static str, why: &'static str },
    /// The model decided on its claim (no log-probabilities: the claim is what there is).
    Claimed { choice: &'static str, confidence: f64 },
}

struct Case {
    name: &'static str,
    /// The reply, served to every request (an answer refused is asked for again).
    reply: Reply,
    expect: Expect,
}

fn cases() -> Vec<Case> {
    use Expect::{Claimed, Fallback};
    let unread = "its log-probabilities do not yield the choice it wrote";
    let invalid = |why| Fallback { source: "none", why };
    vec![
        Case {
            name: "a second choice key after the one the tokens were read at",
            reply: Reply::Logprobs(around(
                &["{\"", "choice", "\":\""],
                "no",
                0.9,
                &[("yes", 0.05)],
                &["\",\"confidence\":0.99,\"choice\":\"yes\"}"],
            )),
            expect: invalid("the key `choice` is given twice"),
        },
        Case {
            name: "a second choice key spelled with escapes",
            reply: Reply::Logprobs(around(
                &["{\"choice\":\""],
                "no",
                0.9,
                &[("yes", 0.05)],
                &["\",\"confidence\":0.99,\"\\u0063hoice\":\"yes\"}"],
            )),
            expect: invalid("the key `choice` is given twice"),
        },
        Case {
            name: "a second confidence key, without log-probabilities",
            reply: Reply::text(r#"{"choice": "yes", "confidence": 0.1, "confidence": 0.99}"#),
            expect: invalid("the key `confidence` is given twice"),
        },
        Case {
            name: "the choice spelled with escapes, no alternative listed",
            reply: Reply::Logprobs(sure(&["{\"choice\":\"", "\\u0079", "es", "\",\"confidence\":0.99}"])),
            expect: Fallback { source: "logprobs-unread", why: unread },
        },
        Case {
            name: "the choice spelled with escapes, the other option among the alternatives",
            reply: Reply::Logprobs(around(
                &["{\"choice\":\""],
                "\\u0079",
                0.05,
                &[("no", 0.9)],
                &["es\",\"confidence\":0.99}"],
            )),
            expect: Fallback { source: "logprobs-unread", why: unread },
        },
        Case {
            name: "the key choice spelled with escapes",
            reply: Reply::Logprobs(around(
                &["{\"\\u0063hoice\":\""],
                "yes",
                0.05,
                &[("no", 0.9)],
                &["\",\"confidence\":0.99}"],
            )),
            expect: Fallback { source: "logprobs-unread", why: unread },
        },
        Case {
            name: "tokens that spell another choice than the text",
            reply: Reply::LogprobsOf {
                text: r#"{"choice":"yes","confidence":0.99}"#.into(),
                tokens: around(&["{\"choice\":\""], "no", 0.9, &[("yes", 0.05)], &["\",\"confidence\":0.99}"]),
            },
            expect: Fallback { source: "logprobs-unread", why: unread },
        },
        Case {
            name: "tokens that spell the choice but another text",
            reply: Reply::LogprobsOf {
                text: r#"{"choice":"yes","confidence":0.99,"reason":"sure"}"#.into(),
                tokens: around(&["{\"choice\":\""], "yes", 0.95, &[("no", 0.05)], &["\",\"confidence\":0.99}"]),
            },
            expect: Fallback { source: "logprobs-unread", why: unread },
        },
        // What the decision's schema refuses (they held before: kept so).
        Case {
            name: "the choice with surrounding whitespace",
            reply: Reply::text(r#"{"choice": " yes ", "confidence": 0.99}"#),
            expect: invalid("\" yes \""),
        },
        Case {
            name: "the choice a number",
            reply: Reply::text(r#"{"choice": 1, "confidence": 0.99}"#),
            expect: invalid("/choice"),
        },
        Case {
            name: "the choice an array",
            reply: Reply::text(r#"{"choice": ["yes"], "confidence": 0.99}"#),
            expect: invalid("/choice"),
        },
        Case {
            name: "a confidence over 1",
            reply: Reply::text(r#"{"choice": "yes", "confidence": 1.5}"#),
            expect: invalid("/confidence"),
        },
        Case {
            name: "a confidence past what a number holds",
            reply: Reply::text(r#"{"choice": "yes", "confidence": 1e999}"#),
            expect: invalid("not valid JSON"),
        },
        Case {
            name: "an extra field",
            reply: Reply::text(r#"{"choice": "yes", "confidence": 0.99, "floor": 0}"#),
            expect: invalid("floor"),
        },
        Case {
            name: "a second answer after the first",
            reply: Reply::text(r#"{"choice": "no", "confidence": 0.5} {"choice": "yes", "confidence": 0.99}"#),
            expect: invalid("not valid JSON"),
        },
        // No log-probabilities at all (a server that sends none): the claim is what there is.
        Case {
            name: "the choice spelled with escapes, without log-probabilities",
            reply: Reply::text(r#"{"choice": "\u0079es", "confidence": 0.99}"#),
            expect: Claimed { choice: "yes", confidence: 0.99 },
        },
    ]
}

#[test]
fn no_forged_answer_passes_the_floor_on_its_claim() {
    let mut failures = Vec::new();
    for case in cases() {
        let server = FakeModel::start(vec![case.reply.clone(), case.reply.clone(), case.reply.clone()]);
        let env = env_on(&server);
        let out = env.run(&ship("default:no"), &["--json"]);
        if out.code != Some(0) {
            failures.push(format!("{}: exit {:?}: {}", case.name, out.code, out.stderr));
            continue;
        }
        let d = out.json()["value"].clone();
        let got = (d["choice"].as_str(), d["decided_by"].as_str(), d["source"].as_str(), d["confidence"].as_f64());
        let ok = match &case.expect {
            Expect::Fallback { source, why } => {
                got == (Some("no"), Some("default"), Some(*source), Some(0.0))
                    && d["no_answer"].as_str().is_some_and(|w| w.contains(why))
                    && env.result()["decisions"][0]["source"] == *source
            }
            Expect::Claimed { choice, confidence } => {
                got == (Some(*choice), Some("model"), Some("claimed"), Some(*confidence))
            }
        };
        if !ok {
            failures.push(format!("{}: {d}", case.name));
        }
    }
    assert!(failures.is_empty(), "{} case(s) wrong:\n{}", failures.len(), failures.join("\n"));
}

/// The choice spelled with escapes, the other option among the alternatives.
fn escaped() -> Reply {
    Reply::Logprobs(around(&["{\"choice\":\""], "\\u0079", 0.05, &[("no", 0.9)], &["es\",\"confidence\":0.99}"]))
}

#[test]
fn unread_log_probabilities_with_fallback_fail_throw_saying_why() {
    let server = FakeModel::start(vec![escaped()]);
    let env = env_on(&server);
    let out = env.run(&format!("let e = \"\"; try {{ {}; }} catch (x) {{ e = `${{x}}`; }} e", ship("fail")), &[]);
    out.expect_code(0)
        .stdout_has("the model gave no valid answer (its log-probabilities do not yield the choice it wrote (`yes`)");
    out.stdout_has("and the fallback is \"fail\"");
    let recorded = &env.result()["decisions"][0];
    assert_eq!(
        (recorded["choice"].as_str(), recorded["source"].as_str()),
        (None, Some("logprobs-unread")),
        "{recorded}"
    );
    assert_eq!(recorded["confidence"], 0.0);
}

#[test]
fn unread_log_probabilities_send_the_decision_to_the_operator() {
    let server = FakeModel::start(vec![escaped()]);
    let env = env_on(&server);
    env.write(
        "wf.rhai",
        &format!("let d = {}; `${{d.choice}} by ${{d.decided_by}} at ${{d.confidence}}`", ship("operator")),
    );
    let running = Running::start(env.path(), &["script", "run", "wf.rhai"]);
    let dir = wait_for_run_dir(&env);
    let id = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let doc = common::poll("the run waiting", common::TIMEOUT, || {
        let doc =
            std::fs::read_to_string(dir.join("run.json")).ok().and_then(|t| serde_json::from_str::<Value>(&t).ok())?;
        (doc["waiting"][0]["key"] == "decision-ship").then_some(doc)
    });
    let question = doc["waiting"][0]["question"].as_str().unwrap_or_default().to_string();
    assert!(
        question.contains("judge gave no valid answer (its log-probabilities do not yield the choice it wrote (`yes`)"),
        "{question}"
    );
    env.awf(&["runs", "answer", &id, "--key", "decision-ship", "--json", "\"no\""]).expect_code(0);
    let out = running.finish();
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "no by operator at 0.0");
    assert_eq!(read_json(&dir.join("result.json"))["decisions"][0]["source"], "logprobs-unread");
}

/// A decision model answering in tools mode (`answer = "tools"`): a key given twice in the
/// `wf_result` arguments, or in an answer written as text, is no answer either.
#[test]
fn in_tools_mode_a_key_given_twice_is_no_answer_either() {
    let twice = r#"{"choice":"no","confidence":0.99,"choice":"yes"}"#;
    let call = Reply::ToolText { name: "wf_result".into(), args: twice.into() };
    let server = FakeModel::start(vec![call.clone(), call.clone(), call]);
    let env = env_with(&server, "answer = \"tools\"");
    let out = env.run(&ship("default:no"), &["--json"]);
    out.expect_code(0);
    let d = &out.json()["value"];
    assert_eq!(
        (d["choice"].as_str(), d["decided_by"].as_str(), d["source"].as_str()),
        (Some("no"), Some("default"), Some("none")),
        "{d}"
    );
    assert!(d["no_answer"].as_str().is_some_and(|w| w.contains("the key `choice` is given twice")), "{d}");
    assert!(server.bodies()[0]["tools"].is_array(), "tools mode: {}", server.bodies()[0]);

    // Written as text instead of a call: not taken as the answer.
    let server = FakeModel::start(vec![Reply::text(twice), Reply::text(twice), Reply::text(twice)]);
    let env = env_with(&server, "answer = \"tools\"");
    let out = env.run(&ship("default:no"), &["--json"]);
    out.expect_code(0);
    let d = &out.json()["value"];
    assert_eq!(
        (d["choice"].as_str(), d["decided_by"].as_str(), d["confidence"].as_f64()),
        (Some("no"), Some("default"), Some(0.0)),
        "{d}"
    );
}
