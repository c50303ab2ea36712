//! `awf serve`: a long-lived process with an HTTP JSON API (axum) on a Unix socket or a loopback
//! TCP address. Runs execute in this process on its one tokio runtime; at most `--max-runs` at
//! once, the rest wait in a visible queue. Strategies come from one registry for the server's
//! life, watched: an edit is live for the next request, a broken file keeps its last good
//! version (`strategies.rs`). `GET /runs` lists every run of the runs folder, and a run of another
//! process is stopped through its control socket; a run waiting for the operator is answered
//! through it too (`answer.rs`). Safe by default: a bearer token on TCP
//! (`auth.rs`), a private socket (`private.rs`), scripts only from its script folder
//! (`scripts.rs`), and errors that show lines of no other file.

mod answer;
mod auth;
mod listen;
mod options;
mod private;
mod strategies;

use super::listing;
use super::script::{check_script_args, prepare, RunFlags};
use super::EXIT_OK;
use crate::council::{self, registry::Registry};
use crate::host::control::{self, Request};
use crate::host::{drive, Host, Output};
use crate::run::{Run, RunStatus, StopCause};
use crate::script::{self, Program};
use anyhow::{bail, Context, Result};
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Map, Value};
use std::collections::VecDeque;
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
}

struct Server {
    cwd: PathBuf,
    /// The script folder, canonical: a client names scripts inside it.
    scripts: PathBuf,
    flags: RunFlags,
    runs: Mutex<Vec<Entry>>,
    slots: Arc<tokio::sync::Semaphore>,
    /// Every strategy, compiled once and recompiled when its files change.
    registry: Arc<Registry>,
}

type Shared = Arc<Server>;

impl Server {
    fn entries(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        // Entries are replaced field by field; a poisoned lock is still usable.
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set_status(&self, id: &str, status: RunStatus, run: Option<Arc<Run>>) {
        if let Some(e) = self.entries().iter_mut().find(|e| e.id == id) {
            e.status = status;
            if run.is_some() {
                e.run = run;
            }
        }
    }

    fn status(&self, id: &str) -> Option<RunStatus> {
        self.entries().iter().find(|e| e.id == id).map(|e| e.status)
    }

    /// The runs folder `GET /runs` lists, read from the config at each request (a config broken
    /// now is reported by `POST /runs`; meanwhile `--runs-dir` or `.awf/runs` is listed).
    fn runs_dir(&self) -> PathBuf {
        listing::runs_dir(&self.cwd, self.flags.runs_dir.as_ref()).unwrap_or_else(|_| {
            let dir = self.flags.runs_dir.clone().unwrap_or_else(|| PathBuf::from(".awf/runs"));
            if dir.is_absolute() {
                dir
            } else {
                self.cwd.join(dir)
            }
        })
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
        slots: Arc::new(tokio::sync::Semaphore::new(args.max_runs)),
        registry,
    });
    let rt =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the async runtime")?;
    rt.block_on(serve(server, args, cwd))
}

async fn serve(server: Shared, args: ServeArgs, cwd: PathBuf) -> Result<i32> {
    let app = Router::new()
        .route("/runs", post(start_run).get(list_runs))
        .route("/runs/{id}", get(show_run))
        .route("/runs/{id}/stop", post(stop_run))
        .route("/runs/{id}/answer", post(answer::answer_run))
        .route("/runs/{id}/events", get(events))
        .route("/strategies", get(strategies::list))
        .with_state(server.clone())
        // MCP over streamable HTTP: the tools of `awf mcp`, behind the same authentication.
        .nest_service("/mcp", super::mcp::http_service(cwd.clone(), server.runs_dir()));
    match &args.listen {
        Some(addr) => listen::tcp(app, addr, args.token_file.as_deref(), &cwd).await?,
        None => listen::unix(app, args.socket.as_deref(), &cwd).await?,
    }
    eprintln!("awf: stopping; cancelling runs in flight");
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

/// What a POST /runs body asks for, checked: the program, its input, how its end is read.
struct Job {
    program: Arc<Program>,
    input: Value,
    output: Output,
}

fn job(server: &Server, body: &Value) -> Result<Job, String> {
    let cwd = &server.cwd;
    if let Some(file) = body.get("script") {
        let file = file.as_str().ok_or("\"script\" must be a path, e.g. \"scripts/x.rhai\"")?;
        let named = super::scripts::resolve(&server.scripts, cwd, file, "the server's script folder")?;
        let source = std::fs::read_to_string(&named.path)
            .map_err(|e| format!("error: cannot read script {}: {e}", named.display))?;
        let program = script::load_source(named.path, named.display, source, cwd)?;
        let input = body.get("args").cloned().unwrap_or_else(|| Value::Object(Map::new()));
        check_script_args(&program, &input)?;
        return Ok(Job { program: Arc::new(program), input, output: Output::Value });
    }
    let Some(name) = body.get("strategy") else {
        return Err("the body needs \"script\" (with \"args\") or \"strategy\" (with \"task\" and \"params\")".into());
    };
    let name = name.as_str().ok_or("\"strategy\" must be a strategy's name")?;
    // The registry's last good version: a file broken since still serves the version before.
    let entry = server.registry.entry(name).ok_or_else(|| {
        let names: Vec<String> = server.registry.entries().into_iter().map(|e| e.strategy.name).collect();
        format!("error: unknown strategy \"{name}\" (installed: {})", names.join(", "))
    })?;
    let Some(program) = entry.program.clone() else {
        return Err(entry.error.unwrap_or_else(|| format!("error: strategy {name} did not compile")));
    };
    let task = body.get("task").and_then(Value::as_str).ok_or("a strategy run needs \"task\" (text)")?;
    let params = match body.get("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err("\"params\" must be an object".into()),
    };
    let params = council::check_call(&entry.strategy, &params).map_err(|e| format!("error: {e}"))?;
    if let Some(roster) = body.get("roster") {
        council::check_roster(roster).map_err(|e| format!("error: {e}"))?;
    }
    let mut input = json!({ "task": task, "params": params, "limits": { "budget_tokens": 0, "max_children": 0 } });
    for key in ["team", "roster"] {
        if let Some(v) = body.get(key) {
            input[key] = v.clone();
        }
    }
    Ok(Job { program, input, output: Output::Strategy })
}

async fn start_run(State(server): State<Shared>, body: Option<Json<Value>>) -> Response {
    let Some(Json(body)) = body else {
        return error(StatusCode::BAD_REQUEST, "the body must be a JSON object");
    };
    let job = match job(&server, &body) {
        Ok(j) => j,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let flags = match options::flags(&server.flags, &body) {
        Ok(f) => f,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("error: {e}")),
    };
    let spec = match prepare(&job.program, job.input.clone(), &flags, None) {
        Ok(s) => s,
        Err(e) => {
            // The first line only: a config file's parse error goes on with the file's offending
            // line, which may hold a key (the operator reads it whole from `awf script run`).
            let text = format!("error: {e:#}");
            return error(StatusCode::BAD_REQUEST, text.lines().next().unwrap_or_default());
        }
    };
    let id = crate::record::new_run_id();
    let dir = spec.runs_dir.join(&id);
    server.entries().push(Entry {
        id: id.clone(),
        script: job.program.display.clone(),
        status: RunStatus::Queued,
        dir,
        run: None,
    });
    tokio::spawn(run_job(server.clone(), id.clone(), job, spec));
    (StatusCode::ACCEPTED, Json(json!({ "run_id": id, "status": RunStatus::Queued }))).into_response()
}

/// Waits for a slot, then runs the job to its end.
async fn run_job(server: Shared, id: String, job: Job, spec: crate::run::RunSpec) {
    let Ok(_slot) = server.slots.clone().acquire_owned().await else { return };
    if server.status(&id).is_none_or(|s| s.is_final()) {
        return; // stopped while queued
    }
    let deadline = spec.deadline;
    let rt = tokio::runtime::Handle::current();
    let host = match Host::start(spec, Some(id.clone()), rt, Box::new(script::load_responder)) {
        Ok(h) => h,
        Err(e) => {
            tracing::error!("cannot create the run folder for {id}: {e}");
            server.set_status(&id, RunStatus::Failed, None);
            return;
        }
    };
    server.set_status(&id, RunStatus::Running, Some(host.run.clone()));
    let end = drive(host, &*job.program, job.input, deadline, job.output).await;
    server.set_status(&id, end.status, None);
}

fn row(e: &Entry) -> Value {
    let mut row = json!({ "run_id": e.id, "status": e.status, "script": e.script });
    // A run in flight parked on a checkpoint: what it asks the operator.
    let waiting = e.run.as_ref().map(|r| r.waiting()).unwrap_or_default();
    if !waiting.is_empty() && e.status == RunStatus::Running {
        row["status"] = json!(RunStatus::Waiting);
        row["waiting"] = Value::Array(waiting);
    }
    row
}

/// Every run of the runs folder (any process's), with this server's queue first-hand.
async fn list_runs(State(server): State<Shared>) -> Response {
    let own: Vec<Value> = server.entries().iter().map(row).collect();
    let root = server.runs_dir();
    let cwd = server.cwd.clone();
    let folder = tokio::task::spawn_blocking(move || {
        listing::ids(&root).into_iter().map(|id| listing::summary(&root, &id, &cwd)).collect::<Vec<_>>()
    })
    .await
    .unwrap_or_default();
    let mut rows: Vec<Value> = folder
        .iter()
        .map(|s| {
            let mut v = s.json();
            // This server knows its own runs' state first-hand (a queued run has no folder yet).
            if let Some(o) = own.iter().find(|o| o["run_id"] == s.id.as_str()) {
                v["status"] = o["status"].clone();
            }
            v
        })
        .collect();
    rows.extend(own.iter().filter(|o| !folder.iter().any(|s| o["run_id"] == s.id.as_str())).cloned());
    Json(json!({ "runs": rows })).into_response()
}

/// The folder of a run this server does not hold, if there is one.
fn folder_of(server: &Server, id: &str) -> Option<PathBuf> {
    listing::run_dir(&server.runs_dir(), id).ok()
}

fn read_json(path: &std::path::Path) -> Option<Value> {
    std::fs::read_to_string(path).ok().and_then(|t| serde_json::from_str(&t).ok())
}

async fn show_run(State(server): State<Shared>, UrlPath(id): UrlPath<String>) -> Response {
    let found = server.entries().iter().find(|e| e.id == id).map(|e| (row(e), e.dir.clone(), e.status));
    match found {
        Some((row, dir, status)) if status.is_final() => match read_json(&dir.join("result.json")) {
            Some(result) => Json(result).into_response(),
            None => Json(row).into_response(),
        },
        Some((row, _, _)) => Json(row).into_response(),
        None => match folder_of(&server, &id) {
            Some(dir) => match read_json(&dir.join("result.json")) {
                Some(result) if crate::record::lock::held(&dir) != Some(true) => Json(result).into_response(),
                _ => Json(listing::summary(&server.runs_dir(), &id, &server.cwd).json()).into_response(),
            },
            None => error(StatusCode::NOT_FOUND, format!("no run {id} in {}", server.runs_dir().display())),
        },
    }
}

async fn stop_run(State(server): State<Shared>, UrlPath(id): UrlPath<String>) -> Response {
    {
        let mut entries = server.entries();
        if let Some(e) = entries.iter_mut().find(|e| e.id == id) {
            return match (e.status, &e.run) {
                (RunStatus::Queued, _) => {
                    e.status = RunStatus::Cancelled;
                    (StatusCode::ACCEPTED, Json(json!({ "run_id": id, "status": RunStatus::Cancelled })))
                        .into_response()
                }
                (RunStatus::Running, Some(run)) => {
                    run.stop_with(StopCause::Cancelled("stopped over the API".into()));
                    (StatusCode::ACCEPTED, Json(json!({ "run_id": id, "status": "stopping" }))).into_response()
                }
                (status, _) => error(StatusCode::CONFLICT, format!("run {id} is not in flight (status {status})")),
            };
        }
    }
    // A run of another process: through its control socket.
    let Some(dir) = folder_of(&server, &id) else {
        return error(StatusCode::NOT_FOUND, format!("no run {id} in {}", server.runs_dir().display()));
    };
    if crate::record::lock::held(&dir) != Some(true) {
        let status = listing::run_status(&dir);
        return error(StatusCode::CONFLICT, format!("run {id} is not in flight (status {status})"));
    }
    let req = Request::Stop { by: "the API".into() };
    match tokio::task::spawn_blocking(move || control::request(&dir, &req, Duration::from_secs(5))).await {
        Ok(Ok(reply)) => {
            (StatusCode::ACCEPTED, Json(json!({ "run_id": id, "status": "stopping", "pid": reply["pid"] })))
                .into_response()
        }
        Ok(Err(e)) => error(StatusCode::CONFLICT, format!("run {id} cannot be reached: {e}")),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, format!("run {id}: {e}")),
    }
}

/// Tails events.jsonl as server-sent events (one per line, named by its type) until the run has
/// finished and every line is sent.
async fn events(State(server): State<Shared>, UrlPath(id): UrlPath<String>) -> Response {
    let own = server.entries().iter().find(|e| e.id == id).map(|e| e.dir.clone());
    let Some(dir) = own.or_else(|| folder_of(&server, &id)) else {
        return error(StatusCode::NOT_FOUND, format!("no run {id} in {}", server.runs_dir().display()));
    };
    let path = dir.join("events.jsonl");
    struct Tail {
        server: Shared,
        id: String,
        path: PathBuf,
        offset: usize,
        lines: VecDeque<String>,
        done: bool,
    }
    let tail = Tail { server, id, path, offset: 0, lines: VecDeque::new(), done: false };
    let stream = futures_util::stream::unfold(tail, |mut t| async move {
        loop {
            if let Some(line) = t.lines.pop_front() {
                let kind = serde_json::from_str::<Value>(&line)
                    .ok()
                    .and_then(|v| v.get("type").and_then(Value::as_str).map(String::from))
                    .unwrap_or_else(|| "event".into());
                let event = Event::default().event(kind).data(line);
                return Some((Ok::<Event, std::convert::Infallible>(event), t));
            }
            if t.done {
                return None;
            }
            // Read the status first: a run that has finished has written its last line.
            let finished = match t.server.status(&t.id) {
                Some(s) => s.is_final(),
                // Another process's run: over once no attempt holds its lock.
                None => t.path.parent().is_none_or(|d| crate::record::lock::held(d) != Some(true)),
            };
            if let Ok(bytes) = tokio::fs::read(&t.path).await {
                let fresh = bytes.get(t.offset..).unwrap_or_default();
                if let Some(end) = fresh.iter().rposition(|b| *b == b'\n') {
                    let text = String::from_utf8_lossy(&fresh[..end]).to_string();
                    t.lines.extend(text.lines().filter(|l| !l.trim().is_empty()).map(String::from));
                    t.offset += end + 1;
                }
            }
            if finished {
                t.done = true;
            } else if t.lines.is_empty() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    });
    Sse::new(stream).into_response()
}
