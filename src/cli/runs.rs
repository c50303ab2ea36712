//! `awf runs list|show|resume`: reading run folders, and new attempts of a run that reuse its
//! recorded stages and replay its journal.

use super::script::{execute_attempt, RunFlags};
use super::{EXIT_OK, EXIT_USAGE};
use crate::config::Config;
use crate::host::Output;
use crate::run::resume;
use crate::run::RunStatus;
use crate::script;
use anyhow::{Context, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};

#[derive(clap::Subcommand)]
pub enum RunsCommand {
    /// Every run in the runs folder, oldest first
    List {
        #[arg(long)]
        runs_dir: Option<PathBuf>,
    },
    /// A run's status, stages, attempts and spend
    Show {
        run_id: String,
        #[arg(long)]
        runs_dir: Option<PathBuf>,
    },
    /// A new attempt of a run: recorded stages are reused, answered operations replayed
    Resume(Box<ResumeArgs>),
    /// Stop a run in flight (not built in this version)
    Stop { run_id: String },
    /// Follow a run's log (not built in this version)
    Logs { run_id: String },
}

#[derive(clap::Args)]
pub struct ResumeArgs {
    run_id: String,
    /// Run this stage and every later one fresh; earlier ones are reused
    #[arg(long)]
    from_stage: Option<String>,
    /// Resume even though the script changed since the last attempt (each attempt's script hash
    /// is kept in run.json)
    #[arg(long)]
    allow_changed: bool,
    /// Start a new attempt of a run that already succeeded (its records and spend are kept)
    #[arg(long)]
    again: bool,
    #[command(flatten)]
    flags: RunFlags,
}

fn runs_dir(cwd: &Path, given: Option<&PathBuf>) -> Result<PathBuf> {
    let config = Config::load(cwd)?;
    let dir = given.cloned().or(config.runs_dir).unwrap_or_else(|| PathBuf::from(".awf/runs"));
    Ok(if dir.is_absolute() { dir } else { cwd.join(dir) })
}

fn read(path: &Path) -> Value {
    std::fs::read_to_string(path).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or(Value::Null)
}

fn run_dir(root: &Path, id: &str) -> Result<PathBuf, String> {
    let dir = root.join(id);
    if id.contains('/') || !dir.join("run.json").is_file() {
        return Err(format!("no run {id} in {}", root.display()));
    }
    Ok(dir)
}

/// The status of each attempt as shown: as recorded, except that an attempt recorded `running`
/// whose process is gone (the run's lock is free, or a later attempt started) is `interrupted`.
/// `None` for a status this version does not know.
fn attempt_statuses(dir: &Path, run: &Value) -> Vec<Option<RunStatus>> {
    let attempts = run["attempts"].as_array().cloned().unwrap_or_default();
    // When `/proc/locks` cannot say, the record is trusted.
    let live = crate::record::lock::held(dir) != Some(false);
    let last = attempts.len().saturating_sub(1);
    attempts
        .iter()
        .enumerate()
        .map(|(i, a)| match serde_json::from_value::<RunStatus>(a["status"].clone()).ok() {
            Some(RunStatus::Running) if i < last || !live => Some(RunStatus::Interrupted),
            s => s,
        })
        .collect()
}

/// A run's status: its live or interrupted last attempt's, else the result's.
fn run_status(dir: &Path, run: &Value, result: &Value) -> String {
    let last = attempt_statuses(dir, run).pop().flatten();
    match (last, result["status"].as_str()) {
        (Some(s @ (RunStatus::Running | RunStatus::Interrupted)), _) => s.to_string(),
        (_, Some(r)) => r.to_string(),
        (Some(s), None) => s.to_string(),
        (None, None) => "?".into(),
    }
}

pub fn exec(cmd: RunsCommand) -> Result<i32> {
    let cwd = std::env::current_dir().context("cannot read the current folder")?;
    match cmd {
        RunsCommand::List { runs_dir: given } => {
            let root = runs_dir(&cwd, given.as_ref())?;
            let mut ids: Vec<String> = std::fs::read_dir(&root)
                .map(|d| {
                    d.filter_map(Result::ok)
                        .filter(|e| e.path().join("run.json").is_file())
                        .filter_map(|e| e.file_name().into_string().ok())
                        .collect()
                })
                .unwrap_or_default();
            ids.sort();
            for id in ids {
                let run = read(&root.join(&id).join("run.json"));
                let result = read(&root.join(&id).join("result.json"));
                let attempts = run["attempts"].as_array().map(|a| a.len()).unwrap_or(0);
                let status = run_status(&root.join(&id), &run, &result);
                let script = run["script"]
                    .as_str()
                    .map(|s| {
                        Path::new(s)
                            .strip_prefix(&cwd)
                            .map(|p| p.display().to_string())
                            .unwrap_or_else(|_| s.to_string())
                    })
                    .unwrap_or_default();
                out!("{id}  {status:<9}  attempts {attempts}  {script}");
            }
            Ok(EXIT_OK)
        }
        RunsCommand::Show { run_id, runs_dir: given } => {
            let root = runs_dir(&cwd, given.as_ref())?;
            let dir = match run_dir(&root, &run_id) {
                Ok(d) => d,
                Err(e) => {
                    eprintln!("error: {e}");
                    return Ok(EXIT_USAGE);
                }
            };
            let run = read(&dir.join("run.json"));
            let result = read(&dir.join("result.json"));
            out!("run {run_id}: {}", run_status(&dir, &run, &result));
            out!("script: {}", run["script"].as_str().unwrap_or("?"));
            let statuses = attempt_statuses(&dir, &run);
            for (a, status) in run["attempts"].as_array().into_iter().flatten().zip(&statuses) {
                out!(
                    "attempt {}: {} ({} → {})",
                    a["n"],
                    status.map(RunStatus::as_str).or(a["status"].as_str()).unwrap_or("?"),
                    a["started_at"].as_str().unwrap_or("?"),
                    a["finished_at"].as_str().unwrap_or("-")
                );
            }
            for s in result["stages"].as_array().into_iter().flatten() {
                out!("stage {}: {}", s["name"].as_str().unwrap_or("?"), s["status"].as_str().unwrap_or("?"));
            }
            if let Some(e) = result["error"].as_str() {
                out!("error: {e}");
            }
            // result.json accounts for every attempt (as of the last one that finished).
            let spend = |t: &Value| {
                format!(
                    "{} operations, {} tokens, ${:.4}",
                    t["operations"],
                    t["tokens"],
                    t["cost_usd"].as_f64().unwrap_or(0.0)
                )
            };
            out!("spend (all attempts): {}", spend(&result["accounting"]["totals"]));
            for (n, t) in result["accounting"]["by_attempt"].as_object().into_iter().flatten() {
                out!("attempt {n} spent: {}", spend(t));
            }
            out!("records: {}", dir.display());
            Ok(EXIT_OK)
        }
        RunsCommand::Resume(args) => resume_run(&cwd, *args),
        RunsCommand::Stop { .. } | RunsCommand::Logs { .. } => {
            eprintln!("error: awf runs stop and awf runs logs are not built in this version of awf yet; a run stops with Ctrl-C, and its log is events.jsonl in its folder");
            Ok(EXIT_USAGE)
        }
    }
}

fn resume_run(cwd: &Path, args: ResumeArgs) -> Result<i32> {
    let root = runs_dir(cwd, args.flags.runs_dir.as_ref())?;
    let refuse = |e: String| {
        eprintln!("error: {e}");
        Ok(EXIT_USAGE)
    };
    let dir = match run_dir(&root, &args.run_id) {
        Ok(d) => d,
        Err(e) => return refuse(e),
    };
    let resume = match resume::load(&dir, args.from_stage.as_deref()) {
        Ok(r) => r,
        Err(e) => return refuse(e),
    };
    let last = resume.run_doc["attempts"].as_array().and_then(|a| a.last()).cloned().unwrap_or_default();
    if last["status"] == RunStatus::Succeeded.as_str() && !args.again {
        return refuse(format!(
            "run {} already succeeded (attempt {}): a resume would start it over; pass --again to start a new attempt on purpose (its records and spend are kept)",
            args.run_id, last["n"]
        ));
    }
    let script_path = PathBuf::from(resume.run_doc["script"].as_str().unwrap_or_default());
    if script_path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("council:")) {
        return refuse("resuming a council run is not built in this version of awf yet".into());
    }
    let program = match script::load(&script_path, cwd) {
        Ok(p) => p,
        Err(rendered) => {
            eprintln!("{rendered}");
            return Ok(EXIT_USAGE);
        }
    };
    // The script as the last attempt ran it (each attempt keeps its hash; older runs only the first).
    let recorded = last["script_sha256"].as_str().or(resume.run_doc["script_sha256"].as_str()).unwrap_or_default();
    if recorded != program.sha256 && !args.allow_changed {
        return refuse(format!(
            "{} changed since run {} started (sha256 {recorded} then, {} now); pass --allow-changed to resume it anyway",
            program.display, args.run_id, program.sha256
        ));
    }
    let script_args = resume.run_doc["args"].clone();
    if !args.flags.quiet {
        eprintln!(
            "awf: attempt {} of run {}: {} stages reused, {} answered operations on record",
            resume.attempt,
            resume.run_id,
            resume.stages.len(),
            resume.journal.len()
        );
    }
    let mut flags = args.flags.clone();
    flags.runs_dir = Some(root);
    execute_attempt(&program, script_args, &flags, Output::Value, Some(resume))
}
