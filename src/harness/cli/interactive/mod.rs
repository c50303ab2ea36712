//! CLI agents in tmux panes (`placement: "pane"`): the CLI runs interactively in a pane the
//! operator can watch and type into, with the home, environment, settings and sandbox a headless
//! run of it gets. What was verified by hand with the pinned versions, against the fake model
//! server, before this was built:
//!
//! - **First-run screens** are kept away by the agent's own home, never by keys typed on a screen.
//!   Claude Code 2.1.197 shows, in turn: a theme and login onboarding (it then fails offline on
//!   api.anthropic.com), "Detected a custom API key ... use it?" (default: No) and "Is this a
//!   project you ... trust?". `.claude.json` in `CLAUDE_CONFIG_DIR` with `hasCompletedOnboarding`,
//!   `customApiKeyResponses.approved` (the key's last 20 characters) and `projects.<cwd>.
//!   hasTrustDialogAccepted` skips all three. Codex 0.171.0 asks "Trust this folder?" in a git
//!   repository: `[projects."<folder>"] trust_level = "trusted"` in `config.toml` (for the folder
//!   and the repository's top, which Codex records) skips it; `--dangerously-bypass-approvals-and-
//!   sandbox` shows no approval screen. Interactive Codex also starts an app-server daemon per
//!   `CODEX_HOME` (`codex app-server --managed-daemon`) that outlives the CLI and holds the
//!   conversation, so that a later `codex resume` is refused ("This conversation is open in
//!   another app"): `[features] daemon_auto_start = false` keeps it inside the CLI's process.
//!   pi 0.73.1 shows none. As root, Claude Code refuses
//!   `--dangerously-skip-permissions` unless `IS_SANDBOX=1`; `--allowedTools Bash` (as headless)
//!   lets its shell tool run the launcher without asking.
//! - **Every turn and nudge is pasted** (`tmux load-buffer -` from stdin + `paste-buffer -p -r`,
//!   a bracketed paste with its newlines as LF: the CLI takes them as text and does not submit
//!   line by line), then Enter; each CLI was seen to take a 6.8 KB, 81-line paste whole into its
//!   session file. Nothing of a turn goes on a command line (every local user reads those), so
//!   the CLI starts with no prompt and the first turn is pasted once it reads its keys: its
//!   terminal has left canonical mode (a pane's terminal starts canonical, also after a respawn).
//!   Codex and pi ask for bracketed pastes as their terminal turns raw; Claude Code turns it raw
//!   at once (to keep what is typed early, a CR made a LF) and asks ~1.75 s later, and in between
//!   a pasted CR submitted the first line alone where a LF stays text (measured, hence `-r`); it
//!   may also miss the Enter then, which is sent again. Pasted that way, each CLI took its first
//!   turn whole at every delay tried. The alternatives fail: Claude Code takes a piped stdin as
//!   its first prompt but then, without a controlling terminal (a sandbox's `--new-session`),
//!   draws nothing; Codex's TUI refuses a stdin that is no terminal; pi takes a piped stdin as
//!   print mode. Text pasted while the CLI is busy is queued by Claude Code and folded into the
//!   running turn beside a tool result (Codex and pi "steer" the running turn likewise), so awf
//!   pastes only when the session file says the CLI is idle.
//! - **Instructions** are a file in the agent's home, as headless: Claude Code's
//!   `--append-system-prompt-file`, pi's `--append-system-prompt` (a path), Codex's `config.toml`.
//! - **A turn ends** when the answer comes through the launcher (`wf result`, which the
//!   operation pipeline supervises as for any harness; the CLI then has the answer's grace to end
//!   its turn, after which Escape interrupts it), when the session file says the CLI's turn is over
//!   without one (the nudges then go as pasted text), when the CLI exits (the pane stays, dead:
//!   `remain-on-exit`) or when the pane is closed ("pane closed by the operator"). An acknowledged
//!   wait (`wf waiting`) keeps the turn open past the CLI's own end, for the operator to answer
//!   through the CLI.
//! - **Session files**, read as they grow (usage, cost, turn start and end, failures, the session
//!   id): Claude Code `$CLAUDE_CONFIG_DIR/projects/<cwd, / as ->/<session id>.jsonl` (a `user`
//!   line starts a turn; `system`/`turn_duration` or a `[Request interrupted by user` line ends
//!   it; `assistant` lines carry `usage`, once per message id, and `isApiErrorMessage`); Codex
//!   `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`, also after `codex resume`
//!   (`event_msg` `task_started`, `token_count` with `last_token_usage`, `task_complete` with an
//!   `error` when it failed, `turn_aborted`); pi the `--session` file (a `user` message starts, an
//!   `assistant` message whose `stopReason` is not `toolUse` ends; `usage` with `cost.total`).
//!   Claude Code and Codex write no cost there: the tokens are priced (`cost_source`
//!   `session-priced`); pi's cost counts when its model has prices (`session`).
//!
//! `transcript.rs` reads a session file as it grows; `turn.rs` runs a turn in the pane; each CLI's
//! part is `interactive.rs` beside it (`claude/`, `codex/`, `pi/`).

mod transcript;
mod turn;

pub use transcript::Transcript;

use super::{CliConfig, CliEnv};
use crate::accounting::Usage;
use crate::harness::AgentInfo;
use crate::pane::{PaneId, Tmux};
use serde_json::Value;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Why a pane agent's CLI could not be readied or reached.
#[derive(Debug, thiserror::Error)]
pub enum PaneError {
    #[error("cannot write {} for the CLI's start in a pane: {why}", path.display())]
    Home { path: PathBuf, why: std::io::Error },
    #[error("{0}")]
    Tmux(#[from] crate::pane::Error),
    #[error("`{0}` cannot run in a pane")]
    NotInteractive(crate::config::HarnessKind),
    /// The CLI's home or environment could not be prepared (as a headless run would say).
    #[error(transparent)]
    Prepare(#[from] crate::harness::HarnessError),
}

/// A CLI run interactively: what differs between the CLIs.
pub trait Interactive: Send + Sync {
    /// Writes into the home what the CLI's first start needs, so that it shows no first-run screen
    /// or trust prompt (`env`: the environment it will run with).
    fn settle(&self, home: &Path, cwd: &Path, cfg: &CliConfig, env: &CliEnv) -> Result<(), PaneError>;
    /// The interactive command line (without the program): the session resumed when it has turns,
    /// no prompt (the turn is pasted).
    fn start(&self, home: &Path, cfg: &CliConfig, info: &AgentInfo) -> Vec<String>;
    /// The session file, once it exists.
    fn transcript(&self, home: &Path) -> Option<PathBuf>;
    /// Folds one line of the session file.
    fn line(&self, line: &Value, seen: &mut Seen);
    /// The session an earlier attempt of the run left in the home, to resume.
    fn left(&self, home: &Path) -> Option<String>;
}

/// What the session file said since a turn was delivered.
#[derive(Debug, Default)]
pub struct Seen {
    /// The CLI took a prompt (ours, or the operator's) and has not ended that turn.
    pub busy: bool,
    /// A turn started since the delivery.
    pub started: bool,
    /// The last turn that started since the delivery ended.
    pub ended: bool,
    pub failure: Option<String>,
    pub usage: Usage,
    pub cost_reported: bool,
    pub session_id: Option<String>,
    /// Claude Code writes a message once per content block, each with the message's usage.
    pub counted: HashSet<String>,
    /// Codex's running total of tokens: a `token_count` that does not move it counts nothing.
    pub total_tokens: u64,
}

impl Seen {
    /// A turn (a prompt) starts.
    pub fn start(&mut self) {
        self.busy = true;
        self.started = true;
        self.ended = false;
        self.failure = None;
    }

    /// The running turn ends (`failure`: how it failed).
    pub fn end(&mut self, failure: Option<String>) {
        self.busy = false;
        self.ended = self.started;
        if failure.is_some() {
            self.failure = failure;
        }
    }

    /// A turn was delivered: what the last one saw of turns starting and ending is forgotten.
    pub fn delivered(&mut self) {
        self.started = false;
        self.ended = false;
        self.failure = None;
    }

    /// The spend seen since the last call, taken (a turn reports it): what the operator had the
    /// CLI do between awf's turns is billed on the next one.
    pub fn take_usage(&mut self) -> (Usage, bool) {
        let taken = (self.usage, self.cost_reported);
        self.usage = Usage::default();
        self.cost_reported = false;
        taken
    }
}

/// A pane agent's pane, and what runs in it.
pub struct PaneSeat {
    pub tmux: Tmux,
    pub pane: PaneId,
    /// awf's own executable: the pane runs `awf pane-exec`.
    pub awf: PathBuf,
    /// Whether the CLI runs in the pane (not before the first turn, nor once a settings change
    /// asks for a restart: the next turn starts it, its session resumed).
    pub(super) running: bool,
    pub(super) transcript: Transcript,
    pub(super) seen: Seen,
    /// Whether the session file was read once: what it held before (an earlier attempt's turns,
    /// billed then) is not billed again.
    pub(super) primed: bool,
}

impl PaneSeat {
    pub fn new(tmux: Tmux, pane: PaneId, awf: PathBuf) -> PaneSeat {
        let (transcript, seen) = (Transcript::default(), Seen::default());
        PaneSeat { tmux, pane, awf, running: false, transcript, seen, primed: false }
    }

    /// The next turn starts the CLI again (its session resumed), to take new settings.
    pub fn restart(&mut self) {
        self.running = false;
    }
}

/// The folders Codex and Claude Code trust a working folder by: the folder, and the top of the
/// git repository it is in, when it is in one.
pub fn trusted_folders(cwd: &Path) -> Vec<PathBuf> {
    let mut out = vec![cwd.to_path_buf()];
    if let Some(top) = cwd.ancestors().find(|a| a.join(".git").exists()) {
        if top != cwd {
            out.push(top.to_path_buf());
        }
    }
    out
}
