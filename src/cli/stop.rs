//! `awf runs stop ID [--now]`: stops a run of any process on this machine through its control
//! socket, as Ctrl-C would (or at once), and waits for it to end; a background run still queued
//! leaves the queue, and a run queued in `awf serve` is cancelled there. A run that is not in flight is said so plainly.

use super::{background, listing, EXIT_FAILED, EXIT_OK, EXIT_USAGE};
use crate::host::control::{self, Request, State};
use crate::record::status::Recorded;
use crate::run::RunStatus;
use anyhow::Result;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long `stop` waits for the run to end: the script's grace, and time to settle.
const WAIT: Duration = Duration::from_secs(15);

fn wait_until(done: impl Fn() -> bool, within: Duration) -> bool {
    let until = Instant::now() + within;
    while !done() {
        if Instant::now() > until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

/// Stops the run in `dir`; the exit code.
pub fn stop(dir: &Path, id: &str, now: bool) -> Result<i32> {
    if !dir.join("run.json").exists() {
        return stop_queued(dir, id);
    }
    if crate::record::lock::held(dir) == Some(false) {
        let status = listing::run_status(dir);
        if status == "interrupted" {
            eprintln!(
                "awf: run {id} is not running: its process is gone (interrupted); `awf runs resume {id}` starts a new attempt"
            );
        } else {
            eprintln!("awf: run {id} is not in flight: it has already ended ({status})");
        }
        return Ok(EXIT_OK);
    }
    let by = if now { "awf runs stop --now" } else { "awf runs stop" };
    let req = if now { Request::Kill { by: by.into() } } else { Request::Stop { by: by.into() } };
    // A run that has just started may not have opened its socket yet.
    let mut reply = control::request(dir, &req, Duration::from_secs(5));
    let until = Instant::now() + Duration::from_secs(2);
    while reply.is_err() && Instant::now() < until && crate::record::lock::held(dir) == Some(true) {
        std::thread::sleep(Duration::from_millis(50));
        reply = control::request(dir, &req, Duration::from_secs(5));
    }
    let reply = match reply {
        Ok(r) => r,
        Err(_) if crate::record::lock::held(dir) == Some(false) => {
            eprintln!("awf: run {id} already ended ({}) before it could be stopped", listing::run_status(dir));
            return Ok(EXIT_OK);
        }
        Err(e) => {
            eprintln!("error: run {id} is live but cannot be reached: {e}");
            return Ok(EXIT_USAGE);
        }
    };
    let pid = serde_json::json!(reply.pid);
    match reply.state {
        Some(State::AlreadyStopping) => eprintln!("awf: run {id} is already stopping; waiting for it to end"),
        Some(State::Killed) => eprintln!("awf: ending run {id} at once (process {pid})"),
        _ => eprintln!("awf: stopping run {id} (process {pid}); its script has 5 s to unwind"),
    }
    if !wait_until(|| crate::record::lock::held(dir) != Some(true), WAIT) {
        eprintln!(
            "awf: run {id} is still stopping after {}s; `awf runs stop {id} --now` ends it at once",
            WAIT.as_secs()
        );
        return Ok(EXIT_FAILED);
    }
    out!("run {id}: {}", listing::run_status(dir));
    Ok(EXIT_OK)
}

/// A run that has not started: a background run's waiting process is told to leave the queue; a
/// run queued in `awf serve` is marked cancelled in its record, which the serve reads before it
/// starts the run.
fn stop_queued(dir: &Path, id: &str) -> Result<i32> {
    use crate::record::accepted::{self, Admission};
    // Queued in an `awf serve`: its record says so, and the serve reads it again before it starts
    // the run (a serve that has just started it makes run.json: then it is stopped as any run).
    if accepted::read(dir).is_some_and(|a| a.status == Admission::Queued) {
        accepted::mark(dir, Admission::Cancelled, "stopped by awf runs stop while queued in awf serve")?;
        if dir.join("run.json").exists() {
            return stop(dir, id, false);
        }
        out!("run {id}: cancelled (it was queued in awf serve, which will not start it)");
        return Ok(EXIT_OK);
    }
    if !background::queued(dir) {
        eprintln!("awf: run {id} is not in flight: it never started ({})", background::status(dir).as_str());
        return Ok(EXIT_OK);
    }
    const WHY: &str = "stopped by awf runs stop while queued";
    // Its process has not said who it is yet: then the record is marked, and it reads that before
    // it queues. Otherwise it is told to leave the queue.
    if let Some(pid) = background::cancel_queued(dir, WHY) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGTERM);
        // It leaves the queue, or it was just starting: then it is stopped like any run.
        wait_until(|| !background::queued(dir) || dir.join("run.json").exists(), WAIT);
        if dir.join("run.json").exists() {
            return stop(dir, id, false);
        }
        if background::status(dir) == Recorded::Known(RunStatus::Interrupted) {
            background::mark(dir, RunStatus::Cancelled, WHY);
        }
    }
    out!("run {id}: {}", background::status(dir).as_str());
    Ok(EXIT_OK)
}
