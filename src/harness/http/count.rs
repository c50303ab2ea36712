//! A request's size as the server counts it: llama-server's `/tokenize` where the server has it
//! (a server found without it is remembered per base URL and not asked again; a missing or failing
//! `/tokenize` never fails a turn), else an estimate from the text's length at a characters-per-token
//! ratio calibrated from the `prompt_tokens` each reply reports (per base URL and model, for the
//! process; only ever lowered, so that what was estimated to fit does fit).

use super::context::{pending, PER_MESSAGE};
use super::session::HttpSession;
use super::size::{Counted, PromptSize, DEFAULT_CHARS_PER_TOKEN};
use super::{Api, HttpConfig, ToolSpec};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

/// The fewest characters a reply's count calibrates from: in a shorter request the chat
/// template's own tokens (a tools preamble can be hundreds) weigh too much against the text's.
const MIN_CALIBRATION_CHARS: u64 = 4000;
/// No tokenizer packs more than this into a token's worth of text as awf counts it.
const MIN_CHARS_PER_TOKEN: f64 = 1.0;
/// The longest wait for `/tokenize`: llama-server answers it without a slot, so even a busy server
/// answers at once, and one that does not is taken to lack it.
const TOKENIZE_TIMEOUT: Duration = Duration::from_secs(5);

/// What this process learnt about servers.
#[derive(Default)]
struct Known {
    /// Whether the server at a base URL has `/tokenize`, once it was asked.
    tokenize: HashMap<String, bool>,
    /// Characters a token as replies counted them, per base URL and model.
    ratio: HashMap<(String, String), f64>,
}

fn known() -> MutexGuard<'static, Known> {
    static KNOWN: OnceLock<Mutex<Known>> = OnceLock::new();
    // What is kept is plain data: a thread that panicked holding it left nothing half-written.
    KNOWN.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner())
}

fn key(cfg: &HttpConfig) -> (String, String) {
    (cfg.base_url.clone(), cfg.model.clone())
}

/// The characters a token this runtime's text is estimated at.
pub(super) fn chars_per_token(cfg: &HttpConfig) -> f64 {
    known().ratio.get(&key(cfg)).copied().unwrap_or(DEFAULT_CHARS_PER_TOKEN)
}

/// The ratio a server's count shows: `chars` of text in `messages` messages counted as `tokens`,
/// the template's tokens for each message taken off; `None` for a request too short to tell.
pub(super) fn observed_ratio(chars: u64, messages: u64, tokens: u64) -> Option<f64> {
    if chars < MIN_CALIBRATION_CHARS || tokens == 0 {
        return None;
    }
    let text_tokens = tokens.saturating_sub(PER_MESSAGE * messages).max(1);
    Some((chars as f64 / text_tokens as f64).max(MIN_CHARS_PER_TOKEN))
}

/// Learns from a server's count of a request (`chars` of text in `messages` messages): a lower
/// ratio than the one in use replaces it.
pub(super) fn calibrate(cfg: &HttpConfig, chars: u64, messages: u64, tokens: u64) {
    let Some(seen) = observed_ratio(chars, messages, tokens) else { return };
    let mut k = known();
    let ratio = k.ratio.entry(key(cfg)).or_insert(DEFAULT_CHARS_PER_TOKEN);
    if seen < *ratio {
        tracing::info!("{} {}: text counted at {seen:.2} characters a token", cfg.base_url, cfg.model);
        *ratio = seen;
    }
}

/// Where a runtime's server would count tokens: llama-server's `/tokenize`, beside `/v1`. Not
/// asked of the public APIs, which have none.
fn tokenize_url(cfg: &HttpConfig) -> Option<String> {
    if cfg.api != Api::OpenAi || cfg.base_url.contains("api.openai.com") {
        return None;
    }
    let base = cfg.base_url.trim_end_matches('/');
    Some(format!("{}/tokenize", base.strip_suffix("/v1").unwrap_or(base)))
}

/// What `/tokenize` answered.
#[derive(Debug, PartialEq)]
enum Asked {
    Counted(u64),
    /// The server has no `/tokenize` (a 4xx, no `tokens` in what it answered, no answer in time).
    Lacks,
    /// It could not say this time (a 5xx, a failed connection).
    Failed,
}

async fn ask(client: &reqwest::Client, cfg: &HttpConfig, url: &str, text: &str) -> Asked {
    let mut req = client.post(url).json(&json!({ "content": text })).timeout(TOKENIZE_TIMEOUT.min(cfg.first_byte));
    if let Some(k) = &cfg.api_key {
        req = req.bearer_auth(k);
    }
    let resp = match req.send().await {
        Ok(r) => r,
        Err(e) if e.is_timeout() => return Asked::Lacks,
        Err(_) => return Asked::Failed,
    };
    if resp.status().is_server_error() {
        return Asked::Failed;
    }
    if !resp.status().is_success() {
        return Asked::Lacks;
    }
    match resp.json::<Value>().await {
        Ok(v) => v.get("tokens").and_then(Value::as_array).map_or(Asked::Lacks, |t| Asked::Counted(t.len() as u64)),
        Err(_) => Asked::Lacks,
    }
}

impl HttpSession {
    /// The tokens the next request holds before its reply: the server's count at the last reply
    /// plus the messages since (or everything, before any reply), counted by `/tokenize` where
    /// the server has it, else estimated.
    pub(super) async fn prompt_size(&self, tools: &[ToolSpec]) -> PromptSize {
        let p = pending(self.measured, self.info.instructions.as_deref(), &self.history, tools);
        let measured = p.measured.is_some();
        if let Some(n) = self.tokenize(&p.text).await {
            return PromptSize { tokens: p.with(n), by: Counted::Tokenize, measured };
        }
        let ratio = chars_per_token(&self.cfg);
        PromptSize {
            tokens: p.with((p.text.len() as f64 / ratio).ceil() as u64),
            by: Counted::Estimate(ratio),
            measured,
        }
    }

    /// `text`'s tokens as the server counts them, where it has `/tokenize`.
    async fn tokenize(&self, text: &str) -> Option<u64> {
        let url = tokenize_url(&self.cfg)?;
        let lacks = known().tokenize.get(&self.cfg.base_url) == Some(&false);
        if lacks || text.is_empty() {
            return None;
        }
        let has = match ask(&self.client, &self.cfg, &url, text).await {
            Asked::Counted(n) => Some(n),
            Asked::Lacks => None,
            Asked::Failed => return None,
        };
        let was = known().tokenize.insert(self.cfg.base_url.clone(), has.is_some());
        if was.is_none() && has.is_none() {
            tracing::info!("{url}: no /tokenize; requests are sized from the replies' counts");
        }
        has
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_calibrates_only_from_long_enough_text_and_takes_the_template_off() {
        assert_eq!(observed_ratio(3999, 1, 100), None, "too short to tell");
        assert_eq!(observed_ratio(4000, 0, 0), None, "no count");
        assert_eq!(observed_ratio(4000, 2, 2016), Some(2.0));
        assert_eq!(observed_ratio(4000, 2, 10), Some(4000.0), "a count below the template's is one token");
        assert_eq!(observed_ratio(4000, 0, 5000), Some(MIN_CHARS_PER_TOKEN));
    }

    #[test]
    fn tokenize_is_asked_beside_v1_and_never_of_the_public_apis() {
        let mut cfg = super::super::tests::config("http://127.0.0.1:8080/v1/");
        assert_eq!(tokenize_url(&cfg).as_deref(), Some("http://127.0.0.1:8080/tokenize"));
        cfg.base_url = "https://api.openai.com/v1".into();
        assert_eq!(tokenize_url(&cfg), None);
        cfg.base_url = "http://127.0.0.1:8080".into();
        cfg.api = Api::Anthropic;
        assert_eq!(tokenize_url(&cfg), None);
    }

    /// A server on 127.0.0.1 answering each connection with the next of `answers` (a whole HTTP
    /// response; an empty one: no answer at all, the connection held).
    fn server(answers: Vec<&'static str>) -> String {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for (mut conn, answer) in listener.incoming().flatten().zip(answers) {
                let _ = conn.read(&mut [0u8; 4096]);
                let _ = conn.write_all(answer.as_bytes());
                held.push(conn);
            }
        });
        format!("http://127.0.0.1:{port}/tokenize")
    }

    #[tokio::test]
    async fn what_tokenize_answers_tells_a_count_a_server_without_it_and_a_failure() {
        let ok = "HTTP/1.1 200 OK\r\ncontent-length: 20\r\nconnection: close\r\n\r\n{\"tokens\":[1,2,3,4]}";
        let missing = "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
        let html = "HTTP/1.1 200 OK\r\ncontent-length: 6\r\nconnection: close\r\n\r\n<html>";
        let broken = "HTTP/1.1 500 Error\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
        let url = server(vec![ok, missing, html, broken, ""]);
        let mut cfg = super::super::tests::config("http://127.0.0.1:1/v1");
        cfg.first_byte = Duration::from_millis(300);
        let client = reqwest::Client::new();
        let mut seen = Vec::new();
        for _ in 0..5 {
            seen.push(ask(&client, &cfg, &url, "some text").await);
        }
        assert_eq!(seen, [Asked::Counted(4), Asked::Lacks, Asked::Lacks, Asked::Failed, Asked::Lacks]);
    }

    #[test]
    fn calibration_only_lowers_the_ratio() {
        let mut cfg = super::super::tests::config("http://127.0.0.1:1/v1");
        cfg.model = "calibration_only_lowers_the_ratio".into();
        assert_eq!(chars_per_token(&cfg), DEFAULT_CHARS_PER_TOKEN);
        calibrate(&cfg, 4000, 0, 1000);
        assert_eq!(chars_per_token(&cfg), DEFAULT_CHARS_PER_TOKEN, "4 a token is not taken: 3 stays");
        calibrate(&cfg, 4000, 0, 2000);
        assert_eq!(chars_per_token(&cfg), 2.0);
        calibrate(&cfg, 4000, 0, 1600);
        assert_eq!(chars_per_token(&cfg), 2.0, "the lower ratio stays");
    }
}
