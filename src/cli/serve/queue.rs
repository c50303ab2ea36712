//! The server's queue: the runs it holds that wait for one of `--max-runs` slots, first accepted
//! first started, at most `--max-queued` of them beyond the slots. A run leaves it to start fresh
//! (`Work::Fresh`) or, recovered from a serve that died while it ran, as a new attempt through
//! the path `awf runs resume` takes (`Work::Resume`).

use super::job::Job;
use super::{Server, Shared};
use crate::cli::runs::{reattempt, ReattemptOptions, Refused};
use crate::cli::script::prepare;
use crate::host::launch;
use crate::record::accepted::{self, Admission};
use crate::run::{RunSpec, RunStatus};
use serde_json::Value;
use std::collections::VecDeque;

/// What a queued run does when its turn comes.
pub(super) enum Work {
    /// A run that has not started: its checked job and spec.
    Fresh { job: Job, spec: Box<RunSpec> },
    /// A run an earlier serve started and did not finish: a new attempt of it. `request` is the
    /// body it was accepted with (its limits apply again).
    Resume { request: Value },
}

pub(super) struct Pending {
    pub id: String,
    pub work: Work,
}

pub(super) struct Queue {
    waiting: VecDeque<Pending>,
    running: usize,
    /// Acceptances being written to disk: counted against the bound already.
    reserved: usize,
    max_runs: usize,
    max_queued: usize,
    /// The server is stopping: nothing more starts.
    closed: bool,
}

impl Queue {
    pub fn new(max_runs: usize, max_queued: usize) -> Queue {
        Queue { waiting: VecDeque::new(), running: 0, reserved: 0, max_runs, max_queued, closed: false }
    }

    /// Takes a place for a run about to be accepted, or says why there is none (the queue is full).
    pub fn reserve(&mut self) -> Result<(), String> {
        let held = self.running + self.waiting.len() + self.reserved;
        if held >= self.max_runs + self.max_queued {
            return Err(format!(
                "the queue is full: {} runs wait for {} slots (--max-queued {}); try again once runs end",
                self.waiting.len() + self.reserved,
                self.max_runs,
                self.max_queued
            ));
        }
        self.reserved += 1;
        Ok(())
    }

    /// Gives back a place `reserve` took for a run that was not accepted after all.
    pub fn unreserve(&mut self) {
        self.reserved = self.reserved.saturating_sub(1);
    }

    /// Takes a run out of the queue (stopped while it waited).
    pub fn remove(&mut self, id: &str) {
        self.waiting.retain(|p| p.id != id);
    }

    /// Starts nothing more (the server is stopping); returns how many runs wait, kept on disk.
    pub fn close(&mut self) -> usize {
        self.closed = true;
        self.waiting.len()
    }
}

/// Queues a run, in place of the reservation made for it when `reserved`; starts what may start.
pub(super) fn push(server: &Shared, pending: Pending, reserved: bool) {
    {
        let mut q = server.queue();
        if reserved {
            q.unreserve();
        }
        q.waiting.push_back(pending);
    }
    pump(server);
}

/// Starts queued runs, in order, while slots are free.
pub(super) fn pump(server: &Shared) {
    loop {
        let next = {
            let mut q = server.queue();
            if q.closed || q.running >= q.max_runs {
                return;
            }
            let Some(next) = q.waiting.pop_front() else { return };
            q.running += 1;
            next
        };
        tokio::spawn(run(server.clone(), next));
    }
}

/// Runs one queued run to its end, then gives its slot to the next.
async fn run(server: Shared, pending: Pending) {
    let id = pending.id;
    // A run stopped while it waited stays stopped.
    if server.begin(&id) {
        let status = match pending.work {
            Work::Fresh { job, spec } => fresh(&server, &id, job, *spec).await,
            Work::Resume { request } => resumed(&server, &id, &request).await,
        };
        server.ended(&id, status);
    }
    server.queue().running -= 1;
    pump(&server);
}

async fn fresh(server: &Server, id: &str, job: Job, spec: RunSpec) -> RunStatus {
    let deadline = spec.deadline;
    let dir = spec.runs_dir.join(id);
    let rt = tokio::runtime::Handle::current();
    let req = launch::Request { spec, id: Some(id.to_string()), caller: None, parent: None };
    let host = match launch::start(req, rt, capabilities()) {
        Ok(h) => h,
        Err(e) => {
            let why = format!("cannot start the run: {e}");
            eprintln!("awf: run {id}: {why}");
            let _ = accepted::mark(&dir, Admission::Failed, &why);
            return RunStatus::Failed;
        }
    };
    server.set_status(id, RunStatus::Running, Some(host.run.clone()));
    launch::run(host, launch::Admission::RunLimit, &*job.program, job.input, deadline, job.output).await.status
}

/// A new attempt of a run whose serve died while it ran, through `awf runs resume`'s path; a run
/// that cannot be resumed is said so and left as it is.
async fn resumed(server: &Server, id: &str, request: &Value) -> RunStatus {
    let Some(dir) = server.entries().iter().find(|e| e.id == id).map(|e| e.dir.clone()) else {
        return RunStatus::Interrupted;
    };
    let (cwd, run_dir, run_id) = (server.cwd.clone(), dir.clone(), id.to_string());
    let loaded =
        tokio::task::spawn_blocking(move || reattempt(&cwd, &run_dir, &run_id, ReattemptOptions::default())).await;
    let attempt = match loaded {
        Ok(Ok(a)) => a,
        Ok(Err(Refused::Records(why) | Refused::Script(why))) => {
            eprintln!("awf: run {id} is left interrupted: {why}");
            return RunStatus::Interrupted;
        }
        Err(e) => {
            eprintln!("awf: run {id} is left interrupted: {e}");
            return RunStatus::Interrupted;
        }
    };
    // The run's lock is held now: an attempt still `running` or `waiting` on record died; one
    // that ended (another process resumed it meanwhile) is not run again.
    let last = attempt.resume.run.attempts.last().and_then(|a| a.status.as_ref()).and_then(|s| s.known());
    if let Some(status) = last.filter(|s| s.is_final() && *s != RunStatus::Interrupted) {
        return status;
    }
    let mut flags = super::options::flags(&server.flags, request).unwrap_or_else(|_| server.flags.clone());
    flags.runs_dir = dir.parent().map(std::path::Path::to_path_buf);
    let spec = match prepare(&attempt.program, attempt.args.clone(), &flags, Some(attempt.resume)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("awf: run {id} is left interrupted: {}", crate::cli::shown(&e));
            return RunStatus::Interrupted;
        }
    };
    let deadline = spec.deadline;
    let rt = tokio::runtime::Handle::current();
    let req = launch::Request { spec, id: None, caller: None, parent: None };
    let host = match launch::start(req, rt, capabilities()) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("awf: run {id} is left interrupted: cannot start its attempt: {e}");
            return RunStatus::Interrupted;
        }
    };
    server.set_status(id, RunStatus::Running, Some(host.run.clone()));
    launch::run(host, launch::Admission::RunLimit, &attempt.program, attempt.args, deadline, attempt.output)
        .await
        .status
}

/// What serve's runs may do: convene councils, their background ones each on a slot of the
/// machine's pool.
fn capabilities() -> launch::Capabilities {
    crate::council::child::capabilities(launch::CouncilPool::Machine)
}
