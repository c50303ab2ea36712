//! `awf worker`: serves agent operations queued on NATS JetStream by runs started with
//! `script run --nats` (`cluster::worker`).

use super::EXIT_OK;
use crate::config::{Config, HarnessKind};
use anyhow::{anyhow, bail, Context, Result};

#[derive(clap::Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    nats: super::nats::NatsFlags,
    /// How many operations it runs at once
    #[arg(long, value_name = "N", default_value_t = 4)]
    slots: usize,
    /// The harnesses it serves, comma-separated (default: all of them)
    #[arg(long, value_name = "HARNESS,...", value_delimiter = ',')]
    runtimes: Vec<String>,
    /// Its name in its run folders and in answers (default: w<pid>); letters, digits, - and _
    #[arg(long)]
    name: Option<String>,
    /// A folder whose subfolders it serves (repeatable; default: the folder it starts in): an
    /// operation or run whose folder, script or skills are elsewhere is refused
    #[arg(long = "root", value_name = "DIR")]
    roots: Vec<std::path::PathBuf>,
    /// The sandbox of awf.toml it runs every agent in at least (a message may ask for a stricter
    /// one, never a looser one)
    #[arg(long, value_name = "NAME")]
    sandbox: Option<String>,
    /// Run inline runtimes (a program's argv written in the script) that messages carry; without
    /// it only runtimes named in this worker's awf.toml run
    #[arg(long)]
    allow_inline_runtimes: bool,
}

pub fn exec(args: WorkerArgs) -> Result<i32> {
    let cwd = std::env::current_dir().context("cannot read the current folder")?;
    let config = Config::load(&cwd)?;
    let nats = args.nats.required(&config.cluster, "awf worker")?;
    if args.slots == 0 {
        bail!("--slots must be at least 1");
    }
    // Its own [limits], refused now as `script run` refuses them, not by each run it serves.
    let limits = crate::run::limits::for_worker(args.slots, &config)?;
    let runtimes = harnesses(&args.runtimes)?;
    let name = args.name.clone().unwrap_or_else(|| format!("w{}", std::process::id()));
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        bail!("--name {name:?}: use letters, digits, - and _ only");
    }
    let roots = if args.roots.is_empty() { vec![cwd.clone()] } else { args.roots.clone() };
    let roots = roots
        .iter()
        .map(|r| cwd.join(r).canonicalize().map_err(|e| anyhow!("--root {}: {e}", r.display())))
        .collect::<Result<Vec<_>>>()?;
    let floor = match &args.sandbox {
        Some(n) => Some(crate::sandbox::Named { name: n.clone(), policy: config.sandbox(n)? }),
        None => None,
    };
    let key = crate::cluster::ClusterKey::load(&cwd, config.cluster.key_file.as_deref()).map_err(|e| anyhow!(e))?;
    // What a worker sends back (reasons in replies and the bucket) never shows a line of a file.
    crate::script::show_lines_only_under(Vec::new());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let cluster = rt.block_on(crate::cluster::connect(&nats)).map_err(|e| anyhow!(e))?;
    let stop = tokio_util::sync::CancellationToken::new();
    let on_signal = stop.clone();
    rt.spawn(async move {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(t) => t,
            Err(_) => return,
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        eprintln!("awf worker: stopping (operations in flight go back to the queue)");
        on_signal.cancel();
    });
    let rules = crate::cluster::worker::Rules {
        roots,
        floor,
        allow_inline: args.allow_inline_runtimes,
        serves: runtimes,
        config,
    };
    let report: crate::cluster::Report = std::sync::Arc::new(|line| eprintln!("{line}"));
    let options =
        crate::cluster::worker::Options { slots: args.slots, name: name.clone(), cwd, key, rules, limits, report };
    let stats = rt.block_on(crate::cluster::worker::serve(cluster, options, stop)).map_err(|e| anyhow!(e))?;
    eprintln!("awf worker {name}: stopped: {}", stats.summary());
    Ok(EXIT_OK)
}

/// `awf runs submit`: the script checked here, then queued; prints the run id.
pub fn submit(
    cwd: &std::path::Path,
    file: &std::path::Path,
    nats: &super::nats::NatsFlags,
    args: Option<&str>,
) -> Result<i32> {
    let config = Config::load(cwd)?;
    let nats = nats.required(&config.cluster, "awf runs submit")?;
    let program = match crate::script::load(file, cwd) {
        Ok(p) => p,
        Err(rendered) => {
            eprintln!("{rendered}");
            return Ok(super::EXIT_USAGE);
        }
    };
    let args: serde_json::Value = match args {
        Some(text) => serde_json::from_str(text).map_err(|e| anyhow!("--args is not valid JSON: {e}"))?,
        None => serde_json::json!({}),
    };
    if let Err(e) = super::script::check_script_args(&program, &args) {
        eprintln!("{e}");
        return Ok(super::EXIT_USAGE);
    }
    let rt =
        tokio::runtime::Builder::new_current_thread().enable_all().build().context("cannot start the async runtime")?;
    let key = crate::cluster::ClusterKey::load(cwd, config.cluster.key_file.as_deref()).map_err(|e| anyhow!(e))?;
    let cluster = rt.block_on(crate::cluster::connect(&nats)).map_err(|e| anyhow!(e))?;
    let id = crate::record::new_run_id();
    let req =
        crate::cluster::runs::RunRequest { id: id.clone(), script: program.path.clone(), cwd: cwd.to_path_buf(), args };
    rt.block_on(crate::cluster::runs::submit(&cluster, &key, &req)).map_err(|e| anyhow!(e))?;
    out!("{id}");
    eprintln!(
        "awf: run {id} queued on {}; the worker that takes it records it in .awf/worker-runs/runs-<worker>/{id}",
        cluster.url
    );
    Ok(EXIT_OK)
}

/// `--runtimes`, each a harness name; none means all.
fn harnesses(names: &[String]) -> Result<Vec<HarnessKind>> {
    if names.is_empty() {
        return Ok(HarnessKind::ALL.to_vec());
    }
    let mut out = Vec::new();
    for n in names {
        let Some(h) = HarnessKind::ALL.iter().find(|h| h.as_str() == n.trim()) else {
            let known: Vec<&str> = HarnessKind::ALL.iter().map(|h| h.as_str()).collect();
            bail!("--runtimes: unknown harness `{n}` (one of {})", known.join(", "));
        };
        if !out.contains(h) {
            out.push(*h);
        }
    }
    Ok(out)
}
