//! `awf script run` and `awf script check`.

use super::ending::{interrupts, report};
use super::live::Live;
use super::{EXIT_OK, EXIT_USAGE};
use crate::config::{parse_duration, Config};
use crate::host::launch::{self, Admission, CouncilPool, Request};
use crate::host::Output;
use crate::run::schema::SchemaCache;
use crate::run::{RunSpec, RunStatus};
use crate::script::{self, Program};
use anyhow::{anyhow, bail, Context, Result};
use serde_json::{Map, Value};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

#[derive(clap::Subcommand)]
pub enum ScriptCommand {
    /// Run a workflow script
    Run(Box<RunArgs>),
    /// Run a workflow on the fake harness and print its plan: stages, agents, operations and the
    /// spend range by model, before spending anything
    Plan(Box<super::plan::PlanArgs>),
    /// Compile scripts and check their META without running them
    Check {
        /// The scripts to check (workflows, strategies or modules)
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Refuse a script file larger than N bytes, before compiling it
        #[arg(long, value_name = "N", default_value_t = script::MAX_SCRIPT_BYTES)]
        max_script_bytes: u64,
    },
    /// Print the script API reference (every ctx and Agent call, with its arguments) as Markdown
    Api,
    /// Write Rhai definition files for the whole host API, for editors and the Rhai language server
    Defs {
        /// The folder to write them into
        #[arg(default_value = ".rhai")]
        dir: PathBuf,
    },
}

#[derive(clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub(super) script: ScriptArgs,
    /// Run again whenever the script or a module it can import changes (a run in flight finishes
    /// on the version it started with; Ctrl-C between runs exits)
    #[arg(long, conflicts_with = "detach")]
    watch: bool,
    /// Print the run id and return; the run goes on in a process of its own (its output in
    /// output.log in the run folder), queued when `[limits] background` runs are in flight
    #[arg(long)]
    detach: bool,
}

/// A script, its arguments and the run's flags: what `script run` and `script plan` share.
#[derive(clap::Args)]
pub struct ScriptArgs {
    /// The script to run
    file: PathBuf,
    /// Arguments as JSON, or @FILE to read them from a file
    #[arg(long)]
    args: Option<String>,
    /// One argument, KEY=VALUE (VALUE is read as JSON when it parses, else as a string); repeatable
    #[arg(long = "arg", value_name = "KEY=VALUE")]
    arg: Vec<String>,
    /// Refuse a script file larger than N bytes, before compiling it
    #[arg(long, value_name = "N", default_value_t = script::MAX_SCRIPT_BYTES)]
    max_script_bytes: u64,
    #[command(flatten)]
    pub flags: RunFlags,
}

/// The flags every command that starts a run takes.
#[derive(clap::Args, Clone, Default)]
pub struct RunFlags {
    /// The runtime alias agents use when their spec names none
    #[arg(long)]
    pub runtime: Option<String>,
    /// Print result.json instead of the value
    #[arg(long)]
    pub json: bool,
    /// Where run folders go (default: .awf/runs)
    #[arg(long)]
    pub runs_dir: Option<PathBuf>,
    /// Stop starting operations once this many USD are spent
    #[arg(long)]
    pub budget_usd: Option<f64>,
    /// Stop starting operations once this many tokens are spent
    #[arg(long)]
    pub budget_tokens: Option<u64>,
    /// Most agents the run may open (default 1000)
    #[arg(long)]
    pub max_agents: Option<usize>,
    /// Most operations at once (default 16)
    #[arg(long)]
    pub max_concurrency: Option<usize>,
    /// Wall-clock limit for the run, e.g. 30s, 10m
    #[arg(long)]
    pub deadline: Option<String>,
    /// Print no progress or log lines on stderr
    #[arg(long, short)]
    pub quiet: bool,
    /// Seat every agent in the sandbox [sandboxes.NAME] of awf.toml (one shared workspace)
    #[arg(long, value_name = "NAME")]
    pub sandbox: Option<String>,
    /// `worktree`: every agent works in a git worktree of its own, on a branch of its own, as with
    /// an agent spec's `isolation: "worktree"` (`none`: as the specs say)
    #[arg(long, value_name = "MODE", value_parser = crate::worktree::Isolation::parse)]
    pub isolation: Option<crate::worktree::Isolation>,
    /// Run the agents' operations on `awf worker`s through NATS (`--nats`, else `[cluster] nats` of
    /// awf.toml; without either, everything runs here)
    #[command(flatten)]
    pub nats: super::nats::NatsFlags,
    /// The background process of a `--detach`ed run: run it as this run id, once the machine's
    /// background queue lets it start
    #[arg(long, value_name = "RUN_ID", hide = true)]
    pub as_run: Option<String>,
    #[command(flatten)]
    pub caller: super::caller::CallerFlags,
    /// Plan the run first and ask before it starts when the plan's high end passes this many USD
    /// (over `[limits] confirm_usd`)
    #[arg(long, value_name = "USD")]
    pub confirm_above: Option<f64>,
    /// Go ahead without asking, whatever the plan says
    #[arg(long)]
    pub yes: bool,
    /// The plan made before the run (`confirm`), recorded in its folder as `plan.json`.
    #[arg(skip)]
    pub plan: Option<crate::plan::Plan>,
    /// The arguments this command was started with (after `cli::ARGV_ON_STDIN`), which a
    /// `--detach`ed run's background process is started with.
    #[arg(skip)]
    pub argv: Vec<std::ffi::OsString>,
}

pub fn exec(cmd: ScriptCommand) -> Result<i32> {
    match cmd {
        ScriptCommand::Run(args) => run(*args),
        ScriptCommand::Plan(args) => super::plan::exec(*args),
        ScriptCommand::Check { files, max_script_bytes } => check(&files, max_script_bytes),
        ScriptCommand::Api => {
            print!("{}", script::reference::markdown());
            Ok(super::EXIT_OK)
        }
        ScriptCommand::Defs { dir } => {
            let files = script::write_definitions(&dir)
                .map_err(|e| anyhow!("writing definitions into {}: {e}", dir.display()))?;
            out!("wrote {} definition files into {}: {}", files.len(), dir.display(), files.join(", "));
            Ok(super::EXIT_OK)
        }
    }
}

fn cwd() -> Result<PathBuf> {
    std::env::current_dir().context("cannot read the current folder")
}

fn check(files: &[PathBuf], max_bytes: u64) -> Result<i32> {
    let cwd = cwd()?;
    let mut code = EXIT_OK;
    for file in files {
        match script::load_bounded(file, &cwd, max_bytes)
            .map_err(|e| e.to_string())
            .and_then(|p| check_meta(&p).map(|_| p))
        {
            Ok(p) => {
                let name = p.meta.get("name").and_then(Value::as_str).unwrap_or("(no META name)");
                let entry = if p.has_run_fn { "fn run(args)" } else { "top-level script" };
                out!("ok {} ({name}; {entry})", p.display);
            }
            Err(e) => {
                eprintln!("{e}");
                code = EXIT_USAGE;
            }
        }
    }
    Ok(code)
}

/// META.args, when present, must be a valid JSON Schema.
fn check_meta(p: &Program) -> Result<(), String> {
    if let Some(schema) = p.meta.get("args") {
        SchemaCache::default().compile(schema).map_err(|e| format!("error: {}: META.args is {e}", p.display))?;
    }
    Ok(())
}

fn parse_args(args: &ScriptArgs, cwd: &Path) -> Result<Value> {
    let mut value = match &args.args {
        None => Value::Object(Map::new()),
        Some(text) => {
            let (text, from) = match text.strip_prefix('@') {
                Some(file) => {
                    let path = cwd.join(file);
                    (
                        std::fs::read_to_string(&path)
                            .with_context(|| format!("cannot read --args file {}", path.display()))?,
                        file.to_string(),
                    )
                }
                None => (text.clone(), "--args".to_string()),
            };
            serde_json::from_str(&text).map_err(|e| anyhow!("{from} is not valid JSON: {e}"))?
        }
    };
    for kv in &args.arg {
        let Some((k, v)) = kv.split_once('=') else {
            bail!("--arg {kv}: write it as KEY=VALUE");
        };
        let Some(obj) = value.as_object_mut() else {
            bail!("--arg needs the arguments to be a JSON object");
        };
        let v = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_string()));
        obj.insert(k.to_string(), v);
    }
    Ok(value)
}

impl RunFlags {
    /// The limits the flags set themselves.
    pub fn overrides(&self) -> crate::run::limits::Overrides {
        crate::run::limits::Overrides {
            max_concurrency: self.max_concurrency,
            max_agents: self.max_agents,
            budget_usd: self.budget_usd,
            budget_tokens: self.budget_tokens,
        }
    }
}

fn run(args: RunArgs) -> Result<i32> {
    if args.watch {
        return watch(&args);
    }
    run_once(&args)
}

/// `--watch`: run, then wait for a change to the script or an import, and run again. Changes made
/// while a run is in flight start the next run as soon as it ends.
fn watch(args: &RunArgs) -> Result<i32> {
    let cwd = cwd()?;
    let file = &args.script.file;
    let script = if file.is_absolute() { file.clone() } else { cwd.join(file) };
    let (tx, rx) = std::sync::mpsc::channel();
    let _watcher = crate::watch::watch(&crate::watch::script_dirs(&script, &cwd), tx)
        .context("cannot watch the script's folders")?;
    let waiter =
        tokio::runtime::Builder::new_current_thread().enable_all().build().context("cannot start the async runtime")?;
    let (change_tx, mut change_rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::Builder::new().name("awf-watch".into()).spawn(move || {
        while let Some(changed) = crate::watch::next_change(&rx) {
            if change_tx.send(changed).is_err() {
                break;
            }
        }
    })?;
    loop {
        let code = run_once(args)?;
        eprintln!("awf: run ended (exit {code}); watching for changes (Ctrl-C to stop)");
        let next = waiter.block_on(async {
            tokio::select! {
                changed = change_rx.recv() => changed,
                _ = tokio::signal::ctrl_c() => None,
            }
        });
        let Some(mut changed) = next else { return Ok(code) };
        // Changes queued while the run was in flight are part of this rerun too.
        while let Ok(more) = change_rx.try_recv() {
            changed.extend(more);
        }
        let names: Vec<String> =
            changed.iter().map(|p| p.strip_prefix(&cwd).unwrap_or(p).display().to_string()).collect();
        eprintln!("awf: changed: {}; running again", names.join(", "));
    }
}

/// The script loaded and its arguments checked, as every command that runs one refuses bad input
/// before anything runs; `Err` is the exit code once the error is printed.
pub(super) fn loaded(args: &ScriptArgs) -> Result<Result<(Program, Value), i32>> {
    let cwd = cwd()?;
    let program = match script::load_bounded(&args.file, &cwd, args.max_script_bytes) {
        Ok(p) => p,
        Err(rendered) => {
            eprintln!("{rendered}");
            return Ok(Err(EXIT_USAGE));
        }
    };
    if let Err(e) = check_meta(&program) {
        eprintln!("{e}");
        return Ok(Err(EXIT_USAGE));
    }
    let script_args = parse_args(args, &cwd)?;
    if let Err(e) = check_script_args(&program, &script_args) {
        eprintln!("{e}");
        return Ok(Err(EXIT_USAGE));
    }
    Ok(Ok((program, script_args)))
}

fn run_once(args: &RunArgs) -> Result<i32> {
    let (program, script_args) = match loaded(&args.script)? {
        Ok(p) => p,
        Err(code) => return Ok(code),
    };
    super::confirm::start(&program, script_args, &args.script.flags, Output::Value, args.detach)
}

/// `--detach`: the run is checked as in the foreground (its flags, its config), then this
/// command starts again in the background as that run; the id is printed.
pub fn start_detached(program: &Program, script_args: Value, flags: &RunFlags) -> Result<i32> {
    let spec = prepare(program, script_args, flags, None)?;
    flags.caller.caller()?;
    let id = super::background::detach(&spec.runs_dir, &program.path.display().to_string(), &flags.argv)?;
    out!("{id}");
    if !flags.quiet {
        eprintln!("awf: run {id} goes on in the background: `awf runs logs {id} -f` follows it, `awf runs stop {id}` stops it");
    }
    Ok(EXIT_OK)
}

/// Runs a loaded program to its end with the given flags; returns the exit code.
pub fn execute(program: &Program, script_args: Value, flags: &RunFlags, output: Output) -> Result<i32> {
    execute_attempt(program, script_args, flags, output, None)
}

/// Runs a program as a new run, or as a new attempt of `resume`'s run.
pub fn execute_attempt(
    program: &Program,
    script_args: Value,
    flags: &RunFlags,
    output: Output,
    resume: Option<crate::run::resume::Resume>,
) -> Result<i32> {
    let prepared = prepare(program, script_args.clone(), flags, resume).and_then(|s| Ok((s, flags.caller.caller()?)));
    let (spec, caller) = match prepared {
        Ok(s) => s,
        Err(e) => {
            if let Some(id) = &flags.as_run {
                super::background::mark(&failed_runs_dir(flags).join(id), RunStatus::Failed, &super::shown(&e));
            }
            return Err(e);
        }
    };
    let deadline = spec.deadline;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    // A background run holds its slot of the machine's pool until the run ends.
    let admission = match &flags.as_run {
        Some(id) => match super::background::wait_in_queue(&rt, &spec, id) {
            Ok(slot) => Admission::Pool(slot),
            Err(code) => return Ok(code),
        },
        None => Admission::AtOnce,
    };
    // A NATS server that does not answer is a usage error, found before any run folder is made.
    let cluster = match flags.nats.options(&spec.config.cluster)? {
        Some(nats) => {
            let key = crate::cluster::ClusterKey::load(&spec.cwd, spec.config.cluster.key_file.as_deref())
                .map_err(|e| anyhow!(e))?;
            Some((rt.block_on(crate::cluster::connect(&nats)).map_err(|e| anyhow!(e))?, key))
        }
        None => None,
    };
    let caps = crate::council::child::capabilities(CouncilPool::Machine).holding(&admission);
    let req = Request { spec, id: flags.as_run.clone(), caller, parent: None };
    let host = launch::start(req, rt.handle().clone(), caps)?;
    if let Some(plan) = &flags.plan {
        if let Err(e) = host.run.records.write_document(crate::plan::PLAN_FILE, plan) {
            eprintln!("awf: warning: cannot record the plan in {}: {e}", host.run.dir().display());
        }
    }
    let owner = cluster.map(|(c, key)| crate::cluster::remote::Owner::new(c, key, &host.run));
    if let Some(o) = &owner {
        host.agents.set_remote(o.clone());
    }
    let live = Live::start(host.run.clone(), std::io::stderr().is_terminal(), flags.quiet);
    let _interrupts = rt.spawn(interrupts(host.clone()));
    let end = rt.block_on(launch::run(host.clone(), admission, program, script_args, deadline, output));
    if let Some(o) = owner {
        // The run ended: its operations still queued are of no use to anyone.
        rt.block_on(o.purge());
    }
    live.finish();
    Ok(report(&host.run, end, flags, output))
}

/// The runs folder of a background run that could not be prepared: awf.toml's `runs_dir` still
/// counts when the file loads (what failed may be another of its values).
fn failed_runs_dir(flags: &RunFlags) -> PathBuf {
    let cwd = cwd().unwrap_or_default();
    let configured = Config::load(&cwd).ok().and_then(|c| c.runs_dir);
    crate::record::runs_dir(&cwd, flags.runs_dir.as_deref(), configured.as_deref())
}

fn config_name(config: &Config) -> String {
    config.source.as_ref().map_or_else(|| "awf.toml".to_string(), |p| p.display().to_string())
}

/// The run's spec from the config and the flags, checked before anything starts (no folder, no
/// record, no output).
pub fn prepare(
    program: &Program,
    script_args: Value,
    flags: &RunFlags,
    resume: Option<crate::run::resume::Resume>,
) -> Result<RunSpec> {
    let cwd = cwd()?;
    let config = Config::load(&cwd)?;
    let recorded = resume.as_ref().and_then(|r| r.limits.clone());
    let limits = crate::run::limits::resolve(&flags.overrides(), recorded, &config)?;
    let deadline = match &flags.deadline {
        Some(d) => Some(parse_duration(d).map_err(|e| anyhow!("--deadline: {e}"))?),
        None => config.deadline()?,
    };
    crate::telemetry::traces_url(&config)?;
    if config.limits.background == Some(0) {
        bail!("{}: [limits] background = 0: at least 1 background run must be allowed at once", config_name(&config));
    }
    let default_runtime = flags.runtime.clone().unwrap_or_else(|| config.default_alias());
    config.runtime(&default_runtime)?;
    let runs_dir = crate::record::runs_dir(&cwd, flags.runs_dir.as_deref(), config.runs_dir.as_deref());
    let sandbox = match &flags.sandbox {
        Some(name) => {
            let policy = config.sandbox(name)?;
            policy.check().map_err(|e| anyhow!("--sandbox {name}: {e}"))?;
            Some(crate::sandbox::Named { name: name.clone(), policy })
        }
        None => None,
    };
    if flags.isolation == Some(crate::worktree::Isolation::Worktree) {
        let repo =
            crate::worktree::Repo::find(Default::default(), &cwd).map_err(|e| anyhow!("--isolation worktree: {e}"))?;
        repo.head().map_err(|e| anyhow!("--isolation worktree: {e}"))?;
    }
    Ok(RunSpec {
        script: program.path.clone(),
        script_sha256: program.sha256.clone(),
        cwd,
        runs_dir,
        args: script_args,
        meta: program.meta.clone(),
        config,
        limits,
        deadline,
        default_runtime,
        sandbox,
        resume,
        isolation: flags.isolation.unwrap_or_default(),
    })
}

/// Checks a loaded script's META and the arguments against META.args; the error is the text the
/// command line prints.
pub fn check_script_args(program: &Program, script_args: &Value) -> Result<(), String> {
    check_meta(program)?;
    if let Some(schema) = program.meta.get("args") {
        let schema = SchemaCache::default().compile(schema).map_err(|e| e.to_string())?;
        let errors = schema.violations(script_args);
        if !errors.is_empty() {
            let mut text = format!("error: the arguments do not match META.args of {}:", program.display);
            for e in errors {
                text.push_str(&format!("\n  - {e}"));
            }
            return Err(text);
        }
    }
    Ok(())
}
