//! The CLI harnesses: `claude` (Claude Code), `codex` (Codex CLI) and `pi` (pi coding agent).
//! Each turn runs the CLI headless, in the agent's `cwd`, in a process group of its own (killed
//! when the turn ends, is cancelled, times out or stalls), with stdin `/dev/null` and the prompt
//! (`TurnInput::shown`, which ends with the launcher instructions) on its command line. The agent
//! answers by running the launcher with the CLI's own shell tool.
//!
//! Each agent gets a home of its own, `agents/<slug>/home` (the CLI's `CLAUDE_CONFIG_DIR`,
//! `CODEX_HOME` or `PI_CODING_AGENT_DIR`), seeded with copies of the operator's credential files
//! and written back when a turn refreshed them. The CLI's JSONL events are read line by line: each
//! line renews the stall clock; usage, cost, session ids and failures are judged from them, not
//! from exit codes (HARNESSES.md: they lie). `claude.rs`, `codex.rs` and `pi.rs` hold what differs.

pub mod claude;
pub mod codex;
pub mod pi;

use super::command::{pump, Group, ANSWER_GRACE};
use super::{AgentInfo, BoxFuture, Session, TurnEnd, TurnInput, TurnReport};
use crate::accounting::{CostSource, Usage};
use crate::config::RuntimeConfig;
use crate::control::server::{Endpoint, OpControl};
use crate::record::agent_files::{Capture, OpLog};
use crate::sandbox::Sandbox;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

/// The CLI harnesses, the npm package of each, and the version it was verified with (HARNESSES.md).
pub const PINNED: [(&str, &str, &str); 3] = [
    ("claude", "@anthropic-ai/claude-code", "2.1.197"),
    ("codex", "@openai/codex", "0.171.0"),
    ("pi", "@mariozechner/pi-coding-agent", "0.73.1"),
];

/// How long a CLI may keep running after its final event before it is killed (some hang there).
const DONE_GRACE: Duration = Duration::from_secs(3);
/// How long the rest of the output may take to arrive once the CLI has exited.
const DRAIN: Duration = Duration::from_secs(2);
/// Prompts longer than this go through stdin or a file instead of the command line (Linux caps
/// one argument at 128 KiB).
pub const ARG_MAX: usize = 100_000;

/// Whether `harness` is one of the CLI harnesses.
pub fn is_cli(harness: &str) -> bool {
    PINNED.iter().any(|(h, _, _)| *h == harness)
}

/// Opens the control folder and socket for a new agent key: `(agents/<slug>, endpoint)`, and,
/// when the parent is sandboxed (`(its sandbox, harness)`), seats the fork in the same sandbox. A
/// fork needs one of its own.
pub type EndpointOpener = Arc<
    dyn Fn(&str, Option<(&Sandbox, &str)>) -> Result<(PathBuf, Arc<Endpoint>, Option<Sandbox>), String> + Send + Sync,
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
            program: program.unwrap_or_else(|| runtime.harness.clone()),
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

/// What a turn's events said.
#[derive(Debug, Default)]
pub struct Turn {
    pub usage: Usage,
    /// The CLI reported its own cost.
    pub cost_reported: bool,
    /// A failure judged from the events.
    pub failure: Option<String>,
    /// An error event that fails the turn only when the turn does not complete.
    pub error: Option<String>,
    /// The CLI's final event arrived (the turn is over, whatever the process does next).
    pub done: bool,
    pub session_id: Option<String>,
    /// Compaction: whether it happened, and the summary.
    pub compacted: bool,
    pub text: String,
    pub lines: u64,
}

/// What differs between the CLIs.
pub trait Cli: Send + Sync {
    fn harness(&self) -> &'static str;
    /// The operator's credential files and where their copies live in the home.
    fn credentials(&self, home: &Path) -> Vec<(PathBuf, PathBuf)>;
    /// Writes the CLI's configuration into its home; returns its environment.
    fn prepare(&self, home: &Path, cfg: &CliConfig, info: &AgentInfo) -> Result<CliEnv, String>;
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
    /// The state of a fork whose home `child_home` is a copy of `home`.
    fn fork(&self, home: &Path, child_home: &Path) -> Result<Box<dyn Cli>, String>;
    /// The invocation that compacts the session natively, or why this CLI cannot.
    fn compact(&self, home: &Path, cfg: &CliConfig, info: &AgentInfo, prompt: &str) -> Result<Invocation, String>;
}

/// Where the operator keeps a CLI's files: `$VAR`, else `~/<default>`.
pub fn operator_dir(var: &str, default: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").filter(|h| !h.is_empty()).map(|h| PathBuf::from(h).join(default)))
}

/// Serializes credential write-backs within this process.
static CREDENTIALS: Mutex<()> = Mutex::new(());

/// One credential file: the operator's, its copy in the agent's home, and the content last synced.
#[derive(Debug, Clone)]
pub struct Credential {
    pub operator: PathBuf,
    pub local: PathBuf,
    known: Option<Vec<u8>>,
}

impl Credential {
    pub fn new(operator: PathBuf, local: PathBuf) -> Credential {
        Credential { operator, local, known: None }
    }

    /// Copies the operator's file into the home when it is new or changed since the last sync.
    pub fn seed(&mut self) -> Result<(), String> {
        let Ok(bytes) = std::fs::read(&self.operator) else { return Ok(()) };
        if self.known.as_ref() != Some(&bytes) || !self.local.exists() {
            write_private(&self.local, &bytes)?;
            self.known = Some(bytes);
        }
        Ok(())
    }

    /// Writes the home's copy back when a turn refreshed it. Never creates the operator's file,
    /// and never overwrites it when it changed meanwhile (another agent refreshed it first).
    /// Returns whether it wrote.
    pub fn write_back(&mut self) -> Result<bool, String> {
        let _guard = CREDENTIALS.lock().unwrap_or_else(|p| p.into_inner());
        let Some(known) = &self.known else { return Ok(false) };
        let Ok(now) = std::fs::read(&self.local) else { return Ok(false) };
        if &now == known || now.iter().all(u8::is_ascii_whitespace) || serde_json::from_slice::<Value>(&now).is_err() {
            return Ok(false);
        }
        match std::fs::read(&self.operator) {
            Ok(current) if &current == known => {}
            _ => return Ok(false),
        }
        write_private(&self.operator, &now)?;
        self.known = Some(now);
        Ok(true)
    }
}

/// Writes a file readable by its owner only, atomically (a temporary file, then a rename).
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = path.parent().ok_or_else(|| format!("{} has no folder", path.display()))?;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.awf-{}", uuid::Uuid::new_v4().simple()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|_| f.sync_all()))
        .and_then(|_| std::fs::rename(&tmp, path));
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot write {}: {e}", path.display())
    })
}

/// Writes a configuration file into a CLI's home.
pub fn write_config(path: &Path, text: &str) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    if std::fs::read_to_string(path).is_ok_and(|old| old == text) {
        return Ok(());
    }
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Copies a folder tree (files, folders and symlinks whose names `keep` accepts; sockets and
/// the like are skipped).
pub fn copy_tree(from: &Path, to: &Path, keep: &dyn Fn(&str) -> bool) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        if !keep(&entry.file_name().to_string_lossy()) {
            continue;
        }
        let ty = entry.file_type()?;
        let target = to.join(entry.file_name());
        if ty.is_dir() {
            copy_tree(&entry.path(), &target, keep)?;
        } else if ty.is_file() {
            std::fs::copy(entry.path(), &target)?;
        } else if ty.is_symlink() {
            let link = std::fs::read_link(entry.path())?;
            let _ = std::fs::remove_file(&target);
            std::os::unix::fs::symlink(link, &target)?;
        }
    }
    Ok(())
}

/// A number from an event, 0 when absent.
pub fn num(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// `text` cut to its last `max` characters, for failure reasons.
fn tail_chars(text: &str, max: usize) -> String {
    let n = text.chars().count();
    text.chars().skip(n.saturating_sub(max)).collect::<String>().trim().to_string()
}

/// A task aborted when its handle is dropped (with the turn, however it ends).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How one CLI process went.
struct Ran {
    turn: Turn,
    status: Option<ExitStatus>,
    stalled: bool,
    stderr_tail: String,
    last_line: String,
}

/// One agent's session with a CLI.
pub struct CliSession {
    info: AgentInfo,
    cfg: CliConfig,
    cli: Box<dyn Cli>,
    cwd: PathBuf,
    agent_dir: PathBuf,
    home: PathBuf,
    endpoint: Arc<Endpoint>,
    opener: EndpointOpener,
    credentials: Vec<Credential>,
    compactions: u32,
    /// When set, every run of the CLI is wrapped in this sandbox, never run outside it; its home
    /// (the CLI's HOME) is `home`, so config and session files stay inside the writable home.
    sandbox: Option<Sandbox>,
}

impl CliSession {
    /// A session for `harness` (one of `PINNED`), its home under `agent_dir`.
    pub fn open(
        harness: &str,
        info: AgentInfo,
        cfg: CliConfig,
        cwd: PathBuf,
        agent_dir: PathBuf,
        endpoint: Arc<Endpoint>,
        opener: EndpointOpener,
    ) -> Result<CliSession, String> {
        let home = agent_dir.join("home");
        std::fs::create_dir_all(&home).map_err(|e| format!("cannot create {}: {e}", home.display()))?;
        let cli: Box<dyn Cli> = match harness {
            "claude" => Box::new(claude::Claude::new()),
            "codex" => Box::new(codex::Codex::new()),
            "pi" => Box::new(pi::Pi::new(&home)),
            other => return Err(format!("`{other}` is not a CLI harness")),
        };
        let mut cfg = cfg;
        if cfg.model.is_none() && harness != "pi" {
            // The model awf records (and prices) is the model the CLI runs.
            cfg.model = Some(info.model.clone());
        }
        Ok(Self::with(info, cfg, cli, cwd, agent_dir, home, endpoint, opener))
    }

    #[allow(clippy::too_many_arguments)]
    fn with(
        info: AgentInfo,
        cfg: CliConfig,
        cli: Box<dyn Cli>,
        cwd: PathBuf,
        agent_dir: PathBuf,
        home: PathBuf,
        endpoint: Arc<Endpoint>,
        opener: EndpointOpener,
    ) -> CliSession {
        let credentials = cli.credentials(&home).into_iter().map(|(op, local)| Credential::new(op, local)).collect();
        CliSession {
            info,
            cfg,
            cli,
            cwd,
            agent_dir,
            home,
            endpoint,
            opener,
            credentials,
            compactions: 0,
            sandbox: None,
        }
    }

    /// Runs the CLI inside `sandbox` (the agent's seat in it, whose home is this session's home).
    pub fn sandboxed(self, sandbox: Option<Sandbox>) -> Self {
        CliSession { sandbox, ..self }
    }

    /// The argv that runs the CLI once: the program and its arguments, wrapped in the sandbox when
    /// there is one. bwrap clears the environment, so everything the CLI needs is passed in: its
    /// own variables (home, settings, `AWF_*`, the runtime's `env`) and the key named by
    /// `api_key_env` (the runtime names it, so it may enter).
    fn argv(&self, args: &[String], env: &CliEnv) -> Vec<String> {
        let mut argv = vec![self.cfg.program.clone()];
        argv.extend(args.iter().cloned());
        let Some(s) = &self.sandbox else { return argv };
        let key = self.cfg.api_key_env.as_ref().and_then(|k| Some((k.clone(), std::env::var(k).ok()?)));
        let vars: Vec<(String, String)> = key.into_iter().chain(env.set.iter().cloned()).collect();
        s.wrap(&argv, &vars)
    }

    fn seed_credentials(&mut self) {
        for c in &mut self.credentials {
            if let Err(e) = c.seed() {
                tracing::warn!("agent {}: {e}", self.info.key);
            }
        }
    }

    fn write_back_credentials(&mut self, log: &mut OpLog) {
        for c in &mut self.credentials {
            match c.write_back() {
                Ok(true) => log.event("credentials-written-back", json!({ "file": c.operator })),
                Ok(false) => {}
                Err(e) => log.event("credentials-write-back-failed", json!({ "error": e })),
            }
        }
    }

    /// The environment of one run of the CLI.
    fn environment(&self, op_id: Option<&str>) -> Result<CliEnv, String> {
        let mut env = self.cli.prepare(&self.home, &self.cfg, &self.info)?;
        env.set("AWF_LAUNCHER", self.endpoint.launcher.display().to_string());
        env.set("AWF_AGENT", &self.info.key);
        if let Some(op) = op_id {
            env.set("AWF_OP", op);
        }
        for (k, v) in &self.cfg.env {
            env.set(k, v);
        }
        Ok(env)
    }

    /// Runs the CLI once, reading its events until it ends, stalls, or is released.
    async fn run(
        &self,
        inv: Invocation,
        env: CliEnv,
        op: Option<&OpControl>,
        log: &mut OpLog,
        capture: &str,
    ) -> Result<Ran, String> {
        let program = &self.cfg.program;
        let argv = self.argv(&inv.args, &env);
        let mut cmd = tokio::process::Command::new(&argv[0]);
        cmd.args(&argv[1..]).current_dir(&self.cwd);
        for k in &env.remove {
            cmd.env_remove(k);
        }
        cmd.envs(env.set.iter().map(|(k, v)| (k, v)))
            .stdin(if inv.stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| {
            let why = if e.kind() == std::io::ErrorKind::NotFound {
                format!(
                    "cannot start `{program}`: not found on PATH (install it: {})",
                    install_hint(self.cli.harness())
                )
            } else {
                format!("cannot start `{program}`: {e}")
            };
            log.event("spawn-failed", json!({ "error": why }));
            why
        })?;
        let mut group = Group(child.id().map(|p| p as i32));
        let shown: Vec<String> =
            inv.args.iter().map(|a| if a.len() > 200 { format!("<{} bytes>", a.len()) } else { a.clone() }).collect();
        let sandbox = self.sandbox.as_ref().map(|s| &s.name);
        log.event("spawned", json!({ "pid": child.id(), "program": program, "args": shown, "sandbox": sandbox }));
        let activity = Arc::new(Mutex::new(Instant::now()));
        let stdout_cap = Arc::new(Mutex::new(Capture::open(&self.agent_dir, capture, "stdout")));
        let stderr_cap = Arc::new(Mutex::new(Capture::open(&self.agent_dir, capture, "stderr")));
        let (tx, mut lines) = tokio::sync::mpsc::unbounded_channel::<String>();
        if let Some(out) = child.stdout.take() {
            let cap = stdout_cap.clone();
            let act = activity.clone();
            tokio::spawn(async move {
                let mut reader = tokio::io::BufReader::new(out);
                let mut buf = Vec::new();
                loop {
                    buf.clear();
                    match reader.read_until(b'\n', &mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {
                            cap.lock().unwrap_or_else(|p| p.into_inner()).push(&buf);
                            *act.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
                            if tx.send(String::from_utf8_lossy(&buf).into_owned()).is_err() {
                                break;
                            }
                        }
                    }
                }
            });
        }
        let stderr_pump = child.stderr.take().map(|err| pump(err, stderr_cap.clone(), activity.clone()));
        // Written in the background (a CLI that does not read must not block the turn); held open
        // until the process ends when it must stay open (pi's RPC mode).
        let keep_open = inv.stdin.as_ref().is_some_and(|(_, keep)| *keep);
        let stdin_task = match (child.stdin.take(), inv.stdin) {
            (Some(mut stdin), Some((text, keep))) => Some(AbortOnDrop(tokio::spawn(async move {
                let _ = stdin.write_all(text.as_bytes()).await;
                let _ = stdin.flush().await;
                if keep {
                    std::future::pending::<()>().await;
                }
            }))),
            _ => None,
        };
        let last_activity = || {
            let own = *activity.lock().unwrap_or_else(|p| p.into_inner());
            own.max(self.endpoint.last_activity())
        };
        let mut turn = Turn::default();
        let mut last_line = String::new();
        let mut status = None;
        let mut exited_at: Option<Instant> = None;
        let mut closed = false;
        let mut answered_at: Option<Instant> = None;
        let mut done_at: Option<Instant> = None;
        let mut stalled = false;
        let mut released = false;
        loop {
            if exited_at.is_some() && closed {
                break;
            }
            let stall_at = last_activity() + self.cfg.stall;
            let (answered_since, done_since, exited_since) = (answered_at, done_at, exited_at);
            let answer_grace = async move {
                match answered_since {
                    Some(at) if !released => tokio::time::sleep_until((at + ANSWER_GRACE).into()).await,
                    _ => std::future::pending().await,
                }
            };
            let done_grace = async move {
                match done_since {
                    Some(at) if !released => {
                        let grace = if keep_open { Duration::ZERO } else { DONE_GRACE };
                        tokio::time::sleep_until((at + grace).into()).await
                    }
                    _ => std::future::pending().await,
                }
            };
            let drained = async move {
                match exited_since {
                    Some(at) => tokio::time::sleep_until((at + DRAIN).into()).await,
                    None => std::future::pending().await,
                }
            };
            let answered = async move {
                match op {
                    Some(o) if answered_since.is_none() => o.answered.notified().await,
                    _ => std::future::pending().await,
                }
            };
            tokio::select! {
                line = lines.recv(), if !closed => match line {
                    Some(line) => {
                        turn.lines += 1;
                        let text = line.trim();
                        if let Ok(ev) = serde_json::from_str::<Value>(text) {
                            self.cli.event(&ev, &mut turn);
                            if turn.done && done_at.is_none() {
                                done_at = Some(Instant::now());
                            }
                        }
                        if !text.is_empty() {
                            last_line = tail_chars(text, 400);
                        }
                    }
                    None => closed = true,
                },
                s = child.wait(), if exited_at.is_none() => {
                    status = s.ok();
                    exited_at = Some(Instant::now());
                }
                _ = answered => {
                    answered_at = Some(Instant::now());
                    log.event("answered", json!({}));
                }
                _ = answer_grace => {
                    log.event("released", json!({ "after_ms": ANSWER_GRACE.as_millis() as u64, "why": "answered" }));
                    released = true;
                    group.kill();
                }
                _ = done_grace => {
                    if !keep_open {
                        log.event("released", json!({ "after_ms": DONE_GRACE.as_millis() as u64, "why": "final event" }));
                    }
                    released = true;
                    group.kill();
                }
                _ = drained => break,
                _ = tokio::time::sleep_until(stall_at.into()), if exited_at.is_none() && answered_at.is_none() && !stalled => {
                    if last_activity() + self.cfg.stall <= Instant::now() {
                        log.event("stalled", json!({ "stall_ms": self.cfg.stall.as_millis() as u64 }));
                        stalled = true;
                        group.kill();
                    }
                }
            }
        }
        // Lines read but not yet handled.
        while let Ok(line) = lines.try_recv() {
            if let Ok(ev) = serde_json::from_str::<Value>(line.trim()) {
                self.cli.event(&ev, &mut turn);
            }
        }
        log.event("exited", json!({ "status": status.map(|s| s.to_string()), "lines": turn.lines }));
        if let Some(o) = op {
            if o.slot.answer().is_none() && !stalled {
                super::command::hold_for_wait(o, log).await;
            }
        }
        if group.kill() {
            log.event("group-killed", json!({}));
        }
        drop(stdin_task);
        if let Some(p) = stderr_pump {
            let _ = tokio::time::timeout(DRAIN, p).await;
        }
        let stderr_tail = stderr_cap.lock().unwrap_or_else(|p| p.into_inner()).tail();
        Ok(Ran { turn, status, stalled, stderr_tail, last_line })
    }

    /// Why a run failed, with a hint when its sandbox has no network (the likely cause).
    fn judge(&self, ran: &Ran) -> Option<String> {
        let why = self.verdict(ran)?;
        match &self.sandbox {
            Some(s) if s.policy.network == crate::sandbox::Network::None && !ran.stalled => Some(format!(
                "{why} (sandbox `{}` has network = \"none\", where not even 127.0.0.1 is the host's: a CLI reaches its model server only with network = \"host\")",
                s.name
            )),
            _ => Some(why),
        }
    }

    /// Why a run that gave no verdict of its own failed, if it did.
    fn verdict(&self, ran: &Ran) -> Option<String> {
        if ran.stalled {
            return Some(format!("stalled: no output or event for {} s", self.cfg.stall.as_secs()));
        }
        if let Some(f) = &ran.turn.failure {
            return Some(f.clone());
        }
        if ran.turn.done {
            return None;
        }
        if let Some(e) = &ran.turn.error {
            return Some(e.clone());
        }
        match ran.status {
            Some(s) if s.success() => None,
            status => {
                let tail = if !ran.stderr_tail.is_empty() {
                    tail_chars(&ran.stderr_tail, 600)
                } else if !ran.last_line.is_empty() {
                    ran.last_line.clone()
                } else {
                    "(no output)".into()
                };
                let how = status.map(|s| s.to_string()).unwrap_or_else(|| "no exit status".into());
                Some(format!("`{}` ended ({how}) before its turn was over: {tail}", self.cfg.program))
            }
        }
    }

    async fn run_turn(&mut self, input: TurnInput) -> TurnReport {
        let mut log = OpLog::open(&self.agent_dir, &input.op_id);
        let deadline_text = match input.deadline_unix_ms {
            Some(ms) => format!("deadline in {} s", (ms - crate::record::now_unix_ms()).max(0) / 1000),
            None => "no deadline".into(),
        };
        let deadline = input.deadline_unix_ms.map(crate::agent::op::instant_of);
        let op = self.endpoint.open_op(&input.op_id, input.slot.clone(), deadline_text, deadline);
        let report = |end: TurnEnd, mut usage: Usage, cost_reported: bool, op: &OpControl| {
            let launched = op.usage();
            usage.add(&launched);
            TurnReport {
                cost_source: if cost_reported || launched.cost_usd > 0.0 {
                    CostSource::Harness
                } else {
                    CostSource::Priced
                },
                end,
                usage,
                simulated: false,
            }
        };
        self.seed_credentials();
        let env = match self.environment(Some(&input.op_id)) {
            Ok(e) => e,
            Err(e) => return report(TurnEnd::Failed(e), Usage::default(), false, &op),
        };
        let inv = self.cli.turn(&self.home, &self.cfg, &self.info, &input.shown);
        let ran = match self.run(inv, env, Some(op.as_ref()), &mut log, &input.op_id).await {
            Ok(r) => r,
            Err(e) => return report(TurnEnd::Failed(e), Usage::default(), false, &op),
        };
        let mut ran = ran;
        self.cli.after_turn(&self.home, &mut ran.turn);
        self.write_back_credentials(&mut log);
        let end = match self.judge(&ran) {
            _ if input.slot.answer().is_some() => TurnEnd::Ended,
            Some(why) => TurnEnd::Failed(why),
            None => TurnEnd::Ended,
        };
        report(end, ran.turn.usage, ran.turn.cost_reported, &op)
    }

    async fn run_compact(&mut self, prompt: String) -> Result<String, String> {
        let inv = self.cli.compact(&self.home, &self.cfg, &self.info, &prompt)?;
        self.compactions += 1;
        let id = format!("compact-{}", self.compactions);
        let mut log = OpLog::open(&self.agent_dir, &id);
        self.seed_credentials();
        let env = self.environment(None)?;
        let mut ran = self.run(inv, env, None, &mut log, &id).await?;
        self.cli.after_turn(&self.home, &mut ran.turn);
        self.write_back_credentials(&mut log);
        if ran.turn.compacted {
            return Ok(ran.turn.text.trim().to_string());
        }
        Err(self.judge(&ran).unwrap_or_else(|| format!("{} did not compact the session", self.cli.harness())))
    }
}

/// The npm command that installs the pinned version of a CLI harness.
pub fn install_hint(harness: &str) -> String {
    match PINNED.iter().find(|(h, _, _)| *h == harness) {
        Some((_, package, version)) => format!("npm install -g {package}@{version}"),
        None => format!("install `{harness}`"),
    }
}

impl Session for CliSession {
    fn turn(&mut self, input: TurnInput) -> BoxFuture<'_, TurnReport> {
        Box::pin(self.run_turn(input))
    }

    fn fork(&self, info: AgentInfo) -> Result<Box<dyn Session>, String> {
        let (dir, endpoint, sandbox) =
            (self.opener)(&info.key, self.sandbox.as_ref().map(|s| (s, self.cli.harness())))?;
        let home = dir.join("home");
        copy_tree(&self.home, &home, &|name| self.cli.fork_copies(name))
            .map_err(|e| format!("cannot copy {} to {}: {e}", self.home.display(), home.display()))?;
        let cli = self.cli.fork(&self.home, &home)?;
        let mut cfg = self.cfg.clone();
        cfg.effort = info.effort.clone().or(cfg.effort);
        let session = Self::with(info, cfg, cli, self.cwd.clone(), dir, home, endpoint, self.opener.clone());
        Ok(Box::new(session.sandboxed(sandbox)))
    }

    fn compact(&mut self, prompt: &str) -> BoxFuture<'_, Result<String, String>> {
        Box::pin(self.run_compact(prompt.to_string()))
    }

    fn set(&mut self, model: Option<&str>, effort: Option<&str>) -> Result<(), String> {
        if let Some(m) = model {
            self.cfg.model = Some(m.to_string());
            self.info.model = m.to_string();
        }
        if let Some(e) = effort {
            self.cfg.effort = Some(e.to_string());
            self.info.effort = Some(e.to_string());
        }
        Ok(())
    }

    fn endpoint(&self) -> Option<Arc<Endpoint>> {
        Some(self.endpoint.clone())
    }
}

/// The first `x.y.z` in a version banner.
fn version_in(text: &str) -> Option<String> {
    text.split(|c: char| c.is_whitespace() || c == '(' || c == ')' || c == 'v').find_map(|w| {
        let parts: Vec<&str> = w.split('.').collect();
        (parts.len() == 3 && parts.iter().all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit())))
            .then(|| w.to_string())
    })
}

/// Runs `program --version`, bounded.
fn installed_version(program: &str) -> Result<String, String> {
    let child = std::process::Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("DISABLE_AUTOUPDATER", "1")
        .env("PI_OFFLINE", "1")
        .spawn()
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                "not found on PATH".to_string()
            } else {
                e.to_string()
            }
        })?;
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(Ok(out)) => {
            let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            version_in(&text).ok_or_else(|| format!("`{program} --version` printed no version: {}", text.trim()))
        }
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGKILL);
            Err(format!("`{program} --version` did not answer within 20 s"))
        }
    }
}

/// `awf doctor`'s checks of the CLI harnesses: per CLI, whether it is installed and is the pinned
/// version: `(name, usable, detail)`.
pub fn doctor_checks() -> Vec<(String, bool, String)> {
    PINNED
        .iter()
        .map(|(harness, _, pinned)| {
            let name = format!("cli: {harness}");
            match installed_version(harness) {
                Ok(v) if v == *pinned => (name, true, format!("`{harness}` {v} (the pinned version)")),
                Ok(v) => (
                    name,
                    false,
                    format!("`{harness}` is {v}, but awf is verified with {pinned}: {}", install_hint(harness)),
                ),
                Err(e) => (name, false, format!("`{harness}` {e}: {}", install_hint(harness))),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_seeded_and_written_back_only_when_refreshed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let operator = dir.path().join("op/auth.json");
        let local = dir.path().join("home/auth.json");
        let mut c = Credential::new(operator.clone(), local.clone());
        c.seed().expect("seed without a file");
        assert!(!local.exists(), "nothing to seed");
        std::fs::create_dir_all(local.parent().expect("parent")).expect("mkdir");
        std::fs::write(&local, "{\"new\":1}").expect("write");
        assert!(!c.write_back().expect("write back"), "the operator had no file: none is created");
        assert!(!operator.exists());

        std::fs::create_dir_all(operator.parent().expect("parent")).expect("mkdir");
        std::fs::write(&operator, "{\"token\":\"a\"}").expect("write");
        c.seed().expect("seed");
        assert_eq!(std::fs::read_to_string(&local).expect("read"), "{\"token\":\"a\"}");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&local).expect("meta").permissions().mode() & 0o777, 0o600);
        assert!(!c.write_back().expect("unchanged"), "unchanged: nothing written");

        std::fs::write(&local, "{\"token\":\"b\"}").expect("refresh");
        assert!(c.write_back().expect("refreshed"));
        assert_eq!(std::fs::read_to_string(&operator).expect("read"), "{\"token\":\"b\"}");

        std::fs::write(&operator, "{\"token\":\"c\"}").expect("another agent refreshed");
        std::fs::write(&local, "{\"token\":\"d\"}").expect("and this one too");
        assert!(!c.write_back().expect("conflict"), "a newer operator file is kept");
        c.seed().expect("seed");
        assert_eq!(std::fs::read_to_string(&local).expect("read"), "{\"token\":\"c\"}", "and adopted");

        std::fs::write(&local, "not json").expect("garbage");
        assert!(!c.write_back().expect("garbage"), "a broken file is never written back");
    }

    #[test]
    fn versions_are_read_from_banners() {
        assert_eq!(version_in("2.1.197 (Claude Code)").as_deref(), Some("2.1.197"));
        assert_eq!(version_in("codex-cli 0.171.0\n").as_deref(), Some("0.171.0"));
        assert_eq!(version_in("0.73.1\n").as_deref(), Some("0.73.1"));
        assert_eq!(version_in("v1.2.3").as_deref(), Some("1.2.3"));
        assert_eq!(version_in("nothing"), None);
    }

    #[test]
    fn loopback_base_urls_are_local() {
        let mut cfg = CliConfig::from_runtime(
            &RuntimeConfig { harness: "claude".into(), ..Default::default() },
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
