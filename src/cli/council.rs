//! `awf council list|show|run`: the strategy catalog and strategy calls.

use super::script::RunFlags;
use super::{EXIT_OK, EXIT_USAGE};
use crate::council::{self, registry};
use crate::host::Output;
use anyhow::{Context, Result};
use serde_json::{json, Map, Value};

#[derive(clap::Subcommand)]
pub enum CouncilCommand {
    /// One line per installed strategy, from its META
    List,
    /// A strategy's META and its default team
    Show {
        /// The strategy's name (`awf council list` shows them)
        name: String,
    },
    /// Run a strategy on a task
    Run(Box<CouncilRun>),
    /// Plan a strategy on a task on the fake harness: its agents, operations and spend range
    Plan(Box<CouncilPlan>),
}

#[derive(clap::Args)]
pub struct CouncilPlan {
    #[command(flatten)]
    call: CouncilCall,
    #[command(flatten)]
    bound: super::plan::BoundFlag,
}

#[derive(clap::Args)]
pub struct CouncilRun {
    #[command(flatten)]
    pub(super) call: CouncilCall,
    /// Print the run id and return; the run goes on in a process of its own (see `script run`)
    #[arg(long)]
    detach: bool,
}

/// A strategy call and the run's flags: what `council run` and `council plan` share.
#[derive(clap::Args)]
pub struct CouncilCall {
    /// The strategy: magi, map, pair, pipeline, synthesize, or one of your own
    name: String,
    /// The task, question or goal
    #[arg(long)]
    task: String,
    /// A named team from stdlib/teams.rhai (default: the strategy's own)
    #[arg(long, conflicts_with = "roster")]
    team: Option<String>,
    /// Members by name, comma-separated (personas from stdlib/teams.rhai where they exist)
    #[arg(long, value_delimiter = ',')]
    roster: Vec<String>,
    /// A param, KEY=VALUE (VALUE is read as JSON when it parses, else as a string); repeatable
    #[arg(long = "param", value_name = "KEY=VALUE")]
    params: Vec<String>,
    /// Most agents the strategy may open (0: no limit beyond --max-agents)
    #[arg(long, default_value_t = 0)]
    max_children: u64,
    #[command(flatten)]
    pub(super) flags: RunFlags,
}

pub fn exec(cmd: CouncilCommand) -> Result<i32> {
    let cwd = std::env::current_dir().context("cannot read the current folder")?;
    match cmd {
        CouncilCommand::List => {
            for s in council::discover(&cwd) {
                out!("{}", council::catalog_line(&s));
            }
            Ok(EXIT_OK)
        }
        CouncilCommand::Show { name } => {
            let s = match council::find(&cwd, &name) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("error: {e}");
                    return Ok(EXIT_USAGE);
                }
            };
            out!("{} ({})", s.name, s.origin);
            out!("{}", serde_json::to_string_pretty(&s.meta).unwrap_or_default());
            let (teams, personas) = council::teams(&cwd);
            if let Some(team) = s.meta.get("team").and_then(Value::as_str) {
                out!("\ndefault team {team}:");
                for m in teams.get(team).and_then(Value::as_array).into_iter().flatten() {
                    let member = council::Member::of(m);
                    let name = member.as_ref().and_then(council::Member::name).unwrap_or("?").to_string();
                    let p = personas.get(&name).cloned().unwrap_or_else(|| m.clone());
                    let label = p.get("label").and_then(Value::as_str).unwrap_or(&name);
                    let instructions = p.get("instructions").and_then(Value::as_str).unwrap_or("");
                    out!("- {label}: {instructions}");
                }
            }
            Ok(EXIT_OK)
        }
        CouncilCommand::Run(args) => run(&cwd, *args),
        CouncilCommand::Plan(args) => {
            let CouncilPlan { call, bound } = *args;
            match checked(&cwd, &call)? {
                Ok((program, input)) => super::plan::print(&program, input, &call.flags, Output::Strategy, &bound),
                Err(code) => Ok(code),
            }
        }
    }
}

fn run(cwd: &std::path::Path, args: CouncilRun) -> Result<i32> {
    let (program, input) = match checked(cwd, &args.call)? {
        Ok(p) => p,
        Err(code) => return Ok(code),
    };
    super::confirm::start(&program, input, &args.call.flags, Output::Strategy, args.detach)
}

/// The strategy compiled and its call checked, refused (printed, `Err` the exit code) before any
/// agent, record or progress row exists; the input its `fn run` is given.
fn checked(cwd: &std::path::Path, args: &CouncilCall) -> Result<Result<(crate::script::Program, Value), i32>> {
    let strategy = match council::find(cwd, &args.name) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(Err(EXIT_USAGE));
        }
    };
    if let Some(error) = &strategy.error {
        eprintln!("{error}");
        return Ok(Err(EXIT_USAGE));
    }
    let mut params = Map::new();
    for kv in &args.params {
        let Some((k, v)) = kv.split_once('=') else {
            eprintln!("error: --param {kv}: write it as KEY=VALUE");
            return Ok(Err(EXIT_USAGE));
        };
        params.insert(k.to_string(), serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_string())));
    }
    // Refused before any agent, record or progress row exists; params coerced to META's types.
    let roster = json!(args.roster);
    let params = match council::check_call(&strategy, &params).and_then(|p| council::check_roster(&roster).map(|_| p)) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(Err(EXIT_USAGE));
        }
    };
    if let Some(team) = &args.team {
        let (teams, _) = council::teams(cwd);
        if !teams.contains_key(team) {
            let known: Vec<&String> = teams.keys().collect();
            eprintln!("error: unknown team \"{team}\" (known: {known:?})");
            return Ok(Err(EXIT_USAGE));
        }
    }
    let program = match registry::compile(cwd, &strategy.name) {
        Ok(p) => p,
        Err(error) => {
            eprintln!("{error}");
            return Ok(Err(EXIT_USAGE));
        }
    };
    let mut input = json!({
        "task": args.task,
        "params": params,
        "limits": { "budget_tokens": args.flags.budget_tokens.unwrap_or(0), "max_children": args.max_children },
    });
    if let Some(team) = &args.team {
        input["team"] = json!(team);
    }
    if !args.roster.is_empty() {
        input["roster"] = roster;
    }
    Ok(Ok((program, input)))
}
