//! Claude Code in a pane: `claude --allowedTools Bash [--append-system-prompt-file FILE]
//! [--session-id ID | --resume ID]`, every turn pasted; `.claude.json` says onboarding is done,
//! the working folder is trusted and the API key it will see is approved; the transcript
//! `projects/<cwd>/<session id>.jsonl` is read as it grows.

use super::{agent_args, session_exists, Claude};
use crate::harness::cli::interactive::{trusted_folders, Interactive, PaneError, Seen};
use crate::harness::cli::{CliConfig, CliEnv};
use crate::harness::AgentInfo;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Claude Code keeps an approved key by its last 20 characters.
const KEY_TAIL: usize = 20;

impl Interactive for Claude {
    fn settle(&self, home: &Path, cwd: &Path, _cfg: &CliConfig, env: &CliEnv) -> Result<(), PaneError> {
        let path = home.join(".claude.json");
        let mut doc: Value = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}));
        doc["hasCompletedOnboarding"] = json!(true);
        doc["lastOnboardingVersion"] = json!(crate::harness::cli::pinned_version(crate::config::HarnessKind::Claude));
        let key = env
            .set
            .iter()
            .find(|(k, _)| k == "ANTHROPIC_API_KEY")
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var("ANTHROPIC_API_KEY").ok())
            .filter(|k| !k.is_empty());
        if let Some(key) = key {
            let tail: String = key.chars().rev().take(KEY_TAIL).collect::<Vec<_>>().into_iter().rev().collect();
            let approved = &mut doc["customApiKeyResponses"]["approved"];
            if !approved.as_array().is_some_and(|a| a.iter().any(|k| *k == tail)) {
                let mut list = approved.as_array().cloned().unwrap_or_default();
                list.push(json!(tail));
                *approved = json!(list);
            }
            if !doc["customApiKeyResponses"]["rejected"].is_array() {
                doc["customApiKeyResponses"]["rejected"] = json!([]);
            }
        }
        for folder in trusted_folders(cwd) {
            let project = &mut doc["projects"][folder.display().to_string()];
            project["hasTrustDialogAccepted"] = json!(true);
            project["hasCompletedProjectOnboarding"] = json!(true);
        }
        let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        Ok(crate::harness::cli::write_config(&path, &text)?)
    }

    fn start(&self, home: &Path, cfg: &CliConfig, info: &AgentInfo) -> Vec<String> {
        let mut args = agent_args(home, cfg, info, self.skills);
        args.extend(self.session_args(home));
        args.extend(cfg.args.iter().cloned());
        args
    }

    fn transcript(&self, home: &Path) -> Option<PathBuf> {
        let dirs = std::fs::read_dir(home.join("projects")).ok()?;
        dirs.filter_map(Result::ok).map(|d| d.path().join(format!("{}.jsonl", self.id))).find(|p| p.is_file())
    }

    fn line(&self, v: &Value, seen: &mut Seen) {
        if let Some(id) = v["sessionId"].as_str() {
            seen.session_id = Some(id.to_string());
        }
        match v["type"].as_str().unwrap_or_default() {
            "user" if v["isMeta"] != true && v["isCompactSummary"] != true => user(v, seen),
            "assistant" => {
                let m = &v["message"];
                let id = m["id"].as_str().unwrap_or_default().to_string();
                let u = &m["usage"];
                if u.is_object() && (id.is_empty() || seen.counted.insert(id)) {
                    super::add_usage(u, &mut seen.usage);
                }
                if v["isApiErrorMessage"] == true {
                    let text = m.pointer("/content/0/text").and_then(Value::as_str).unwrap_or("no message");
                    seen.failure = Some(format!("Claude Code reported an error: {text}"));
                }
            }
            "system" if v["subtype"] == "turn_duration" => seen.end(None),
            _ => {}
        }
    }

    fn left(&self, home: &Path) -> Option<String> {
        let dirs = std::fs::read_dir(home.join("projects")).ok()?;
        let files = dirs.filter_map(Result::ok).filter_map(|d| std::fs::read_dir(d.path()).ok()).flatten();
        let newest = files
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .filter_map(|p| Some((p.metadata().ok()?.modified().ok()?, p)))
            .max()?;
        let id = newest.1.file_stem()?.to_string_lossy().into_owned();
        session_exists(home, &id).then_some(id)
    }
}

/// A `user` line: a prompt starts a turn; an interruption ends one; a tool's result is neither.
fn user(v: &Value, seen: &mut Seen) {
    let content = &v["message"]["content"];
    let texts: Vec<&str> = match content {
        Value::String(s) => vec![s.as_str()],
        Value::Array(blocks) if blocks.iter().any(|b| b["type"] == "tool_result") => return,
        Value::Array(blocks) => {
            blocks.iter().filter(|b| b["type"] == "text").filter_map(|b| b["text"].as_str()).collect()
        }
        _ => return,
    };
    if texts.iter().any(|t| t.starts_with("[Request interrupted by user")) {
        seen.end(None);
    } else if texts.iter().any(|t| !t.starts_with("<command-") && !t.starts_with("<local-command")) {
        seen.start();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transcript_gives_turns_usage_once_per_message_and_errors() {
        let c = Claude::new();
        let mut seen = Seen::default();
        let usage = json!({ "input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 5 });
        for line in [
            json!({ "type": "user", "sessionId": "s1", "message": { "role": "user", "content": "Give a verdict." } }),
            json!({ "type": "assistant", "message": { "id": "m1", "usage": usage, "content": [{ "type": "text", "text": "a" }] } }),
            json!({ "type": "assistant", "message": { "id": "m1", "usage": usage, "content": [{ "type": "tool_use" }] } }),
            json!({ "type": "user", "message": { "content": [{ "type": "tool_result", "content": "accepted" }] } }),
        ] {
            c.line(&line, &mut seen);
        }
        assert!(seen.busy && seen.started && !seen.ended, "{seen:?}");
        assert_eq!((seen.usage.input_tokens, seen.usage.output_tokens, seen.usage.cache_read_tokens), (100, 20, 5));
        c.line(&json!({ "type": "system", "subtype": "turn_duration", "durationMs": 10 }), &mut seen);
        assert!(seen.ended && !seen.busy && seen.failure.is_none());
        assert_eq!(seen.session_id.as_deref(), Some("s1"));

        let mut seen = Seen::default();
        c.line(&json!({ "type": "user", "message": { "content": [{ "type": "text", "text": "go" }] } }), &mut seen);
        let error = json!({ "type": "assistant", "isApiErrorMessage": true,
            "message": { "id": "e", "content": [{ "type": "text", "text": "API Error: Unable to connect to API (ConnectionRefused)" }] } });
        c.line(&error, &mut seen);
        c.line(&json!({ "type": "system", "subtype": "turn_duration" }), &mut seen);
        assert_eq!(
            seen.failure.as_deref(),
            Some("Claude Code reported an error: API Error: Unable to connect to API (ConnectionRefused)")
        );

        let mut seen = Seen::default();
        c.line(&json!({ "type": "user", "message": { "content": "go" } }), &mut seen);
        let stopped = json!({ "type": "user", "message": { "content": [{ "type": "text", "text": "[Request interrupted by user for tool use]" }] } });
        c.line(&stopped, &mut seen);
        assert!(seen.ended && !seen.busy, "an interruption ends the turn");
    }

    #[test]
    fn the_home_says_onboarding_is_done_and_trusts_the_folder_and_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(".claude.json"), r#"{"numStartups": 3}"#).expect("write");
        let key = "sk-ant-0123456789abcdefghijKLMNOPQRSTUV";
        let mut env = CliEnv::default();
        env.set("ANTHROPIC_API_KEY", key);
        let cfg = CliConfig::from_runtime(&Default::default(), None, std::time::Duration::from_secs(1));
        Claude::new().settle(dir.path(), Path::new("/work/project"), &cfg, &env).expect("settle");
        let doc: Value =
            serde_json::from_slice(&std::fs::read(dir.path().join(".claude.json")).expect("read")).expect("json");
        assert_eq!(doc["numStartups"], 3, "what Claude Code keeps there stays");
        assert_eq!(doc["hasCompletedOnboarding"], true);
        assert_eq!(doc["customApiKeyResponses"]["approved"], json!([&key[key.len() - 20..]]));
        assert_eq!(doc["projects"]["/work/project"]["hasTrustDialogAccepted"], true);
    }
}
