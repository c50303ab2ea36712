//! `awf runs list|show|resume|stop|answer|logs|attach|clean`: reading run folders, new attempts of a run (a script's
//! or a strategy's) that reuse its recorded stages and replay its journal, and reaching a live
//! run from any terminal.

use super::listing::{self, run_dir, runs_dir};
use super::script::{execute_attempt, RunFlags};
use super::{stop, EXIT_OK, EXIT_USAGE};
use crate::host::Output;
use crate::record::events::EventRecord;
use crate::record::status::Recorded;
use crate::run::resume;
use crate::run::RunStatus;
use crate::script;
use anyhow::{Context, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};

#[derive(clap::Subcommand)]
pub enum RunsCommand {
    /// Every run in the runs folder, oldest first: status, age, spend, script
    List {
        /// The folder holding the runs (default: runs_dir from awf.toml, else .awf/runs)
        #[arg(long, value_name = "DIR")]
        runs_dir: Option<PathBuf>,
    },
    /// A run's status, stages, attempts, each agent's operations and spend
    Show {
        /// The run's id (`awf runs list` shows them)
        run_id: String,
        /// Print this agent's turns instead: prompt, rejections with their errors, nudges, replies
        #[arg(long, value_name = "KEY")]
        agent: Option<String>,
        /// The folder holding the runs (default: runs_dir from awf.toml, else .awf/runs)
        #[arg(long, value_name = "DIR")]
        runs_dir: Option<PathBuf>,
    },
    /// A new attempt of a run: recorded stages are reused, answered operations replayed
    Resume(Box<ResumeArgs>),
    /// Queue a run for any `awf worker` on NATS JetStream; print its id
    Submit {
        /// The script to run (workers must see the same path)
        file: PathBuf,
        #[command(flatten)]
        nats: super::nats::NatsFlags,
        /// Arguments as JSON
        #[arg(long)]
        args: Option<String>,
    },
    /// Stop a run in flight, from any terminal, as Ctrl-C would
    Stop {
        /// The run's id (`awf runs list` shows them)
        run_id: String,
        /// End it at once: no grace for the script to unwind
        #[arg(long)]
        now: bool,
        /// The folder holding the runs (default: runs_dir from awf.toml, else .awf/runs)
        #[arg(long, value_name = "DIR")]
        runs_dir: Option<PathBuf>,
    },
    /// Answer a run waiting for the operator (a checkpoint): the answer must match its schema
    Answer {
        /// The run's id (`awf runs list` shows them)
        run_id: String,
        /// The answer: a JSON value, or @FILE holding one
        #[arg(long = "json", value_name = "VALUE")]
        value: String,
        /// Which checkpoint, when several are open (`awf runs show` lists their keys)
        #[arg(long)]
        key: Option<String>,
        /// The folder holding the runs (default: runs_dir from awf.toml, else .awf/runs)
        #[arg(long, value_name = "DIR")]
        runs_dir: Option<PathBuf>,
    },
    /// Follow a run started elsewhere: a row per agent (state, operation, last activity, spend),
    /// stages, groups, checkpoints and spend, redrawn until it ends; then its summary
    Watch {
        /// The run's id (`awf runs list` shows them)
        run_id: String,
        /// The folder holding the runs (default: runs_dir from awf.toml, else .awf/runs)
        #[arg(long, value_name = "DIR")]
        runs_dir: Option<PathBuf>,
    },
    /// Attach this terminal to a run's tmux session, where its pane agents run (off a terminal:
    /// print the command that attaches, and each pane agent)
    Attach {
        /// The run's id (`awf runs list` shows them)
        run_id: String,
        /// Watch only: keys typed are not passed to the panes
        #[arg(long, short)]
        read_only: bool,
        /// The folder holding the runs (default: runs_dir from awf.toml, else .awf/runs)
        #[arg(long, value_name = "DIR")]
        runs_dir: Option<PathBuf>,
    },
    /// Remove what a run left: its agents' worktrees and, with --branches, their branches; its
    /// tmux session (released panes, or those of a killed run)
    Clean {
        /// The run's id (`awf runs list` shows them)
        run_id: String,
        /// Delete its agents' branches too (`awf/<run>/<agent>`); unmerged work on them is lost
        #[arg(long)]
        branches: bool,
        /// The folder holding the runs (default: runs_dir from awf.toml, else .awf/runs)
        #[arg(long, value_name = "DIR")]
        runs_dir: Option<PathBuf>,
    },
    /// A run's events as readable lines
    Logs {
        /// The run's id (`awf runs list` shows them)
        run_id: String,
        /// Follow a live run until it ends
        #[arg(long, short)]
        follow: bool,
        /// Print the events.jsonl lines as they are
        #[arg(long)]
        json: bool,
        /// The folder holding the runs (default: runs_dir from awf.toml, else .awf/runs)
        #[arg(long, value_name = "DIR")]
        runs_dir: Option<PathBuf>,
    },
}

#[derive(clap::Args)]
pub struct ResumeArgs {
    /// The run's id (`awf runs list` shows them)
    run_id: String,
    /// Run this stage and every later one fresh; earlier ones are reused
    #[arg(long)]
    from_stage: Option<String>,
    /// The value of a stage that has no record, STAGE=@FILE or STAGE=JSON (or a JSON object of
    /// them); repeatable
    #[arg(long, value_name = "STAGE=@FILE")]
    values: Vec<String>,
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

fn refuse(e: impl std::fmt::Display) -> Result<i32> {
    eprintln!("error: {e}");
    Ok(EXIT_USAGE)
}

pub fn exec(cmd: RunsCommand) -> Result<i32> {
    let cwd = std::env::current_dir().context("cannot read the current folder")?;
    match cmd {
        RunsCommand::Submit { file, nats, args } => super::worker::submit(&cwd, &file, &nats, args.as_deref()),
        RunsCommand::List { runs_dir: given } => {
            let root = runs_dir(&cwd, given.as_ref())?;
            let ids = listing::ids(&root);
            if ids.is_empty() {
                eprintln!("awf: no runs in {}", root.display());
            }
            for id in ids {
                let s = listing::summary(&root, &id, &cwd);
                let started = root.join(&id).join("run.json").exists();
                let served = root.join(&id).join(crate::record::accepted::FILE).exists();
                let hint = if s.status == "interrupted" && served {
                    "  (accepted by awf serve: the next awf serve takes it over)".to_string()
                } else if s.status == "interrupted" && started {
                    format!("  (resume: awf runs resume {id})")
                } else if let Some(w) = s.waiting.first() {
                    format!("  (waiting: {}; answer: awf runs answer {id} --json VALUE)", w.question)
                } else {
                    String::new()
                };
                let script = super::show::script_name(&s.script);
                out!("{id}  {:<11}  {:>4}  {:>14}  {script}{hint}", s.status, s.age(), s.spend());
            }
            Ok(EXIT_OK)
        }
        RunsCommand::Show { run_id, agent, runs_dir: given } => {
            let root = runs_dir(&cwd, given.as_ref())?;
            let dir = match run_dir(&root, &run_id) {
                Ok(d) => d,
                Err(e) => return refuse(e),
            };
            let Some(key) = agent else {
                super::show::run(&dir, &run_id).with_context(|| format!("cannot read the records of run {run_id}"))?;
                return Ok(EXIT_OK);
            };
            let found = super::show::agent(&dir, &run_id, &key)
                .with_context(|| format!("cannot read the records of run {run_id}"))?;
            if !found {
                let agents: Vec<String> = crate::record::lines::turns(&dir)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|t| t.agent)
                    .fold(Vec::new(), |mut all, a| {
                        if !all.contains(&a) {
                            all.push(a);
                        }
                        all
                    });
                let list = if agents.is_empty() { "none".to_string() } else { agents.join(", ") };
                return refuse(format!("run {run_id} has no operations of agent {key} (its agents: {list})"));
            }
            Ok(EXIT_OK)
        }
        RunsCommand::Resume(args) => resume_run(&cwd, *args),
        RunsCommand::Clean { run_id, branches, runs_dir: given } => {
            let root = runs_dir(&cwd, given.as_ref())?;
            let dir = match run_dir(&root, &run_id) {
                Ok(d) => d,
                Err(e) => return refuse(e),
            };
            if listing::live(&dir) {
                return refuse(format!("run {run_id} is running; stop it first (awf runs stop {run_id})"));
            }
            let recorded = crate::record::docs::run(&dir).unwrap_or_default().worktrees.unwrap_or_default();
            let panes = super::attach::close_session(&dir)
                .with_context(|| format!("cannot read the events of run {run_id}"))?;
            match recorded.clean(Default::default(), branches) {
                Ok(done) => {
                    let plural = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
                    let panes = panes.map(|n| format!(", {} closed", plural(n, "pane", "panes"))).unwrap_or_default();
                    out!(
                        "run {run_id}: {} removed, {} deleted{panes}",
                        plural(done.worktrees, "worktree", "worktrees"),
                        plural(done.branches, "branch", "branches")
                    );
                    Ok(EXIT_OK)
                }
                Err(e) => refuse(format!("run {run_id}: {e}")),
            }
        }
        RunsCommand::Stop { run_id, now, runs_dir: given } => {
            let root = runs_dir(&cwd, given.as_ref())?;
            match run_dir(&root, &run_id) {
                Ok(dir) => stop::stop(&dir, &run_id, now),
                Err(e) => refuse(e),
            }
        }
        RunsCommand::Answer { run_id, value, key, runs_dir: given } => {
            let root = runs_dir(&cwd, given.as_ref())?;
            let dir = match run_dir(&root, &run_id) {
                Ok(d) => d,
                Err(e) => return refuse(e),
            };
            let answered =
                super::answer::parse_value(&value, &cwd).and_then(|v| super::answer::answer(&dir, &run_id, key, v));
            match answered {
                Ok(key) => {
                    out!("run {run_id}: checkpoint {key} answered; the run goes on");
                    Ok(EXIT_OK)
                }
                Err(e) => refuse(e),
            }
        }
        RunsCommand::Attach { run_id, read_only, runs_dir: given } => {
            let root = runs_dir(&cwd, given.as_ref())?;
            match run_dir(&root, &run_id) {
                Ok(dir) => super::attach::attach(&dir, &run_id, read_only),
                Err(e) => refuse(e),
            }
        }
        RunsCommand::Watch { run_id, runs_dir: given } => {
            let root = runs_dir(&cwd, given.as_ref())?;
            let dir = match run_dir(&root, &run_id) {
                Ok(d) => d,
                Err(e) => return refuse(e),
            };
            super::watch::watch(&dir, &run_id).with_context(|| format!("cannot read the records of run {run_id}"))?;
            Ok(EXIT_OK)
        }
        RunsCommand::Logs { run_id, follow, json, runs_dir: given } => {
            let root = runs_dir(&cwd, given.as_ref())?;
            let dir = match run_dir(&root, &run_id) {
                Ok(d) => d,
                Err(e) => return refuse(e),
            };
            super::logs::print(&dir, follow, json)
                .with_context(|| format!("cannot read the events of run {run_id}"))?;
            Ok(EXIT_OK)
        }
    }
}

/// `--values`: STAGE=@FILE, STAGE=JSON (a string when it is not JSON), or a JSON object of them.
fn stage_values(given: &[String], cwd: &Path) -> Result<Vec<(String, Value)>, String> {
    let mut out = Vec::new();
    for v in given {
        if v.trim_start().starts_with('{') {
            let map: serde_json::Map<String, Value> =
                serde_json::from_str(v).map_err(|e| format!("--values {v}: not a JSON object: {e}"))?;
            out.extend(map);
            continue;
        }
        let Some((stage, value)) = v.split_once('=').filter(|(s, _)| !s.is_empty()) else {
            return Err(format!("--values {v}: write it as STAGE=@FILE, STAGE=JSON or a JSON object"));
        };
        let value = match value.strip_prefix('@') {
            Some(file) => {
                let path = cwd.join(file);
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("--values {stage}=@{file}: cannot read {}: {e}", path.display()))?;
                serde_json::from_str(&text).map_err(|e| format!("--values {stage}=@{file}: not JSON: {e}"))?
            }
            None => serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_string())),
        };
        out.push((stage.to_string(), value));
    }
    Ok(out)
}

/// What a new attempt of a recorded run may take: `--from-stage`, `--values`, `--allow-changed`,
/// `--again`.
#[derive(Default)]
pub struct ReattemptOptions {
    pub from_stage: Option<String>,
    pub values: Vec<(String, Value)>,
    pub allow_changed: bool,
    pub again: bool,
}

/// Why a run cannot be attempted again.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// The run's records or the options say no (a live attempt, a succeeded run, a changed script).
    #[error("{0}")]
    Records(String),
    /// The script no longer compiles: its rendered error.
    #[error("{0}")]
    Script(String),
}

/// A new attempt of a recorded run, ready to execute: the program as the run named it (a
/// script's path, or a strategy rebuilt from its name), its arguments, and the records it
/// reuses. The run's lock is held from here (`resume.lock`).
pub struct Reattempt {
    pub program: script::Program,
    pub args: Value,
    pub output: Output,
    pub resume: resume::Resume,
}

/// Reads the run in `dir` for a new attempt, as `awf runs resume` and a restarted `awf serve` do.
pub fn reattempt(cwd: &Path, dir: &Path, run_id: &str, options: ReattemptOptions) -> Result<Reattempt, Refused> {
    let mut resume = resume::load(dir, options.from_stage.as_deref()).map_err(|e| Refused::Records(e.to_string()))?;
    for (stage, value) in options.values {
        if resume.stages.contains_key(&stage) {
            return Err(Refused::Records(format!(
                "--values {stage}: stage {stage} has a record this attempt reuses; --values gives values only to stages with none (use --from-stage to run recorded stages again)"
            )));
        }
        resume.stages.insert(stage, (value, Some(resume::GIVEN.into())));
    }
    let run = &resume.run;
    let last = run.attempts.last();
    if let Some(last) = last.filter(|a| a.status == Some(Recorded::Known(RunStatus::Succeeded))) {
        if !options.again {
            return Err(Refused::Records(format!(
                "run {run_id} already succeeded (attempt {}): a resume would start it over; pass --again to start a new attempt on purpose (its records and spend are kept)",
                last.n
            )));
        }
    }
    let script_path = PathBuf::from(run.script.as_deref().unwrap_or_default());
    let strategy = listing::strategy_name(&script_path);
    let (loaded, output) = match &strategy {
        // A strategy is rebuilt from its name, in the folder the run was started from.
        Some(name) => {
            let run_cwd = run.cwd.as_deref().map(PathBuf::from).unwrap_or_else(|| cwd.to_path_buf());
            (crate::council::registry::compile(&run_cwd, name), Output::Strategy)
        }
        None => (script::load(&script_path, cwd), Output::Value),
    };
    let program = loaded.map_err(|e| Refused::Script(e.to_string()))?;
    // The script as the last attempt ran it (each attempt keeps its hash; older runs only the first).
    let recorded =
        last.and_then(|a| a.script_sha256.as_deref()).or(run.script_sha256.as_deref()).unwrap_or_default().to_string();
    if recorded != program.sha256 && !options.allow_changed {
        return Err(Refused::Records(format!(
            "{} changed since run {run_id} started ({} {recorded} then, {} now); pass --allow-changed to resume it anyway",
            program.display,
            if strategy.is_some() { "version" } else { "sha256" },
            program.sha256
        )));
    }
    let args = run.args.clone();
    Ok(Reattempt { program, args, output, resume })
}

fn resume_run(cwd: &Path, args: ResumeArgs) -> Result<i32> {
    let root = runs_dir(cwd, args.flags.runs_dir.as_ref())?;
    let dir = match run_dir(&root, &args.run_id) {
        Ok(d) => d,
        Err(e) => return refuse(e),
    };
    let values = match stage_values(&args.values, cwd) {
        Ok(v) => v,
        Err(e) => return refuse(e),
    };
    let options = ReattemptOptions {
        from_stage: args.from_stage.clone(),
        values,
        allow_changed: args.allow_changed,
        again: args.again,
    };
    let Reattempt { program, args: script_args, output, resume } = match reattempt(cwd, &dir, &args.run_id, options) {
        Ok(r) => r,
        Err(Refused::Records(e)) => return refuse(e),
        Err(Refused::Script(rendered)) => {
            eprintln!("{rendered}");
            return Ok(EXIT_USAGE);
        }
    };
    let given = resume.stages.values().filter(|(_, s)| s.as_deref() == Some(resume::GIVEN)).count();
    if !args.flags.quiet {
        eprintln!(
            "awf: attempt {} of run {}: {} stages reused, {} given with --values, {} answered operations on record",
            resume.attempt,
            resume.run_id,
            resume.stages.len() - given,
            given,
            resume.journalled
        );
    }
    let mut flags = args.flags.clone();
    flags.runs_dir = Some(root);
    let attempt = resume.attempt;
    let mut given: Vec<String> = resume
        .stages
        .iter()
        .filter(|(_, (_, s))| s.as_deref() == Some(resume::GIVEN))
        .map(|(n, _)| n.clone())
        .collect();
    given.sort();
    let code = execute_attempt(&program, script_args, &flags, output, Some(resume))?;
    if !flags.quiet {
        for stage in unused(&dir, attempt, &given) {
            eprintln!("awf: --values {stage}: this attempt reached no stage {stage}; its value was not used");
        }
    }
    Ok(code)
}

/// The stages given with `--values` that attempt `attempt` never reached.
fn unused(dir: &Path, attempt: u32, given: &[String]) -> Vec<String> {
    let events = crate::record::events::read(dir).unwrap_or_default();
    let reached: Vec<&str> = events
        .iter()
        .filter(|e| e.attempt == attempt)
        .filter_map(|e| match &e.event {
            EventRecord::StageFinished { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    given.iter().filter(|g| !reached.contains(&g.as_str())).cloned().collect()
}
