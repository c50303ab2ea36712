//! The calling session of a run: the agent CLI session the run was started from (`--caller
//! HARNESS:SESSION`, or the agent that convened a council with `wf council`). Recorded in
//! `run.json` as `caller`; `ctx.agents.caller()` shows it and `ctx.agents.fork_caller(spec)` forks it.

use super::lock;
use crate::config::HarnessKind;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::path::PathBuf;

/// A run's calling session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Caller {
    pub harness: HarnessKind,
    /// The CLI's own session id; `None` when the caller had none yet.
    pub session: Option<String>,
    /// The CLI's config folder holding its sessions (`CLAUDE_CONFIG_DIR`, `PI_CODING_AGENT_DIR`);
    /// `None`: the operator's (the variable, else `~/.claude` or `~/.pi/agent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home: Option<PathBuf>,
    /// For a council convened from a turn: the parent run and the calling agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

/// Why a `--caller` value names no calling session.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadCaller {
    #[error("`{0}` is not HARNESS:SESSION (e.g. claude:<session id>)")]
    NotHarnessSession(String),
    #[error("`{0}` is not an agent CLI harness: a caller's session is a claude, codex or pi session")]
    NotCli(String),
    #[error("`{text}` names no session: give the {harness} session id after the colon")]
    NoSession { text: String, harness: HarnessKind },
    #[error("`{0}` is not a session id")]
    BadSession(String),
}

impl Caller {
    /// `HARNESS:SESSION` (`claude:<session id>`, `pi:<session id>`), as `--caller` takes it.
    pub fn parse(text: &str) -> Result<Caller, BadCaller> {
        let (harness, session) = text.split_once(':').ok_or_else(|| BadCaller::NotHarnessSession(text.into()))?;
        let harness = match harness.trim() {
            "claude" => HarnessKind::Claude,
            "codex" => HarnessKind::Codex,
            "pi" => HarnessKind::Pi,
            other => return Err(BadCaller::NotCli(other.into())),
        };
        let session = session.trim();
        if session.is_empty() {
            return Err(BadCaller::NoSession { text: text.into(), harness });
        }
        if session.contains('/') || session.starts_with('.') {
            return Err(BadCaller::BadSession(session.into()));
        }
        Ok(Caller { harness, session: Some(session.to_string()), home: None, run: None, agent: None })
    }
}

/// The run's calling session, kept in `run.json`.
impl super::Run {
    /// Records the run's calling session in `run.json`.
    pub fn set_caller(&self, caller: Caller) -> std::io::Result<()> {
        let mut doc = lock(&self.run_doc);
        doc["caller"] = json!(caller);
        *lock(&self.caller) = Some(caller);
        self.records.write_document("run.json", &*doc)
    }

    /// The run's calling session, if it has one.
    pub fn caller(&self) -> Option<Caller> {
        lock(&self.caller).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_names_a_cli_and_a_session() {
        let c = Caller::parse("claude:abc-123").expect("parse");
        assert_eq!((c.harness, c.session.as_deref()), (HarnessKind::Claude, Some("abc-123")));
        assert_eq!(Caller::parse("claude"), Err(BadCaller::NotHarnessSession("claude".into())));
        let e = Caller::parse("claude: ").expect_err("empty");
        assert_eq!(e.to_string(), "`claude: ` names no session: give the claude session id after the colon");
        assert_eq!(Caller::parse("openai:x"), Err(BadCaller::NotCli("openai".into())));
        assert_eq!(Caller::parse("pi:../x"), Err(BadCaller::BadSession("../x".into())));
    }
}
