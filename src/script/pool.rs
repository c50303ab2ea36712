//! The branch thread pool: `ctx.parallel` runs its branches on worker threads that are kept and
//! reused (creating a 16 MiB-stack thread per branch cost more than a fake turn). A job always
//! gets a thread of its own at once: an idle worker when there is one, else a new one, so a
//! branch never waits behind another (branches may block for a whole agent turn).

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

pub type Job = Box<dyn FnOnce() + Send + 'static>;

/// How long an idle worker waits for work before it exits.
const IDLE: Duration = Duration::from_secs(30);

struct Pool {
    /// Idle workers, each waiting on its own channel, with an id to find it again.
    idle: Mutex<Vec<(u64, Sender<Job>)>>,
    next_id: Mutex<u64>,
    stack: usize,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool { idle: Mutex::new(Vec::new()), next_id: Mutex::new(0), stack: super::api::WORKER_STACK })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Each critical section is a single push, pop or retain: a poisoned lock is still consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs `job` on a worker thread at once. Fails only when no thread can be created.
pub fn spawn(job: Job) -> Result<(), String> {
    let p = pool();
    let mut job = job;
    while let Some((_, tx)) = lock(&p.idle).pop() {
        match tx.send(job) {
            Ok(()) => return Ok(()),
            // The worker exited between being listed and being claimed: try the next one.
            Err(mpsc::SendError(j)) => job = j,
        }
    }
    let id = {
        let mut n = lock(&p.next_id);
        *n += 1;
        *n
    };
    std::thread::Builder::new()
        .name(format!("awf-branch-{id}"))
        .stack_size(p.stack)
        .spawn(move || worker(id, job))
        .map(|_| ())
        .map_err(|e| format!("cannot start a parallel worker thread: {e}"))
}

fn worker(id: u64, first: Job) {
    let p = pool();
    let mut job = first;
    loop {
        job();
        let (tx, rx) = mpsc::channel::<Job>();
        lock(&p.idle).push((id, tx));
        job = loop {
            match rx.recv_timeout(IDLE) {
                Ok(j) => break j,
                Err(RecvTimeoutError::Timeout) => {
                    let mut idle = lock(&p.idle);
                    let before = idle.len();
                    idle.retain(|(i, _)| *i != id);
                    if idle.len() < before {
                        return; // Still listed, so nobody claimed this worker: exit.
                    }
                    // Claimed just now: the job is on its way.
                }
                Err(RecvTimeoutError::Disconnected) => return,
            }
        };
    }
}

/// Work handed to the pool only if the caller is still busy after a short grace: a parallel group
/// whose branches finish within it (instant fake agents) runs on its caller alone, with no thread
/// handoff, while a group whose first branch blocks gets its helpers a moment later.
pub struct Deferred {
    pending: Mutex<Vec<(u64, std::time::Instant, Vec<Job>)>>,
    wake: std::sync::Condvar,
    next: Mutex<u64>,
}

/// How long a caller works alone before helpers join it.
pub const HELPERS_AFTER: Duration = Duration::from_micros(300);

fn deferred() -> &'static Deferred {
    static D: OnceLock<Deferred> = OnceLock::new();
    D.get_or_init(|| {
        let d = Deferred { pending: Mutex::new(Vec::new()), wake: std::sync::Condvar::new(), next: Mutex::new(0) };
        let started = std::thread::Builder::new().name("awf-helpers".into()).spawn(|| deferred().run());
        if let Err(e) = started {
            tracing::error!("cannot start the helper timer: {e}; parallel helpers start at once");
        }
        d
    })
}

impl Deferred {
    fn run(&self) {
        let mut pending = lock(&self.pending);
        loop {
            let now = std::time::Instant::now();
            let mut due = Vec::new();
            pending.retain_mut(|(_, at, jobs)| {
                if *at <= now {
                    due.append(jobs);
                    false
                } else {
                    true
                }
            });
            if !due.is_empty() {
                drop(pending);
                for job in due {
                    if let Err(e) = spawn(job) {
                        tracing::error!("{e}");
                    }
                }
                pending = lock(&self.pending);
                continue;
            }
            let wait = pending.iter().map(|(_, at, _)| at.saturating_duration_since(now)).min();
            pending = match wait {
                Some(w) => self.wake.wait_timeout(pending, w).map(|(g, _)| g).unwrap_or_else(|p| p.into_inner().0),
                None => self.wake.wait(pending).unwrap_or_else(|p| p.into_inner()),
            };
        }
    }
}

/// Schedules `jobs` to start on pool threads after `HELPERS_AFTER`, unless `cancel_deferred` takes
/// them back first. Returns a ticket for that.
pub fn defer(jobs: Vec<Job>) -> u64 {
    let d = deferred();
    let id = {
        let mut n = lock(&d.next);
        *n += 1;
        *n
    };
    lock(&d.pending).push((id, std::time::Instant::now() + HELPERS_AFTER, jobs));
    d.wake.notify_one();
    id
}

/// Takes back jobs not started yet; true when they were still pending.
pub fn cancel_deferred(ticket: u64) -> bool {
    let mut pending = lock(&deferred().pending);
    let before = pending.len();
    pending.retain(|(id, _, _)| *id != ticket);
    pending.len() < before
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_run_concurrently_and_workers_are_reused() {
        let (tx, rx) = mpsc::channel();
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(3));
        for _ in 0..3 {
            let (tx, b) = (tx.clone(), barrier.clone());
            // All three must run at once to pass the barrier: no job waits behind another.
            spawn(Box::new(move || {
                b.wait();
                tx.send(std::thread::current().name().map(String::from)).expect("send");
            }))
            .expect("spawn");
        }
        let first: Vec<_> = (0..3).map(|_| rx.recv_timeout(Duration::from_secs(10)).expect("ran")).collect();
        // Wait (bounded) until the finished workers have listed themselves as idle.
        let listed = std::time::Instant::now();
        while lock(&pool().idle).len() < 3 && listed.elapsed() < Duration::from_secs(10) {
            std::thread::yield_now();
        }
        let tx2 = tx.clone();
        spawn(Box::new(move || tx2.send(std::thread::current().name().map(String::from)).expect("send")))
            .expect("spawn");
        let again = rx.recv_timeout(Duration::from_secs(10)).expect("ran");
        assert!(first.contains(&again), "a finished worker is reused: {again:?} not in {first:?}");
    }
}
