//! Deadlines: when work must settle. Kept as `Instant`s inside the engine; unix milliseconds only
//! where a person or a script reads them.

use std::time::{Duration, Instant};

/// Converts a unix-ms deadline to an `Instant` (already passed deadlines become now).
pub fn instant_of(unix_ms: i64) -> Instant {
    let now = crate::record::now_unix_ms();
    Instant::now() + Duration::from_millis((unix_ms - now).max(0) as u64)
}

/// The unix-ms time of an `Instant` (for display and for scripts).
pub fn unix_ms_of(at: Instant) -> i64 {
    crate::record::now_unix_ms() + at.saturating_duration_since(Instant::now()).as_millis() as i64
}
