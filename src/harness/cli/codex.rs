//! Codex CLI: `codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox
//! -- -` (the prompt on stdin), then `codex exec resume <thread_id> -- -`; `CODEX_HOME` is the
//! agent's home, with a `config.toml` that holds the instructions (`developer_instructions`),
//! turns analytics, feedback, plugin sync and update checks off and, when the runtime names a
//! `base_url`, points a provider at it. Codex reports tokens but no cost: they are priced. A turn
//! fails on `turn.failed`, or on an `error` event when the turn never completes; an `item.completed`
//! of type `error` is harmless (HARNESSES.md).

mod interactive;

use super::{num, operator_dir, CliConfig, CliEnv, Invocation, Turn};
use crate::accounting::Usage;
use crate::harness::AgentInfo;
use crate::harness::HarnessError;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The variable holding a dummy key for a local server that needs none.
const LOCAL_KEY_VAR: &str = "AWF_CODEX_LOCAL_KEY";

#[derive(Default)]
pub struct Codex {
    /// The thread (session) id, from `thread.started`.
    thread: Option<String>,
    /// A fork's parent thread, copied into this home, until the first turn forks it.
    fork_from: Option<String>,
    /// Codex reports a thread's usage cumulatively: the totals so far.
    totals: Usage,
}

impl Codex {
    pub fn new() -> Codex {
        Codex::default()
    }
}

/// The provider's key variable: the runtime's `api_key_env`, else `OPENAI_API_KEY`, else (for a
/// local server) a dummy.
fn key_var(cfg: &CliConfig) -> String {
    if let Some(v) = &cfg.api_key_env {
        return v.clone();
    }
    if cfg.local() && !cfg.has_env("OPENAI_API_KEY") {
        return LOCAL_KEY_VAR.into();
    }
    "OPENAI_API_KEY".into()
}

/// `config.toml` for the agent's home.
fn config(cfg: &CliConfig, info: &AgentInfo) -> String {
    use toml::{Table, Value as T};
    let table = |pairs: &[(&str, T)]| T::Table(pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect());
    let mut root = Table::new();
    root.insert("check_for_update_on_startup".into(), T::Boolean(false));
    if let Some(i) = &info.instructions {
        root.insert("developer_instructions".into(), T::String(i.clone()));
    }
    root.insert("analytics".into(), table(&[("enabled", T::Boolean(false))]));
    root.insert("feedback".into(), table(&[("enabled", T::Boolean(false))]));
    root.insert(
        "features".into(),
        // An interactive Codex (a pane agent) would start an app-server daemon per home that
        // outlives it and holds the conversation, so that resuming it later is refused.
        table(&[
            ("plugins", T::Boolean(false)),
            ("unbounded_connection_retries", T::Boolean(false)),
            ("daemon_auto_start", T::Boolean(false)),
        ]),
    );
    if let Some(url) = &cfg.base_url {
        root.insert("model_provider".into(), T::String("awf".into()));
        let mut provider = vec![
            ("name", T::String("awf".into())),
            ("base_url", T::String(url.clone())),
            ("env_key", T::String(key_var(cfg))),
            ("wire_api", T::String("responses".into())),
        ];
        if cfg.local() {
            provider.push(("request_max_retries", T::Integer(0)));
            provider.push(("stream_max_retries", T::Integer(0)));
        }
        root.insert("model_providers".into(), table(&[("awf", table(&provider))]));
    }
    toml::to_string(&root).unwrap_or_default()
}

fn flags(cfg: &CliConfig) -> Vec<String> {
    let mut args: Vec<String> = ["--json", "--skip-git-repo-check"].map(String::from).to_vec();
    args.extend(agent_flags(cfg));
    args
}

impl Codex {
    /// `flags` with the session this agent's turn continues: `resume FLAGS THREAD` once it has a
    /// thread, `fork FLAGS PARENT` for a fork's first turn, else `FLAGS` alone.
    fn session_args(&self, flags: Vec<String>) -> Vec<String> {
        let (verb, id) = match (&self.thread, &self.fork_from) {
            (Some(t), _) => ("resume", t),
            (None, Some(parent)) => ("fork", parent),
            (None, None) => return flags,
        };
        let mut args = vec![verb.to_string()];
        args.extend(flags);
        args.push(id.clone());
        args
    }
}

/// No approvals and no sandbox of Codex's own, the model and effort, the runtime's flags:
/// headless or in a pane.
fn agent_flags(cfg: &CliConfig) -> Vec<String> {
    let mut args: Vec<String> = vec!["--dangerously-bypass-approvals-and-sandbox".into()];
    if let Some(m) = &cfg.model {
        args.extend(["-m".into(), m.clone()]);
    }
    if let Some(e) = &cfg.effort {
        args.extend(["-c".into(), format!("model_reasoning_effort=\"{}\"", e.replace('"', ""))]);
    }
    args.extend(cfg.args.iter().cloned());
    args
}

impl super::Cli for Codex {
    fn harness(&self) -> crate::config::HarnessKind {
        crate::config::HarnessKind::Codex
    }

    fn credentials(&self, home: &Path) -> Vec<(PathBuf, PathBuf)> {
        operator_dir("CODEX_HOME", ".codex")
            .map(|d| vec![(d.join("auth.json"), home.join("auth.json"))])
            .unwrap_or_default()
    }

    fn prepare(&self, home: &Path, cfg: &CliConfig, info: &AgentInfo) -> Result<CliEnv, HarnessError> {
        super::write_config(&home.join("config.toml"), &config(cfg, info))?;
        let mut env = CliEnv::default();
        env.set("CODEX_HOME", home.display().to_string());
        if cfg.base_url.is_some() && key_var(cfg) == LOCAL_KEY_VAR {
            env.set(LOCAL_KEY_VAR, "dummy");
        }
        Ok(env)
    }

    fn turn(&self, _home: &Path, cfg: &CliConfig, _info: &AgentInfo, prompt: &str) -> Invocation {
        let mut args: Vec<String> = vec!["exec".into()];
        args.extend(self.session_args(flags(cfg)));
        // `-`: the prompt is read from stdin, to its end (closed after it).
        args.extend(["--".into(), "-".into()]);
        Invocation { args, stdin: Some((prompt.to_string(), false)) }
    }

    fn interactive(&self) -> Option<&dyn super::interactive::Interactive> {
        Some(self)
    }

    fn event(&self, ev: &Value, turn: &mut Turn) {
        match ev["type"].as_str().unwrap_or_default() {
            "thread.started" => turn.session_id = ev["thread_id"].as_str().map(String::from),
            "turn.completed" => {
                turn.done = true;
                let u = &ev["usage"];
                let cached = num(u, "cached_input_tokens");
                turn.usage = Usage {
                    input_tokens: num(u, "input_tokens").saturating_sub(cached),
                    output_tokens: num(u, "output_tokens"),
                    cache_read_tokens: cached,
                    cache_write_tokens: num(u, "cache_write_input_tokens"),
                    cost_usd: 0.0,
                };
            }
            "turn.failed" => {
                turn.done = true;
                let msg = ev.pointer("/error/message").and_then(Value::as_str).unwrap_or("no message");
                turn.failure = Some(format!("Codex reported the turn failed: {msg}"));
            }
            "error" => {
                let msg = ev["message"].as_str().unwrap_or("no message");
                turn.error = Some(format!("Codex reported an error: {msg}"));
            }
            // `item.*` events, including items of type "error", are the turn's progress.
            _ => {}
        }
    }

    fn after_turn(&mut self, _home: &Path, turn: &mut Turn) {
        if let Some(id) = &turn.session_id {
            self.thread = Some(id.clone());
            self.fork_from = None;
        }
        if turn.usage.tokens() > 0 {
            let now = turn.usage;
            let t = &self.totals;
            let cumulative = now.input_tokens >= t.input_tokens
                && now.output_tokens >= t.output_tokens
                && now.cache_read_tokens >= t.cache_read_tokens
                && now.cache_write_tokens >= t.cache_write_tokens;
            if cumulative {
                turn.usage = Usage {
                    input_tokens: now.input_tokens - t.input_tokens,
                    output_tokens: now.output_tokens - t.output_tokens,
                    cache_read_tokens: now.cache_read_tokens - t.cache_read_tokens,
                    cache_write_tokens: now.cache_write_tokens - t.cache_write_tokens,
                    cost_usd: 0.0,
                };
            }
            self.totals = now;
        }
    }

    /// Codex's state databases name the rollout files by absolute path, in the parent's home: a
    /// fork goes without them, and Codex finds the parent's rollout in `sessions/` by its id.
    fn fork_copies(&self, name: &str) -> bool {
        !name.contains(".sqlite")
    }

    fn resume(&mut self, _home: &Path, id: &str) -> Result<(), HarnessError> {
        self.thread = Some(id.to_string());
        self.fork_from = None;
        Ok(())
    }

    fn fork(&self, _home: &Path, _child_home: &Path) -> Result<Box<dyn super::Cli>, HarnessError> {
        Ok(Box::new(Codex {
            thread: None,
            fork_from: self.thread.clone().or_else(|| self.fork_from.clone()),
            totals: self.totals,
        }))
    }

    fn compact(&self, _: &Path, _: &CliConfig, _: &AgentInfo, _: &str) -> Result<Invocation, HarnessError> {
        Err(HarnessError::Cannot("the codex harness cannot compact: `codex exec` has no compact command (Codex compacts its context on its own when it fills)".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::cli::Cli;
    use serde_json::json;

    fn info() -> AgentInfo {
        AgentInfo {
            key: "a".into(),
            instructions: Some("Be \"brief\".".into()),
            model: "m".into(),
            effort: None,
            labels: json!({}),
        }
    }

    #[test]
    fn usage_is_per_turn_although_codex_reports_it_cumulatively() {
        let mut c = Codex::new();
        let mut t = Turn::default();
        c.event(&json!({ "type": "thread.started", "thread_id": "th" }), &mut t);
        c.event(
            &json!({ "type": "item.completed", "item": { "type": "error", "message": "Model metadata not found" } }),
            &mut t,
        );
        c.event(&json!({ "type": "turn.completed", "usage": { "input_tokens": 200, "cached_input_tokens": 50, "output_tokens": 40 } }), &mut t);
        assert!(t.done && t.failure.is_none() && t.error.is_none(), "{t:?}");
        c.after_turn(Path::new("/nonexistent"), &mut t);
        assert_eq!((t.usage.input_tokens, t.usage.cache_read_tokens, t.usage.output_tokens), (150, 50, 40));
        let mut t = Turn::default();
        c.event(&json!({ "type": "turn.completed", "usage": { "input_tokens": 400, "cached_input_tokens": 50, "output_tokens": 80 } }), &mut t);
        c.after_turn(Path::new("/nonexistent"), &mut t);
        assert_eq!((t.usage.input_tokens, t.usage.cache_read_tokens, t.usage.output_tokens), (200, 0, 40));
        let inv = c.turn(
            Path::new("/h"),
            &CliConfig::from_runtime(&Default::default(), Some("codex".into()), std::time::Duration::from_secs(1)),
            &info(),
            "-go",
        );
        assert_eq!(inv.args[..2], ["exec".to_string(), "resume".to_string()]);
        assert!(inv.args.ends_with(&["th".into(), "--".into(), "-".into()]), "{:?}", inv.args);
        assert_eq!(inv.stdin, Some(("-go".to_string(), false)), "the prompt on stdin, closed after it");
        assert!(!inv.args.iter().any(|a| a.contains("brief")), "the instructions are in config.toml: {:?}", inv.args);
    }

    #[test]
    fn turn_failed_fails_and_a_lone_error_fails_only_an_unfinished_turn() {
        let c = Codex::new();
        let mut t = Turn::default();
        c.event(&json!({ "type": "error", "message": "Connection failed" }), &mut t);
        c.event(
            &json!({ "type": "turn.failed", "error": { "message": "Connection failed: error sending request" } }),
            &mut t,
        );
        assert!(t.failure.as_deref().unwrap_or("").contains("error sending request"), "{t:?}");
        let mut t = Turn::default();
        c.event(&json!({ "type": "error", "message": "Reconnecting... 1/5" }), &mut t);
        c.event(&json!({ "type": "turn.completed", "usage": {} }), &mut t);
        assert!(t.done && t.failure.is_none());
    }

    #[test]
    fn the_config_points_a_provider_at_the_base_url() {
        let mut cfg =
            CliConfig::from_runtime(&Default::default(), Some("codex".into()), std::time::Duration::from_secs(1));
        let text = config(&cfg, &info());
        assert!(text.contains("enabled = false") && !text.contains("model_providers"), "{text}");
        assert!(
            text.contains(r#"developer_instructions = 'Be "brief".'"#) || text.contains(r#"Be \"brief\"."#),
            "{text}"
        );
        cfg.base_url = Some("http://127.0.0.1:9/v1".into());
        let parsed: toml::Table = toml::from_str(&config(&cfg, &info())).expect("valid TOML");
        assert_eq!(parsed["model_provider"].as_str(), Some("awf"));
        let p = &parsed["model_providers"]["awf"];
        assert_eq!(p["base_url"].as_str(), Some("http://127.0.0.1:9/v1"));
        assert_eq!(p["env_key"].as_str(), Some(LOCAL_KEY_VAR));
        assert_eq!(p["request_max_retries"].as_integer(), Some(0));
    }
}
