//! `cargo bench --bench engine`: runs the release `awf` binary on the fake harness, with every record
//! written to disk, and prints wall time, the child's peak RSS and the time per operation.
//!
//! Each case writes a workflow into a temporary folder and runs `awf script run -q` there as a child
//! process, `AWF_BENCH_REPS` times (default 3); the table shows the run with the median wall time. A
//! run counts only if it exits 0 and `turns.jsonl` holds exactly the expected number of turns.
#![allow(unsafe_code)] // libc::wait4, to read the child's peak RSS

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const AWF: &str = env!("CARGO_BIN_EXE_awf");

/// Case (a): every item opens its own agent and makes one schema-validated turn, in one stage.
const MAP: &str = r#"
const VERDICT = #{
    type: "object",
    properties: #{ verdict: #{ enum: ["keep", "drop", "unsure"] }, note: #{ type: "string" } },
    required: ["verdict", "note"],
};

fn run(args) {
    let items = [];
    items.pad(args.n, 0);
    let out = ctx.stage("map", #{ result: #{ type: "array" } }, || {
        ctx.parallel(items, |item, i| {
            let a = ctx.agents.open(#{ key: `a-${i}` });
            a.ask(`Judge item ${i}`, global::VERDICT)
        }, #{ concurrency: 16 })
    });
    out.len()
}
"#;

/// Case (b): three agents; each round three parallel votes, three parallel reflections, a tally.
const MAGI: &str = r#"
const VOTE = #{
    type: "object",
    properties: #{ choice: #{ enum: ["approve", "reject", "abstain"] }, reason: #{ type: "string" } },
    required: ["choice", "reason"],
};
const REFLECT = #{
    type: "object",
    properties: #{ stance: #{ enum: ["keep", "change"] }, note: #{ type: "string" } },
    required: ["stance", "note"],
};

fn run(args) {
    for k in 0..3 {
        ctx.agents.open(#{ key: `m${k}` });
    }
    let wins = #{};
    for r in 0..args.rounds {
        let votes = ctx.parallel([0, 1, 2], |k, i| {
            ctx.agents.get(`m${k}`).ask(`Round ${r}: vote on proposal ${r}`, global::VOTE)
        });
        let shown = votes.map(|v| v.choice);
        let reflections = ctx.parallel([0, 1, 2], |k, i| {
            ctx.agents.get(`m${k}`).ask(`Round ${r}: the votes were ${shown}; reflect`, global::REFLECT)
        });
        let counts = #{};
        for v in votes {
            counts[v.choice] = (counts[v.choice] ?? 0) + 1;
        }
        let best = "";
        let most = 0;
        for c in counts.keys() {
            if counts[c] > most {
                most = counts[c];
                best = c;
            }
        }
        wins[best] = (wins[best] ?? 0) + 1;
    }
    wins
}
"#;

/// Case (c): no agents; a script that builds a list of strings with `push` (linear since rhai's
/// size limits, which re-measured the array on every push, gave way to awf's data guard).
const PUSH: &str = r#"
fn run(args) {
    let a = [];
    for i in 0..args.n {
        a.push(`item ${i}`);
    }
    a.len()
}
"#;

struct Case {
    name: &'static str,
    n: usize,
    script: &'static str,
    args: String,
    max_agents: usize,
    /// Lines `turns.jsonl` must hold: the operations the run makes.
    ops: usize,
}

struct Measure {
    wall: Duration,
    rss_mb: f64,
    ops: usize,
}

fn map_case(n: usize) -> Case {
    Case { name: "map", n, script: MAP, args: format!(r#"{{"n":{n}}}"#), max_agents: n + 10, ops: n }
}

fn push_case(n: usize) -> Case {
    Case { name: "push", n, script: PUSH, args: format!(r#"{{"n":{n}}}"#), max_agents: 1, ops: 0 }
}

fn magi_case(rounds: usize) -> Case {
    Case {
        name: "magi",
        n: rounds,
        script: MAGI,
        args: format!(r#"{{"rounds":{rounds}}}"#),
        max_agents: 13,
        ops: rounds * 6,
    }
}

/// Runs the child to completion and returns (exit status, wall time, peak RSS in KiB).
fn spawn_and_wait(cmd: &mut Command) -> (i32, Duration, i64) {
    let start = Instant::now();
    let child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {AWF}: {e}"));
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain old data; wait4 fills it and the status for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = start.elapsed();
    assert_eq!(rc, pid, "wait4 failed: {}", std::io::Error::last_os_error());
    let code = if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { -1 };
    drop(child); // already reaped; dropping a Child neither waits nor kills
    (code, wall, usage.ru_maxrss)
}

fn run_once(case: &Case) -> Measure {
    let dir = tempfile::tempdir().expect("cannot create a temporary folder");
    let root = dir.path();
    let script = root.join("bench.rhai");
    fs::write(&script, case.script).expect("cannot write the workflow");
    let runs = root.join("runs");
    let out = fs::File::create(root.join("stdout")).expect("stdout file");
    let err = fs::File::create(root.join("stderr")).expect("stderr file");
    let mut cmd = Command::new(AWF);
    cmd.current_dir(root)
        .env("XDG_CONFIG_HOME", root) // no user config
        .env_remove("AWF_RUNTIME")
        .args(["script", "run", "-q", "--max-concurrency", "16"])
        .arg("--max-agents")
        .arg(case.max_agents.to_string())
        .arg("--runs-dir")
        .arg(&runs)
        .arg("--args")
        .arg(&case.args)
        .arg(&script)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    let (code, wall, maxrss_kib) = spawn_and_wait(&mut cmd);
    let what = format!("{} N={}", case.name, case.n);
    if code != 0 {
        let stderr = fs::read_to_string(root.join("stderr")).unwrap_or_default();
        panic!("{what}: awf exited {code}\n{stderr}");
    }
    let run_dir = only_run(&runs, &what);
    let turns = fs::read(run_dir.join("turns.jsonl")).unwrap_or_else(|e| panic!("{what}: turns.jsonl: {e}"));
    let lines = turns.iter().filter(|&&b| b == b'\n').count();
    assert_eq!(lines, case.ops, "{what}: turns.jsonl has {lines} lines, expected {}", case.ops);
    Measure { wall, rss_mb: maxrss_kib as f64 / 1024.0, ops: lines }
}

fn only_run(runs: &Path, what: &str) -> PathBuf {
    let dirs: Vec<PathBuf> = fs::read_dir(runs)
        .unwrap_or_else(|e| panic!("{what}: {}: {e}", runs.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(dirs.len(), 1, "{what}: expected one run folder in {}", runs.display());
    dirs.into_iter().next().unwrap_or_default()
}

/// Runs the case `reps` times and keeps the run with the median wall time.
fn measure(case: &Case, reps: usize) -> Measure {
    let mut all: Vec<Measure> = (0..reps).map(|_| run_once(case)).collect();
    all.sort_by_key(|m| m.wall);
    all.swap_remove(all.len() / 2)
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "MISSED"
    }
}

fn main() {
    // `cargo bench` passes `--bench` (and maybe a filter); this harness takes none of them.
    let reps: usize = std::env::var("AWF_BENCH_REPS").ok().and_then(|v| v.parse().ok()).unwrap_or(3).max(1);
    let cases =
        [map_case(100), map_case(1_000), map_case(10_000), magi_case(1_000), magi_case(10_000), push_case(100_000)];
    println!("awf engine bench: fake harness, all records on disk, -q; median of {reps} runs");
    println!("{:<6} {:>7} {:>9} {:>9} {:>8} {:>9}", "case", "N", "wall s", "RSS MB", "ops", "µs/op");
    let mut results = Vec::new();
    for case in &cases {
        let m = measure(case, reps);
        let per_op =
            if m.ops == 0 { "-".to_string() } else { format!("{:.1}", m.wall.as_secs_f64() * 1e6 / m.ops as f64) };
        println!(
            "{:<6} {:>7} {:>9.3} {:>9.1} {:>8} {:>9}",
            case.name,
            case.n,
            m.wall.as_secs_f64(),
            m.rss_mb,
            m.ops,
            per_op
        );
        results.push(m);
    }
    let (small, map10k, magi10k, push) = (&results[0], &results[2], &results[4], &results[5]);
    let overhead_us = (map10k.wall.as_secs_f64() - small.wall.as_secs_f64()) * 1e6 / (map10k.ops - small.ops) as f64;
    println!();
    println!("engine overhead per operation (map N=10000 minus N=100): {overhead_us:.1} µs/op");
    println!();
    println!("targets:");
    let map_wall = map10k.wall.as_secs_f64();
    println!("  map  N=10000 wall    {map_wall:>8.3} s   < 0.3 s    {}", verdict(map_wall < 0.3));
    println!("  map  N=10000 RSS     {:>8.1} MB  < 80 MB    {}", map10k.rss_mb, verdict(map10k.rss_mb < 80.0));
    let magi_wall = magi10k.wall.as_secs_f64();
    println!("  magi N=10000 wall    {magi_wall:>8.3} s   < 1.5 s    {}", verdict(magi_wall < 1.5));
    println!("  overhead per op      {overhead_us:>8.1} µs  < 25 µs    {}", verdict(overhead_us < 25.0));
    let push_wall = push.wall.as_secs_f64();
    println!("  push N=100000 wall   {push_wall:>8.3} s   < 0.1 s    {}", verdict(push_wall < 0.1));
}
