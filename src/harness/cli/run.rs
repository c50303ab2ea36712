//! One run of a CLI process: its argv (wrapped in the sandbox when there is one), its events read
//! line by line until it ends, stalls or is released, and the verdict on how it went.

use super::events::tail_chars;
use super::{install_hint, CliEnv, CliSession, Invocation, Turn};
use crate::control::server::OpControl;
use crate::harness::command::{pump, ANSWER_GRACE};
use crate::record::agent_files::{Capture, OpLog};
use serde_json::{json, Value};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

/// How long a CLI may keep running after its final event before it is killed (some hang there).
const DONE_GRACE: Duration = Duration::from_secs(3);
/// How long the rest of the output may take to arrive once the CLI has exited.
const DRAIN: Duration = Duration::from_secs(2);

/// A task aborted when its handle is dropped (with the turn, however it ends).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How one CLI process went.
pub(super) struct Ran {
    pub(super) turn: Turn,
    status: Option<ExitStatus>,
    stalled: bool,
    stderr_tail: String,
    last_line: String,
}

impl CliSession {
    /// The command that runs the CLI once: the program and its arguments, wrapped in the sandbox
    /// when there is one. A sandboxed CLI gets only the sandbox's environment, so everything it
    /// needs is passed in: its own variables (home, settings, `AWF_*`, the runtime's `env`) and the
    /// key named by `api_key_env` (the runtime names it, so it may enter); bwrap is started with
    /// that environment, never with values on its command line.
    fn command(&self, args: &[String], env: &CliEnv) -> tokio::process::Command {
        let mut argv = vec![self.cfg.program.clone()];
        argv.extend(args.iter().cloned());
        let Some(s) = &self.sandbox else {
            let mut cmd = tokio::process::Command::new(&argv[0]);
            cmd.args(&argv[1..]);
            for k in &env.remove {
                cmd.env_remove(k);
            }
            cmd.envs(env.set.iter().map(|(k, v)| (k, v)));
            return cmd;
        };
        let key = self.cfg.api_key_env.as_ref().and_then(|k| Some((k.clone(), std::env::var(k).ok()?)));
        let vars: Vec<(String, String)> = key.into_iter().chain(env.set.iter().cloned()).collect();
        let wrapped = s.wrap(&argv, &vars);
        let mut cmd = tokio::process::Command::new(&wrapped.argv[0]);
        cmd.args(&wrapped.argv[1..]).env_clear().envs(wrapped.env);
        cmd
    }
    /// Runs the CLI once, reading its events until it ends, stalls, or is released.
    pub(super) async fn run(
        &self,
        inv: Invocation,
        env: CliEnv,
        op: Option<&OpControl>,
        log: &mut OpLog,
        capture: &str,
    ) -> Result<Ran, String> {
        let program = &self.cfg.program;
        let mut cmd = self.command(&inv.args, &env);
        cmd.current_dir(&self.cwd)
            .stdin(if inv.stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let spawned = crate::harness::spawn::spawn(cmd, &self.endpoint, &self.info.key, capture).await;
        let (mut child, mut group) = spawned.map_err(|e| {
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
                crate::harness::command::hold_for_wait(o, log).await;
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
    pub(super) fn judge(&self, ran: &Ran) -> Option<String> {
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
}
