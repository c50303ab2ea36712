//! Claude Code: `claude -p --output-format stream-json --verbose --allowedTools Bash`, the prompt on
//! stdin and the instructions in the file `--append-system-prompt-file` names, the session id
//! preset with `--session-id` on the first turn and `--resume` after; `CLAUDE_CONFIG_DIR` is the
//! agent's home. Cost comes from the `result` event (`total_cost_usd`); a turn fails on `is_error`
//! or on permission denials (the command did not run).

mod interactive;

use super::{instructions_file, num, operator_dir, CliConfig, CliEnv, Invocation, Turn};
use crate::harness::AgentInfo;
use crate::harness::HarnessError;
use serde_json::Value;
use std::path::{Path, PathBuf};

pub struct Claude {
    /// This agent's session id, preset.
    id: String,
    /// A fork's parent session, copied into this home, until the first turn forks it.
    fork_from: Option<String>,
    /// Whether the agent was given skills: the `Skill` tool is allowed beside `Bash`.
    skills: bool,
}

impl Default for Claude {
    fn default() -> Self {
        Self::new()
    }
}

impl Claude {
    pub fn new() -> Claude {
        Claude { id: uuid::Uuid::new_v4().to_string(), fork_from: None, skills: false }
    }
}

/// Whether a session's transcript exists in the home (`projects/<cwd>/<id>.jsonl`).
fn session_exists(home: &Path, id: &str) -> bool {
    let Ok(dirs) = std::fs::read_dir(home.join("projects")) else { return false };
    dirs.filter_map(Result::ok).any(|d| d.path().join(format!("{id}.jsonl")).is_file())
}

fn common_args(home: &Path, cfg: &CliConfig, info: &AgentInfo, skills: bool) -> Vec<String> {
    let mut args: Vec<String> = ["-p", "--output-format", "stream-json", "--verbose"].map(String::from).to_vec();
    args.extend(agent_args(home, cfg, info, skills));
    args
}

/// The tools, model, effort and the instructions' file, headless or in a pane.
fn agent_args(home: &Path, cfg: &CliConfig, info: &AgentInfo, skills: bool) -> Vec<String> {
    let tools = if skills { "Bash,Skill" } else { "Bash" };
    let mut args: Vec<String> = ["--allowedTools", tools].map(String::from).to_vec();
    if let Some(m) = &cfg.model {
        args.extend(["--model".into(), m.clone()]);
    }
    if let Some(e) = &cfg.effort {
        args.extend(["--effort".into(), e.clone()]);
    }
    if let Some(file) = instructions_file(home, info) {
        args.extend(["--append-system-prompt-file".into(), file.display().to_string()]);
    }
    args
}

/// The runtime's flags last, the prompt on stdin: with `-p` and no prompt argument, Claude Code
/// reads its prompt to stdin's end (closed after it: an open stdin would hold it ~3 s).
fn with_prompt(mut args: Vec<String>, cfg: &CliConfig, prompt: &str) -> Invocation {
    args.extend(cfg.args.iter().cloned());
    Invocation { args, stdin: Some((prompt.to_string(), false)) }
}

impl Claude {
    /// The session flags: its id preset, resumed once it has turns, or a fork's parent forked.
    fn session_args(&self, home: &Path) -> Vec<String> {
        match &self.fork_from {
            Some(parent) if session_exists(home, parent) && !session_exists(home, &self.id) => {
                vec!["--resume".into(), parent.clone(), "--fork-session".into(), "--session-id".into(), self.id.clone()]
            }
            _ if session_exists(home, &self.id) => vec!["--resume".into(), self.id.clone()],
            _ => vec!["--session-id".into(), self.id.clone()],
        }
    }
}

impl super::Cli for Claude {
    fn harness(&self) -> crate::config::HarnessKind {
        crate::config::HarnessKind::Claude
    }

    fn credentials(&self, home: &Path) -> Vec<(PathBuf, PathBuf)> {
        operator_dir("CLAUDE_CONFIG_DIR", ".claude")
            .map(|d| vec![(d.join(".credentials.json"), home.join(".credentials.json"))])
            .unwrap_or_default()
    }

    fn prepare(&self, home: &Path, cfg: &CliConfig, info: &AgentInfo) -> Result<CliEnv, HarnessError> {
        super::write_instructions(home, info)?;
        let mut env = CliEnv::default();
        env.set("CLAUDE_CONFIG_DIR", home.display().to_string());
        for var in [
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
            "DISABLE_TELEMETRY",
            "DISABLE_AUTOUPDATER",
            "DISABLE_ERROR_REPORTING",
            "DISABLE_BUG_COMMAND",
            // In a pane, the session survey ("How is Claude doing?") would take the digits of a
            // pasted turn as its answer.
            "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY",
        ] {
            env.set(var, "1");
        }
        // A Claude Code that runs awf must not make its agents think they are nested in it.
        env.remove.extend(["CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT"]);
        if let Some(url) = &cfg.base_url {
            env.set("ANTHROPIC_BASE_URL", url);
        }
        if let Some(key) = cfg.api_key() {
            env.set("ANTHROPIC_API_KEY", key);
        } else if cfg.local() && !cfg.has_env("ANTHROPIC_API_KEY") && !cfg.has_env("ANTHROPIC_AUTH_TOKEN") {
            env.set("ANTHROPIC_API_KEY", "dummy");
        }
        if cfg.local() {
            env.set("CLAUDE_CODE_MAX_RETRIES", "1");
        }
        Ok(env)
    }

    fn turn(&self, home: &Path, cfg: &CliConfig, info: &AgentInfo, prompt: &str) -> Invocation {
        let mut args = common_args(home, cfg, info, self.skills);
        args.extend(self.session_args(home));
        with_prompt(args, cfg, prompt)
    }

    fn interactive(&self) -> Option<&dyn super::interactive::Interactive> {
        Some(self)
    }

    fn event(&self, ev: &Value, turn: &mut Turn) {
        let ty = ev["type"].as_str().unwrap_or_default();
        let subtype = ev["subtype"].as_str().unwrap_or_default();
        match (ty, subtype) {
            ("system", "init") => turn.session_id = ev["session_id"].as_str().map(String::from),
            ("system", "compact_boundary") => turn.compacted = true,
            // The summary comes back as the user message that continues the session.
            ("user", _) if turn.compacted && turn.text.is_empty() => {
                if let Some(text) = ev.pointer("/message/content").and_then(Value::as_str) {
                    turn.text = summary_of(text);
                }
            }
            ("result", _) => {
                turn.done = true;
                add_usage(&ev["usage"], &mut turn.usage);
                if let Some(cost) = ev["total_cost_usd"].as_f64() {
                    turn.usage.cost_usd += cost;
                    turn.cost_reported = true;
                }
                let denials = ev["permission_denials"].as_array().filter(|d| !d.is_empty());
                if ev["is_error"].as_bool() == Some(true) {
                    let text = ev["result"].as_str().filter(|t| !t.is_empty()).unwrap_or(subtype);
                    // Claude's own subtype is often `success` even here: it is shown only when it adds something.
                    let detail = if subtype.is_empty() || subtype == "success" || subtype == text {
                        String::new()
                    } else {
                        format!(" (result subtype `{subtype}`)")
                    };
                    turn.failure = Some(format!("Claude Code reported an error: {text}{detail}"));
                } else if let Some(d) = denials {
                    let tools: Vec<&str> = d.iter().filter_map(|x| x["tool_name"].as_str()).collect();
                    turn.failure = Some(format!(
                        "Claude Code denied permission for {} (the call did not run; runtime `args` can allow more tools, e.g. [\"--allowedTools\", \"Edit\"])",
                        if tools.is_empty() { "a tool".to_string() } else { tools.join(", ") }
                    ));
                }
            }
            _ => {}
        }
    }

    fn after_turn(&mut self, home: &Path, _turn: &mut Turn) {
        if self.fork_from.is_some() && session_exists(home, &self.id) {
            self.fork_from = None;
        }
    }

    fn resume(&mut self, home: &Path, id: &str) -> Result<(), HarnessError> {
        if !session_exists(home, id) {
            return Err(HarnessError::Stored(format!("the Claude Code session {id} is not in the stored home")));
        }
        self.id = id.to_string();
        self.fork_from = None;
        Ok(())
    }

    fn fork(&self, home: &Path, _child_home: &Path) -> Result<Box<dyn super::Cli>, HarnessError> {
        let fork_from = if session_exists(home, &self.id) { Some(self.id.clone()) } else { self.fork_from.clone() };
        Ok(Box::new(Claude { id: uuid::Uuid::new_v4().to_string(), fork_from, skills: self.skills }))
    }

    fn adopt(&mut self, home: &Path, cwd: &Path, fork: &super::caller::CallerFork) -> Result<(), HarnessError> {
        // `--resume` finds a session in the project folder of the working folder it runs in.
        let dir = home.join("projects").join(super::caller::claude_project(cwd));
        crate::record::private::create_dir(&dir).map_err(HarnessError::create(&dir))?;
        let to = dir.join(format!("{}.jsonl", fork.id));
        crate::record::private::copy(&fork.transcript, &to).map_err(|e| {
            HarnessError::io(format!("cannot copy the caller's session {}", fork.transcript.display()), e)
        })?;
        self.fork_from = Some(fork.id.clone());
        Ok(())
    }

    fn probe(&self, home: &Path) -> Option<super::caller::CallerProbe> {
        let (home, id) = (home.to_path_buf(), self.id.clone());
        Some(std::sync::Arc::new(move || crate::run::caller::Caller {
            harness: crate::config::HarnessKind::Claude,
            // Preset: the session's id even before its transcript is written.
            session: Some(id.clone()),
            home: Some(home.clone()),
            run: None,
            agent: None,
        }))
    }

    fn skills(&mut self, _dirs: &[PathBuf]) -> Result<(), HarnessError> {
        // Claude Code finds them in `$CLAUDE_CONFIG_DIR/skills`, where they were copied.
        self.skills = true;
        Ok(())
    }

    fn compact(
        &self,
        home: &Path,
        cfg: &CliConfig,
        info: &AgentInfo,
        prompt: &str,
    ) -> Result<Invocation, HarnessError> {
        if !session_exists(home, &self.id) {
            return Err(HarnessError::Cannot(
                "nothing to compact: the agent's Claude Code session has no turns yet".into(),
            ));
        }
        let mut args = common_args(home, cfg, info, self.skills);
        args.extend(["--resume".into(), self.id.clone()]);
        let command = format!("/compact {}", prompt.replace('\n', " "));
        Ok(with_prompt(args, cfg, command.trim()))
    }
}

/// The summary inside Claude Code's "This session is being continued..." message.
fn summary_of(text: &str) -> String {
    let start = "covers the earlier portion of the conversation.";
    let body = match text.find(start) {
        Some(i) => &text[i + start.len()..],
        None => text,
    };
    let body = match body.find("\n\nIf you need specific details") {
        Some(i) => &body[..i],
        None => body,
    };
    body.trim().to_string()
}

/// Adds an Anthropic `usage` object (`input_tokens`, `output_tokens`, `cache_read_input_tokens`,
/// `cache_creation_input_tokens`) to `usage`: a headless turn's result, a pane's session line.
pub(super) fn add_usage(u: &Value, usage: &mut crate::accounting::Usage) {
    usage.input_tokens += num(u, "input_tokens");
    usage.output_tokens += num(u, "output_tokens");
    usage.cache_read_tokens += num(u, "cache_read_input_tokens");
    usage.cache_write_tokens += num(u, "cache_creation_input_tokens");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::cli::Cli;
    use serde_json::json;

    #[test]
    fn a_result_gives_cost_and_failures() {
        let c = Claude::new();
        let mut t = Turn::default();
        c.event(&json!({ "type": "system", "subtype": "init", "session_id": "s1" }), &mut t);
        c.event(
            &json!({ "type": "result", "subtype": "success", "is_error": false, "total_cost_usd": 0.25,
                     "usage": { "input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 3 },
                     "permission_denials": [] }),
            &mut t,
        );
        assert!(t.done && t.cost_reported && t.failure.is_none());
        assert_eq!((t.usage.input_tokens, t.usage.output_tokens, t.usage.cache_read_tokens), (10, 5, 3));
        assert_eq!(t.session_id.as_deref(), Some("s1"));

        let mut t = Turn::default();
        c.event(
            &json!({ "type": "result", "subtype": "success", "is_error": false,
                         "permission_denials": [{ "tool_name": "Bash" }] }),
            &mut t,
        );
        assert!(t.failure.as_deref().unwrap_or("").contains("denied permission for Bash"), "{t:?}");

        let mut t = Turn::default();
        c.event(
            &json!({ "type": "result", "subtype": "success", "is_error": true,
                         "result": "API Error: Unable to connect to API" }),
            &mut t,
        );
        // Claude's subtype `success` on an error reads as a contradiction: it is left out.
        assert_eq!(t.failure.as_deref(), Some("Claude Code reported an error: API Error: Unable to connect to API"));

        let mut t = Turn::default();
        c.event(&json!({ "type": "result", "subtype": "error_max_turns", "is_error": true, "result": "" }), &mut t);
        assert_eq!(t.failure.as_deref(), Some("Claude Code reported an error: error_max_turns"));
    }

    #[test]
    fn no_model_flag_unless_the_runtime_names_one() {
        let info = AgentInfo {
            key: "a".into(),
            instructions: None,
            model: "default".into(),
            effort: None,
            labels: serde_json::Value::Null,
        };
        let mut cfg =
            CliConfig::from_runtime(&Default::default(), Some("claude".into()), std::time::Duration::from_secs(1));
        let home = Path::new("/h");
        assert!(
            !common_args(home, &cfg, &info, false).contains(&"--model".to_string()),
            "Claude Code picks its own default"
        );
        cfg.model = Some("claude-opus-4-1".into());
        let args = common_args(home, &cfg, &info, false);
        let at = args.iter().position(|a| a == "--model").expect("--model when named");
        assert_eq!(args[at + 1], "claude-opus-4-1");
    }

    #[test]
    fn the_prompt_goes_on_stdin_and_the_instructions_in_a_file_of_the_home() {
        let dir = tempfile::tempdir().expect("tempdir");
        let info = AgentInfo {
            key: "a".into(),
            instructions: Some("Judge SECRET-INSTRUCTIONS.".into()),
            model: "m".into(),
            effort: None,
            labels: serde_json::Value::Null,
        };
        let cfg =
            CliConfig::from_runtime(&Default::default(), Some("claude".into()), std::time::Duration::from_secs(1));
        let c = Claude::new();
        c.prepare(dir.path(), &cfg, &info).expect("prepare");
        let file = dir.path().join("awf-instructions.md");
        assert_eq!(std::fs::read_to_string(&file).expect("written"), "Judge SECRET-INSTRUCTIONS.");
        let headless = c.turn(dir.path(), &cfg, &info, "-- SECRET-PROMPT");
        let pane = crate::harness::cli::interactive::Interactive::start(&c, dir.path(), &cfg, &info);
        for args in [&headless.args, &pane] {
            let line = args.join(" ");
            assert!(!line.contains("SECRET"), "{line}");
            let at = args.iter().position(|a| a == "--append-system-prompt-file").expect("the file is named");
            assert_eq!(args[at + 1], file.display().to_string());
        }
        assert_eq!(headless.stdin, Some(("-- SECRET-PROMPT".to_string(), false)), "on stdin, closed after it");
        // Without instructions, no flag, and no file a fork's copied home left.
        let none = AgentInfo { instructions: None, ..info };
        c.prepare(dir.path(), &cfg, &none).expect("prepare");
        assert!(!file.exists());
        assert!(!c.turn(dir.path(), &cfg, &none, "go").args.iter().any(|a| a.contains("system-prompt")));
    }

    #[test]
    fn the_compaction_summary_is_cut_out() {
        let text = "This session is being continued from a previous conversation that ran out of context. The summary below covers the earlier portion of the conversation.\n\nThe verdict was ok.\n\nIf you need specific details from before compaction, read it.";
        assert_eq!(summary_of(text), "The verdict was ok.");
        assert_eq!(summary_of("plain"), "plain");
    }
}
