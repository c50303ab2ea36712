//! Background runs. `--detach` names the run, makes its folder, and starts the same command again
//! in a process of its own (`--as-run ID`: a new session, no terminal, its output in `output.log`
//! in the run folder), then prints the id and returns. That process waits its turn in a
//! machine-wide queue, `$XDG_STATE_HOME/awf/background/` (else `~/.local/state/awf/background/`):
//! a ticket per waiting run (named by run id, so they start in the order they were asked for,
//! flocked by its waiter) and `[limits] background` slot locks, one held by each run in flight.
//! Until its run starts, `background.json` in the run folder says it is `queued`.

use crate::record::private;
use crate::run::RunSpec;
use anyhow::{Context, Result};
use nix::fcntl::{Flock, FlockArg};
use serde_json::{json, Value};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The background record in a run folder.
pub const FILE: &str = "background.json";
/// A background run's stdout and stderr.
pub const OUTPUT: &str = "output.log";
/// Background runs at once on this machine when `[limits] background` is not set.
pub const DEFAULT_SLOTS: usize = 4;

fn write(dir: &Path, doc: &Value) -> std::io::Result<()> {
    let tmp = dir.join(format!(".{FILE}.tmp"));
    std::fs::write(&tmp, serde_json::to_vec_pretty(doc)?)?;
    std::fs::rename(&tmp, dir.join(FILE))
}

fn alive(pid: i64) -> bool {
    i32::try_from(pid).is_ok_and(|p| p > 0 && nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), None).is_ok())
}

/// The status of a background run that has not started: `queued` while its process waits,
/// `cancelled` when it was stopped in the queue, `failed` when it could not start, `interrupted`
/// when its process died first.
pub fn status(dir: &Path) -> String {
    let doc = super::listing::read(&dir.join(FILE));
    match (doc["status"].as_str(), doc["pid"].as_i64()) {
        (Some("queued"), Some(pid)) if !alive(pid) => "interrupted".into(),
        (Some(s), _) => s.to_string(),
        (None, _) => "?".into(),
    }
}

/// The pid of the process waiting in the queue for run `dir`, while it waits.
pub fn queued_pid(dir: &Path) -> Option<i32> {
    if dir.join("run.json").exists() {
        return None;
    }
    let doc = super::listing::read(&dir.join(FILE));
    let pid = doc["pid"].as_i64().filter(|p| alive(*p))?;
    (doc["status"] == "queued").then(|| i32::try_from(pid).ok()).flatten()
}

/// Starts this command again in the background as run `id` under `runs_dir`; returns the id.
pub fn detach(runs_dir: &Path, script: &str) -> Result<String> {
    let id = crate::record::new_run_id();
    let dir = runs_dir.join(&id);
    private::create_dir(&dir).with_context(|| format!("cannot create the run folder {}", dir.display()))?;
    write(
        &dir,
        &json!({ "v": 1, "id": id, "script": script, "queued_at": crate::record::now_iso(),
                          "status": "queued", "pid": null }),
    )?;
    let out = private::append(&dir.join(OUTPUT)).context("cannot create output.log")?;
    let err = out.try_clone().context("cannot share output.log")?;
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).filter(|a| a != "--detach").collect();
    let exe = std::env::current_exe().context("cannot find the awf binary")?;
    std::process::Command::new(exe)
        .args(args)
        .args(["--as-run", &id])
        .stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .context("cannot start the background process")?;
    Ok(id)
}

/// Marks a background run that never started: `cancelled` or `failed`, with why.
pub fn mark(dir: &Path, status: &str, why: &str) {
    let mut doc = super::listing::read(&dir.join(FILE));
    if doc.is_object() {
        doc["status"] = json!(status);
        doc["error"] = json!(why);
        doc["finished_at"] = json!(crate::record::now_iso());
        let _ = write(dir, &doc);
    }
}

fn state_dir() -> PathBuf {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local").join("state")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("awf").join("background")
}

fn try_lock(path: &Path) -> Option<Flock<File>> {
    let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path).ok()?;
    Flock::lock(file, FlockArg::LockExclusiveNonblock).ok()
}

/// A slot of the machine's background pool, held until the process exits.
pub struct Slot {
    _lock: Flock<File>,
}

/// A waiting run's place in the queue; removed when dropped.
struct Ticket {
    path: PathBuf,
    _lock: Flock<File>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The first ticket whose waiter is alive; dead waiters' tickets are removed.
fn first_live(tickets: &Path, mine: &str) -> Option<String> {
    let mut names: Vec<String> = std::fs::read_dir(tickets)
        .ok()?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    for name in names {
        if name == mine {
            return Some(name);
        }
        match try_lock(&tickets.join(&name)) {
            // Nobody holds it: its waiter is gone.
            Some(_stale) => {
                let _ = std::fs::remove_file(tickets.join(&name));
            }
            None => return Some(name),
        }
    }
    None
}

/// Marks run `dir` as waiting in this process, then waits until it is first in line and a slot
/// is free. Cancel safety: dropping the future leaves the queue (the ticket is removed).
pub async fn admit(dir: &Path, id: &str, slots: usize) -> Result<Slot> {
    let mut doc = super::listing::read(&dir.join(FILE));
    if doc.is_object() {
        doc["pid"] = json!(std::process::id());
        write(dir, &doc).context("cannot update background.json")?;
    }
    let state = state_dir();
    let tickets = state.join("tickets");
    let slot_dir = state.join("slots");
    for d in [&tickets, &slot_dir] {
        private::create_dir(d).with_context(|| format!("cannot create {}", d.display()))?;
    }
    // The ticket is locked before it is visible, so no one takes it for a dead waiter's.
    let tmp = state.join(format!(".{id}.{}", std::process::id()));
    let lock = try_lock(&tmp).with_context(|| format!("cannot lock {}", tmp.display()))?;
    let path = tickets.join(id);
    std::fs::rename(&tmp, &path).with_context(|| format!("cannot queue {}", path.display()))?;
    let ticket = Ticket { path, _lock: lock };
    loop {
        if first_live(&tickets, id).as_deref() == Some(id) {
            for i in 0..slots.max(1) {
                if let Some(lock) = try_lock(&slot_dir.join(format!("{i}.lock"))) {
                    drop(ticket);
                    return Ok(Slot { _lock: lock });
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether this process is a background run holding its slot: its councils run on that slot.
static HOLDS_SLOT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `admit` as the council layer takes it (`council::background::install_pool`): a slot for a
/// background council's child run, `[limits] background` slots (else `DEFAULT_SLOTS`). In a
/// background run, which holds a slot already and waits for its councils, they run on its slot:
/// else with every slot held by such runs none could ever end.
pub fn admit_council(
    dir: PathBuf,
    id: String,
    slots: Option<usize>,
) -> crate::run::BoxFuture<'static, std::result::Result<Box<dyn Send>, String>> {
    Box::pin(async move {
        if HOLDS_SLOT.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(Box::new(()) as Box<dyn Send>);
        }
        match admit(&dir, &id, slots.unwrap_or(DEFAULT_SLOTS)).await {
            Ok(slot) => Ok(Box::new(slot) as Box<dyn Send>),
            Err(e) => Err(format!("{e:#}")),
        }
    })
}

/// A background run's process: out of the terminal's session, then its place in the machine's
/// queue. `Err(code)`: it ended before starting (stopped while queued, or it could not queue).
pub fn wait_in_queue(rt: &tokio::runtime::Runtime, spec: &RunSpec, id: &str) -> std::result::Result<Slot, i32> {
    // A new session: no terminal's Ctrl-C or hang-up reaches it.
    let _ = nix::unistd::setsid();
    let dir = spec.runs_dir.join(id);
    if status(&dir) != "queued" {
        eprintln!("awf: run {id} was {} before it started", status(&dir));
        return Err(crate::host::exit::CANCELLED);
    }
    let slots = spec.config.limits.background.unwrap_or(DEFAULT_SLOTS);
    let admitted = rt.block_on(async {
        let mut signals = super::ending::Signals::new().ok();
        let stop = async {
            match signals.as_mut() {
                Some(s) => s.next().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            slot = admit(&dir, id, slots) => slot.map_err(|e| ("failed", format!("cannot queue: {e:#}"))),
            name = stop => Err(("cancelled", format!("stopped while queued ({})", name.unwrap_or("a signal")))),
        }
    });
    if admitted.is_ok() {
        HOLDS_SLOT.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    admitted.map_err(|(status, why)| {
        mark(&dir, status, &why);
        eprintln!("awf: run {id}: {why}");
        crate::host::exit::CANCELLED
    })
}
