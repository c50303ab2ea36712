//! `drive`: a run from its script's start to its recorded end. It starts the script, waits for it
//! while honouring the run's deadline and a stop from anywhere (Ctrl-C, the API, `ctx.stop`: a
//! stop gives the script a 5 s grace to unwind), decides the run's status, and finishes the run
//! (`result.json`, `run.json`); its trace, when telemetry is on, follows the records alongside.
//! It prints nothing: the commands print what they need.

use super::{exit, Host};
use crate::run::{RunStatus, StopCause};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// How long a stopped script has to unwind before the run is settled without it.
pub const GRACE: Duration = Duration::from_secs(5);

/// How a script ended.
pub enum ScriptEnd {
    Value(Value),
    Failed(Failure),
}

pub struct Failure {
    /// The rustc-style text: message, position, source line, call chain.
    pub rendered: String,
    /// The message alone.
    pub message: String,
    pub kind: FailureKind,
}

/// What kind of failure a script ended with; the exit code comes from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The workflow failed (exit 1).
    Error,
    /// The configuration is wrong, as an agent whose runtime does not resolve (exit 2).
    Config,
    /// A stop, cancellation or deadline rather than an error.
    Terminated,
}

/// A program a run executes: the script host implements it.
pub trait Script: Send + Sync {
    /// Starts the program on `host` with `args`; the receiver gets how it ended.
    fn start(&self, host: Arc<Host>, args: Value) -> std::io::Result<oneshot::Receiver<ScriptEnd>>;
}

/// What a finished run prints on stdout.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Output {
    /// The script's value: a string as is, anything else as JSON.
    Value,
    /// A strategy's result: its `output` text; `ok: false` makes the run failed.
    Strategy,
}

/// How a run ended, with its `result.json` written.
pub struct RunEnd {
    pub result: crate::run::ResultDoc,
    pub status: RunStatus,
    pub value: Option<Value>,
    pub error: Option<String>,
    /// The script's rendered error, when it failed or was cut short.
    pub rendered: Option<String>,
    /// Why a strategy that ran to its end returned `ok: false`.
    pub strategy_error: Option<String>,
    /// The exit code (`host::exit`).
    pub code: i32,
}

/// Runs `script` on `host` with `args` to the run's recorded end.
pub async fn drive(
    host: Arc<Host>,
    script: &dyn Script,
    args: Value,
    deadline: Option<Duration>,
    output: Output,
) -> RunEnd {
    let trace = crate::telemetry::start(&host.run.config, host.run.dir(), host.run.attempt);
    let end = match script.start(host.clone(), args) {
        Ok(rx) => wait(&host, rx, deadline).await,
        Err(e) => Some(ScriptEnd::Failed(Failure {
            rendered: format!("error: cannot start the script thread: {e}"),
            message: format!("cannot start the script thread: {e}"),
            kind: FailureKind::Error,
        })),
    };
    if end.is_some() {
        wait_background(&host).await;
    }
    // What agents left in their worktrees is committed on their branches (git, off the async
    // threads) before result.json; a script that did not return a value counts as failed.
    let failed = !matches!(end, Some(ScriptEnd::Value(_))) || host.run.stop_cause().is_some();
    let settling = host.clone();
    let _ = tokio::task::spawn_blocking(move || settling.agents.settle_worktrees(failed)).await;
    let end = settle(&host, end, output);
    // After result.json: the last spans go out within a bounded wait, off the async runtime.
    if let Some(trace) = trace {
        let _ = tokio::task::spawn_blocking(move || trace.finish()).await;
    }
    end
}

/// Waits for the script. When the run's deadline passes it is stopped; once stopped (by anyone),
/// the script has `GRACE` to end (none when killed through the control socket). `None`: it did
/// not end within the grace.
pub async fn wait(host: &Host, mut rx: oneshot::Receiver<ScriptEnd>, deadline: Option<Duration>) -> Option<ScriptEnd> {
    let run = &host.run;
    let deadline_at = deadline.map(|d| tokio::time::Instant::now() + d);
    let run_deadline = async {
        match deadline_at {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        end = &mut rx => return end.ok(),
        _ = run.root.cancelled() => {}
        _ = run_deadline => run.stop_with(StopCause::Deadline),
    }
    tokio::select! {
        end = &mut rx => end.ok(),
        _ = tokio::time::sleep(GRACE) => None,
        _ = host.control.killed.cancelled() => None,
    }
}

/// Waits for the background councils the run's agents started (`wf council --background`) to
/// settle and for the message operations that bring their outputs, saying so on the run's log;
/// a stop (the workflow's, Ctrl-C, the deadline) ends the wait, and the councils with it.
async fn wait_background(host: &Host) {
    let run = &host.run;
    if run.background().1 == 0 {
        return;
    }
    while !run.root.is_cancelled() {
        let n = run.background().0;
        if n > 0 {
            let plural = if n == 1 { "" } else { "s" };
            run.log("info", &format!("waiting for {n} background council{plural}"), &Value::Null);
            tokio::select! {
                _ = run.background_settled() => {}
                _ = run.root.cancelled() => return,
                _ = crate::run::deadline::Deadline::sleep(run.deadline) => return run.stop_with(StopCause::Deadline),
            }
        }
        // Their outputs wake their agents: those message operations belong to the run.
        tokio::select! {
            _ = host.router.settle(&None) => {}
            _ = run.root.cancelled() => return,
        }
        if run.background().0 == 0 {
            return;
        }
    }
}

/// Decides the run's status from how the script ended and why the run stopped, and finishes the
/// run (result.json, run.json).
pub fn settle(host: &Host, end: Option<ScriptEnd>, output: Output) -> RunEnd {
    let run = &host.run;
    // The progress hook can see the run deadline pass before the timer in `wait` records it.
    let past_deadline = run.deadline.is_some_and(|d| d.passed());
    let cause = match &end {
        Some(ScriptEnd::Failed(f)) if f.kind == FailureKind::Terminated && past_deadline => {
            run.stop_cause().or(Some(StopCause::Deadline))
        }
        _ => run.stop_cause(),
    };
    let (status, value, error, rendered, code) = match (end, cause) {
        (Some(ScriptEnd::Value(v)), _) => (RunStatus::Succeeded, Some(v), None, None, exit::OK),
        (Some(ScriptEnd::Failed(f)), Some(StopCause::Stopped(r))) => {
            (RunStatus::Stopped, None, Some(r), Some(f.rendered), exit::STOPPED)
        }
        (Some(ScriptEnd::Failed(f)), Some(StopCause::Cancelled(r))) => {
            (RunStatus::Cancelled, None, Some(r), Some(f.rendered), exit::CANCELLED)
        }
        (Some(ScriptEnd::Failed(f)), Some(StopCause::Deadline)) => {
            (RunStatus::Cancelled, None, Some("run deadline exceeded".to_string()), Some(f.rendered), exit::CANCELLED)
        }
        (Some(ScriptEnd::Failed(f)), None) => {
            let code = if f.kind == FailureKind::Config { exit::USAGE } else { exit::FAILED };
            (RunStatus::Failed, None, Some(f.message), Some(f.rendered), code)
        }
        (None, _) if host.control.killed.is_cancelled() => {
            (RunStatus::Cancelled, None, Some(format!("{}; ended at once", run.stop_reason())), None, exit::CANCELLED)
        }
        (None, _) => (
            RunStatus::Cancelled,
            None,
            Some(format!("{}; the script did not end within the 5 s grace period", run.stop_reason())),
            None,
            exit::CANCELLED,
        ),
    };
    // A strategy that returned ok: false failed, though its script ran to the end.
    let strategy_error = match (&value, output) {
        (Some(v), Output::Strategy) if v.get("ok") == Some(&Value::Bool(false)) => {
            Some(v.get("error").and_then(Value::as_str).unwrap_or("the strategy did not succeed").to_string())
        }
        _ => None,
    };
    let (status, error, code) = match &strategy_error {
        Some(e) => (RunStatus::Failed, Some(e.clone()), exit::FAILED),
        None => (status, error, code),
    };
    let ended_in = if status == RunStatus::Succeeded { None } else { run.stages.failed_in() };
    let result = host.finish(status, value.as_ref(), error.as_deref(), ended_in.as_deref());
    RunEnd { result, status, value, error, rendered, strategy_error, code }
}
