//! `awf doctor`: what works on this machine, as a list of checks (a name, an ok flag, a detail).
//! Exit 0 when every check passes, 1 otherwise. To check something new (a CLI harness's binary, an
//! API key's variable), write a function returning `Vec<Check>` and add it to `checks`.

use super::{EXIT_FAILED, EXIT_OK};
use crate::harness::KNOWN_HARNESSES;
use crate::sandbox::{confinement, provider, Confinement};
use anyhow::Result;
use serde::Serialize;

#[derive(clap::Args)]
pub struct DoctorArgs {
    /// Print the checks as a JSON array of {name, ok, detail}
    #[arg(long)]
    json: bool,
}

/// One thing awf needs, and whether this machine has it.
#[derive(Debug, Serialize)]
pub struct Check {
    pub name: String,
    pub ok: bool,
    /// What was found, or what is wrong and how to fix it.
    pub detail: String,
}

impl Check {
    fn new(name: &str, ok: bool, detail: impl Into<String>) -> Check {
        Check { name: name.into(), ok, detail: detail.into() }
    }
}

/// Every check, in the order they are shown.
fn checks() -> Vec<Check> {
    let mut all = sandbox_checks();
    all.extend(harness_checks());
    // The CLI harnesses: installed, and the pinned version.
    all.extend(crate::harness::cli::doctor_checks().into_iter().map(|(name, ok, detail)| Check { name, ok, detail }));
    all
}

/// Whether sandboxes can be made: bwrap on PATH, then the same probe a run uses.
fn sandbox_checks() -> Vec<Check> {
    let bwrap = match provider::find(std::env::var_os("PATH").as_deref()) {
        Ok(b) => b,
        Err(why) => return vec![Check::new("sandbox: bwrap", false, why)],
    };
    let version = provider::version(&bwrap).unwrap_or_else(|| "version unknown".into());
    let probe = match provider::probe(&bwrap) {
        Ok(()) => Check::new("sandbox: namespaces", true, "bwrap --unshare-all works here: sandboxed agents can run"),
        Err(why) => Check::new("sandbox: namespaces", false, why),
    };
    vec![Check::new("sandbox: bwrap", true, format!("{} ({version})", bwrap.display())), probe]
}

/// The harnesses this build drives, and how each meets a sandbox.
fn harness_checks() -> Vec<Check> {
    KNOWN_HARNESSES
        .iter()
        .filter(|(_, built)| *built)
        .map(|(name, _)| {
            let sandbox = match confinement(name) {
                Confinement::Wrapped => "its program runs inside the agent's sandbox",
                Confinement::InProcess => "runs inside awf: a sandbox is recorded but has nothing to confine",
                Confinement::Unsupported => "refuses sandboxed agents (it cannot wrap its program yet)",
            };
            Check::new(&format!("harness: {name}"), true, format!("built; {sandbox}"))
        })
        .collect()
}

pub fn exec(args: DoctorArgs) -> Result<i32> {
    let checks = checks();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&checks)?);
    } else {
        let width = checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
        for c in &checks {
            println!("{:<4}  {:<width$}  {}", if c.ok { "ok" } else { "FAIL" }, c.name, c.detail);
        }
        let missing: Vec<&str> = KNOWN_HARNESSES.iter().filter(|(_, built)| !built).map(|(n, _)| *n).collect();
        if !missing.is_empty() {
            println!("not built in this version: {}", missing.join(", "));
        }
    }
    Ok(if checks.iter().all(|c| c.ok) { EXIT_OK } else { EXIT_FAILED })
}
