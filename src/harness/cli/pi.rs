//! pi coding agent: `pi -p --mode json [--append-system-prompt FILE] --session <file>`, the prompt
//! on stdin; `PI_CODING_AGENT_DIR` is the agent's home, with a `models.json` that points a provider
//! at the runtime's `base_url` when it names one.
//! pi reports tokens and (when its model has prices) cost per assistant message. `--mode json`
//! exits 0 even when the model call failed: the turn fails when its last assistant message has
//! `stopReason: "error"`. Compaction is native, through pi's RPC mode.

mod interactive;

use super::{instructions_file, num, operator_dir, CliConfig, CliEnv, Invocation, Turn};
use crate::harness::AgentInfo;
use crate::harness::HarnessError;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The provider name awf gives a runtime's `base_url`.
const PROVIDER: &str = "awf";
/// The id of the RPC command that compacts.
const COMPACT_ID: &str = "awf-compact";

pub struct Pi {
    /// The session file (pi creates it at this exact path). It lives in a folder of its own: pi
    /// 0.73.1 does not resume a session file at the top of its agent folder; it starts a new one.
    file: PathBuf,
    /// A fork's parent session (a copy in this home), until the first turn forks it.
    fork_from: Option<PathBuf>,
    /// The skill folders given to the agent (in its home): pi loads these and no others.
    skills: Vec<PathBuf>,
}

impl Pi {
    pub fn new(home: &Path) -> Pi {
        Pi { file: session_dir(home).join("session.jsonl"), fork_from: None, skills: Vec::new() }
    }
}

/// Where the session files live in the home.
fn session_dir(home: &Path) -> PathBuf {
    home.join("awf-session")
}

/// The model id: the runtime's, else `default` for a server of one's own.
fn model_id(cfg: &CliConfig) -> String {
    cfg.model.clone().unwrap_or_else(|| "default".into())
}

fn models_json(cfg: &CliConfig, url: &str) -> Value {
    // pi reads `apiKey` as the name of a variable when one is set, else as the key itself.
    let api_key = cfg.api_key_env.clone().unwrap_or_else(|| "dummy".into());
    json!({ "providers": { PROVIDER: {
        "baseUrl": url,
        "api": "openai-completions",
        "apiKey": api_key,
        "compat": { "supportsDeveloperRole": false, "supportsReasoningEffort": cfg.effort.is_some() },
        "models": [{ "id": model_id(cfg), "reasoning": cfg.effort.is_some(), "input": ["text"], "contextWindow": 128000, "maxTokens": 16384 }]
    } } })
}

/// Model, thinking level and the instructions' file (pi reads a path that exists as a file).
fn model_args(home: &Path, cfg: &CliConfig, info: &AgentInfo) -> Vec<String> {
    let mut args = Vec::new();
    if cfg.base_url.is_some() {
        args.extend(["--provider".into(), PROVIDER.into(), "--model".into(), model_id(cfg)]);
    } else if let Some(m) = &cfg.model {
        args.extend(["--model".into(), m.clone()]);
    }
    if let Some(e) = &cfg.effort {
        args.extend(["--thinking".into(), e.clone()]);
    }
    if let Some(file) = instructions_file(home, info) {
        args.extend(["--append-system-prompt".into(), file.display().to_string()]);
    }
    args
}

/// `--no-skills --skill <dir>...` when the agent was given skills: pi loads exactly those.
fn skill_args(skills: &[PathBuf]) -> Vec<String> {
    if skills.is_empty() {
        return Vec::new();
    }
    let mut args = vec!["--no-skills".to_string()];
    for d in skills {
        args.extend(["--skill".into(), d.display().to_string()]);
    }
    args
}

/// The session file a fork created in `dir`, named `<time>_<id>.jsonl`.
fn created_session(dir: &Path, id: &str) -> Option<PathBuf> {
    let suffix = format!("_{id}.jsonl");
    let entries = std::fs::read_dir(dir).ok()?;
    entries.filter_map(Result::ok).map(|e| e.path()).find(|p| {
        p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(&suffix) || n == format!("{id}.jsonl"))
    })
}

impl Pi {
    /// The session file, or a fork's parent forked into `forked/`.
    fn session_args(&self, home: &Path) -> Vec<String> {
        match &self.fork_from {
            Some(parent) => vec![
                "--fork".into(),
                parent.display().to_string(),
                "--session-dir".into(),
                session_dir(home).join("forked").display().to_string(),
            ],
            None => vec!["--session".into(), self.file.display().to_string()],
        }
    }
}

impl super::Cli for Pi {
    fn harness(&self) -> crate::config::HarnessKind {
        crate::config::HarnessKind::Pi
    }

    fn credentials(&self, home: &Path) -> Vec<(PathBuf, PathBuf)> {
        operator_dir("PI_CODING_AGENT_DIR", ".pi/agent")
            .map(|d| vec![(d.join("auth.json"), home.join("auth.json"))])
            .unwrap_or_default()
    }

    fn prepare(&self, home: &Path, cfg: &CliConfig, info: &AgentInfo) -> Result<CliEnv, HarnessError> {
        super::write_instructions(home, info)?;
        if let Some(url) = &cfg.base_url {
            let text = serde_json::to_string_pretty(&models_json(cfg, url)).unwrap_or_default();
            super::write_config(&home.join("models.json"), &text)?;
        }
        if cfg.local() {
            super::write_config(&home.join("settings.json"), "{\"retry\":{\"enabled\":false}}\n")?;
        }
        let mut env = CliEnv::default();
        env.set("PI_CODING_AGENT_DIR", home.display().to_string());
        env.set("PI_OFFLINE", "1");
        env.set("PI_SKIP_VERSION_CHECK", "1");
        env.set("PI_TELEMETRY", "0");
        Ok(env)
    }

    fn turn(&self, home: &Path, cfg: &CliConfig, info: &AgentInfo, prompt: &str) -> Invocation {
        let mut args: Vec<String> = ["-p", "--mode", "json"].map(String::from).to_vec();
        args.extend(model_args(home, cfg, info));
        args.extend(skill_args(&self.skills));
        args.extend(self.session_args(home));
        args.extend(cfg.args.iter().cloned());
        // pi reads a piped stdin to its end (closed after it) as the message.
        Invocation { args, stdin: Some((prompt.to_string(), false)) }
    }

    fn interactive(&self) -> Option<&dyn super::interactive::Interactive> {
        Some(self)
    }

    fn event(&self, ev: &Value, turn: &mut Turn) {
        match ev["type"].as_str().unwrap_or_default() {
            "session" => turn.session_id = ev["id"].as_str().map(String::from),
            "message_end" if ev.pointer("/message/role").and_then(Value::as_str) == Some("assistant") => {
                turn.cost_reported |= add_usage(&ev["message"]["usage"], &mut turn.usage);
            }
            "agent_end" => {
                turn.done = true;
                let messages = ev["messages"].as_array().map(Vec::as_slice).unwrap_or_default();
                let last = messages.iter().rev().find(|m| m["role"] == "assistant");
                if let Some(m) = last.filter(|m| m["stopReason"] == "error") {
                    let why = m["errorMessage"].as_str().unwrap_or("no message");
                    turn.failure = Some(format!("pi reported an error (stopReason: error): {why}"));
                }
            }
            "compaction_end" => {
                if let Some(summary) = ev.pointer("/result/summary").and_then(Value::as_str) {
                    turn.compacted = true;
                    turn.text = summary.to_string();
                }
            }
            "response" if ev["id"] == COMPACT_ID => {
                turn.done = true;
                if ev["success"] == true {
                    if let Some(summary) = ev.pointer("/data/summary").and_then(Value::as_str) {
                        turn.compacted = true;
                        turn.text = summary.to_string();
                    }
                } else {
                    let why = ev["error"].as_str().unwrap_or("no message");
                    turn.failure = Some(format!("pi could not compact: {why}"));
                }
            }
            _ => {}
        }
    }

    fn after_turn(&mut self, home: &Path, turn: &mut Turn) {
        if self.fork_from.is_none() {
            return;
        }
        let dir = session_dir(home).join("forked");
        if let Some(created) = turn.session_id.as_deref().and_then(|id| created_session(&dir, id)) {
            if std::fs::rename(&created, &self.file).is_ok() {
                if let Some(parent) = self.fork_from.take() {
                    let _ = std::fs::remove_file(parent);
                }
            }
        }
    }

    fn adopt(&mut self, home: &Path, _cwd: &Path, fork: &super::caller::CallerFork) -> Result<(), HarnessError> {
        let dir = session_dir(home);
        crate::record::private::create_dir(&dir).map_err(HarnessError::create(&dir))?;
        let to = dir.join(format!("caller-{}.jsonl", fork.id));
        crate::record::private::copy(&fork.transcript, &to).map_err(|e| {
            HarnessError::io(format!("cannot copy the caller's session {}", fork.transcript.display()), e)
        })?;
        self.fork_from = Some(to);
        Ok(())
    }

    fn probe(&self, home: &Path) -> Option<super::caller::CallerProbe> {
        let (home, file) = (home.to_path_buf(), self.file.clone());
        Some(std::sync::Arc::new(move || {
            // A fork's first turn writes its session in `forked/` until it ends.
            let session = super::caller::pi_header_id(&file).or_else(|| {
                let forked = std::fs::read_dir(session_dir(&home).join("forked")).ok()?;
                let newest = forked
                    .filter_map(Result::ok)
                    .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
                    .max()
                    .map(|(_, p)| p)?;
                super::caller::pi_header_id(&newest)
            });
            crate::run::caller::Caller {
                harness: crate::config::HarnessKind::Pi,
                session,
                home: Some(home.clone()),
                run: None,
                agent: None,
            }
        }))
    }

    fn skills(&mut self, dirs: &[PathBuf]) -> Result<(), HarnessError> {
        self.skills = dirs.to_vec();
        Ok(())
    }

    /// The session file's place in the home is fixed: the stored home brought it there.
    fn resume(&mut self, _home: &Path, id: &str) -> Result<(), HarnessError> {
        if !self.file.exists() {
            return Err(HarnessError::Stored(format!("the pi session {id} is not in the stored home")));
        }
        self.fork_from = None;
        Ok(())
    }

    fn fork(&self, home: &Path, child_home: &Path) -> Result<Box<dyn super::Cli>, HarnessError> {
        let mut child = Pi::new(child_home);
        // The home's copy holds the skills too: the fork names its own copies.
        child.skills =
            self.skills.iter().map(|d| d.strip_prefix(home).map(|r| child_home.join(r)).unwrap_or(d.clone())).collect();
        // The copied home holds this session at the child's own session path: it becomes the
        // fork's source, and the child's first turn forks it into a session of its own.
        let copied = child.file.clone();
        let source = session_dir(child_home).join("fork-source.jsonl");
        let pending = self.fork_from.as_ref().and_then(|p| p.file_name()).map(|n| session_dir(child_home).join(n));
        if copied.is_file() {
            std::fs::rename(&copied, &source).map_err(|e| HarnessError::io("cannot prepare the fork's session", e))?;
            child.fork_from = Some(source);
        } else if let Some(p) = pending.filter(|p| p.is_file()) {
            child.fork_from = Some(p);
        }
        Ok(Box::new(child))
    }

    fn compact(
        &self,
        home: &Path,
        cfg: &CliConfig,
        info: &AgentInfo,
        prompt: &str,
    ) -> Result<Invocation, HarnessError> {
        if !self.file.is_file() {
            return Err(HarnessError::Cannot("nothing to compact: the agent's pi session has no turns yet".into()));
        }
        let mut args: Vec<String> = ["--mode", "rpc"].map(String::from).to_vec();
        args.extend(model_args(home, cfg, info));
        args.extend(skill_args(&self.skills));
        args.extend(["--session".into(), self.file.display().to_string()]);
        args.extend(cfg.args.iter().cloned());
        let command = json!({ "type": "compact", "customInstructions": prompt, "id": COMPACT_ID });
        Ok(Invocation { args, stdin: Some((format!("{command}\n"), true)) })
    }
}

/// Adds a pi assistant message's `usage` (`input`, `output`, `cacheRead`, `cacheWrite`,
/// `cost.total`) to `usage`, headless or in a pane; whether pi reported a cost.
pub(super) fn add_usage(u: &Value, usage: &mut crate::accounting::Usage) -> bool {
    usage.input_tokens += num(u, "input");
    usage.output_tokens += num(u, "output");
    usage.cache_read_tokens += num(u, "cacheRead");
    usage.cache_write_tokens += num(u, "cacheWrite");
    let cost = u.pointer("/cost/total").and_then(Value::as_f64).unwrap_or(0.0);
    if cost > 0.0 {
        usage.cost_usd += cost;
    }
    cost > 0.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::cli::Cli;

    #[test]
    fn an_error_stop_fails_the_turn_and_usage_adds_up() {
        let p = Pi::new(Path::new("/h"));
        let mut t = Turn::default();
        p.event(&json!({ "type": "session", "id": "s" }), &mut t);
        let usage = json!({ "input": 100, "output": 20, "cacheRead": 5, "cacheWrite": 0, "cost": { "total": 0 } });
        p.event(&json!({ "type": "message_end", "message": { "role": "assistant", "usage": usage } }), &mut t);
        p.event(&json!({ "type": "message_end", "message": { "role": "assistant", "usage": usage } }), &mut t);
        p.event(&json!({ "type": "message_end", "message": { "role": "user" } }), &mut t);
        p.event(&json!({ "type": "agent_end", "messages": [{ "role": "assistant", "stopReason": "stop" }] }), &mut t);
        assert!(t.done && t.failure.is_none() && !t.cost_reported, "{t:?}");
        assert_eq!((t.usage.input_tokens, t.usage.output_tokens, t.usage.cache_read_tokens), (200, 40, 10));

        let mut t = Turn::default();
        p.event(
            &json!({ "type": "agent_end", "messages": [{ "role": "assistant", "stopReason": "error", "errorMessage": "Connection error." }] }),
            &mut t,
        );
        assert!(t.failure.as_deref().unwrap_or("").contains("Connection error."), "{t:?}");
    }

    #[test]
    fn the_prompt_goes_on_stdin_and_the_instructions_in_a_file_of_the_home() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = Pi::new(dir.path());
        let cfg = CliConfig::from_runtime(&Default::default(), Some("pi".into()), std::time::Duration::from_secs(1));
        let info = AgentInfo {
            key: "a".into(),
            instructions: Some("SECRET instructions".into()),
            model: "pi".into(),
            effort: None,
            labels: json!({}),
        };
        p.prepare(dir.path(), &cfg, &info).expect("prepare");
        let file = dir.path().join("awf-instructions.md");
        assert_eq!(std::fs::read_to_string(&file).expect("written"), "SECRET instructions");
        // A prompt that looks like an option is none: it is not an argument at all.
        let inv = p.turn(dir.path(), &cfg, &info, "- list SECRET");
        assert_eq!(inv.stdin, Some(("- list SECRET".to_string(), false)), "on stdin, closed after it");
        let pane = crate::harness::cli::interactive::Interactive::start(&p, dir.path(), &cfg, &info);
        for args in [&inv.args, &pane] {
            assert!(!args.join(" ").contains("SECRET"), "{args:?}");
            let file = file.display().to_string();
            assert!(args.windows(2).any(|w| w[0] == "--append-system-prompt" && w[1] == file), "{args:?}");
        }
        let session = dir.path().join("awf-session/session.jsonl").display().to_string();
        assert!(inv.args.windows(2).any(|w| w[0] == "--session" && w[1] == session), "{:?}", inv.args);
    }
}
