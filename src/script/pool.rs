//! The branch thread pool: `ctx.parallel` runs its branches on worker threads that are kept and
//! reused (creating a 16 MiB-stack thread per branch cost more than a fake turn). A job always
//! gets a thread of its own at once: an idle worker when there is one, else a new one, so a
//! branch never waits behind another (branches may block for a whole agent turn). An idle worker
//! parks on its own slot; handing it a job is a store and an unpark, with no channel to build.

use std::sync::{Arc, Mutex, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

pub type Job = Box<dyn FnOnce() + Send + 'static>;

/// How long an idle worker waits for work before it exits.
const IDLE: Duration = Duration::from_secs(30);

/// A worker, as the idle list knows it: where to put its next job and how to wake it.
struct Worker {
    job: Mutex<Option<Job>>,
    thread: Thread,
}

struct Pool {
    /// Idle workers, parked; the last to finish is the first reused.
    idle: Mutex<Vec<Arc<Worker>>>,
    next_id: Mutex<u64>,
    stack: usize,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool { idle: Mutex::new(Vec::new()), next_id: Mutex::new(0), stack: super::api::WORKER_STACK })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Each critical section is a single push, pop, take or retain: a poisoned lock is still
    // consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// No worker thread could be started for a parallel branch.
#[derive(Debug, thiserror::Error)]
#[error("cannot start a parallel worker thread: {0}")]
pub struct NoThread(#[source] std::io::Error);

/// Runs `job` on a worker thread at once. Fails only when no thread can be created.
pub fn spawn(job: Job) -> Result<(), NoThread> {
    let p = pool();
    // A listed worker has not exited: it leaves only after taking itself off the list.
    if let Some(w) = lock(&p.idle).pop() {
        *lock(&w.job) = Some(job);
        w.thread.unpark();
        return Ok(());
    }
    let id = {
        let mut n = lock(&p.next_id);
        *n += 1;
        *n
    };
    std::thread::Builder::new()
        .name(format!("awf-branch-{id}"))
        .stack_size(p.stack)
        .spawn(move || worker(job))
        .map(|_| ())
        .map_err(NoThread)
}

fn worker(first: Job) {
    let p = pool();
    let me = Arc::new(Worker { job: Mutex::new(None), thread: std::thread::current() });
    let mut job = first;
    loop {
        job();
        lock(&p.idle).push(me.clone());
        let idle_since = Instant::now();
        job = loop {
            if let Some(j) = lock(&me.job).take() {
                break j;
            }
            let left = IDLE.saturating_sub(idle_since.elapsed());
            if left.is_zero() {
                let mut idle = lock(&p.idle);
                if let Some(at) = idle.iter().position(|w| Arc::ptr_eq(w, &me)) {
                    idle.swap_remove(at);
                    return; // Still listed, so nobody claimed this worker: exit.
                }
                // Claimed just now: the job is on its way, with an unpark.
                drop(idle);
                std::thread::park();
                continue;
            }
            // Parking may end early (an unpark meant for an earlier job, or spuriously): the
            // loop looks at the slot again.
            std::thread::park_timeout(left);
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

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
        let listed = Instant::now();
        while lock(&pool().idle).len() < 3 && listed.elapsed() < Duration::from_secs(10) {
            std::thread::yield_now();
        }
        let tx2 = tx.clone();
        spawn(Box::new(move || tx2.send(std::thread::current().name().map(String::from)).expect("send")))
            .expect("spawn");
        let again = rx.recv_timeout(Duration::from_secs(10)).expect("ran");
        assert!(first.contains(&again), "a finished worker is reused: {again:?} not in {first:?}");
    }

    #[test]
    fn one_worker_serves_many_jobs_one_after_another() {
        let (tx, rx) = mpsc::channel();
        let mut names = std::collections::HashSet::new();
        for i in 0..2_000 {
            let tx = tx.clone();
            spawn(Box::new(move || tx.send((i, std::thread::current().name().map(String::from))).expect("send")))
                .expect("spawn");
            let (got, name) = rx.recv_timeout(Duration::from_secs(10)).expect("ran");
            assert_eq!(got, i);
            names.insert(name.clone());
            // The next job finds this worker idle once it has listed itself (bounded wait).
            let listed = Instant::now();
            let is_listed = || lock(&pool().idle).iter().any(|w| w.thread.name().map(String::from) == name);
            while !is_listed() && listed.elapsed() < Duration::from_secs(10) {
                std::thread::yield_now();
            }
        }
        assert_eq!(names.len(), 1, "every job ran on the one idle worker: {names:?}");
    }
}
