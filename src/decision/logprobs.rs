//! A decision's distribution over its options, read from the log-probabilities of the tokens
//! where the model wrote its `choice` (chat completions' `logprobs.content`, with
//! `top_logprobs` alternatives at each token), not from the model's own claim.
//!
//! The tokens must be the answer that was accepted: their text holds one JSON object, read
//! strictly (no key given twice), equal to the answer, with one `"choice"` key written plainly
//! (not with escapes). Anything else is not read, and says why: the caller then trusts neither
//! the tokens nor the claim.
//!
//! The value's tokens are walked from the one where the choice's string starts. At each token,
//! every alternative is matched against what each option still needs (its JSON-escaped id and
//! the closing quote): an alternative that fits one option gives that option its probability;
//! one that fits every option still in play is the same text cut into other tokens and says
//! nothing; one that fits several of them (options whose ids share a prefix, such as `yes` and
//! `yesterday`) is split evenly among them, and the reading says it is approximate. The sampled
//! token is followed to the next position while it fits several options, so `yes` against
//! `yesterday` is told apart at the token after `yes`, where the closing quote competes with
//! `terday`. The sampled tokens must spell the written option as its id is written, up to the
//! token where it parts from every other option (a choice spelled with escapes there, such as
//! `"\u0079es"`, is not read: its alternatives were matched against text the model did not
//! follow). Probabilities are those the model gave (before any grammar constrained it), and the
//! options' shares are normalised to sum to 1: mass on text that is no option is dropped.

use crate::control::strict;
use serde_json::Value;

/// A distribution read from the tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// Each option's probability, in the options' order; they sum to 1.
    pub probabilities: Vec<f64>,
    /// The option the model wrote (the sampled one).
    pub sampled: String,
    /// Some alternative fitted several options (ids sharing a prefix) and was split among them.
    pub approximate: bool,
}

/// Why no distribution could be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NotRead {
    #[error("the tokens are not chat-completions log-probabilities")]
    Malformed,
    #[error("the tokens' text is no JSON object ({0})")]
    NoObject(String),
    #[error("the tokens spell another answer than the one accepted")]
    OtherAnswer,
    #[error("the tokens hold no `choice` key written plainly with a string value")]
    NoChoice,
    #[error("the tokens hold `\"choice\":` more than once")]
    SeveralChoices,
    #[error("the tokens' choice `{0}` is not one of the options")]
    NotAnOption(String),
    #[error("the tokens of the choice do not spell `{0}` as the option's id is written (escapes?)")]
    Unmatched(String),
    #[error("no alternative at the choice's tokens fits any option")]
    NoMass,
}

/// The longest tokens' choice a `NotAnOption` quotes.
const CHOICE_SHOWN: usize = 40;

/// One token: its bytes, log-probability and the alternatives the server listed.
struct Token {
    bytes: Vec<u8>,
    logprob: f64,
    top: Vec<(Vec<u8>, f64)>,
}

fn bytes_of(v: &Value) -> Option<Vec<u8>> {
    match v.get("bytes").and_then(Value::as_array) {
        Some(b) => b.iter().map(|x| x.as_u64().and_then(|n| u8::try_from(n).ok())).collect(),
        None => v.get("token").and_then(Value::as_str).map(|t| t.as_bytes().to_vec()),
    }
}

fn parse(tokens: &[Value]) -> Option<Vec<Token>> {
    tokens
        .iter()
        .map(|t| {
            let top = t.get("top_logprobs").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            let top = top.iter().map(|a| Some((bytes_of(a)?, a.get("logprob")?.as_f64()?))).collect::<Option<_>>()?;
            Some(Token { bytes: bytes_of(t)?, logprob: t.get("logprob")?.as_f64()?, top })
        })
        .collect()
}

/// Where the object that is the answer lies in `text`: from its first `{` to the end of the JSON
/// value there (a fence or spaces around it are what a structured reply may carry).
fn answer_span(text: &[u8]) -> Result<std::ops::Range<usize>, NotRead> {
    let no_object = || NotRead::NoObject("no `{` in them".into());
    let open = text.iter().position(|&b| b == b'{').ok_or_else(no_object)?;
    let mut stream = serde_json::Deserializer::from_slice(&text[open..]).into_iter::<serde::de::IgnoredAny>();
    match stream.next() {
        Some(Ok(_)) => Ok(open..open + stream.byte_offset()),
        Some(Err(e)) => Err(NotRead::NoObject(e.to_string())),
        None => Err(no_object()),
    }
}

/// Where the `choice` string's value starts in `answer`: just after its opening quote. The key
/// must be written plainly, once: `"choice"`, spaces, `:`.
fn value_start(answer: &[u8]) -> Result<usize, NotRead> {
    let key = b"\"choice\"";
    let skip = |mut i: usize| {
        while answer.get(i).is_some_and(|b| b.is_ascii_whitespace()) {
            i += 1;
        }
        i
    };
    // Every `"choice"` followed by a colon. Inside a string the text cannot hold one (a quote
    // there is escaped), but a key ending in `\"choice` can: more than one is not guessed at.
    let colons: Vec<usize> = answer
        .windows(key.len())
        .enumerate()
        .filter(|(_, w)| *w == key)
        .map(|(at, _)| skip(at + key.len()))
        .filter(|&i| answer.get(i) == Some(&b':'))
        .collect();
    let colon = match colons[..] {
        [] => return Err(NotRead::NoChoice),
        [one] => one,
        _ => return Err(NotRead::SeveralChoices),
    };
    let i = skip(colon + 1);
    (answer.get(i) == Some(&b'"')).then_some(i + 1).ok_or(NotRead::NoChoice)
}

/// Whether `token` can be the next piece of `rest` (what an option still needs), or completes it
/// and runs on past its closing quote.
fn fits(rest: &[u8], token: &[u8]) -> bool {
    !token.is_empty() && (rest.starts_with(token) || token.starts_with(rest))
}

/// Reads the distribution over `ids` from the tokens of a structured reply whose accepted
/// answer is `answer` (an object holding `"choice": "<id>"`).
pub fn read(tokens: &Value, ids: &[String], answer: &Value) -> Result<Reading, NotRead> {
    let tokens = parse(tokens.as_array().ok_or(NotRead::Malformed)?).ok_or(NotRead::Malformed)?;
    let text: Vec<u8> = tokens.iter().flat_map(|t| t.bytes.iter().copied()).collect();
    let span = answer_span(&text)?;
    let spelled = strict::parse_slice(&text[span.clone()]).map_err(|e| NotRead::NoObject(e.to_string()))?;
    if spelled != *answer {
        return Err(NotRead::OtherAnswer);
    }
    let start = span.start + value_start(&text[span.clone()])?;
    let mut stream = serde_json::Deserializer::from_slice(&text[start - 1..span.end]).into_iter::<String>();
    let sampled = match stream.next() {
        Some(Ok(s)) => s,
        _ => return Err(NotRead::NoChoice),
    };
    let Some(written) = ids.iter().position(|id| *id == sampled) else {
        return Err(NotRead::NotAnOption(sampled.chars().take(CHOICE_SHOWN).collect()));
    };
    // The token the value starts in, and the part of it before the value (a quote, a space).
    let mut at = 0;
    let mut first = 0;
    for (i, t) in tokens.iter().enumerate() {
        if at + t.bytes.len() > start {
            first = i;
            break;
        }
        at += t.bytes.len();
    }
    let lead = &text[at..start];
    // What each option writes from that token on: the lead, its JSON-escaped id, the closing quote.
    let wants: Vec<Vec<u8>> = ids
        .iter()
        .map(|id| {
            let quoted = serde_json::to_string(id).unwrap_or_default();
            [lead, &quoted.as_bytes()[1..]].concat()
        })
        .collect();
    let mut walk =
        Walk { tokens: &tokens, wants: &wants, mass: vec![0.0; ids.len()], approximate: false, reached: None };
    walk.from(first, 0, (0..ids.len()).collect(), 1.0);
    // The sampled tokens must spell the written option as its id is written: where they spell it
    // otherwise, every alternative was matched against a text the model did not follow.
    if walk.reached != Some(written) {
        return Err(NotRead::Unmatched(sampled));
    }
    let total: f64 = walk.mass.iter().sum();
    if total <= 0.0 || !total.is_finite() {
        return Err(NotRead::NoMass);
    }
    let probabilities = walk.mass.iter().map(|m| m / total).collect();
    Ok(Reading { probabilities, sampled, approximate: walk.approximate })
}

struct Walk<'a> {
    tokens: &'a [Token],
    wants: &'a [Vec<u8>],
    mass: Vec<f64>,
    approximate: bool,
    /// The option the sampled tokens spelled to its end, if any.
    reached: Option<usize>,
}

impl Walk<'_> {
    /// Gives out `mass` (the probability of the sampled path so far) at token `i`, where
    /// `consumed` bytes of every option in `live` are written.
    fn from(&mut self, i: usize, consumed: usize, live: Vec<usize>, mass: f64) {
        let Some(t) = self.tokens.get(i) else { return };
        let mut alternatives = t.top.clone();
        if !alternatives.iter().any(|(b, _)| *b == t.bytes) {
            alternatives.push((t.bytes.clone(), t.logprob));
        }
        for (bytes, logprob) in alternatives {
            let p = mass * logprob.exp();
            let fit: Vec<usize> = live
                .iter()
                .copied()
                .filter(|&o| self.wants[o].get(consumed..).is_some_and(|rest| fits(rest, &bytes)))
                .collect();
            let sampled = bytes == t.bytes;
            match fit.len() {
                0 => {}
                1 => {
                    if sampled {
                        self.reached = Some(fit[0]);
                    }
                    self.mass[fit[0]] += p;
                }
                _ if sampled => self.from(i + 1, consumed + bytes.len(), fit, p),
                // The same text as the sampled path, cut into other tokens: it tells no option apart.
                n if n == live.len() => {}
                n => {
                    self.approximate = true;
                    for o in fit {
                        self.mass[o] += p / n as f64;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tok(t: &str, lp: f64, top: &[(&str, f64)]) -> Value {
        json!({ "token": t, "logprob": lp, "top_logprobs": top.iter().map(|(a, l)| json!({ "token": a, "logprob": l })).collect::<Vec<_>>() })
    }

    fn ids(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9)
    }

    /// `tokens` read as the answer they spell (the object from their first `{`), as the harness
    /// accepted it.
    fn read_own(tokens: &Value, ids: &[String]) -> Result<Reading, NotRead> {
        let text: String = tokens
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| match t.get("bytes").and_then(Value::as_array) {
                Some(b) => {
                    String::from_utf8(b.iter().filter_map(Value::as_u64).map(|n| n as u8).collect()).expect("utf-8")
                }
                None => t["token"].as_str().unwrap_or_default().to_string(),
            })
            .collect();
        let from = text.find('{').unwrap_or(0);
        let answer = serde_json::Deserializer::from_str(&text[from..]).into_iter::<Value>().next();
        read(tokens, ids, &answer.and_then(Result::ok).unwrap_or_default())
    }

    /// llama-server's tokens for `{"choice": "yes", ...}` (a fence first, as it writes one).
    #[test]
    fn the_choice_tokens_alternatives_give_the_distribution() {
        let (pyes, pno) = (0.8f64, 0.1f64);
        let tokens = json!([
            tok("```json\n", -9.0, &[("No", -0.9)]),
            tok("{", -0.1, &[]),
            tok("\n  \"", -0.2, &[]),
            tok("choice", -0.1, &[("type", -1.0)]),
            tok("\":", -0.1, &[]),
            tok(" \"", -0.1, &[(" `", -3.0)]),
            tok("yes", pyes.ln(), &[("yes", pyes.ln()), ("no", pno.ln()), ("Yes", -3.0), ("maybe", -4.0)]),
            tok("\",", -0.3, &[]),
            tok(" \"confidence\": 0.9\n}\n```", -0.3, &[]),
        ]);
        let answer = json!({ "choice": "yes", "confidence": 0.9 });
        let r = read(&tokens, &ids(&["yes", "no"]), &answer).expect("read");
        assert_eq!(r.sampled, "yes");
        assert!(close(&r.probabilities, &[pyes / (pyes + pno), pno / (pyes + pno)]), "{r:?}");
        assert!(!r.approximate);
        // An option absent from the alternatives gets nothing; the rest still sum to 1.
        let r = read(&tokens, &ids(&["no", "yes", "never"]), &answer).expect("read");
        assert!(close(&r.probabilities, &[pno / (pyes + pno), pyes / (pyes + pno), 0.0]), "{r:?}");
    }

    #[test]
    fn a_token_holding_the_quote_and_the_value_is_matched_with_its_lead() {
        let tokens = json!([
            tok("{\"choice\":", -0.1, &[]),
            tok(" \"b", 0.6f64.ln(), &[(" \"a", 0.3f64.ln()), (" \"b", 0.6f64.ln()), (" ", -2.0)]),
            tok("\"}", -0.1, &[]),
        ]);
        let r = read_own(&tokens, &ids(&["a", "b"])).expect("read");
        assert_eq!(r.sampled, "b");
        assert!(close(&r.probabilities, &[1.0 / 3.0, 2.0 / 3.0]), "{r:?}");
    }

    /// `yes` and `yesterday`: the token `yes` fits both, so the walk goes on to the next token,
    /// where the closing quote (yes) competes with `terday` (yesterday).
    #[test]
    fn options_sharing_a_prefix_are_told_apart_where_they_part() {
        let tokens = json!([
            tok("{\"choice\": \"", -0.1, &[]),
            tok("yes", 0.9f64.ln(), &[("yes", 0.9f64.ln()), ("no", 0.1f64.ln())]),
            tok("\"", 0.75f64.ln(), &[("\"", 0.75f64.ln()), ("terday", 0.25f64.ln())]),
            tok("}", -0.1, &[]),
        ]);
        let r = read_own(&tokens, &ids(&["yes", "yesterday", "no"])).expect("read");
        assert_eq!(r.sampled, "yes");
        let total = 0.9 * 0.75 + 0.9 * 0.25 + 0.1;
        assert!(close(&r.probabilities, &[0.9 * 0.75 / total, 0.9 * 0.25 / total, 0.1 / total]), "{r:?}");
        assert!(!r.approximate, "every share was read where the options part");
        // An alternative that is a shared prefix off the sampled path is split, and said so.
        let tokens = json!([
            tok("{\"choice\": \"", -0.1, &[]),
            tok("no", 0.5f64.ln(), &[("no", 0.5f64.ln()), ("ye", 0.4f64.ln())]),
            tok("\"}", -0.1, &[]),
        ]);
        let r = read_own(&tokens, &ids(&["yes", "yesterday", "no"])).expect("read");
        assert!(close(&r.probabilities, &[0.4 / 0.9 / 2.0, 0.4 / 0.9 / 2.0, 0.5 / 0.9]), "{r:?}");
        assert!(r.approximate);
    }

    #[test]
    fn ids_are_matched_as_json_writes_them_and_bytes_win_over_text() {
        let id = "say \"hi\"";
        let tokens = json!([
            tok("{\"choice\":\"", -0.1, &[]),
            tok("say", -0.1, &[("no", 0.5f64.ln())]),
            { "token": "?", "bytes": b" \\\"hi\\\"\"".to_vec(), "logprob": -0.1, "top_logprobs": [] },
            tok("}", -0.1, &[]),
        ]);
        let r = read_own(&tokens, &ids(&[id, "no"])).expect("read");
        assert_eq!(r.sampled, id);
        // `say` fits only the quoted id: its share is read there; the bytes made the text.
        let p = (-0.1f64).exp();
        assert!(close(&r.probabilities, &[p / (p + 0.5), 0.5 / (p + 0.5)]), "{r:?}");
    }

    /// Spellings that are still the one plain `choice` key: read.
    #[test]
    fn a_plain_choice_key_is_found_past_look_alikes() {
        for text in [
            r#"{"reason": "x \"choice", "choice": "yes"}"#,
            r#"{"choice" :  "yes"}"#,
            r#"{"Choice": 1, "choice": "yes"}"#,
        ] {
            let at = text.rfind("yes").expect("yes");
            let tokens = json!([
                tok(&text[..at], -0.1, &[]),
                tok("yes", 0.6f64.ln(), &[("no", 0.3f64.ln())]),
                tok(&text[at + 3..], -0.1, &[]),
            ]);
            let r = read_own(&tokens, &ids(&["yes", "no"])).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert!(close(&r.probabilities, &[2.0 / 3.0, 1.0 / 3.0]), "{text}: {r:?}");
        }
    }

    /// Issue 46, row 7: tokens that do not yield the choice the answer writes are not read, each
    /// saying why; the caller trusts neither them nor the claim.
    #[test]
    fn tokens_that_do_not_yield_the_written_choice_are_not_read() {
        let yes_no = ids(&["yes", "no"]);
        let answer = json!({ "choice": "yes", "confidence": 0.99 });
        let cases: Vec<(&str, Vec<Value>, NotRead)> = vec![
            (
                "the choice spelled with escapes, no alternative",
                vec![
                    tok("{\"choice\":\"", -0.1, &[]),
                    tok("\\u0079es", -0.1, &[]),
                    tok("\",\"confidence\":0.99}", -0.1, &[]),
                ],
                NotRead::Unmatched("yes".into()),
            ),
            (
                "the choice spelled with escapes, the other option an alternative",
                vec![
                    tok("{\"choice\":\"", -0.1, &[]),
                    tok("\\u0079", 0.05f64.ln(), &[("no", 0.9f64.ln())]),
                    tok("es\",\"confidence\":0.99}", -0.1, &[]),
                ],
                NotRead::Unmatched("yes".into()),
            ),
            (
                "the key spelled with escapes",
                vec![
                    tok("{\"\\u0063hoice\":\"", -0.1, &[]),
                    tok("yes", 0.05f64.ln(), &[("no", 0.9f64.ln())]),
                    tok("\",\"confidence\":0.99}", -0.1, &[]),
                ],
                NotRead::NoChoice,
            ),
            (
                "a second choice key after the one the walk would read",
                vec![
                    tok("{\"choice\":\"", -0.1, &[]),
                    tok("no", 0.9f64.ln(), &[("yes", 0.05f64.ln())]),
                    tok("\",\"confidence\":0.99,\"choice\":\"yes\"}", -0.1, &[]),
                ],
                NotRead::NoObject("the key `choice` is given twice at line 1 column 41".into()),
            ),
            (
                "tokens of another answer",
                vec![
                    tok("{\"choice\":\"", -0.1, &[]),
                    tok("no", -0.1, &[("yes", -3.0)]),
                    tok("\",\"confidence\":0.99}", -0.1, &[]),
                ],
                NotRead::OtherAnswer,
            ),
            (
                "tokens of the same choice, another answer",
                vec![
                    tok("{\"choice\":\"", -0.1, &[]),
                    tok("yes", -0.1, &[("no", -3.0)]),
                    tok("\",\"confidence\":0.5}", -0.1, &[]),
                ],
                NotRead::OtherAnswer,
            ),
            ("tokens without an object", vec![tok("yes", -0.1, &[])], NotRead::NoObject("no `{` in them".into())),
            (
                "tokens cut off",
                vec![tok("{\"choice\":\"", -0.1, &[]), tok("yes", -0.1, &[])],
                NotRead::NoObject("EOF while parsing a string at line 1 column 14".into()),
            ),
        ];
        for (name, tokens, why) in cases {
            assert_eq!(read(&Value::Array(tokens), &yes_no, &answer), Err(why), "{name}");
        }
        // Where the answer itself is odd (the schema refuses these before; the walk holds alone).
        let odd: Vec<(&str, &str, NotRead)> = vec![
            (r#"{"a\"choice": 1, "choice": "yes"}"#, "a key ending in \\\"choice", NotRead::SeveralChoices),
            (r#"{"choice": 1}"#, "a choice that is no string", NotRead::NoChoice),
            (r#"{"choice": "c"}"#, "a choice that is no option", NotRead::NotAnOption("c".into())),
            (r#"{"pick": "a"}"#, "no choice", NotRead::NoChoice),
        ];
        for (text, name, why) in odd {
            let answer: Value = serde_json::from_str(text).expect(text);
            assert_eq!(read(&json!([tok(text, -0.1, &[])]), &yes_no, &answer), Err(why), "{name}");
        }
        let long = format!("{{\"choice\": \"{}\"}}", "c".repeat(100));
        let answer: Value = serde_json::from_str(&long).expect("long");
        assert_eq!(read(&json!([tok(&long, -0.1, &[])]), &yes_no, &answer), Err(NotRead::NotAnOption("c".repeat(40))));
        assert_eq!(read(&json!({}), &yes_no, &answer), Err(NotRead::Malformed));
        // Escapes past the token where the choice parts from every other option change nothing:
        // the choice was made there, at the probabilities listed there.
        let late = json!([
            tok("{\"choice\":\"", -0.1, &[]),
            tok("y", 0.8f64.ln(), &[("no", 0.2f64.ln())]),
            tok("\\u0065s\",\"confidence\":0.99}", -0.1, &[]),
        ]);
        let r = read(&late, &yes_no, &json!({ "choice": "yes", "confidence": 0.99 })).expect("read");
        assert!(close(&r.probabilities, &[0.8, 0.2]), "{r:?}");
        assert_eq!(read(&json!([{ "token": "x" }]), &yes_no, &answer), Err(NotRead::Malformed));
    }
}
