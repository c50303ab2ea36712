//! `cargo bench --bench budget`: how far a run overshoots its budget at concurrency 1, 8 and 64,
//! beside the bound it must stay under (one operation's cost: issue 17).
//!
//! Each case runs `awf script run` on a workflow of ITEMS fake agents, one turn each, through
//! `ctx.parallel_settled` at the given concurrency. Every turn takes DELAY_MS (so that turns are
//! in flight together) and costs OP_USD and OP_TOKENS, as the fake responder reports. The run has
//! `--budget-usd BUDGET_USD`, then in a second run `--budget-tokens BUDGET_TOKENS`; what
//! `result.json` says the run spent, less the budget, is the overshoot. A case says PASS when the
//! overshoot is at most one operation's cost, MISS otherwise. `AWF_BENCH_BIN` measures another awf
//! binary (an older build, to compare). The run folders go where `TMPDIR` points.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// Agents (and turns) per run: far more than any budget here allows.
const ITEMS: usize = 400;
const DELAY_MS: u64 = 20;
const OP_USD: f64 = 0.01;
const OP_TOKENS: u64 = 120;
const BUDGET_USD: f64 = 0.5;
const BUDGET_TOKENS: u64 = 6_000;
const CONCURRENCIES: [usize; 3] = [1, 8, 64];

const RESPONDER: &str = r#"fn respond(turn) {
    #{ answer: #{}, delay_ms: DELAY, usage: #{ input_tokens: INPUT, output_tokens: 20, cost_usd: USD } }
}"#;

const WORKFLOW: &str = r#"
let r = ctx.parallel_settled(0..ITEMS, |i| ctx.agents.open(#{ key: `w${i}` }).ask("Go.", #{ type: "object" }),
                             #{ concurrency: CONCURRENCY });
r.filter(|x| x.ok).len()
"#;

/// What one run spent: (USD, tokens, operations answered), and its wall time in seconds.
fn spend(awf: &Path, concurrency: usize, budget: &[&str]) -> (f64, u64, u64, f64) {
    let dir = tempfile::tempdir().expect("a temporary folder for the run");
    let root = dir.path();
    fs::write(
        root.join("awf.toml"),
        "default_runtime = \"paid\"\n[runtimes.paid]\nharness = \"fake\"\nresponder = \"paid.rhai\"\n",
    )
    .expect("awf.toml written");
    let responder = RESPONDER
        .replace("DELAY", &DELAY_MS.to_string())
        .replace("INPUT", &(OP_TOKENS - 20).to_string())
        .replace("USD", &OP_USD.to_string());
    fs::write(root.join("paid.rhai"), responder).expect("the responder written");
    let workflow = WORKFLOW.replace("ITEMS", &ITEMS.to_string()).replace("CONCURRENCY", &concurrency.to_string());
    fs::write(root.join("bench.rhai"), workflow).expect("the workflow written");
    let started = Instant::now();
    let out = Command::new(awf)
        .current_dir(root)
        .env("XDG_CONFIG_HOME", root) // no user config
        .env_remove("AWF_RUNTIME")
        .args(["script", "run", "bench.rhai", "-q", "--max-concurrency", &concurrency.to_string()])
        .args(budget)
        .stdin(Stdio::null())
        .output()
        .expect("awf started");
    let wall = started.elapsed().as_secs_f64();
    assert!(out.status.success(), "awf exited with {}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    let result = only_run(&root.join(".awf/runs")).join("result.json");
    let doc: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&result).expect("result.json")).expect("result.json is JSON");
    let answered: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().expect("the count of answered turns");
    let totals = &doc["accounting"]["totals"];
    (totals["cost_usd"].as_f64().unwrap_or(0.0), totals["tokens"].as_u64().unwrap_or(0), answered, wall)
}

fn only_run(runs: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = fs::read_dir(runs)
        .unwrap_or_else(|e| panic!("{}: {e}", runs.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(dirs.len(), 1, "expected one run folder in {}", runs.display());
    dirs.into_iter().next().expect("one run folder")
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "MISS"
    }
}

fn main() {
    // `cargo bench` passes `--bench`; this harness takes no arguments.
    let awf = PathBuf::from(std::env::var("AWF_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_awf").into()));
    println!(
        "budget overshoot: {ITEMS} fake turns of ${OP_USD} and {OP_TOKENS} tokens, {DELAY_MS} ms each; bound: one operation"
    );
    let usd_flag = BUDGET_USD.to_string();
    let tokens_flag = BUDGET_TOKENS.to_string();
    let mut missed = 0;
    for c in CONCURRENCIES {
        let (usd, _, paid, wall) = spend(&awf, c, &["--budget-usd", &usd_flag]);
        let over = (usd - BUDGET_USD).max(0.0);
        let ok = over <= OP_USD + 1e-9;
        missed += usize::from(!ok);
        println!(
            "concurrency {c:>2}  --budget-usd {BUDGET_USD}: spent ${usd:.4} in {paid} turns ({wall:.2}s), overshoot ${over:.4} (bound ${OP_USD:.4})  {}",
            verdict(ok)
        );
        let (_, tokens, paid, wall) = spend(&awf, c, &["--budget-tokens", &tokens_flag]);
        let over = tokens.saturating_sub(BUDGET_TOKENS);
        let ok = over <= OP_TOKENS;
        missed += usize::from(!ok);
        println!(
            "concurrency {c:>2}  --budget-tokens {BUDGET_TOKENS}: spent {tokens} tokens in {paid} turns ({wall:.2}s), overshoot {over} (bound {OP_TOKENS})  {}",
            verdict(ok)
        );
    }
    if missed > 0 {
        println!("{missed} case(s) overshot by more than one operation");
    }
}
