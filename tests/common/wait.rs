//! Waiting for something a test cannot be told about (a file, a folder, a line in a log, a status
//! behind a request): every bounded poll of the tests is one of these, so that no test sleeps to
//! synchronise and every wait fails, after its limit, naming what it waited for.

use super::{Env, TIMEOUT};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How often a cheap look (a file, a folder, a counter) is taken again.
const CHEAP: Duration = Duration::from_millis(10);

/// How often a dear look (a process to run, a request to make, a screen to capture) is taken
/// again.
const DEAR: Duration = Duration::from_millis(50);

/// Takes `look` every `every` until it gives a value; after `limit` fails with `what` and what
/// the last look saw. The only loop here: the helpers below choose its pace and its message.
#[track_caller]
fn poll_every<T>(what: &str, limit: Duration, every: Duration, mut look: impl FnMut() -> Result<T, String>) -> T {
    let end = Instant::now() + limit;
    loop {
        let seen = match look() {
            Ok(v) => return v,
            Err(seen) => seen,
        };
        assert!(Instant::now() < end, "{what}: not within {limit:?}{seen}");
        std::thread::sleep(every);
    }
}

/// Polls (every 10 ms, at most `TIMEOUT`) until `ready` holds.
#[track_caller]
pub fn wait_until(what: &str, ready: impl FnMut() -> bool) {
    wait_until_within(what, TIMEOUT, ready)
}

/// As [`wait_until`], with a limit of its own (a cluster, a real model).
#[track_caller]
pub fn wait_until_within(what: &str, limit: Duration, mut ready: impl FnMut() -> bool) {
    poll_every(what, limit, CHEAP, || if ready() { Ok(()) } else { Err(String::new()) })
}

/// Polls `f` every 50 ms until it gives a value, failing with `what` after `limit`.
#[track_caller]
pub fn poll<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    poll_every(what, limit, DEAR, || f().ok_or_else(String::new))
}

/// Polls `look` every 50 ms until it gives a value; a look that does not says what it saw (a
/// screen, a status), and the failure after `limit` shows the last one.
#[track_caller]
pub fn poll_seeing<T>(what: &str, limit: Duration, mut look: impl FnMut() -> Result<T, String>) -> T {
    poll_every(what, limit, DEAR, || look().map_err(|seen| format!("; last seen:\n{seen}")))
}

/// Polls (bounded) until `path` exists.
#[track_caller]
pub fn wait_for_file(path: &Path) {
    wait_until(&format!("{} to appear", path.display()), || path.exists())
}

/// The run folder of `env` once it exists; there must be one and only one.
#[track_caller]
pub fn wait_for_run_dir(env: &Env) -> PathBuf {
    wait_until("a run folder", || env.run_dirs().len() == 1);
    env.run_dir()
}

/// Waits (bounded) until attempt `n` of the run in `dir` is recorded `waiting`; run.json then.
#[track_caller]
pub fn wait_for_attempt_waiting(dir: &Path, n: usize) -> Value {
    // run.json is null while it is not written yet.
    let run_json = || {
        std::fs::read_to_string(dir.join("run.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    };
    wait_until(&format!("attempt {n} waiting"), || {
        let doc: Value = run_json();
        let attempts = doc["attempts"].as_array().cloned().unwrap_or_default();
        attempts.len() == n && attempts[n - 1]["status"] == "waiting"
    });
    run_json()
}
