//! The CLI harnesses: `claude` (Claude Code), `codex` (Codex CLI) and `pi` (pi coding agent).
//! Each turn runs the CLI headless, in the agent's `cwd`, in a process group of its own (killed
//! when the turn ends, is cancelled, times out or stalls), with the prompt (`TurnInput::shown`,
//! which ends with the launcher instructions) on its stdin, closed after it. The agent answers by
//! running the launcher with the CLI's own shell tool.
//!
//! Each agent gets a home of its own, `agents/<slug>/home` (the CLI's `CLAUDE_CONFIG_DIR`,
//! `CODEX_HOME` or `PI_CODING_AGENT_DIR`), seeded with copies of the operator's credential files
//! and written back when a turn refreshed them. The agent's instructions are a file there (0600:
//! `awf-instructions.md`, named by a flag; Codex's `config.toml`): every local user reads a
//! process's command line, so neither instructions nor prompts ever go on one. The CLI's JSONL
//! events are read line by line: each line renews the stall clock; usage, cost, session ids and
//! failures are judged from them, not from exit codes (HARNESSES.md: they lie). `claude.rs`, `codex.rs` and `pi.rs` hold what differs.
//! `session.rs` (the session and its turns), `run.rs` (one process run of the CLI and its verdict),
//! `home.rs` (the agent's home and credential seeding), `events.rs` (what a turn's events said) and
//! `doctor.rs` (`awf doctor`'s checks); `interactive/` runs a CLI agent in a tmux pane instead
//! (`placement: "pane"`).

pub mod caller;
mod carry;
pub mod claude;
pub mod codex;
mod doctor;
mod events;
mod home;
pub mod interactive;
pub mod pi;
mod run;
mod session;
pub mod skills;

pub use doctor::doctor_checks;
pub use events::{num, Turn};
pub use home::{copy_tree, operator_dir, write_config, Credential};
pub use session::CliSession;

use super::{AgentInfo, HarnessError};
use crate::config::{HarnessKind, RuntimeConfig};
use crate::control::server::Endpoint;
use crate::sandbox::Sandbox;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The CLI harnesses, the npm package of each, and the version it was verified with (HARNESSES.md).
pub const PINNED: [(HarnessKind, &str, &str); 3] = [
    (HarnessKind::Claude, "@anthropic-ai/claude-code", "2.1.197"),
    (HarnessKind::Codex, "@openai/codex", "0.171.0"),
    (HarnessKind::Pi, "@mariozechner/pi-coding-agent", "0.73.1"),
];

/// The agent's instructions in its home, for the CLIs that take them from a file named by a flag
/// (Claude Code's `--append-system-prompt-file`, pi's `--append-system-prompt`).
const INSTRUCTIONS: &str = "awf-instructions.md";

/// The file holding the agent's instructions, when it has some (`write_instructions` wrote it).
pub fn instructions_file(home: &Path, info: &AgentInfo) -> Option<PathBuf> {
    info.instructions.as_ref().map(|_| home.join(INSTRUCTIONS))
}

/// Writes the agent's instructions into its home (0600), or removes a file a parent's home or
/// an earlier setting left there when it has none.
pub fn write_instructions(home: &Path, info: &AgentInfo) -> Result<(), HarnessError> {
    let path = home.join(INSTRUCTIONS);
    match &info.instructions {
        Some(text) => write_config(&path, text),
        None => match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(HarnessError::io(format!("cannot remove {}", path.display()), e))
            }
            _ => Ok(()),
        },
    }
}

/// Opens the control folder and socket for a new agent key: `(agents/<slug>, endpoint)`, and,
/// when the parent is sandboxed (`(its sandbox, harness)`), seats the fork in the same sandbox. A
/// fork needs one of its own.
pub type EndpointOpener = Arc<
    dyn Fn(&str, Option<(&Sandbox, HarnessKind)>) -> Result<(PathBuf, Arc<Endpoint>, Option<Sandbox>), HarnessError>
        + Send
        + Sync,
>;

/// A CLI session's settings, from the runtime.
#[derive(Debug, Clone)]
pub struct CliConfig {
    /// The executable (`[harnesses.NAME] command`, else the harness's own name).
    pub program: String,
    pub model: Option<String>,
    pub effort: Option<String>,
    pub base_url: Option<String>,
    pub api_key_env: Option<String>,
    /// Extra environment, applied last.
    pub env: BTreeMap<String, String>,
    /// Extra command-line flags.
    pub args: Vec<String>,
    pub stall: Duration,
}

impl CliConfig {
    pub fn from_runtime(runtime: &RuntimeConfig, program: Option<String>, stall: Duration) -> CliConfig {
        CliConfig {
            program: program.unwrap_or_else(|| runtime.harness.to_string()),
            model: runtime.model.clone(),
            effort: runtime.effort.clone(),
            base_url: runtime.base_url.clone(),
            api_key_env: runtime.api_key_env.clone(),
            env: runtime.env.clone().unwrap_or_default(),
            args: runtime.args.clone().unwrap_or_default(),
            stall,
        }
    }

    /// Whether the model server is on this machine (a local server or a test's fake): retries
    /// are then off, so that a server that is down fails the turn fast.
    pub fn local(&self) -> bool {
        self.base_url
            .as_deref()
            .is_some_and(|u| ["://127.0.0.1", "://localhost", "://[::1]"].iter().any(|h| u.contains(h)))
    }

    /// The API key named by `api_key_env`, from the environment (never recorded).
    pub fn api_key(&self) -> Option<String> {
        let var = self.api_key_env.as_deref()?;
        std::env::var(var).ok().filter(|v| !v.is_empty())
    }

    /// Whether a variable is set, in the runtime's `env` or the process environment.
    pub fn has_env(&self, var: &str) -> bool {
        self.env.get(var).is_some_and(|v| !v.is_empty()) || std::env::var(var).is_ok_and(|v| !v.is_empty())
    }
}

/// The environment a CLI runs with: variables to set and to remove.
#[derive(Debug, Default)]
pub struct CliEnv {
    pub set: Vec<(String, String)>,
    pub remove: Vec<&'static str>,
}

impl CliEnv {
    pub fn set(&mut self, k: &str, v: impl Into<String>) {
        self.set.push((k.to_string(), v.into()));
    }
}

/// One invocation of a CLI: its arguments and, when needed, what goes to its stdin.
#[derive(Debug, Default)]
pub struct Invocation {
    pub args: Vec<String>,
    /// Written to stdin; `keep_open` holds stdin open until the process ends (pi's RPC mode),
    /// else it is closed after the text. `None`: stdin is `/dev/null`.
    pub stdin: Option<(String, bool)>,
}

/// What differs between the CLIs.
pub trait Cli: Send + Sync {
    fn harness(&self) -> HarnessKind;
    /// The operator's credential files and where their copies live in the home.
    fn credentials(&self, home: &Path) -> Vec<(PathBuf, PathBuf)>;
    /// Writes the CLI's configuration into its home; returns its environment.
    fn prepare(&self, home: &Path, cfg: &CliConfig, info: &AgentInfo) -> Result<CliEnv, HarnessError>;
    /// The invocation for one turn.
    fn turn(&self, home: &Path, cfg: &CliConfig, info: &AgentInfo, prompt: &str) -> Invocation;
    /// Folds one event into the turn.
    fn event(&self, ev: &Value, turn: &mut Turn);
    /// After a turn: keeps the session id, adjusts the usage.
    fn after_turn(&mut self, home: &Path, turn: &mut Turn);
    /// Whether a fork's home copies this file or folder of the parent's home.
    fn fork_copies(&self, _name: &str) -> bool {
        true
    }
    /// Resumes the session `id`, whose files another machine's home held and `home` now holds
    /// (an agent taken over), or says why this CLI cannot.
    fn resume(&mut self, _home: &Path, _id: &str) -> Result<(), HarnessError> {
        Err(HarnessError::Cannot(format!("{} cannot resume a session taken over", self.harness())))
    }
    /// The state of a fork whose home `child_home` is a copy of `home`.
    fn fork(&self, home: &Path, child_home: &Path) -> Result<Box<dyn Cli>, HarnessError>;
    /// Takes the skills copied into the home (their folders), or says why this CLI cannot.
    fn skills(&mut self, _dirs: &[PathBuf]) -> Result<(), HarnessError> {
        Err(HarnessError::Cannot(format!("harness `{}` cannot be given skills", self.harness())))
    }
    /// Makes the first turn fork the caller's session (`fork.transcript`, copied into the home),
    /// or says why this CLI cannot.
    fn adopt(&mut self, _home: &Path, _cwd: &Path, _fork: &caller::CallerFork) -> Result<(), HarnessError> {
        Err(HarnessError::Cannot(format!("harness `{}` cannot fork a caller's session", self.harness())))
    }
    /// What tells, during a turn, the session this CLI is in.
    fn probe(&self, _home: &Path) -> Option<caller::CallerProbe> {
        None
    }
    /// The CLI run interactively in a pane (`interactive/`), when it can be.
    fn interactive(&self) -> Option<&dyn interactive::Interactive> {
        None
    }
    /// The invocation that compacts the session natively, or why this CLI cannot.
    fn compact(&self, home: &Path, cfg: &CliConfig, info: &AgentInfo, prompt: &str)
        -> Result<Invocation, HarnessError>;
}

/// The version of a CLI harness awf was verified with.
pub fn pinned_version(harness: HarnessKind) -> &'static str {
    PINNED.iter().find(|(h, _, _)| *h == harness).map(|(_, _, v)| *v).unwrap_or_default()
}

/// The npm command that installs the pinned version of a CLI harness.
pub fn install_hint(harness: HarnessKind) -> String {
    match PINNED.iter().find(|(h, _, _)| *h == harness) {
        Some((_, package, version)) => format!("npm install -g {package}@{version}"),
        None => format!("install `{harness}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_base_urls_are_local() {
        let mut cfg = CliConfig::from_runtime(
            &RuntimeConfig { harness: HarnessKind::Claude, ..Default::default() },
            None,
            Duration::from_secs(1),
        );
        assert!(!cfg.local());
        assert_eq!(cfg.program, "claude");
        cfg.base_url = Some("http://127.0.0.1:8080/v1".into());
        assert!(cfg.local());
        cfg.base_url = Some("https://api.example.com".into());
        assert!(!cfg.local());
    }
}
