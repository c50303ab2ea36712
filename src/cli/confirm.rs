//! Runs that ask first: with `[limits] confirm_usd` or `--confirm-above USD`, `script run` and
//! `council run` plan the run (`crate::plan`) before it starts, warn when its budget is below the
//! plan's low end, and, when the plan's high end passes the threshold, show the plan and ask on a
//! terminal; with no terminal they refuse, naming `--yes`.

use super::script::RunFlags;
use super::EXIT_USAGE;
use crate::config::Config;
use crate::host::Output;
use crate::plan::Plan;
use crate::script::Program;

use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::io::{BufRead, IsTerminal, Write};

/// The threshold in USD a new run is planned against: the flag over awf.toml.
fn threshold(flags: &RunFlags, config: &Config) -> Result<Option<f64>> {
    let t = flags.confirm_above.or(config.limits.confirm_usd);
    if let Some(v) = t.filter(|v| !v.is_finite() || *v < 0.0) {
        let from = if flags.confirm_above.is_some() { "--confirm-above" } else { "[limits] confirm_usd" };
        bail!("{from} must be a number of USD, not negative (got {v})");
    }
    Ok(t)
}

/// Plans a new run when a threshold is set and asks as its plan requires. `Ok(Some(plan))`: go
/// ahead (the run records the plan); `Ok(None)`: no plan wanted; `Err(code)`: refused, printed.
pub(super) fn ask_first(
    program: &Program,
    script_args: &Value,
    flags: &RunFlags,
    output: Output,
) -> Result<Result<Option<Plan>, i32>> {
    let cwd = std::env::current_dir().context("cannot read the current folder")?;
    let config = Config::load(&cwd)?;
    let Some(limit) = threshold(flags, &config)? else { return Ok(Ok(None)) };
    let mut plan = match super::plan::make(program, script_args.clone(), flags, output, crate::plan::DEFAULT_BOUND)? {
        Ok(p) => p,
        Err(code) => return Ok(Err(code)),
    };
    plan.script = program.display.clone();
    let limits = crate::run::limits::resolve(&flags.overrides(), None, &config)?;
    let say = |line: String| {
        if !flags.quiet {
            eprintln!("{line}");
        }
    };
    say(format!(
        "awf: planned in {} ms: {} operation{}, ${:.4}-${:.4}{}",
        plan.plan_ms,
        plan.operations,
        if plan.operations == 1 { "" } else { "s" },
        plan.usd[0],
        plan.usd[1],
        unpriced(&plan)
    ));
    if let Some(b) = limits.budget_usd.filter(|b| *b < plan.usd[0]) {
        eprintln!(
            "awf: warning: the budget ${b:.4} is below the plan's low end ${:.4}: the run will likely stop short",
            plan.usd[0]
        );
    }
    if let Some(b) = limits.budget_tokens.filter(|b| *b < plan.tokens[0]) {
        eprintln!("awf: warning: the budget of {b} tokens is below the plan's low end of {} tokens: the run will likely stop short", plan.tokens[0]);
    }
    // A background run's own process was confirmed by the command that detached it.
    if plan.usd[1] <= limit || flags.yes || flags.as_run.is_some() {
        return Ok(Ok(Some(plan)));
    }
    let why = format!("the plan's high end ${:.4} passes the confirm threshold ${limit:.4}", plan.usd[1]);
    eprintln!("{}", crate::plan::render::text(&plan).trim_end());
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        eprintln!("awf: refused: {why} ([limits] confirm_usd or --confirm-above); run with --yes to go ahead");
        return Ok(Err(EXIT_USAGE));
    }
    eprint!("awf: {why}; run it? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer).context("cannot read the answer")?;
    if matches!(answer.trim(), "y" | "Y" | "yes") {
        Ok(Ok(Some(plan)))
    } else {
        eprintln!("awf: not run");
        Ok(Err(EXIT_USAGE))
    }
}

fn unpriced(plan: &Plan) -> String {
    if plan.unpriced.is_empty() {
        String::new()
    } else {
        format!(" and unpriced tokens of {}", plan.unpriced.join(", "))
    }
}

/// A new run of a checked program: planned and asked about first when a threshold is set, then
/// detached or run here.
pub(super) fn start(program: &Program, input: Value, flags: &RunFlags, output: Output, detach: bool) -> Result<i32> {
    let mut flags = flags.clone();
    flags.plan = match ask_first(program, &input, &flags, output)? {
        Ok(p) => p,
        Err(code) => return Ok(code),
    };
    if detach {
        return super::script::start_detached(program, input, &flags);
    }
    super::script::execute(program, input, &flags, output)
}
