//! Secrets out of harness text: before a failure reason, an HTTP error body or a stderr tail is
//! recorded or printed, the values of the run's key variables and any `Bearer <token>` or
//! `x-api-key: <key>` in it become `[redacted]`.

use crate::config::Config;

/// What a secret is replaced with.
pub const REDACTED: &str = "[redacted]";
/// Values shorter than this are left alone: they would match ordinary words.
const MIN_LEN: usize = 8;
/// The key variables the harnesses read when a runtime names none.
pub const DEFAULT_KEY_VARS: &[&str] = &["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"];

/// Whether a variable's name says it holds a secret (`*KEY*`, `*TOKEN*`, `*SECRET*`, `*PASSWORD*`).
pub fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ["KEY", "TOKEN", "SECRET", "PASSWORD"].iter().any(|w| upper.contains(w))
}

/// The secret values of one run, longest first, and the scrubbing of text.
#[derive(Debug, Default, Clone)]
pub struct Redactor {
    values: Vec<String>,
}

impl Redactor {
    /// The run's secrets: the values of every runtime's `api_key_env`, of the harnesses' default
    /// key variables, and of every variable whose name looks secret (which covers a sandbox's
    /// `env` entries that do), from `vars` (the process environment) and from the runtimes' `env`
    /// tables.
    pub fn new(config: &Config, vars: impl IntoIterator<Item = (String, String)>) -> Redactor {
        let named: Vec<&str> = config
            .runtimes
            .values()
            .filter_map(|r| r.api_key_env.as_deref())
            .chain(DEFAULT_KEY_VARS.iter().copied())
            .collect();
        let from_env = vars.into_iter().filter(|(k, _)| named.contains(&k.as_str()) || looks_secret(k)).map(|(_, v)| v);
        let from_config = config
            .runtimes
            .values()
            .filter_map(|r| r.env.as_ref())
            .flat_map(|env| env.iter().filter(|(k, _)| named.contains(&k.as_str()) || looks_secret(k)))
            .map(|(_, v)| v.clone());
        Redactor::of_values(from_env.chain(from_config))
    }

    /// A redactor for these values (those shorter than 8 characters are dropped).
    pub fn of_values(values: impl IntoIterator<Item = String>) -> Redactor {
        let mut values: Vec<String> = values.into_iter().filter(|v| v.chars().count() >= MIN_LEN).collect();
        values.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        values.dedup();
        Redactor { values }
    }

    /// `text` with every secret value, `Bearer` token and `x-api-key` value replaced by `[redacted]`.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = std::borrow::Cow::Borrowed(text);
        for v in &self.values {
            if out.contains(v.as_str()) {
                out = out.replace(v.as_str(), REDACTED).into();
            }
        }
        // Every prompt goes through here: text without a marker is not copied again.
        for (marker, sep) in [("bearer", Separator::Space), ("x-api-key", Separator::Colon)] {
            if has_marker(&out, marker) {
                out = after_marker(&out, marker, sep).into();
            }
        }
        out.into_owned()
    }
}

/// Whether `text` holds `marker` (lowercase ASCII) in any case. Only the places holding the
/// marker's first letter (found with memchr's vector search) are compared: every prompt comes
/// here, and comparing at every byte cost about 10 instructions a byte a marker (1.3 million for
/// a 64 KiB prompt).
fn has_marker(text: &str, marker: &str) -> bool {
    let (bytes, marker) = (text.as_bytes(), marker.as_bytes());
    let Some(&first) = marker.first() else { return true };
    memchr::memchr2_iter(first, first.to_ascii_uppercase(), bytes)
        .any(|at| bytes.get(at..at + marker.len()).is_some_and(|w| w.eq_ignore_ascii_case(marker)))
}

/// What must come between a marker and the secret it announces.
#[derive(Clone, Copy)]
enum Separator {
    /// `Bearer <token>`: at least one space or tab.
    Space,
    /// `x-api-key: <key>`, `"x-api-key": "<key>"`, `x-api-key=<key>`.
    Colon,
}

fn token_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~' | b'+' | b'/' | b'=')
}

/// The length of the separator at the start of `rest`, if it is one.
fn separator_len(rest: &[u8], sep: Separator) -> Option<usize> {
    let spaces = |from: usize| rest[from..].iter().take_while(|c| matches!(c, b' ' | b'\t')).count();
    let quotes = |from: usize| rest[from..].iter().take_while(|c| matches!(c, b'"' | b'\'')).count();
    match sep {
        Separator::Space => Some(spaces(0)).filter(|n| *n > 0),
        Separator::Colon => {
            let mut i = quotes(0);
            i += spaces(i);
            if !matches!(rest.get(i), Some(b':' | b'=')) {
                return None;
            }
            i += 1;
            i += spaces(i);
            Some(i + quotes(i))
        }
    }
}

/// `text` with the token after each case-insensitive `marker` (and its separator) redacted.
fn after_marker(text: &str, marker: &str, sep: Separator) -> String {
    let bytes = text.as_bytes();
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut from = 0;
    while let Some(found) = lower[from..].find(marker) {
        let after = from + found + marker.len();
        from = after;
        let Some(gap) = separator_len(&bytes[after..], sep) else { continue };
        let start = after + gap;
        let len = bytes[start..].iter().take_while(|c| token_char(**c)).count();
        // A short word is prose ("the bearer of"), not a credential.
        if len < MIN_LEN {
            continue;
        }
        // Token characters are ASCII, so `start` and `start + len` are character boundaries.
        out.push_str(&text[copied..start]);
        out.push_str(REDACTED);
        copied = start + len;
        from = copied;
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrub(values: &[&str], text: &str) -> String {
        Redactor::of_values(values.iter().map(|v| v.to_string())).scrub(text)
    }

    #[test]
    fn key_values_become_redacted_and_short_ones_stay() {
        assert_eq!(scrub(&["sk-live-0123456789"], "bad key sk-live-0123456789!"), "bad key [redacted]!");
        assert_eq!(scrub(&["short"], "a short word"), "a short word");
        assert_eq!(scrub(&["abcdefgh", "abcdefghijkl"], "k=abcdefghijkl"), "k=[redacted]", "longest first");
    }

    #[test]
    fn bearer_tokens_and_api_key_headers_become_redacted() {
        assert_eq!(scrub(&[], "Authorization: Bearer sk-abc.DEF_123/+="), "Authorization: Bearer [redacted]");
        assert_eq!(
            scrub(&[], r#"{"authorization":"bearer  eyJhbGciOi.x"}"#),
            r#"{"authorization":"bearer  [redacted]"}"#
        );
        assert_eq!(scrub(&[], "x-api-key: sk-ant-123 next"), "x-api-key: [redacted] next");
        assert_eq!(scrub(&[], r#"{"X-Api-Key": "sk-ant-123", "b": 1}"#), r#"{"X-Api-Key": "[redacted]", "b": 1}"#);
        assert_eq!(scrub(&[], "x-api-key=abcdefgh12; Bearer"), "x-api-key=[redacted]; Bearer");
        assert_eq!(scrub(&[], "the bearer of bad news"), "the bearer of bad news", "prose stays");
        assert_eq!(scrub(&[], "é Bearer tokentoken€ end"), "é Bearer [redacted]€ end");
    }

    #[test]
    fn markers_are_found_in_any_case_anywhere_and_only_whole() {
        for text in ["bearer", "xBEARER", "a bEaReR b", "é€ x-API-key", "ends with x-api-key"] {
            assert!(has_marker(text, "bearer") || has_marker(text, "x-api-key"), "{text}");
        }
        for text in ["", "b", "beare", "bearr", "bbbbbbbbbb", "x-api-ke", "é€ bear er"] {
            assert!(!has_marker(text, "bearer") && !has_marker(text, "x-api-key"), "{text}");
        }
        let long = format!("{}Bearer{}", "b".repeat(70_000), "e".repeat(10));
        assert!(has_marker(&long, "bearer"));
        assert!(!has_marker(&long[..70_005], "bearer"));
    }

    #[test]
    fn the_runs_secrets_come_from_key_variables_and_secret_looking_names() {
        let config: Config = toml::from_str(
            "[runtimes.a]\nharness = \"openai\"\napi_key_env = \"MY_LLM_CRED\"\n\
             [runtimes.b]\nharness = \"claude\"\nenv = { GATEWAY_TOKEN = \"tok-from-config\", LANG = \"C.UTF-8-long\" }\n",
        )
        .expect("config");
        let vars = [
            ("MY_LLM_CRED", "cred-value-1"),
            ("OPENAI_API_KEY", "sk-openai-value"),
            ("GITHUB_TOKEN", "ghp-token-value"),
            ("DB_PASSWORD", "hunter2hunter2"),
            ("PATH", "/usr/local/bin:/usr/bin"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let r = Redactor::new(&config, vars);
        let text = "cred-value-1 sk-openai-value ghp-token-value hunter2hunter2 tok-from-config /usr/local/bin:/usr/bin C.UTF-8-long";
        assert_eq!(
            r.scrub(text),
            "[redacted] [redacted] [redacted] [redacted] [redacted] /usr/local/bin:/usr/bin C.UTF-8-long"
        );
    }
}
