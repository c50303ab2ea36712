//! The one deadline type, from the command line (`--deadline 30s`) and scripts (`timeout_ms`,
//! `deadline` in unix ms) down to the harnesses: a point in time. Unix milliseconds only where a
//! person or a script reads it.

use std::time::{Duration, Instant};

/// When work must settle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Deadline(Instant);

impl Deadline {
    /// `d` from now.
    pub fn after(d: Duration) -> Deadline {
        Deadline(Instant::now() + d)
    }

    /// A deadline given in unix milliseconds (one already passed is now).
    pub fn at_unix_ms(unix_ms: i64) -> Deadline {
        let now = crate::record::now_unix_ms();
        Deadline::after(Duration::from_millis((unix_ms - now).max(0) as u64))
    }

    /// This deadline in unix milliseconds (for scripts and for people).
    pub fn unix_ms(self) -> i64 {
        crate::record::now_unix_ms() + self.remaining().as_millis() as i64
    }

    pub fn instant(self) -> Instant {
        self.0
    }

    /// How long until it passes (zero once it has).
    pub fn remaining(self) -> Duration {
        self.0.saturating_duration_since(Instant::now())
    }

    pub fn passed(self) -> bool {
        Instant::now() >= self.0
    }

    /// The earlier of two optional deadlines.
    pub fn earliest(a: Option<Deadline>, b: Option<Deadline>) -> Option<Deadline> {
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Sleeps until `deadline`, or forever when there is none. Cancel safety: dropping it is fine.
    pub async fn sleep(deadline: Option<Deadline>) {
        match deadline {
            Some(d) => tokio::time::sleep_until(d.0.into()).await,
            None => std::future::pending().await,
        }
    }
}
