//! The `command` harness: any executable as an agent. The prompt goes to its stdin; it answers by
//! running the launcher (`$AWF_LAUNCHER result $AWF_OP`). Each turn runs in a process group of its
//! own (`spawn.rs`), killed when the turn is cancelled, times out, stalls, or outlives its answer's
//! grace.

use super::{AgentInfo, BoxFuture, Session, TurnEnd, TurnInput, TurnReport};
use crate::accounting::CostSource;
use crate::control::server::Endpoint;
use crate::record::agent_files::{Capture, OpLog};
use serde_json::json;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// How long a turn may keep running after its answer was accepted.
pub const ANSWER_GRACE: Duration = Duration::from_secs(10);

pub struct CommandSession {
    info: AgentInfo,
    argv: Vec<String>,
    cwd: PathBuf,
    agent_dir: PathBuf,
    state_dir: PathBuf,
    endpoint: Arc<Endpoint>,
    stall: Duration,
    /// When set, every turn's program runs inside this sandbox, never outside it.
    sandbox: Option<crate::sandbox::Sandbox>,
}

impl CommandSession {
    pub fn new(
        info: AgentInfo,
        argv: Vec<String>,
        cwd: PathBuf,
        agent_dir: PathBuf,
        endpoint: Arc<Endpoint>,
        stall: Duration,
    ) -> Result<Self, String> {
        if argv.is_empty() || argv[0].is_empty() {
            return Err("the `command` harness needs `command` (an array: program, then arguments)".into());
        }
        let state_dir = agent_dir.join("state");
        crate::record::private::create_dir(&state_dir)
            .map_err(|e| format!("cannot create {}: {e}", state_dir.display()))?;
        Ok(CommandSession { info, argv, cwd, agent_dir, state_dir, endpoint, stall, sandbox: None })
    }

    /// Runs every turn's program inside `sandbox` (the agent's seat in it).
    pub fn sandboxed(self, sandbox: Option<crate::sandbox::Sandbox>) -> Self {
        CommandSession { sandbox, ..self }
    }
}

/// An acknowledged wait keeps a turn's processes alive until it ends or an answer comes.
pub(crate) async fn hold_for_wait(op: &crate::control::server::OpControl, log: &mut OpLog) {
    if let Some(until) = op.waiting_until() {
        log.event("waiting", json!({ "until_ms": until.saturating_duration_since(Instant::now()).as_millis() as u64 }));
        tokio::select! {
            _ = op.answered.notified() => {}
            _ = tokio::time::sleep_until(until.into()) => {}
        }
    }
}

/// Copies a child's stream into a bounded capture, noting when output last arrived.
pub(crate) fn pump(
    mut from: impl AsyncRead + Unpin + Send + 'static,
    to: Arc<Mutex<Capture>>,
    activity: Arc<Mutex<Instant>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut buf = vec![0u8; 16 * 1024];
        while let Ok(n) = from.read(&mut buf).await {
            if n == 0 {
                break;
            }
            to.lock().unwrap_or_else(|p| p.into_inner()).push(&buf[..n]);
            *activity.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        }
    })
}

impl Session for CommandSession {
    fn turn(&mut self, input: TurnInput) -> BoxFuture<'_, TurnReport> {
        Box::pin(async move {
            let mut log = OpLog::open(&self.agent_dir, &input.op_id);
            let op = self.endpoint.open_turn(&input.op_id, input.slot.clone(), input.deadline_unix_ms);
            let prompt = match &self.info.instructions {
                Some(i) => format!("{i}\n\n{}", input.shown),
                None => input.shown.clone(),
            };
            let report = |end, usage: crate::accounting::Usage| TurnReport {
                cost_source: if usage.cost_usd > 0.0 { CostSource::Harness } else { CostSource::Priced },
                end,
                usage,
                simulated: false,
            };
            let vars: Vec<(String, String)> = [
                ("AWF_LAUNCHER", self.endpoint.launcher.display().to_string()),
                ("AWF_OP", input.op_id.clone()),
                ("AWF_AGENT", self.info.key.clone()),
                ("AWF_SCHEMA", input.slot.schema().text.to_string()),
                ("AWF_STATE_DIR", self.state_dir.display().to_string()),
                ("AWF_NUDGE", input.nudge.to_string()),
                ("AWF_RUN_ID", self.endpoint.run.id.clone()),
            ]
            .map(|(k, v)| (k.to_string(), v))
            .into();
            // A sandboxed program runs as bwrap's child, with only the sandbox's environment, which
            // bwrap itself is started with (never on its command line).
            let mut cmd = match &self.sandbox {
                Some(s) => {
                    let wrapped = s.wrap(&self.argv, &vars);
                    let mut cmd = tokio::process::Command::new(&wrapped.argv[0]);
                    cmd.args(&wrapped.argv[1..]).env_clear().envs(wrapped.env);
                    cmd
                }
                None => {
                    let mut cmd = tokio::process::Command::new(&self.argv[0]);
                    cmd.args(&self.argv[1..]).envs(vars);
                    cmd
                }
            };
            cmd.current_dir(&self.cwd).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
            let (mut child, mut group) =
                match super::spawn::spawn(cmd, &self.endpoint, &self.info.key, &input.op_id).await {
                    Ok(c) => c,
                    Err(e) => {
                        let why = format!("cannot start `{}`: {e}", self.argv[0]);
                        log.event("spawn-failed", json!({ "error": why }));
                        return report(TurnEnd::Failed(why), op.usage());
                    }
                };
            let sandbox = self.sandbox.as_ref().map(|s| &s.name);
            log.event(
                "spawned",
                json!({ "pid": child.id(), "nudge": input.nudge, "argv": self.argv, "sandbox": sandbox }),
            );
            let activity = Arc::new(Mutex::new(Instant::now()));
            let stdout = Arc::new(Mutex::new(Capture::open(&self.agent_dir, &input.op_id, "stdout")));
            let stderr = Arc::new(Mutex::new(Capture::open(&self.agent_dir, &input.op_id, "stderr")));
            let mut pumps = Vec::new();
            if let Some(out) = child.stdout.take() {
                pumps.push(pump(out, stdout.clone(), activity.clone()));
            }
            if let Some(err) = child.stderr.take() {
                pumps.push(pump(err, stderr.clone(), activity.clone()));
            }
            if let Some(mut stdin) = child.stdin.take() {
                // Written in the background: a program that never reads its stdin must not block the turn.
                tokio::spawn(async move {
                    let _ = stdin.write_all(prompt.as_bytes()).await;
                });
            }
            let last_activity =
                || (*activity.lock().unwrap_or_else(|p| p.into_inner())).max(self.endpoint.last_activity());
            let mut answered_at: Option<Instant> = None;
            let status = loop {
                let stall_at = last_activity() + self.stall;
                let grace = async {
                    match answered_at {
                        Some(at) => tokio::time::sleep_until((at + ANSWER_GRACE).into()).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    status = child.wait() => break status.ok(),
                    _ = op.answered.notified(), if answered_at.is_none() => {
                        answered_at = Some(Instant::now());
                        log.event("answered", json!({}));
                    }
                    _ = grace => {
                        log.event("released", json!({ "after_ms": ANSWER_GRACE.as_millis() as u64 }));
                        group.kill();
                        break None;
                    }
                    _ = tokio::time::sleep_until(stall_at.into()), if answered_at.is_none() => {
                        if last_activity() + self.stall <= Instant::now() {
                            group.kill();
                            log.event("stalled", json!({ "stall_ms": self.stall.as_millis() as u64 }));
                            return report(TurnEnd::Failed(format!("stalled: no output or event for {} s", self.stall.as_secs())), op.usage());
                        }
                    }
                }
            };
            log.event("exited", json!({ "status": status.map(|s| s.to_string()) }));
            if input.slot.answer().is_none() {
                hold_for_wait(&op, &mut log).await;
            }
            if group.kill() {
                log.event("group-killed", json!({}));
            }
            for p in pumps {
                let _ = tokio::time::timeout(Duration::from_secs(2), p).await;
            }
            let end = match status {
                _ if input.slot.answer().is_some() => TurnEnd::Ended,
                Some(s) if s.success() => TurnEnd::Ended,
                None => TurnEnd::Ended,
                Some(s) => {
                    let tail = stderr.lock().unwrap_or_else(|p| p.into_inner()).tail();
                    let tail = if tail.is_empty() { "(no stderr)".to_string() } else { tail };
                    TurnEnd::Failed(format!("`{}` exited with {s}: {tail}", self.argv[0]))
                }
            };
            report(end, op.usage())
        })
    }

    fn fork(&self, _info: AgentInfo) -> Result<Box<dyn Session>, String> {
        Err("a `command` agent's session is its program's own state; awf cannot copy it".into())
    }

    fn compact(&mut self, _prompt: &str) -> BoxFuture<'_, Result<String, String>> {
        Box::pin(async { Err("the `command` harness cannot compact: its program keeps its own history".to_string()) })
    }

    fn set(&mut self, model: Option<&str>, effort: Option<&str>) -> Result<(), String> {
        if let Some(m) = model {
            self.info.model = m.to_string();
        }
        if let Some(e) = effort {
            self.info.effort = Some(e.to_string());
        }
        Ok(())
    }
}
