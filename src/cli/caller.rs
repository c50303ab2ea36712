//! `--caller HARNESS:SESSION` and `--caller-home DIR`: the session a run is started from (an
//! operator's own Claude Code or pi session), checked before the run starts and recorded in
//! `run.json`; `ctx.agents.fork_caller(spec)` forks it.

use crate::config::HarnessKind;
use crate::run::caller::Caller;
use anyhow::{anyhow, bail, Result};
use std::path::PathBuf;

/// The calling session's flags.
#[derive(clap::Args, Clone, Default)]
pub struct CallerFlags {
    /// The session this run is started from, HARNESS:SESSION (e.g. claude:<session id>):
    /// ctx.agents.caller() shows it, ctx.agents.fork_caller(spec) forks it
    #[arg(long, value_name = "HARNESS:SESSION")]
    pub caller: Option<String>,
    /// The CLI's config folder holding the caller's session (default: $CLAUDE_CONFIG_DIR or
    /// ~/.claude for claude, $PI_CODING_AGENT_DIR or ~/.pi/agent for pi)
    #[arg(long, value_name = "DIR", requires = "caller")]
    pub caller_home: Option<PathBuf>,
}

impl CallerFlags {
    /// The caller the flags name, checked: a claude or pi session must be found in its home.
    pub fn caller(&self) -> Result<Option<Caller>> {
        let Some(text) = &self.caller else { return Ok(None) };
        let mut caller = Caller::parse(text).map_err(|e| anyhow!("--caller: {e}"))?;
        if let Some(home) = &self.caller_home {
            let home = std::path::absolute(home).unwrap_or_else(|_| home.clone());
            if !home.is_dir() {
                bail!("--caller-home {}: not a folder", home.display());
            }
            caller.home = Some(home);
        }
        if matches!(caller.harness, HarnessKind::Claude | HarnessKind::Pi) {
            crate::harness::cli::caller::locate(&caller).map_err(|e| anyhow!("--caller {text}: {e}"))?;
        }
        Ok(Some(caller))
    }
}
