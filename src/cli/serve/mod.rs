//! `awf serve`: a long-lived process with an HTTP JSON API (axum) on a Unix socket or a loopback
//! TCP address. Runs execute in this process on its one tokio runtime; at most `--max-runs` at
//! once, the rest wait in a visible, bounded queue (`queue.rs`, `--max-queued`). A run it accepts
//! is kept on disk before the 202 (`record::accepted`); a serve that starts takes over what one
//! that died left, queued or interrupted (`recover.rs`). Strategies come from one registry for the
//! server's life, watched: an edit is live for the next request, a broken file keeps its last good
//! version (`strategies.rs`). `GET /runs` lists every run of the runs folder, and a run of another
//! process is stopped through its control socket; a run waiting for the operator is answered
//! through it too (`answer.rs`). Safe by default: a bearer token on TCP (`auth.rs`), a private
//! socket (`private.rs`), scripts only from its script folder (`scripts.rs`), and errors that show
//! lines of no other file.

mod answer;
mod auth;
mod dashboard;
mod events;
mod job;
mod listen;
mod options;
mod plans;
mod private;
mod queue;
mod recover;
mod run_page;
mod runs;
mod sign_in;
mod strategies;

use super::listing;
use super::script::RunFlags;
use super::EXIT_OK;
use crate::council::registry::Registry;
use crate::record::accepted;
use crate::run::{Run, RunStatus, StopCause};
use crate::script;
use anyhow::{bail, Context, Result};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(clap::Args)]
pub struct ServeArgs {
    /// Listen on this loopback TCP address (e.g. 127.0.0.1:8700) instead of the Unix socket
    #[arg(long, conflicts_with = "socket")]
    listen: Option<String>,
    /// The Unix socket to listen on (default: .awf/serve.sock)
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Most runs at once; later ones are queued
    #[arg(long, default_value_t = 2)]
    max_runs: usize,
    /// Most runs waiting for a slot; a POST /runs past it is refused with 429
    #[arg(long, default_value_t = 1000)]
    max_queued: usize,
    /// Leave the runs an earlier serve accepted and did not finish (queued or interrupted) as
    /// they are, instead of running and resuming them
    #[arg(long)]
    no_recover: bool,
    /// The runtime alias agents use when their spec names none
    #[arg(long)]
    runtime: Option<String>,
    /// Where run folders go (default: .awf/runs)
    #[arg(long)]
    runs_dir: Option<PathBuf>,
    /// The folder clients' scripts are read from (default: the working folder)
    #[arg(long, value_name = "DIR")]
    scripts: Option<PathBuf>,
    /// With --listen: where the generated token is written, mode 0600 (default: .awf/serve.token;
    /// not written when AWF_SERVE_TOKEN gives the token)
    #[arg(long, value_name = "PATH", requires = "listen")]
    token_file: Option<PathBuf>,
}

/// One run the server knows of.
struct Entry {
    id: String,
    script: String,
    /// queued, running, or the run's final status.
    status: RunStatus,
    dir: PathBuf,
    run: Option<Arc<Run>>,
    /// This server's hold on the run (`serve.lock`), while it is queued or running here.
    hold: Option<accepted::Hold>,
    /// A stop asked while the run was starting: it is stopped as soon as it runs.
    stop_asked: bool,
}

struct Server {
    cwd: PathBuf,
    /// The script folder, canonical: a client names scripts inside it.
    scripts: PathBuf,
    flags: RunFlags,
    runs: Mutex<Vec<Entry>>,
    queue: Mutex<queue::Queue>,
    /// Every strategy, compiled once and recompiled when its files change.
    registry: Arc<Registry>,
}

type Shared = Arc<Server>;

impl Server {
    fn entries(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        // Entries are replaced field by field; a poisoned lock is still usable.
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, queue::Queue> {
        // The queue's counters change one statement at a time; a poisoned lock is still usable.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set_status(&self, id: &str, status: RunStatus, run: Option<Arc<Run>>) {
        if let Some(e) = self.entries().iter_mut().find(|e| e.id == id) {
            e.status = status;
            if let Some(run) = run {
                if e.stop_asked {
                    run.stop_with(StopCause::Cancelled("stopped over the API".into()));
                }
                e.run = Some(run);
            }
        }
    }

    /// Moves a queued run to `running` (it is starting); false when it was stopped first.
    fn begin(&self, id: &str) -> bool {
        let mut entries = self.entries();
        match entries.iter_mut().find(|e| e.id == id) {
            // `awf runs stop` of a run queued here marks its record: read again before it starts.
            Some(e) if e.status == RunStatus::Queued && cancelled_on_disk(&e.dir) => {
                e.status = RunStatus::Cancelled;
                e.hold = None;
                false
            }
            Some(e) if e.status == RunStatus::Queued => {
                e.status = RunStatus::Running;
                true
            }
            _ => false,
        }
    }

    /// A run this server held has ended (or was left): its hold goes.
    fn ended(&self, id: &str, status: RunStatus) {
        if let Some(e) = self.entries().iter_mut().find(|e| e.id == id) {
            e.status = status;
            e.hold = None;
        }
    }

    pub(super) fn status(&self, id: &str) -> Option<RunStatus> {
        self.entries().iter().find(|e| e.id == id).map(|e| e.status)
    }

    /// The runs folder `GET /runs` lists, read from the config at each request (a config broken
    /// now is reported by `POST /runs`; meanwhile `--runs-dir` or `.awf/runs` is listed).
    fn runs_dir(&self) -> PathBuf {
        listing::runs_dir(&self.cwd, self.flags.runs_dir.as_ref())
            .unwrap_or_else(|_| crate::record::runs_dir(&self.cwd, self.flags.runs_dir.as_deref(), None))
    }
}

pub fn exec(args: ServeArgs) -> Result<i32> {
    if args.max_runs == 0 {
        bail!("--max-runs must be at least 1");
    }
    let cwd = std::env::current_dir().context("cannot read the current folder")?;
    let scripts = args.scripts.as_ref().map(|d| cwd.join(d)).unwrap_or_else(|| cwd.clone());
    let scripts = match scripts.canonicalize() {
        Ok(dir) if dir.is_dir() => dir,
        Ok(_) => bail!("--scripts {}: not a folder", scripts.display()),
        Err(e) => bail!("--scripts {}: {e}", scripts.display()),
    };
    // Errors a client reads show lines of the script folder's .rhai files and the embedded
    // stdlib only (never /etc/shadow's first line, nor the user's strategies).
    script::show_lines_only_under(vec![scripts.clone()]);
    let flags =
        RunFlags { runtime: args.runtime.clone(), runs_dir: args.runs_dir.clone(), quiet: true, ..Default::default() };
    let registry = strategies::watched(&cwd);
    let server = Arc::new(Server {
        cwd: cwd.clone(),
        scripts,
        flags,
        runs: Mutex::new(Vec::new()),
        queue: Mutex::new(queue::Queue::new(args.max_runs, args.max_queued)),
        registry,
    });
    let rt =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the async runtime")?;
    rt.block_on(serve(server, args, cwd))
}

async fn serve(server: Shared, args: ServeArgs, cwd: PathBuf) -> Result<i32> {
    // What a serve that died left is taken over (or, with --no-recover, left) before any new run.
    let found = recover::find(&server.runs_dir());
    recover::take_over(&server, found, !args.no_recover);
    let app = Router::new()
        .route("/runs", post(runs::start_run).get(runs::list_runs))
        .route("/runs/{id}", get(runs::show_run))
        .route("/runs/{id}/stop", post(runs::stop_run))
        .route("/runs/{id}/answer", post(answer::answer_run))
        .route("/runs/{id}/events", get(events::events))
        .route("/plans", post(plans::plan))
        .route("/strategies", get(strategies::list))
        .route("/", get(dashboard::page))
        .route("/dashboard.js", get(dashboard::script))
        .route("/dashboard/runs", get(dashboard::runs))
        .route("/runs/{id}/view", get(run_page::view))
        .with_state(server.clone())
        // MCP over streamable HTTP: the tools of `awf mcp`, behind the same authentication.
        .nest_service("/mcp", super::mcp::http_service(cwd.clone(), server.runs_dir()));
    match &args.listen {
        Some(addr) => listen::tcp(app, addr, args.token_file.as_deref(), &cwd).await?,
        None => listen::unix(app, args.socket.as_deref(), &cwd).await?,
    }
    match server.queue().close() {
        0 => eprintln!("awf: stopping; cancelling runs in flight"),
        n => eprintln!("awf: stopping; cancelling runs in flight; {n} queued runs stay queued for the next awf serve"),
    }
    let running: Vec<Arc<Run>> = server.entries().iter().filter_map(|e| e.run.clone()).collect();
    for run in &running {
        run.stop_with(StopCause::Cancelled("the server stopped".into()));
    }
    for _ in 0..60 {
        if server.entries().iter().all(|e| e.status != RunStatus::Running) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(EXIT_OK)
}

fn error(status: StatusCode, text: impl Into<String>) -> Response {
    (status, Json(json!({ "error": text.into() }))).into_response()
}

/// The folder of a run this server does not hold, if there is one.
fn folder_of(server: &Server, id: &str) -> Option<PathBuf> {
    listing::run_dir(&server.runs_dir(), id).ok()
}

/// Whether the record of a run queued here says it was stopped (`awf runs stop` from another
/// process).
fn cancelled_on_disk(dir: &std::path::Path) -> bool {
    accepted::read(dir).is_some_and(|a| a.status == accepted::Admission::Cancelled)
}
