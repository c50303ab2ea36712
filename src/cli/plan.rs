//! `awf script plan` and `awf council plan`: the workflow planned on the fake harness
//! (`crate::plan`), printed as text or, with `--json`, as the plan's data.

use super::script::{loaded, prepare, RunFlags, ScriptArgs};
use crate::config::parse_duration;
use crate::host::Output;
use crate::script::Program;
use anyhow::{anyhow, Context, Result};
use serde_json::Value;

#[derive(clap::Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub script: ScriptArgs,
    #[command(flatten)]
    pub bound: BoundFlag,
}

/// How long a plan run may take.
#[derive(clap::Args, Clone, Default)]
pub struct BoundFlag {
    /// Cut a plan run that has not ended after this long (a script that waits on a message that
    /// never comes, or sleeps), e.g. 10s (default 30s)
    #[arg(long, value_name = "DURATION")]
    pub bound: Option<String>,
}

impl BoundFlag {
    fn duration(&self) -> Result<std::time::Duration> {
        match &self.bound {
            Some(b) => parse_duration(b).map_err(|e| anyhow!("--bound: {e}")),
            None => Ok(crate::plan::DEFAULT_BOUND),
        }
    }
}

pub fn exec(args: PlanArgs) -> Result<i32> {
    match loaded(&args.script)? {
        Ok((program, script_args)) => print(&program, script_args, &args.script.flags, Output::Value, &args.bound),
        Err(code) => Ok(code),
    }
}

/// Plans a checked program with a run's flags; `Err(code)` when the run would be refused (printed).
pub(super) fn make(
    program: &Program,
    script_args: Value,
    flags: &RunFlags,
    output: Output,
    bound: std::time::Duration,
) -> Result<Result<crate::plan::Plan, i32>> {
    let spec = prepare(program, script_args.clone(), flags, None)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    match rt.block_on(crate::plan::make(spec, program, script_args, output, bound)) {
        Ok(p) => Ok(Ok(p)),
        Err(crate::plan::PlanError::Refused { code, rendered }) => {
            eprintln!("{rendered}");
            Ok(Err(code))
        }
        Err(e) => Err(e.into()),
    }
}

/// Plans and prints; the exit code.
pub(super) fn print(
    program: &Program,
    script_args: Value,
    flags: &RunFlags,
    output: Output,
    bound: &BoundFlag,
) -> Result<i32> {
    let mut plan = match make(program, script_args, flags, output, bound.duration()?)? {
        Ok(p) => p,
        Err(code) => return Ok(code),
    };
    plan.script = program.display.clone();
    if flags.json {
        out!("{}", serde_json::to_string_pretty(&plan).context("the plan as JSON")?);
    } else {
        out!("{}", crate::plan::render::text(&plan).trim_end());
    }
    Ok(match plan.cut {
        Some(crate::plan::Cut::Failed { .. }) => crate::host::exit::FAILED,
        _ => crate::host::exit::OK,
    })
}
