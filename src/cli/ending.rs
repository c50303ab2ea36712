//! How an attempt run by this process ends: the signals that stop it (Ctrl-C, SIGTERM, SIGHUP; a
//! second one kills), and what it prints as it ends (its value, its error, the closing spend line)
//! and the exit code it returns.

use super::script::RunFlags;
use crate::host::{Host, Output, RunEnd};
use crate::run::{Run, RunStatus, StopCause};
use serde_json::Value;
use std::sync::Arc;

/// Ctrl-C, SIGTERM or SIGHUP stops the run (its script gets the grace to unwind); a second one
/// records the run as killed and exits at once.
pub(super) async fn interrupts(host: Arc<Host>) {
    let Ok(mut signals) = Signals::new() else { return };
    let Some(name) = signals.next().await else { return };
    eprintln!("awf: stopping on {name} ({name} again to kill)");
    host.run.stop_with(StopCause::Cancelled(format!("interrupted ({name})")));
    if let Some(name) = signals.next().await {
        eprintln!("awf: killed by a second {name}");
        let _ = host.finish(RunStatus::Cancelled, None, Some(&format!("killed by a second {name}")), None);
        std::process::exit(130);
    }
}

/// The signals that stop a run: Ctrl-C (SIGINT), SIGTERM and SIGHUP.
pub struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    pub fn new() -> std::io::Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    /// The next signal's name. Cancel safety: dropping the future loses no signal.
    pub async fn next(&mut self) -> Option<&'static str> {
        tokio::select! {
            s = self.int.recv() => s.map(|_| "Ctrl-C"),
            s = self.term.recv() => s.map(|_| "SIGTERM"),
            s = self.hup.recv() => s.map(|_| "SIGHUP"),
        }
    }
}

pub(super) fn report(run: &Run, end: RunEnd, args: &RunFlags, output: Output) -> i32 {
    let RunEnd { result, status, value, error, rendered, strategy_error, code } = end;
    if args.json {
        out!("{}", serde_json::to_string_pretty(&result).unwrap_or_default());
    } else if let Some(v) = &value {
        match (v, output) {
            (v, Output::Strategy) if v.get("output").is_some() => {
                out!("{}", v["output"].as_str().map(String::from).unwrap_or_else(|| v["output"].to_string()));
            }
            (Value::String(s), _) => out!("{s}"),
            (other, _) => out!("{}", serde_json::to_string_pretty(other).unwrap_or_default()),
        }
    }
    if let Some(why) = &strategy_error {
        eprintln!("awf: {why}");
    }
    if let Some(r) = rendered {
        if status == RunStatus::Failed {
            eprintln!("{r}");
        } else {
            eprintln!("awf: run {status}: {}", error.as_deref().unwrap_or(""));
        }
    }
    if !args.quiet {
        eprintln!("{}", summary(run, status, &result));
    }
    code
}

/// The closing spend line.
fn summary(run: &Run, status: RunStatus, result: &crate::run::ResultDoc) -> String {
    let totals = &result.accounting.totals;
    let plural = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let unpriced = result.accounting.unpriced_operations();
    // Every operation unpriced (a local model): no "$0.0000", the unpriced note says why.
    let usd =
        if totals.cost_usd == 0.0 && unpriced > 0 { String::new() } else { format!(" · ${:.4}", totals.cost_usd) };
    let mut s = format!(
        "awf: {status} in {:.2}s · {} · {} · {} tokens{usd}",
        run.started.elapsed().as_secs_f64(),
        plural(result.accounting.by_agent.len(), "agent", "agents"),
        plural(totals.operations as usize, "operation", "operations"),
        totals.tokens,
    );
    if unpriced > 0 {
        let models: Vec<&str> = result.accounting.unpriced.keys().map(String::as_str).collect();
        s.push_str(&format!(
            " · {} unpriced ({}: counted at $0; add their [prices] to awf.toml)",
            plural(unpriced as usize, "operation", "operations"),
            models.join(", ")
        ));
    }
    if let Some(plan) = crate::plan::read(run.dir()) {
        s.push_str(&format!("\nawf: {}", crate::plan::render::against(&plan, totals.tokens, totals.cost_usd)));
    }
    if run.simulated() {
        s.push_str("\nawf: simulated: answers came from the fake harness; no model was called");
    }
    s.push_str(&format!("\nawf: records in {}", run.dir().display()));
    s
}
