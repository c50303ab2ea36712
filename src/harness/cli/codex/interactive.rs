//! Codex in a pane: `codex [resume THREAD] --dangerously-bypass-approvals-and-sandbox`, every turn
//! pasted; `config.toml` (written as for a headless run, the instructions in it) also trusts the
//! working folder and its repository's top; the rollout
//! `sessions/YYYY/MM/DD/rollout-<time>-<thread>.jsonl`, which `codex resume` goes on writing, is
//! read as it grows.

use super::{agent_flags, Codex};
use crate::harness::cli::interactive::{trusted_folders, Interactive, PaneError, Seen};
use crate::harness::cli::{num, CliConfig, CliEnv};
use crate::harness::AgentInfo;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The rollout files under `sessions/`, newest last.
fn rollouts(home: &Path) -> Vec<(std::time::SystemTime, PathBuf)> {
    let mut out = Vec::new();
    let mut dirs = vec![home.join("sessions")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.filter_map(Result::ok) {
            let path = e.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("rollout-") && n.ends_with(".jsonl"))
            {
                if let Ok(at) = e.metadata().and_then(|m| m.modified()) {
                    out.push((at, path));
                }
            }
        }
    }
    out.sort();
    out
}

/// The thread id a rollout file is named after (its name ends with `-<uuid>.jsonl`).
fn thread_of(path: &Path) -> Option<String> {
    let stem = path.file_stem()?.to_str()?;
    (stem.len() > 36).then(|| stem[stem.len() - 36..].to_string())
}

impl Interactive for Codex {
    fn settle(&self, home: &Path, cwd: &Path, _cfg: &CliConfig, _env: &CliEnv) -> Result<(), PaneError> {
        let path = home.join("config.toml");
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let mut root: toml::Table = toml::from_str(&text).unwrap_or_default();
        let projects = root.entry("projects").or_insert_with(|| toml::Value::Table(Default::default()));
        if let toml::Value::Table(projects) = projects {
            for folder in trusted_folders(cwd) {
                let mut trust = toml::Table::new();
                trust.insert("trust_level".into(), toml::Value::String("trusted".into()));
                projects.insert(folder.display().to_string(), toml::Value::Table(trust));
            }
        }
        let text = toml::to_string(&root).unwrap_or_default();
        Ok(crate::harness::cli::write_config(&path, &text)?)
    }

    fn start(&self, _home: &Path, cfg: &CliConfig, _info: &AgentInfo) -> Vec<String> {
        self.session_args(agent_flags(cfg))
    }

    fn transcript(&self, home: &Path) -> Option<PathBuf> {
        let all = rollouts(home);
        match &self.thread {
            Some(t) => all.into_iter().rev().map(|(_, p)| p).find(|p| thread_of(p).as_deref() == Some(t.as_str())),
            None => all.into_iter().next_back().map(|(_, p)| p),
        }
    }

    fn line(&self, v: &Value, seen: &mut Seen) {
        let p = &v["payload"];
        match (v["type"].as_str().unwrap_or_default(), p["type"].as_str().unwrap_or_default()) {
            ("session_meta", _) => seen.session_id = p["id"].as_str().map(String::from),
            ("event_msg", "task_started") => seen.start(),
            ("event_msg", "token_count") => {
                let total = p.pointer("/info/total_token_usage/total_tokens").and_then(Value::as_u64);
                if let Some(total) = total.filter(|t| *t != seen.total_tokens) {
                    seen.total_tokens = total;
                    let last = &p["info"]["last_token_usage"];
                    let cached = num(last, "cached_input_tokens");
                    seen.usage.input_tokens += num(last, "input_tokens").saturating_sub(cached);
                    seen.usage.cache_read_tokens += cached;
                    seen.usage.cache_write_tokens += num(last, "cache_write_input_tokens");
                    seen.usage.output_tokens += num(last, "output_tokens");
                }
            }
            ("event_msg", "task_complete") => {
                let failure = p.pointer("/error/message").and_then(Value::as_str);
                seen.end(failure.map(|m| format!("Codex reported the turn failed: {m}")));
            }
            ("event_msg", "turn_aborted") => seen.end(None),
            ("event_msg", "error") => {
                let msg = p["message"].as_str().unwrap_or("no message");
                seen.failure = Some(format!("Codex reported an error: {msg}"));
            }
            _ => {}
        }
    }

    fn left(&self, home: &Path) -> Option<String> {
        rollouts(home).into_iter().next_back().and_then(|(_, p)| thread_of(&p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_rollout_gives_turns_usage_per_request_and_failures() {
        let c = Codex::new();
        let mut seen = Seen::default();
        let count = |total: u64| {
            json!({ "type": "event_msg", "payload": { "type": "token_count", "info": {
                "total_token_usage": { "total_tokens": total },
                "last_token_usage": { "input_tokens": 100, "cached_input_tokens": 30, "output_tokens": 20 } } } })
        };
        for line in [
            json!({ "type": "session_meta", "payload": { "id": "01a2-thread" } }),
            json!({ "type": "event_msg", "payload": { "type": "task_started" } }),
            count(120),
            count(120),
            count(240),
        ] {
            c.line(&line, &mut seen);
        }
        assert!(seen.busy && !seen.ended);
        assert_eq!((seen.usage.input_tokens, seen.usage.cache_read_tokens, seen.usage.output_tokens), (140, 60, 40));
        c.line(
            &json!({ "type": "event_msg", "payload": { "type": "task_complete", "last_agent_message": "done" } }),
            &mut seen,
        );
        assert!(seen.ended && seen.failure.is_none());
        assert_eq!(seen.session_id.as_deref(), Some("01a2-thread"));
        c.line(&json!({ "type": "event_msg", "payload": { "type": "task_started" } }), &mut seen);
        let failed = json!({ "type": "event_msg", "payload": { "type": "task_complete",
            "error": { "message": "Connection failed: error sending request" } } });
        c.line(&failed, &mut seen);
        assert_eq!(
            seen.failure.as_deref(),
            Some("Codex reported the turn failed: Connection failed: error sending request")
        );
        assert_eq!(
            thread_of(Path::new(
                "/h/sessions/2026/12/02/rollout-2026-12-02T06-55-49-01a23589-bde7-71b0-bb59-608e8377a68c.jsonl"
            ))
            .as_deref(),
            Some("01a23589-bde7-71b0-bb59-608e8377a68c")
        );
    }

    #[test]
    fn the_config_trusts_the_folder_and_keeps_the_rest() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("config.toml"), "model = \"m\"\n").expect("write");
        let cfg = CliConfig::from_runtime(&Default::default(), None, std::time::Duration::from_secs(1));
        Codex::new().settle(dir.path(), Path::new("/work/p"), &cfg, &CliEnv::default()).expect("settle");
        let t: toml::Table =
            toml::from_str(&std::fs::read_to_string(dir.path().join("config.toml")).expect("read")).expect("toml");
        assert_eq!(t["model"].as_str(), Some("m"));
        assert_eq!(t["projects"]["/work/p"]["trust_level"].as_str(), Some("trusted"));
    }
}
