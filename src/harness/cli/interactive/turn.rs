//! One turn of a CLI agent in its pane: the CLI started (when it does not run) and waited for
//! until it reads its keys, or waited for until idle, then the turn pasted (never on a command
//! line); its pane's process admitted to the agent's socket, then watched until the answer came
//! and the CLI's turn ended (or the answer's grace passed: Escape interrupts it), the CLI's turn
//! ended without an answer, the CLI exited, the pane was closed, or nothing happened for the
//! stall timeout. What the session file said gives the usage.

use super::{Interactive, PaneError, PaneSeat};
use crate::accounting::CostSource;
use crate::control::server::OpControl;
use crate::harness::cli::{CliSession, Turn};
use crate::harness::process::ANSWER_GRACE;
use crate::harness::{TurnEnd, TurnInput, TurnReport};
use crate::pane::launch::{self, Launch};
use crate::pane::{PaneId, State, Tmux};
use crate::record::agent_files::OpLog;
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

/// How often the pane and the session file are looked at.
const TICK: Duration = Duration::from_millis(100);
/// How often a CLI just started is looked at, until it reads its keys.
const READING_TICK: Duration = Duration::from_millis(50);
/// How many times a dead pane's exit status is asked for again (`exited`), a `READING_TICK` apart.
const STATUS_TRIES: usize = 20;
/// How long a pasted turn may go unsubmitted (no turn started in the session file) before Enter
/// is sent again, doubling up to `ENTER_MAX`: a CLI busy taking a long paste in (Claude Code,
/// under load) can miss the Enter that follows it. Enter on an empty prompt does nothing in
/// the three CLIs, so one sent again after the turn was taken is harmless.
const ENTER_AGAIN: Duration = Duration::from_millis(800);
const ENTER_MAX: Duration = Duration::from_secs(4);

/// The reason a turn fails when its pane is closed.
pub const CLOSED: &str = "pane closed by the operator";

/// Sends Escape to the pane when dropped armed: a turn dropped (cancelled, past its deadline, its
/// agent stopped) interrupts the CLI's running turn, leaving the CLI idle in its pane.
struct Interrupt {
    tmux: Tmux,
    pane: PaneId,
    armed: bool,
}

impl Drop for Interrupt {
    fn drop(&mut self) {
        if self.armed {
            let _ = self.tmux.keys(&self.pane, &["Escape"]);
        }
    }
}

impl CliSession {
    /// Runs one turn in the agent's pane.
    pub(in crate::harness::cli) async fn pane_turn(&mut self, input: TurnInput) -> TurnReport {
        let mut log = OpLog::open(&self.agent_dir, &input.op_id);
        let op = self.endpoint.open_turn(&input.op_id, input.slot.clone(), input.deadline, input.meter.clone());
        self.seed_credentials();
        let end = self.pane_run(&input, &op, &mut log).await;
        self.write_back_credentials(&mut log);
        let launched = op.usage();
        let (mut usage, reported) = match &mut self.pane {
            Some(seat) => seat.seen.take_usage(),
            None => (Default::default(), false),
        };
        usage.add(&launched);
        let cost_source =
            if reported || launched.cost_usd > 0.0 { CostSource::SessionFile } else { CostSource::SessionPriced };
        let end = match end {
            _ if input.slot.answer().is_some() => TurnEnd::Ended,
            end => end,
        };
        TurnReport { end, usage, cost_source, simulated: false }
    }

    async fn pane_run(&mut self, input: &TurnInput, op: &OpControl, log: &mut OpLog) -> TurnEnd {
        let Some(ia) = self.cli.interactive() else {
            return TurnEnd::Failed(PaneError::NotInteractive(self.cli.harness()).to_string());
        };
        let Some(seat) = self.pane.as_mut() else {
            return TurnEnd::Failed(PaneError::NotInteractive(self.cli.harness()).to_string());
        };
        match seat.tmux.state(&seat.pane) {
            State::Gone => return TurnEnd::Failed(CLOSED.into()),
            State::Dead { .. } => seat.running = false,
            State::Alive { .. } => {}
        }
        seat.transcript.read(ia, &self.home, &mut seat.seen);
        if !seat.primed {
            let _ = seat.seen.take_usage();
            seat.primed = true;
        }
        // Until the pane's process is admitted, a call from it waits instead of being refused.
        let spawning = self.endpoint.turns().spawning();
        if seat.running {
            if let Err(end) = wait_idle(seat, ia, &self.home, self.cfg.stall).await {
                return end;
            }
        }
        if !seat.running {
            seat.seen.delivered();
            seat.seen.busy = false;
            let launch = match self.pane_launch(ia) {
                Ok(l) => l,
                Err(why) => return TurnEnd::Failed(why.to_string()),
            };
            let Some(seat) = self.pane.as_mut() else { return TurnEnd::Failed(CLOSED.into()) };
            let file = self.agent_dir.join("pane.launch");
            if let Err(why) = respawn(seat, &launch, &file, &self.cwd) {
                return TurnEnd::Failed(format!("cannot start `{}` in pane {}: {why}", self.cfg.program, seat.pane));
            }
            seat.running = true;
            let sandbox = self.sandbox.as_ref().map(|s| &s.name);
            log.event("pane-started", json!({ "pane": seat.pane, "program": self.cfg.program, "sandbox": sandbox }));
            if let Err(end) = wait_reading(seat, &self.cfg.program, self.cfg.stall).await {
                return end;
            }
        }
        let Some(seat) = self.pane.as_mut() else { return TurnEnd::Failed(CLOSED.into()) };
        seat.seen.delivered();
        let pasted = seat.tmux.paste(&seat.pane, &input.shown).and_then(|_| seat.tmux.keys(&seat.pane, &["Enter"]));
        if let Err(e) = pasted {
            return TurnEnd::Failed(format!("cannot deliver the turn into pane {}: {e}", seat.pane));
        }
        log.event("pasted", json!({ "pane": seat.pane, "bytes": input.shown.len() }));
        let mut pid = match seat.tmux.state(&seat.pane) {
            State::Alive { pid } => pid,
            State::Gone => return TurnEnd::Failed(CLOSED.into()),
            State::Dead { status } => return exited(seat, &self.cfg.program, status).await,
        };
        let _admitted = spawning.admit(pid);
        let mut interrupt = Interrupt { tmux: seat.tmux.clone(), pane: seat.pane.clone(), armed: true };
        let mut answered = false;
        let mut release: Option<Instant> = None;
        let mut activity = Instant::now();
        let mut enter = Some((Instant::now() + ENTER_AGAIN, ENTER_AGAIN));
        loop {
            tokio::select! {
                _ = op.answered.notified(), if !answered => {}
                _ = tokio::time::sleep(TICK) => {}
            }
            let now = Instant::now();
            if !answered && op.slot.answer().is_some() {
                answered = true;
                release = Some(now + ANSWER_GRACE);
                log.event("answered", json!({}));
            }
            if seat.transcript.read(ia, &self.home, &mut seat.seen) {
                activity = now;
            }
            if let Some((at, wait)) = enter.filter(|_| !answered && !seat.seen.started) {
                if at <= now {
                    log.event("enter-again", json!({ "after_ms": wait.as_millis() as u64 }));
                    let _ = seat.tmux.keys(&seat.pane, &["Enter"]);
                    let wait = (wait * 2).min(ENTER_MAX);
                    enter = Some((now + wait, wait));
                }
            }
            let seen = &seat.seen;
            let over = seen.ended && !seen.busy;
            if answered {
                if over {
                    interrupt.armed = false;
                    return TurnEnd::Ended;
                }
                if release.is_some_and(|at| at <= now) {
                    log.event("released", json!({ "after_ms": ANSWER_GRACE.as_millis() as u64 }));
                    return TurnEnd::Ended;
                }
                continue;
            }
            let waiting = op.waiting_until().is_some();
            if over && !waiting {
                interrupt.armed = false;
                log.event("turn-ended", json!({ "failure": seen.failure }));
                return match &seen.failure {
                    Some(why) => TurnEnd::Failed(why.clone()),
                    None => TurnEnd::Ended,
                };
            }
            if nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_err() {
                match seat.tmux.state(&seat.pane) {
                    State::Alive { pid: now_pid } => pid = now_pid,
                    State::Gone => {
                        interrupt.armed = false;
                        seat.running = false;
                        log.event("pane-closed", json!({ "pane": seat.pane }));
                        return TurnEnd::Failed(CLOSED.into());
                    }
                    State::Dead { status } => {
                        interrupt.armed = false;
                        return exited(seat, &self.cfg.program, status).await;
                    }
                }
            }
            let last = activity.max(self.endpoint.last_activity());
            if !waiting && last + self.cfg.stall <= now {
                log.event("stalled", json!({ "stall_ms": self.cfg.stall.as_millis() as u64 }));
                return TurnEnd::Failed(format!(
                    "stalled: no line in the session file and no call on the socket for {} s; the pane shows: {}",
                    self.cfg.stall.as_secs(),
                    screen_tail(seat)
                ));
            }
        }
    }

    /// What runs the CLI in its pane: the interactive command line (no prompt), wrapped in the
    /// sandbox when there is one, with the environment a headless run gets (no `AWF_OP`: the CLI
    /// outlives its first operation).
    fn pane_launch(&self, ia: &dyn Interactive) -> Result<Launch, PaneError> {
        let env = self.environment(None).map_err(PaneError::Prepare)?;
        ia.settle(&self.home, &self.cwd, &self.cfg, &env)?;
        let mut argv = vec![self.cfg.program.clone()];
        argv.extend(ia.start(&self.home, &self.cfg, &self.info));
        let Some(s) = &self.sandbox else {
            let mut vars: Vec<(String, String)> =
                std::env::vars().filter(|(k, _)| !env.remove.contains(&k.as_str())).collect();
            for (k, v) in env.set {
                vars.retain(|(name, _)| *name != k);
                vars.push((k, v));
            }
            return Ok(Launch { argv, env: vars, cwd: self.cwd.clone(), pinned: vec![] });
        };
        let key = self.cfg.api_key_env.as_ref().and_then(|k| Some((k.clone(), std::env::var(k).ok()?)));
        let vars: Vec<(String, String)> = key.into_iter().chain(env.set).collect();
        let wrapped = s.wrap(&argv, &vars);
        Ok(Launch { argv: wrapped.argv, env: wrapped.env, cwd: self.cwd.clone(), pinned: wrapped.pinned })
    }

    /// Keeps the session id the session file gave, as a headless turn keeps its events'.
    pub(in crate::harness::cli) fn pane_after_turn(&mut self) {
        let Some(id) = self.pane.as_ref().and_then(|s| s.seen.session_id.clone()) else { return };
        let mut turn = Turn { session_id: Some(id.clone()), ..Default::default() };
        self.cli.after_turn(&self.home, &mut turn);
        self.session_id = Some(id);
    }
}

/// Waits until the CLI is idle (an operator's own turn may be running), reading its session file.
async fn wait_idle(
    seat: &mut PaneSeat,
    ia: &dyn Interactive,
    home: &std::path::Path,
    stall: Duration,
) -> Result<(), TurnEnd> {
    let mut activity = Instant::now();
    while seat.seen.busy {
        tokio::time::sleep(TICK).await;
        if seat.transcript.read(ia, home, &mut seat.seen) {
            activity = Instant::now();
        }
        match seat.tmux.state(&seat.pane) {
            State::Gone => return Err(TurnEnd::Failed(CLOSED.into())),
            State::Dead { .. } => {
                // It exited mid-turn: the turn starts it again, its session resumed.
                seat.running = false;
                return Ok(());
            }
            State::Alive { .. } => {}
        }
        if activity + stall <= Instant::now() {
            return Err(TurnEnd::Failed(format!(
                "stalled: the CLI in pane {} stayed busy with a turn of its own for {} s",
                seat.pane,
                stall.as_secs()
            )));
        }
    }
    Ok(())
}

/// Replaces what runs in the pane with `awf pane-exec` reading `launch` from `file` (written
/// 0600, removed by `awf pane-exec` as it reads it, or here when the pane could not start it).
fn respawn(seat: &PaneSeat, launch: &Launch, file: &Path, cwd: &Path) -> Result<(), PaneError> {
    let started = launch::write(file, launch)
        .map_err(|why| PaneError::Home { path: file.to_path_buf(), why })
        .and_then(|_| Ok(seat.tmux.respawn(&seat.pane, cwd, &launch::argv(&seat.awf, file))?));
    if started.is_err() {
        let _ = std::fs::remove_file(file);
    }
    started
}

/// Waits until the CLI just started in the pane reads its keys (`Tmux::reads_keys`), for at
/// most the stall timeout.
async fn wait_reading(seat: &mut PaneSeat, program: &str, stall: Duration) -> Result<(), TurnEnd> {
    let end = Instant::now() + stall;
    loop {
        let reads = seat.tmux.reads_keys(&seat.pane);
        match seat.tmux.state(&seat.pane) {
            State::Gone => {
                seat.running = false;
                return Err(TurnEnd::Failed(CLOSED.into()));
            }
            State::Dead { status } => return Err(exited(seat, program, status).await),
            State::Alive { .. } => {}
        }
        match reads {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(e) => return Err(TurnEnd::Failed(format!("cannot deliver the turn into pane {}: {e}", seat.pane))),
        }
        if Instant::now() >= end {
            return Err(TurnEnd::Failed(format!(
                "stalled: `{program}` in pane {} did not read its keys within {} s; the pane shows: {}",
                seat.pane,
                stall.as_secs(),
                screen_tail(seat)
            )));
        }
        tokio::time::sleep(READING_TICK).await;
    }
}

/// The CLI exited in its pane before its turn was over: how, with the last lines it showed. tmux
/// may mark a pane dead (its terminal closed) a moment before it has reaped the process and knows
/// its status: asked again a few times, briefly, before "no status" is said.
async fn exited(seat: &mut PaneSeat, program: &str, mut status: Option<i32>) -> TurnEnd {
    seat.running = false;
    for _ in 0..STATUS_TRIES {
        if status.is_some() {
            break;
        }
        tokio::time::sleep(READING_TICK).await;
        if let State::Dead { status: known } = seat.tmux.state(&seat.pane) {
            status = known;
        }
    }
    let how = status.map(|s| format!("status {s}")).unwrap_or_else(|| "no status".into());
    TurnEnd::Failed(format!("`{program}` exited in its pane ({how}) before its turn was over: {}", screen_tail(seat)))
}

/// The last lines the pane shows, joined, at most 400 characters.
fn screen_tail(seat: &PaneSeat) -> String {
    let screen = seat.tmux.capture(&seat.pane, false).unwrap_or_default();
    let lines: Vec<&str> = screen.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(6)..].join(" / ");
    crate::harness::cli::events::tail_chars(&tail, 400)
}
