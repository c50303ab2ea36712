//! `cargo bench --bench command`: `command` turns per second through awf at concurrency 2 and 16,
//! against the floor of the same process tree run by `xargs -P`.
//!
//! awf: a workflow opens N `command` agents and makes one turn each through `ctx.parallel` at the
//! concurrency measured; each turn is `sh -c` reading its prompt with `cat` and answering through
//! `$AWF_LAUNCHER` (a symlink to the awf binary). The whole `awf script run` is timed; it counts
//! only if it exits 0 and `turns.jsonl` holds N answered turns.
//!
//! Floor: `seq N | xargs -P C -I{} sh -c "cat >/dev/null; echo '{..}' | awf --version"`: the same
//! `sh`, `cat` and awf process images, C at a time, none of the engine's or the protocol's work.
//!
//! Each measurement runs `REPS` times, the two alternating; the best of each counts. The run folders
//! go where `TMPDIR` points (default `/tmp`). awf makes about 7 files and folders a turn of these
//! (the agent's folder, `ops/` and `state/`, its socket and launcher, the op log and the captured
//! stdout), which the floor does not: the bench times making such files there and prints what they
//! come to a turn. On ext4 without a journal each costs more the more inodes anything on the file
//! system freed in the last minutes (the allocator steps over them); on tmpfs a few microseconds.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const AWF: &str = env!("CARGO_BIN_EXE_awf");
/// Turns per measurement.
const N: usize = 200;
/// Turns running at once, in awf and in the floor: one measurement each.
const CONCURRENCIES: [usize; 2] = [2, 16];
/// Runs per measurement; the best counts.
const REPS: usize = 3;
/// awf's throughput must reach this share of the floor's.
const TARGET: f64 = 0.8;

/// The workflow: N agents, one turn each, C at a time. `N` and `C` are replaced before writing.
const WORKFLOW: &str = r##"
let items = ctx.parallel(0..N, |i| {
    let a = ctx.agents.open(#{
        key: `c-${i}`,
        runtime: #{
            harness: "command",
            command: ["sh", "-c", "cat >/dev/null; echo '{\"ok\":true}' | \"$AWF_LAUNCHER\" result \"$AWF_OP\""],
        },
    });
    a.ask("go", #{ type: "object" })
}, #{ concurrency: C });
items.len()
"##;

/// One timed run of the workflow through the release binary. The run's folder is returned, to be
/// removed only when every measurement is done: on a file system that holds back recently freed
/// inodes (ext4 without a journal), removing it would slow the next run's file creation.
fn awf_once(concurrency: usize) -> (Duration, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("a temporary folder for the run");
    let root = dir.path();
    let script = root.join("bench.rhai");
    let workflow =
        WORKFLOW.replace("0..N", &format!("0..{N}")).replace("concurrency: C", &format!("concurrency: {concurrency}"));
    fs::write(&script, workflow).expect("the workflow written");
    let out = fs::File::create(root.join("stdout")).expect("a file for awf's stdout");
    let err = fs::File::create(root.join("stderr")).expect("a file for awf's stderr");
    let mut cmd = Command::new(AWF);
    cmd.current_dir(root)
        .env("XDG_CONFIG_HOME", root) // no user config
        .env_remove("AWF_RUNTIME")
        .args(["script", "run"])
        .arg(&script)
        .args(["-q", "--max-concurrency", &concurrency.to_string(), "--max-agents", &(N + 10).to_string()])
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    let start = Instant::now();
    let status = cmd.status().expect("awf started");
    let wall = start.elapsed();
    if !status.success() {
        let stderr = fs::read_to_string(root.join("stderr")).unwrap_or_default();
        panic!("awf exited with {status}\n{stderr}");
    }
    check_turns(&only_run(&root.join(".awf/runs")));
    (wall, dir)
}

/// `turns.jsonl` must hold N lines, every one answered.
fn check_turns(run_dir: &Path) {
    let path = run_dir.join("turns.jsonl");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), N, "turns.jsonl has {} lines, expected {N}", lines.len());
    for line in lines {
        let turn: serde_json::Value = serde_json::from_str(line).expect("turns.jsonl lines are JSON");
        assert_eq!(turn["outcome"], "answered", "a turn was not answered: {line}");
    }
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

/// N bare turns, `concurrency` at a time, run by `xargs -P`, timed.
fn floor_once(concurrency: usize) -> Duration {
    let line = format!("cat >/dev/null; echo '{{\"ok\":true}}' | '{AWF}' --version >/dev/null");
    let mut xargs = Command::new("xargs")
        .args(["-P", &concurrency.to_string(), "-I{}", "sh", "-c", &line])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("xargs started (findutils)");
    let items: String = (0..N).map(|i| format!("{i}\n")).collect();
    let start = Instant::now();
    let mut stdin = xargs.stdin.take().expect("xargs's stdin");
    std::io::Write::write_all(&mut stdin, items.as_bytes()).expect("the items written to xargs");
    drop(stdin);
    let status = xargs.wait().expect("xargs waited for");
    let wall = start.elapsed();
    assert!(status.success(), "the floor's xargs exited with {status}");
    wall
}

/// Files and folders awf makes a turn in these runs (each agent makes one turn).
const MADE_PER_TURN: u32 = 7;

/// What making a file or folder costs where the run folders go: the median of 100 of each, made in
/// a folder of its own (kept until the end, as the runs' are).
fn making_a_file() -> (Duration, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("a temporary folder for the probe");
    let mut each: Vec<Duration> = (0..100)
        .flat_map(|i| {
            let folder = dir.path().join(format!("d{i}"));
            let file = dir.path().join(format!("f{i}"));
            let start = Instant::now();
            fs::create_dir(&folder).expect("a folder made");
            let mid = Instant::now();
            fs::File::create(&file).expect("a file made");
            [mid - start, mid.elapsed()]
        })
        .collect();
    each.sort();
    (each[each.len() / 2], dir)
}

/// The file system type of `dir` as `stat -f` names it (`tmpfs`, `ext2/ext3` for ext4, ...).
fn file_system(dir: &Path) -> String {
    let out = Command::new("stat").args(["-f", "-c", "%T"]).arg(dir).output();
    out.ok().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_else(|| "?".into())
}

fn main() {
    // `cargo bench` passes `--bench`; this harness takes no arguments.
    println!("awf command bench: N={N} turns, best of {REPS}; floor: the same sh + cat + awf tree by xargs -P");
    let (made, probe) = making_a_file();
    let tmp = std::env::temp_dir();
    println!(
        "run folders in {} ({}): a new file or folder there takes {:.0} µs, {:.2} ms a turn for the {MADE_PER_TURN} awf makes",
        tmp.display(),
        file_system(&tmp),
        made.as_secs_f64() * 1e6,
        made.as_secs_f64() * 1e3 * f64::from(MADE_PER_TURN)
    );
    let mut folders = Vec::new();
    for concurrency in CONCURRENCIES {
        // The two measurements alternate, so that a busy moment on the machine weighs on both alike.
        let (mut floor, mut awf) = (Duration::MAX, Duration::MAX);
        for _ in 0..REPS {
            floor = floor.min(floor_once(concurrency));
            let (wall, folder) = awf_once(concurrency);
            awf = awf.min(wall);
            folders.push(folder);
        }
        let per_s = |d: Duration| N as f64 / d.as_secs_f64();
        let per_turn_ms = |d: Duration| d.as_secs_f64() * 1e3 / N as f64;
        let ratio = per_s(awf) / per_s(floor);
        println!("concurrency {concurrency}:");
        println!("  awf    {:>8.1} turns/s  {:>7.2} ms/turn", per_s(awf), per_turn_ms(awf));
        println!("  floor  {:>8.1} turns/s  {:>7.2} ms/turn", per_s(floor), per_turn_ms(floor));
        let verdict = if ratio >= TARGET { "PASS" } else { "MISS" };
        println!("  ratio  {:>8.1} %  (target >= {:.0} %)  {verdict}", ratio * 100.0, TARGET * 100.0);
    }
    drop((folders, probe));
}
