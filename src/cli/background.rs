//! Background runs. `--detach` names the run, makes its folder, and starts the same command again
//! in a process of its own (`--as-run ID`: a new session, no terminal, its output in `output.log`
//! in the run folder), then prints the id and returns. That process waits its turn in the
//! machine's background pool (`host::pool`). Until its run starts, `background.json` in the run
//! folder says it is `queued`.

use crate::host::pool::{update, write};
use crate::record::docs::{self, BackgroundDoc};
use crate::record::private;
use crate::record::status::Recorded;
use crate::run::{RunSpec, RunStatus};
use anyhow::{Context, Result};
use std::path::Path;

pub use crate::host::pool::{Slot, DEFAULT_SLOTS, FILE};
/// A background run's stdout and stderr.
pub const OUTPUT: &str = "output.log";

fn alive(pid: i64) -> bool {
    i32::try_from(pid).is_ok_and(|p| p > 0 && nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), None).is_ok())
}

/// The status of a background run that has not started: `queued` while its process waits,
/// `cancelled` when it was stopped in the queue, `failed` when it could not start, `interrupted`
/// when its process died first; `?` when there is no background record.
pub fn status(dir: &Path) -> Recorded<RunStatus> {
    match docs::background(dir) {
        Some(d) if d.status == Recorded::Known(RunStatus::Queued) && d.pid.is_some_and(|p| !alive(p)) => {
            RunStatus::Interrupted.into()
        }
        Some(d) => d.status,
        None => Recorded::Other("?".into()),
    }
}

/// Whether the background run in `dir` still waits in the queue.
pub fn queued(dir: &Path) -> bool {
    status(dir) == Recorded::Known(RunStatus::Queued)
}

/// Starts this command again in the background as run `id` under `runs_dir`; returns the id.
pub fn detach(runs_dir: &Path, script: &str, argv: &[std::ffi::OsString]) -> Result<String> {
    let id = crate::record::new_run_id();
    let dir = runs_dir.join(&id);
    private::create_dir(&dir).with_context(|| format!("cannot create the run folder {}", dir.display()))?;
    let queued = BackgroundDoc {
        v: 1,
        id: id.clone(),
        script: Some(script.to_string()),
        queued_at: Some(crate::record::now_iso()),
        status: RunStatus::Queued.into(),
        pid: None,
        error: None,
        finished_at: None,
    };
    write(&dir, &queued)?;
    let out = private::append(&dir.join(OUTPUT)).context("cannot create output.log")?;
    let err = out.try_clone().context("cannot share output.log")?;
    let mut args: Vec<std::ffi::OsString> = argv.iter().filter(|a| *a != "--detach").cloned().collect();
    args.extend(["--as-run".into(), id.clone().into()]);
    let exe = std::env::current_exe().context("cannot find the awf binary")?;
    // The background awf raises the limit again, and gives its turns the one this awf started with.
    // Its arguments (a task, `--args`) go on its stdin, not on its command line, which every local
    // user can read for as long as the run lasts.
    let mut cmd = crate::open_files::command(exe);
    cmd.stdout(out).stderr(err);
    super::spawn_with_argv_on_stdin(cmd, &args).context("cannot start the background process")?;
    Ok(id)
}

fn ended(doc: &mut BackgroundDoc, status: RunStatus, why: &str) {
    doc.status = status.into();
    doc.error = Some(why.to_string());
    doc.finished_at = Some(crate::record::now_iso());
}

/// Marks a background run that never started: `Cancelled` or `Failed`, with why.
pub fn mark(dir: &Path, status: RunStatus, why: &str) {
    let _ = update(dir, |doc| ended(doc, status, why));
}

/// Stops a background run still queued: when its process has not yet said who it is, the run is
/// marked cancelled (its process reads that before it queues) and `None` comes back; otherwise
/// the record is left alone and the waiting process's pid comes back, for the caller to signal.
pub fn cancel_queued(dir: &Path, why: &str) -> Option<i32> {
    let mut waiting = None;
    let _ = update(dir, |doc| {
        if doc.status != Recorded::Known(RunStatus::Queued) {
            return;
        }
        match doc.pid.and_then(|p| i32::try_from(p).ok()) {
            Some(pid) => waiting = Some(pid),
            None => ended(doc, RunStatus::Cancelled, why),
        }
    });
    waiting
}

/// A background run's process: out of the terminal's session, then its place in the machine's
/// queue. `Err(code)`: it ended before starting (stopped while queued, or it could not queue).
pub fn wait_in_queue(rt: &tokio::runtime::Runtime, spec: &RunSpec, id: &str) -> std::result::Result<Slot, i32> {
    // A new session: no terminal's Ctrl-C or hang-up reaches it.
    let _ = nix::unistd::setsid();
    let dir = spec.runs_dir.join(id);
    let slots = spec.config.limits.background.unwrap_or(DEFAULT_SLOTS);
    let admitted = rt.block_on(async {
        // The signals are caught before the pid is written: a stop that reads it is heard.
        let mut signals = super::ending::Signals::new().ok();
        // Under the record's lock: a stop that came first has marked it, and then it never queues.
        let me = i64::from(std::process::id());
        let still = update(&dir, |doc| {
            if doc.status == Recorded::Known(RunStatus::Queued) {
                doc.pid = Some(me);
            }
        });
        if !matches!(&still, Ok(Some(d)) if d.pid == Some(me) && d.status == Recorded::Known(RunStatus::Queued)) {
            return Err(None);
        }
        let stop = async {
            match signals.as_mut() {
                Some(s) => s.next().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            slot = crate::host::pool::admit(id, slots) => slot.map_err(|e| Some((RunStatus::Failed, format!("cannot queue: {e}")))),
            name = stop => Err(Some((RunStatus::Cancelled, format!("stopped while queued ({})", name.unwrap_or("a signal"))))),
        }
    });
    admitted.map_err(|ended| {
        match ended {
            Some((status, why)) => {
                mark(&dir, status, &why);
                eprintln!("awf: run {id}: {why}");
            }
            None => eprintln!("awf: run {id} was {} before it started", status(&dir).as_str()),
        }
        crate::host::exit::CANCELLED
    })
}
