//! pi in a pane: `pi [--provider awf --model M] [--append-system-prompt FILE] --session <file>`,
//! every turn pasted, its home as for a headless run (pi shows no first-run screen); the session
//! file is read as it grows.

use super::{add_usage, model_args, skill_args, Pi};
use crate::harness::cli::interactive::{Interactive, PaneError, Seen};
use crate::harness::cli::{CliConfig, CliEnv};
use crate::harness::AgentInfo;
use serde_json::Value;
use std::path::{Path, PathBuf};

impl Interactive for Pi {
    fn settle(&self, _home: &Path, _cwd: &Path, _cfg: &CliConfig, _env: &CliEnv) -> Result<(), PaneError> {
        Ok(())
    }

    fn start(&self, home: &Path, cfg: &CliConfig, info: &AgentInfo) -> Vec<String> {
        let mut args = model_args(home, cfg, info);
        args.extend(skill_args(&self.skills));
        args.extend(self.session_args(home));
        args.extend(cfg.args.iter().cloned());
        args
    }

    fn transcript(&self, _home: &Path) -> Option<PathBuf> {
        self.file.is_file().then(|| self.file.clone())
    }

    fn line(&self, v: &Value, seen: &mut Seen) {
        match v["type"].as_str().unwrap_or_default() {
            "session" => seen.session_id = v["id"].as_str().map(String::from),
            "message" => {
                let m = &v["message"];
                match m["role"].as_str().unwrap_or_default() {
                    "user" => seen.start(),
                    "assistant" => {
                        seen.cost_reported |= add_usage(&m["usage"], &mut seen.usage);
                        match m["stopReason"].as_str().unwrap_or_default() {
                            "toolUse" => {}
                            "error" => {
                                let why = m["errorMessage"].as_str().unwrap_or("no message");
                                seen.end(Some(format!("pi reported an error (stopReason: error): {why}")));
                            }
                            _ => seen.end(None),
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }

    fn left(&self, _home: &Path) -> Option<String> {
        crate::harness::cli::caller::pi_header_id(&self.file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_session_file_gives_turns_usage_and_errors() {
        let p = Pi::new(Path::new("/h"));
        let mut seen = Seen::default();
        let usage = json!({ "input": 100, "output": 20, "cacheRead": 0, "cacheWrite": 0, "cost": { "total": 0 } });
        for line in [
            json!({ "type": "session", "id": "s1" }),
            json!({ "type": "message", "message": { "role": "user", "content": [] } }),
            json!({ "type": "message", "message": { "role": "assistant", "stopReason": "toolUse", "usage": usage } }),
            json!({ "type": "message", "message": { "role": "toolResult" } }),
        ] {
            p.line(&line, &mut seen);
        }
        assert!(seen.busy && !seen.ended);
        p.line(
            &json!({ "type": "message", "message": { "role": "assistant", "stopReason": "stop", "usage": usage } }),
            &mut seen,
        );
        assert!(seen.ended && !seen.busy && !seen.cost_reported);
        assert_eq!((seen.usage.input_tokens, seen.usage.output_tokens), (200, 40));
        p.line(&json!({ "type": "message", "message": { "role": "user" } }), &mut seen);
        let error = json!({ "type": "message", "message": { "role": "assistant", "stopReason": "error", "errorMessage": "Connection error." } });
        p.line(&error, &mut seen);
        assert_eq!(seen.failure.as_deref(), Some("pi reported an error (stopReason: error): Connection error."));
        assert_eq!(seen.session_id.as_deref(), Some("s1"));
    }
}
