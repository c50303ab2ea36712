//! `cargo bench --bench engine`: awf beside a reference of the same shape, in one process run, with
//! the ratio of the two (the machine is shared and noisy: ratios are what we judge).
//!
//! awf: the release binary runs a workflow from `benches/workflows/` on the fake harness as
//! `awf script run -q`, every record written to disk; a run counts only if it exits 0 and
//! `turns.jsonl` holds exactly the operations made. Reference: `benches/reference.py`, a bare
//! asyncio program doing the same fan-out with no records; it counts only if it prints the count
//! expected. Both are timed as whole processes (interpreter start included), alternating, and the
//! median of `AWF_BENCH_REPS` runs (default 3) counts, with its peak RSS (and for awf, its
//! voluntary context switches). A ratio is the median of the ratios of the pairs run back to back
//! (a load that comes and goes moves both runs of a pair), of wall time, which is judged, and of
//! CPU time, shown beside it. A child's peak RSS is never below this process's own (see
//! `count_lines`), which is printed last.
//!
//! `AWF_BENCH_BIN` runs another awf binary (to compare builds in the same minutes);
//! `AWF_BENCH_ONLY` keeps the cases whose name contains it (`map`, `magi`, `push`, `chain`,
//! `nested`, `long`).
#![allow(unsafe_code)] // libc::wait4, to read the child's peak RSS

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const REFERENCE: &str = include_str!("reference.py");
const MAP: &str = include_str!("workflows/map.rhai");
const MAGI: &str = include_str!("workflows/magi.rhai");
const PUSH: &str = include_str!("workflows/push.rhai");
const CHAIN: &str = include_str!("workflows/chain.rhai");
const NESTED: &str = include_str!("workflows/nested.rhai");
const LONG: &str = include_str!("workflows/long.rhai");

struct Case {
    name: &'static str,
    n: usize,
    script: &'static str,
    args: String,
    max_agents: usize,
    /// Lines `turns.jsonl` must hold: the operations the run makes.
    ops: usize,
    /// The reference's arguments, and the count it must print.
    reference: Vec<String>,
    count: usize,
}

#[derive(Clone, Copy)]
struct Measure {
    wall: Duration,
    rss_mb: f64,
    /// Voluntary context switches: how often the process's threads blocked.
    switches: i64,
    /// CPU time, user and system, of all its threads: what a busy machine moves least.
    cpu: Duration,
}

fn map_case(n: usize) -> Case {
    let reference = vec!["map".into(), n.to_string()];
    Case {
        name: "map",
        n,
        script: MAP,
        args: format!(r#"{{"n":{n}}}"#),
        max_agents: n + 10,
        ops: n,
        reference,
        count: n,
    }
}

fn magi_case(rounds: usize, new: bool) -> Case {
    Case {
        name: if new { "magi-new" } else { "magi" },
        n: rounds,
        script: MAGI,
        args: format!(r#"{{"rounds":{rounds},"fresh":{new}}}"#),
        max_agents: if new { 3 * rounds + 13 } else { 13 },
        ops: rounds * 6,
        reference: vec!["magi".into(), rounds.to_string(), if new { "new" } else { "reused" }.into()],
        count: rounds,
    }
}

fn push_case(n: usize) -> Case {
    let reference = vec!["push".into(), n.to_string()];
    Case { name: "push", n, script: PUSH, args: format!(r#"{{"n":{n}}}"#), max_agents: 1, ops: 0, reference, count: n }
}

/// Shapes no target was tuned on: one agent's long chain of turns, and parallels nested in one.
fn chain_case(n: usize) -> Case {
    let reference = vec!["chain".into(), n.to_string()];
    Case {
        name: "chain",
        n,
        script: CHAIN,
        args: format!(r#"{{"n":{n}}}"#),
        max_agents: 10,
        ops: n,
        reference,
        count: n,
    }
}

fn nested_case(groups: usize, items: usize) -> Case {
    let n = groups * items;
    Case {
        name: "nested",
        n,
        script: NESTED,
        args: format!(r#"{{"groups":{groups},"items":{items}}}"#),
        max_agents: n + 10,
        ops: n,
        reference: vec!["nested".into(), groups.to_string(), items.to_string()],
        count: n,
    }
}

/// A map whose prompts each carry the same long document: what a prompt's size costs.
fn long_case(n: usize, lines: usize) -> Case {
    Case {
        name: "long",
        n,
        script: LONG,
        args: format!(r#"{{"n":{n},"lines":{lines}}}"#),
        max_agents: n + 10,
        ops: n,
        reference: vec!["long".into(), n.to_string(), lines.to_string()],
        count: n,
    }
}

/// Runs the child to completion and returns its exit status and measure.
fn spawn_and_wait(cmd: &mut Command, what: &str) -> (i32, Measure) {
    let start = Instant::now();
    let child = cmd.spawn().unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain old data; wait4 fills it and the status for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = start.elapsed();
    assert_eq!(rc, pid, "wait4 failed: {}", std::io::Error::last_os_error());
    let code = if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { -1 };
    drop(child); // already reaped; dropping a Child neither waits nor kills
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    let cpu = time(usage.ru_utime) + time(usage.ru_stime);
    (code, Measure { wall, rss_mb: usage.ru_maxrss as f64 / 1024.0, switches: usage.ru_nvcsw, cpu })
}

/// One awf run; an error says why it does not count (exit status, records short).
fn awf_once(awf: &Path, case: &Case) -> Result<Measure, String> {
    let dir = tempfile::tempdir().expect("cannot create a temporary folder");
    let root = dir.path();
    let script = root.join("bench.rhai");
    fs::write(&script, case.script).expect("cannot write the workflow");
    let runs = root.join("runs");
    let mut cmd = Command::new(awf);
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
        .stdout(fs::File::create(root.join("stdout")).expect("stdout file"))
        .stderr(fs::File::create(root.join("stderr")).expect("stderr file"));
    let what = format!("awf {} N={}", case.name, case.n);
    let (code, m) = spawn_and_wait(&mut cmd, &what);
    let stderr = || fs::read_to_string(root.join("stderr")).unwrap_or_default();
    if code != 0 {
        return Err(format!("{what}: exited {code}\n{}", stderr()));
    }
    let run_dir = only_run(&runs, &what);
    let lines = count_lines(&run_dir.join("turns.jsonl")).unwrap_or_else(|e| panic!("{what}: turns.jsonl: {e}"));
    if lines != case.ops {
        return Err(format!("{what}: turns.jsonl has {lines} lines, expected {}\n{}", case.ops, stderr()));
    }
    Ok(m)
}

/// The lines of a file, read through a small buffer. The file is not read whole: a child spawned
/// later (posix_spawn shares this process's memory until it execs) is charged this process's own
/// peak RSS as its own floor, so this process keeps its peak small (a 100k map's `turns.jsonl`
/// read whole made every later case's peak read about 50 MB, awf's and asyncio's alike).
fn count_lines(path: &Path) -> std::io::Result<usize> {
    use std::io::Read;
    let mut file = fs::File::open(path)?;
    let (mut buf, mut lines) = (vec![0u8; 64 * 1024], 0);
    loop {
        match file.read(&mut buf)? {
            0 => return Ok(lines),
            n => lines += buf[..n].iter().filter(|&&b| b == b'\n').count(),
        }
    }
}

/// This process's own peak RSS in MB: the floor of every child's figure.
fn own_peak_mb() -> f64 {
    // SAFETY: rusage is plain old data; getrusage fills it for this process.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    usage.ru_maxrss as f64 / 1024.0
}

fn reference_once(case: &Case) -> Measure {
    let dir = tempfile::tempdir().expect("cannot create a temporary folder");
    let root = dir.path();
    let program = root.join("reference.py");
    fs::write(&program, REFERENCE).expect("cannot write the reference");
    let mut cmd = Command::new("python3");
    cmd.arg(&program)
        .args(&case.reference)
        .stdin(Stdio::null())
        .stdout(fs::File::create(root.join("stdout")).expect("stdout file"))
        .stderr(fs::File::create(root.join("stderr")).expect("stderr file"));
    let what = format!("asyncio {} N={}", case.name, case.n);
    let (code, m) = spawn_and_wait(&mut cmd, &what);
    let stdout = fs::read_to_string(root.join("stdout")).unwrap_or_default();
    if code != 0 || stdout.trim() != case.count.to_string() {
        let stderr = fs::read_to_string(root.join("stderr")).unwrap_or_default();
        panic!("{what}: exited {code}, printed {stdout:?}, expected {}\n{stderr}", case.count);
    }
    m
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

fn median(mut all: Vec<Measure>) -> Measure {
    all.sort_by_key(|m| m.wall);
    all[all.len() / 2]
}

/// One case's figures: awf and the reference, each the median of `reps` alternating runs, and the
/// median of the ratios of the runs made back to back (a load that comes and goes over the minutes
/// of a bench moves both runs of a pair, and cancels out of their ratio). A case where any awf run
/// failed has no awf figure: it misses every target.
struct Row {
    name: &'static str,
    n: usize,
    awf: Result<Measure, String>,
    reference: Measure,
    /// The median of awf's wall time over the reference's, pair by pair.
    paired: f64,
    /// The same of their CPU times: printed beside it, to tell the machine's load from awf's work.
    paired_cpu: f64,
}

fn measure(awf: &Path, case: &Case, reps: usize) -> Row {
    let (mut a, mut r, mut ratios, mut cpu) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut failed = None;
    for _ in 0..reps {
        let mine = awf_once(awf, case);
        let theirs = reference_once(case);
        match mine {
            Ok(m) => {
                ratios.push(m.wall.as_secs_f64() / theirs.wall.as_secs_f64());
                cpu.push(m.cpu.as_secs_f64() / theirs.cpu.as_secs_f64());
                a.push(m);
            }
            Err(e) => failed = failed.or(Some(e)),
        }
        r.push(theirs);
    }
    let middle = |mut all: Vec<f64>| {
        all.sort_by(f64::total_cmp);
        all.get(all.len() / 2).copied().unwrap_or(f64::NAN)
    };
    let awf = match failed {
        Some(e) => Err(e),
        None => Ok(median(a)),
    };
    Row { name: case.name, n: case.n, awf, reference: median(r), paired: middle(ratios), paired_cpu: middle(cpu) }
}

/// Prints one target line: what, the figure, the target and PASS or MISS.
fn target(what: &str, figure: String, goal: &str, ok: bool) {
    println!("  {what:<28} {figure:>11}  {goal:<12} {}", if ok { "PASS" } else { "MISS" });
}

/// The case's awf figure, or a MISS line for each of its targets when it failed.
fn ran<'a>(row: Option<&'a Row>, goals: &[&str]) -> Option<&'a Measure> {
    let row = row?;
    match &row.awf {
        Ok(m) => Some(m),
        Err(_) => {
            for goal in goals {
                target(&format!("{} {}", row.name, row.n), "failed".into(), goal, false);
            }
            None
        }
    }
}

fn targets(rows: &[Row]) {
    let find = |name: &str, n: usize| rows.iter().find(|r| r.name == name && r.n == n);
    println!();
    println!("targets (issues 11 and 27):");
    if let Some(m) = ran(find("map", 10_000), &["<= 0.2 s", "<= 60 MB", "<= 0.67x"]) {
        let row = find("map", 10_000).expect("ran found it");
        let s = m.wall.as_secs_f64();
        target("map 10000 wall", format!("{s:.3} s"), "<= 0.2 s", s <= 0.2);
        target("map 10000 RSS", format!("{:.1} MB", m.rss_mb), "<= 60 MB", m.rss_mb <= 60.0);
        target("map 10000 / asyncio", format!("{:.2}x", row.paired), "<= 0.67x", row.paired <= 0.67);
        if let Some(big) = ran(find("map", 100_000), &["completes", "<= 12x"]) {
            let grow = big.wall.as_secs_f64() / s;
            target("map 100000 completes", format!("{:.3} s", big.wall.as_secs_f64()), "completes", true);
            target("map 100000 / map 10000", format!("{grow:.2}x"), "<= 12x", grow <= 12.0);
        }
    }
    for name in ["magi", "magi-new"] {
        let goals: &[&str] = if name == "magi" { &["<= 1 s", "<= 1.4x"] } else { &["<= 1 s", "<= 1.4x", "<= 80 MB"] };
        if let Some(m) = ran(find(name, 10_000), goals) {
            let row = find(name, 10_000).expect("ran found it");
            let s = m.wall.as_secs_f64();
            target(&format!("{name} 10000 wall"), format!("{s:.3} s"), "<= 1 s", s <= 1.0);
            let ratio = row.paired;
            target(&format!("{name} 10000 / asyncio"), format!("{ratio:.2}x"), "<= 1.4x", ratio <= 1.4);
            if name == "magi-new" {
                target("magi-new 10000 RSS", format!("{:.1} MB", m.rss_mb), "<= 80 MB", m.rss_mb <= 80.0);
            }
        }
    }
    if let Some(m) = ran(find("push", 100_000), &["<= 0.1 s"]) {
        let s = m.wall.as_secs_f64();
        target("push 100000 wall", format!("{s:.3} s"), "<= 0.1 s", s <= 0.1);
        // Linear to 100k, and on to ten times that: what a push costs from 100k to 1M is what it
        // costs from 10k to 100k (the process's start cancels out of each difference). Both
        // differences are tenths of a second; the one from 1k to 10k, a few milliseconds, is
        // within the noise of a process start, and is printed only.
        let (one, ten) = (ran(find("push", 1_000), &[]), ran(find("push", 10_000), &["linear"]));
        let million = ran(find("push", 1_000_000), &["linear"]);
        if let (Some(one), Some(ten), Some(million)) = (one, ten, million) {
            let (one, ten, million) = (one.wall.as_secs_f64(), ten.wall.as_secs_f64(), million.wall.as_secs_f64());
            let small = (ten - one) / 9_000.0;
            let below = (s - ten).max(1e-6) / 90_000.0;
            let above = (million - s) / 900_000.0;
            let growth = above / below;
            target("push 100k-1M / 10k-100k µs", format!("{growth:.2}x"), "<= 2x", growth <= 2.0);
            println!(
                "    a push costs {:.3} µs from 1k to 10k, {:.3} µs from 10k to 100k, {:.3} µs from 100k to 1M",
                small * 1e6,
                below * 1e6,
                above * 1e6
            );
        }
    }
}

/// The shapes without targets: their ratio to asyncio, to watch.
fn unseen(rows: &[Row]) {
    let shown: Vec<&Row> = rows.iter().filter(|r| ["chain", "nested", "long"].contains(&r.name)).collect();
    if shown.is_empty() {
        return;
    }
    println!("shapes no target was tuned on (ratios to watch, no PASS or MISS):");
    for row in shown {
        match &row.awf {
            Ok(_) => println!("  {:<28} {:>10.2}x", format!("{} {} / asyncio", row.name, row.n), row.paired),
            Err(_) => println!("  {:<28} {:>11}", format!("{} {}", row.name, row.n), "failed"),
        }
    }
}

fn main() {
    // `cargo bench` passes `--bench` (and maybe a filter); this harness takes none of them.
    let reps: usize = std::env::var("AWF_BENCH_REPS").ok().and_then(|v| v.parse().ok()).unwrap_or(3).max(1);
    let awf = PathBuf::from(std::env::var("AWF_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_awf").into()));
    let only = std::env::var("AWF_BENCH_ONLY").unwrap_or_default();
    let cases = [
        map_case(1_000),
        map_case(10_000),
        map_case(100_000),
        magi_case(10_000, false),
        magi_case(10_000, true),
        push_case(1_000),
        push_case(10_000),
        push_case(100_000),
        push_case(1_000_000),
        chain_case(10_000),
        nested_case(100, 100),
        long_case(500, 2_000),
    ];
    println!("awf engine bench: {}", awf.display());
    println!("fake harness, all records on disk, -q; reference: bare asyncio, no records; median of {reps};");
    println!("ratios: the median of the ratios of the pairs run back to back, of wall time (judged) and of CPU time (user + system, shown)");
    println!(
        "{:<9} {:>7} {:>9} {:>8} {:>10} {:>8} {:>9} {:>9} {:>8} {:>9}",
        "case", "N", "awf s", "awf MB", "asyncio s", "py MB", "ratio", "cpu ratio", "µs/op", "awf csw"
    );
    let mut rows = Vec::new();
    for case in cases.iter().filter(|c| c.name.contains(only.as_str())) {
        let row = measure(&awf, case, reps);
        let py = (row.reference.wall.as_secs_f64(), row.reference.rss_mb);
        match &row.awf {
            Ok(m) => {
                let per_op = match case.ops {
                    0 => "-".to_string(),
                    ops => format!("{:.1}", m.wall.as_secs_f64() * 1e6 / ops as f64),
                };
                println!(
                    "{:<9} {:>7} {:>9.3} {:>8.1} {:>10.3} {:>8.1} {:>8.2}x {:>8.2}x {:>8} {:>9}",
                    row.name,
                    row.n,
                    m.wall.as_secs_f64(),
                    m.rss_mb,
                    py.0,
                    py.1,
                    row.paired,
                    row.paired_cpu,
                    per_op,
                    m.switches
                );
            }
            Err(e) => {
                println!("{:<9} {:>7} {:>9} {:>8} {:>10.3} {:>8.1}", row.name, row.n, "FAILED", "-", py.0, py.1);
                // The reason, cut to its first lines (a panic's backtrace is long).
                for line in e.lines().take(6) {
                    println!("    {line}");
                }
            }
        }
        rows.push(row);
    }
    targets(&rows);
    unseen(&rows);
    println!("this bench's own peak RSS, the floor under every MB figure above: {:.1} MB", own_peak_mb());
}
