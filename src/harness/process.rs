//! One turn's process, the lifecycle `command` and the CLI harnesses share: started through
//! `spawn.rs` in a process group of its own, its stdin's text in its pipe; its pipes (`pipes.rs`:
//! what of stdin the pipe did not take written in the background, stdin held open when asked;
//! stdout captured and, for a CLI, handed to the harness line by line; stderr captured); watched
//! (`watch.rs`, a state machine) until it exits, stalls, or outlives an answer's or a final
//! event's grace; an acknowledged wait held; its group killed.
//! Every step is a line of the op log (`ops/<op>.jsonl`): spawn-failed, spawned, answered,
//! released, stalled, exited, waiting, group-killed.

mod pipes;
mod watch;

use super::spawn::{spawn, Program};
use crate::control::server::{Endpoint, OpControl};
use crate::record::agent_files::OpLog;
use pipes::Pipes;
use serde_json::{json, Value};
use std::path::Path;
use std::process::ExitStatus;
use std::time::{Duration, Instant};
use watch::Watch;

/// How long a turn may keep running after its answer was accepted.
pub const ANSWER_GRACE: Duration = Duration::from_secs(10);
/// How long the rest of the output may take once the process has exited, and how long a killed
/// process may take to exit.
const DRAIN: Duration = Duration::from_secs(2);

/// Folds one line of stdout into the harness's view of the turn; true once the program's final
/// event was among the lines.
pub(crate) type LineHandler<'h> = dyn FnMut(&str) -> bool + Send + 'h;

/// What a turn's process is and how to watch it.
pub(crate) struct Spec<'a> {
    pub endpoint: &'a Endpoint,
    pub agent: &'a str,
    pub agent_dir: &'a Path,
    /// The operation's id, or the name the captures and the process group go under (`compact-1`).
    pub capture: &'a str,
    /// The operation whose answer is watched for, when the process serves one.
    pub op: Option<&'a OpControl>,
    /// Put in stdin's pipe as the process starts (what the pipe cannot take, written in the
    /// background); `None`: stdin is `/dev/null`.
    pub stdin: Option<Stdin>,
    /// No output and no frame on the socket for this long, before an answer, kills the group.
    pub stall: Duration,
    /// The program's name, for a failure to start it.
    pub program: &'a str,
    /// How to install the program, said when it is not on PATH.
    pub install: Option<String>,
    /// What the `spawned` event says beside the pid (an object).
    pub shown: Value,
}

pub(crate) use super::spawn::Stdin;

/// How stdout is read.
pub(crate) enum Stdout<'h> {
    /// Captured only.
    Captured,
    /// Captured and handed to `handler` line by line, read to its end before the process is
    /// judged; the process may run `final_grace` after its final event. A zero grace ends the turn
    /// at its final event, which then is no release (a program whose stdin is held open).
    Lines { handler: &'h mut LineHandler<'h>, final_grace: Duration },
}

/// How the process went.
pub(crate) struct Exit {
    /// `None` when it was not seen to exit (it outlived the kill of its group).
    pub status: Option<ExitStatus>,
    pub stalled: bool,
    pub stderr_tail: String,
    /// Lines of stdout handed to the handler.
    pub lines: u64,
}

/// Runs one turn's process from its start to the kill of its group; `Err` when it cannot start,
/// saying why. Cancel safety: dropping the future kills the process group (and the process) and
/// leaves nothing running.
pub(crate) async fn run(
    program: Program,
    spec: Spec<'_>,
    log: &mut OpLog,
    stdout: Stdout<'_>,
) -> Result<Exit, super::HarnessError> {
    let (mut child, group) = match spawn(program, spec.stdin, spec.endpoint, spec.agent, spec.capture).await {
        Ok(started) => started,
        Err(source) => {
            let why =
                super::HarnessError::Start { program: spec.program.to_string(), install: spec.install.clone(), source };
            log.event("spawn-failed", json!({ "error": why.to_string() }));
            return Err(why);
        }
    };
    let mut shown = spec.shown;
    if let Value::Object(fields) = &mut shown {
        fields.insert("pid".into(), json!(child.id()));
    }
    log.event("spawned", shown);
    let (mut handler, final_grace) = match stdout {
        Stdout::Captured => (None, Duration::ZERO),
        Stdout::Lines { handler, final_grace } => (Some(handler), final_grace),
    };
    let secrets = spec.endpoint.run.secrets.clone();
    let scrub: crate::record::agent_files::Scrub = std::sync::Arc::new(move |text: &str| secrets.scrub(text));
    let mut pipes = Pipes::open(&mut child, spec.agent_dir, spec.capture, scrub, handler.is_some());
    let mut watch = Watch::new(group, spec.endpoint, pipes.activity.clone(), spec.stall, final_grace);
    watch.watch(&mut child, spec.op, &mut pipes.lines, &mut handler, log).await;
    if watch.status.is_none() {
        // It outlived the kill of its group (it left the group): killed on its own, so that its
        // pipes close.
        let _ = child.start_kill();
    }
    // Lines read but not yet handled.
    if let Some(rx) = &mut pipes.lines {
        while let Ok(line) = rx.try_recv() {
            watch.line(&line, &mut handler, Instant::now());
        }
    }
    let status = watch.status.map(|s| s.to_string());
    let exited = match handler {
        Some(_) => json!({ "status": status, "lines": watch.lines }),
        None => json!({ "status": status }),
    };
    log.event("exited", exited);
    if let Some(op) = spec.op {
        if op.slot.answer().is_none() && !watch.stalled {
            hold_for_wait(op, log).await;
        }
    }
    if watch.group.kill() {
        log.event("group-killed", json!({}));
    }
    let stderr_tail = pipes.close().await;
    Ok(Exit { status: watch.status, stalled: watch.stalled, stderr_tail, lines: watch.lines })
}

/// An acknowledged wait keeps a turn's processes alive until it ends or an answer comes.
async fn hold_for_wait(op: &OpControl, log: &mut OpLog) {
    if let Some(until) = op.waiting_until() {
        log.event("waiting", json!({ "until_ms": until.saturating_duration_since(Instant::now()).as_millis() as u64 }));
        tokio::select! {
            _ = op.answered.notified() => {}
            _ = tokio::time::sleep_until(until.into()) => {}
        }
    }
}
