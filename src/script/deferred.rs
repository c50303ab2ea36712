//! Helpers that join a parallel's caller after a grace: work handed to the branch pool only if the
//! caller is still busy after `HELPERS_AFTER`. A group whose branches finish within it (instant
//! fake agents) runs on its caller alone, with no thread handoff, while a group whose first branch
//! blocks gets its helpers a moment later.
//!
//! One timer thread starts the jobs that fall due. While groups keep coming it ticks on its own
//! every `HELPERS_AFTER`, so deferring and taking back are a lock and a push or a retain, with no
//! wake; only a timer gone idle (nothing deferred for `LINGER`) is woken by the next group.

use super::pool::{self, Job};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// How long a caller works alone before helpers join it. Helpers start between one and two
/// of these after being deferred (the timer ticks at this pace).
pub const HELPERS_AFTER: Duration = Duration::from_micros(300);

/// How long the timer keeps ticking with nothing deferred before it waits to be woken.
const LINGER: Duration = Duration::from_millis(50);

struct Timer {
    /// Jobs not started yet: ticket, when they fall due, the jobs.
    pending: Vec<(u64, Instant, Vec<Job>)>,
    next: u64,
    /// The timer waits on `wake` rather than ticking: the next `defer` must wake it.
    idle: bool,
    /// Times a `defer` woke the timer.
    wakes: u64,
}

struct Deferred {
    timer: Mutex<Timer>,
    wake: Condvar,
    /// False when the timer thread could not start: jobs then start at once.
    ticking: bool,
}

fn deferred() -> &'static Deferred {
    static D: OnceLock<Deferred> = OnceLock::new();
    D.get_or_init(|| {
        let started = std::thread::Builder::new().name("awf-helpers".into()).spawn(|| deferred().run());
        if let Err(e) = &started {
            tracing::error!("cannot start the helper timer: {e}; parallel helpers start at once");
        }
        let timer = Timer { pending: Vec::new(), next: 0, idle: false, wakes: 0 };
        Deferred { timer: Mutex::new(timer), wake: Condvar::new(), ticking: started.is_ok() }
    })
}

impl Deferred {
    fn lock(&self) -> MutexGuard<'_, Timer> {
        // Each critical section is a push, a retain or a flag: a poisoned lock is still consistent.
        self.timer.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn run(&self) {
        let mut last_busy = Instant::now();
        loop {
            let mut t = self.lock();
            let now = Instant::now();
            if !t.pending.is_empty() {
                last_busy = now;
            }
            let mut due = Vec::new();
            t.pending.retain_mut(|(_, at, jobs)| {
                if *at <= now {
                    due.append(jobs);
                    false
                } else {
                    true
                }
            });
            if !due.is_empty() {
                drop(t);
                for job in due {
                    if let Err(e) = pool::spawn(job) {
                        tracing::error!("{e}");
                    }
                }
                continue;
            }
            let nap = match t.pending.iter().map(|(_, at, _)| *at).min() {
                Some(at) => at.saturating_duration_since(now),
                None if now.duration_since(last_busy) < LINGER => HELPERS_AFTER,
                None => {
                    t.idle = true;
                    while t.idle {
                        t = self.wake.wait(t).unwrap_or_else(|p| p.into_inner());
                    }
                    last_busy = Instant::now();
                    continue;
                }
            };
            drop(t);
            std::thread::sleep(nap);
        }
    }
}

/// Schedules `jobs` to start on pool threads after `HELPERS_AFTER`, unless `cancel_deferred` takes
/// them back first. Returns a ticket for that.
pub fn defer(jobs: Vec<Job>) -> u64 {
    defer_until(jobs, Instant::now() + HELPERS_AFTER)
}

fn defer_until(jobs: Vec<Job>, at: Instant) -> u64 {
    let d = deferred();
    if !d.ticking {
        for job in jobs {
            if let Err(e) = pool::spawn(job) {
                tracing::error!("{e}");
            }
        }
        return 0;
    }
    let mut t = d.lock();
    t.next += 1;
    let id = t.next;
    t.pending.push((id, at, jobs));
    let wake = std::mem::replace(&mut t.idle, false);
    t.wakes += u64::from(wake);
    drop(t);
    if wake {
        d.wake.notify_one();
    }
    id
}

/// Takes back jobs not started yet; true when they were still pending.
pub fn cancel_deferred(ticket: u64) -> bool {
    let mut t = deferred().lock();
    let before = t.pending.len();
    t.pending.retain(|(id, _, _)| *id != ticket);
    t.pending.len() < before
}

/// Times a `defer` woke the timer thread.
#[cfg(test)]
fn wakes() -> u64 {
    deferred().lock().wakes
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn deferred_jobs_start_after_the_grace() {
        let (tx, rx) = mpsc::channel();
        let start = Instant::now();
        let ticket = defer(vec![Box::new(move || tx.send(start.elapsed()).expect("send"))]);
        let after = rx.recv_timeout(Duration::from_secs(10)).expect("started");
        assert!(after >= HELPERS_AFTER, "started after {after:?}, before the grace");
        assert!(!cancel_deferred(ticket), "started, so no longer pending");
    }

    #[test]
    fn jobs_taken_back_never_run() {
        let (tx, rx) = mpsc::channel::<()>();
        // Due in an hour: certainly still pending when taken back.
        let ticket =
            defer_until(vec![Box::new(move || tx.send(()).expect("send"))], Instant::now() + Duration::from_secs(3600));
        assert!(cancel_deferred(ticket), "still pending");
        // The job was dropped unrun with its sender: nothing can arrive.
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Err(mpsc::RecvTimeoutError::Disconnected));
    }

    #[test]
    fn groups_in_quick_succession_do_not_wake_the_timer_each() {
        let n = 5_000;
        for _ in 0..n {
            let ticket = defer(vec![Box::new(|| {})]);
            cancel_deferred(ticket);
        }
        let wakes = wakes();
        assert!(wakes < n / 100, "{wakes} wakes for {n} groups");
    }
}
