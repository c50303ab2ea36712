//! Helpers shared by the integration tests: a temporary working folder, running the real `awf`
//! binary in it with a timeout, and reading the run folder's records.
#![allow(dead_code)]

pub mod ansi;
pub mod chrome;
pub mod cli;
pub mod council;
pub mod fake_model;
pub mod git;
pub mod hostile;
pub mod mcp;
pub mod nats;
pub mod serve;
pub mod tmux;
pub mod wait;

pub use wait::{
    poll, poll_seeing, wait_for_attempt_waiting, wait_for_file, wait_for_run_dir, wait_until, wait_until_within,
};

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The longest any single `awf` invocation may take before the test kills it and fails.
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// The path of the binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_awf")
}

/// What one `awf` invocation left behind.
#[derive(Debug)]
pub struct Out {
    /// The exit code; `None` when the process was killed by a signal.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    fn from_output(o: Output) -> Out {
        Out {
            code: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    /// Asserts the exit code, showing both streams when it differs.
    #[track_caller]
    pub fn expect_code(&self, code: i32) -> &Out {
        assert_eq!(
            self.code,
            Some(code),
            "unexpected exit code\n--- stdout:\n{}\n--- stderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    /// stdout parsed as JSON.
    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!("stdout is not JSON ({e})\n--- stdout:\n{}\n--- stderr:\n{}", self.stdout, self.stderr)
        })
    }

    #[track_caller]
    pub fn stderr_has(&self, needle: &str) -> &Out {
        assert!(
            self.stderr.contains(needle),
            "stderr lacks {needle:?}\n--- stderr:\n{}\n--- stdout:\n{}",
            self.stderr,
            self.stdout
        );
        self
    }

    #[track_caller]
    pub fn stdout_has(&self, needle: &str) -> &Out {
        assert!(
            self.stdout.contains(needle),
            "stdout lacks {needle:?}\n--- stdout:\n{}\n--- stderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }
}

/// A command for the binary with the environment isolated from the machine's: no user config, no
/// `AWF_RUNTIME`, no colour.
pub fn command(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(bin());
    cmd.args(args)
        .current_dir(dir)
        .env("XDG_CONFIG_HOME", dir.join(".xdg-config"))
        // The machine-wide background queue, per test.
        .env("XDG_STATE_HOME", dir.join(".xdg-state"))
        .env("NO_COLOR", "1")
        .env_remove("AWF_RUNTIME")
        .env_remove("AWF_LOG")
        .stdin(Stdio::null());
    cmd
}

/// Sends `signal` (e.g. "-INT", "-KILL") to `pid` through kill(1).
pub fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill").args([signal, &pid.to_string()]).status().expect("run kill");
    assert!(status.success() || signal == "-KILL", "kill {signal} {pid} failed");
}

/// Waits for `child` to exit, killing it and failing the test after `TIMEOUT`.
pub fn wait_with_timeout(child: Child) -> Out {
    wait_within(child, TIMEOUT)
}

/// Waits for `child` to exit, killing it and failing the test after `limit` (for a real model).
pub fn wait_within(child: Child, limit: Duration) -> Out {
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => Out::from_output(out.expect("wait for awf")),
        Err(_) => {
            signal(pid, "-KILL");
            let out = rx.recv().ok().and_then(Result::ok).map(Out::from_output);
            panic!("awf did not finish within {limit:?}; killed it. Output so far: {out:#?}");
        }
    }
}

/// Runs `awf ARGS` in `dir` and waits (bounded) for it.
pub fn awf(dir: &Path, args: &[&str]) -> Out {
    let child = command(dir, args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn awf");
    wait_with_timeout(child)
}

/// Runs `awf ARGS` in `dir` as `awf` does, from a shell that first runs `setup` (`ulimit ...`,
/// `umask ...`), and waits (bounded) for it.
pub fn awf_after(dir: &Path, setup: &str, args: &[&str]) -> Out {
    let mut cmd = after(setup, &command(dir, args));
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    wait_with_timeout(cmd.spawn().expect("sh started"))
}

/// `cmd` (its program, arguments, folder and environment) started from a shell that first runs
/// `setup`; its standard streams are left for the caller to set.
pub fn after(setup: &str, cmd: &Command) -> Command {
    let mut sh = Command::new("sh");
    sh.arg("-c").arg(format!("{setup} && exec \"$0\" \"$@\"")).arg(cmd.get_program()).args(cmd.get_args());
    if let Some(dir) = cmd.get_current_dir() {
        sh.current_dir(dir);
    }
    for (key, value) in cmd.get_envs() {
        match value {
            Some(v) => sh.env(key, v),
            None => sh.env_remove(key),
        };
    }
    sh
}

/// Reads a JSONL file into values; every line must parse.
pub fn read_jsonl(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    parse_jsonl(&text, path)
}

/// The lines of `text` (read from `path`) as values; every one must parse.
fn parse_jsonl(text: &str, path: &Path) -> Vec<Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: bad line {l:?}: {e}", path.display())))
        .collect()
}

/// The events a run has written so far, for a poll on a live run: none while its folder exists but
/// its first event does not (the folder is made before the log), and not a last line still being
/// written (a reader may see part of a write in progress).
pub fn events_so_far(dir: &Path) -> Vec<Value> {
    let path = dir.join("events.jsonl");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => panic!("read {}: {e}", path.display()),
    };
    parse_jsonl(text.rfind('\n').map_or("", |end| &text[..end]), &path)
}

/// The events of type `ty` a run in `dir` has written so far (it may still be running).
pub fn events_so_far_of(dir: &Path, ty: &str) -> Vec<Value> {
    events_so_far(dir).into_iter().filter(|e| e["type"] == ty).collect()
}

/// Reads a JSON document.
pub fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// A temporary working folder for one test.
pub struct Env {
    pub dir: tempfile::TempDir,
}

impl Default for Env {
    fn default() -> Self {
        Env::new()
    }
}

impl Env {
    pub fn new() -> Env {
        Env { dir: tempfile::tempdir().expect("create a temp dir") }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `text` to `rel` (creating folders) and returns the absolute path.
    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.path().join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create folders");
        }
        std::fs::write(&path, text).expect("write file");
        path
    }

    /// Writes `awf.toml` with a `scripted` default runtime answered by `responder.rhai`, and the
    /// responder itself.
    pub fn with_responder(&self, responder: &str) -> &Env {
        self.write(
            "awf.toml",
            "default_runtime = \"scripted\"\n\n[runtimes.scripted]\nharness = \"fake\"\nmodel = \"fake\"\nresponder = \"responder.rhai\"\n",
        );
        self.write("responder.rhai", responder);
        self
    }

    pub fn awf(&self, args: &[&str]) -> Out {
        awf(self.path(), args)
    }

    /// Writes `wf.rhai` and runs it with `extra` flags.
    pub fn run(&self, script: &str, extra: &[&str]) -> Out {
        self.write("wf.rhai", script);
        let mut args = vec!["script", "run", "wf.rhai"];
        args.extend_from_slice(extra);
        self.awf(&args)
    }

    /// The folder holding run folders.
    pub fn runs_root(&self) -> PathBuf {
        self.path().join(".awf").join("runs")
    }

    /// Every run folder, sorted.
    pub fn run_dirs(&self) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(self.runs_root()) else {
            return Vec::new();
        };
        let mut dirs: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.is_dir()).collect();
        dirs.sort();
        dirs
    }

    /// The single run folder; fails when there is none or more than one.
    #[track_caller]
    /// The id of the only run (its folder's name).
    pub fn run_id(&self) -> String {
        self.run_dir().file_name().and_then(|n| n.to_str()).expect("run id").to_string()
    }

    pub fn run_dir(&self) -> PathBuf {
        let dirs = self.run_dirs();
        assert_eq!(dirs.len(), 1, "expected exactly one run folder, found {dirs:?}");
        dirs.into_iter().next().expect("one run folder")
    }

    /// A JSONL record of the single run (`turns`, `events`, `stages`, `journal`).
    pub fn jsonl(&self, name: &str) -> Vec<Value> {
        let path = self.run_dir().join(format!("{name}.jsonl"));
        if !path.exists() {
            return Vec::new();
        }
        read_jsonl(&path)
    }

    pub fn turns(&self) -> Vec<Value> {
        self.jsonl("turns")
    }

    pub fn stages(&self) -> Vec<Value> {
        self.jsonl("stages")
    }

    pub fn events(&self) -> Vec<Value> {
        self.jsonl("events")
    }

    /// Events of one type.
    pub fn events_of(&self, ty: &str) -> Vec<Value> {
        self.events().into_iter().filter(|e| e["type"] == ty).collect()
    }

    pub fn result(&self) -> Value {
        read_json(&self.run_dir().join("result.json"))
    }

    pub fn run_json(&self) -> Value {
        read_json(&self.run_dir().join("run.json"))
    }

    /// The turns.jsonl line for `op_id`.
    #[track_caller]
    pub fn turn(&self, op_id: &str) -> Value {
        let turns = self.turns();
        turns
            .iter()
            .find(|t| t["op_id"] == op_id)
            .cloned()
            .unwrap_or_else(|| panic!("no turn {op_id} in turns.jsonl: {turns:#?}"))
    }
}

/// A running `awf` whose stderr is read line by line, for tests that must act mid-run.
pub struct Running {
    pub child: Option<Child>,
    pub pid: u32,
    pub lines: mpsc::Receiver<String>,
    pub seen: Vec<String>,
    rest: Option<std::thread::JoinHandle<String>>,
}

impl Running {
    /// Starts `awf ARGS` in `dir` with stderr read by a thread.
    pub fn start(dir: &Path, args: &[&str]) -> Running {
        let mut child = command(dir, args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn awf");
        let pid = child.id();
        let stderr = child.stderr.take().expect("stderr piped");
        let (tx, rx) = mpsc::channel();
        let rest = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line);
            }
            String::new()
        });
        Running { child: Some(child), pid, lines: rx, seen: Vec::new(), rest: Some(rest) }
    }

    /// Waits (bounded) for a stderr line equal to `line` (trimmed).
    #[track_caller]
    pub fn wait_for_line(&mut self, line: &str) {
        let until = Instant::now() + TIMEOUT;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    let hit = l.trim() == line;
                    self.seen.push(l);
                    if hit {
                        return;
                    }
                }
                Err(_) => {
                    signal(self.pid, "-KILL");
                    panic!("no stderr line {line:?} within {TIMEOUT:?}; saw {:#?}", self.seen);
                }
            }
        }
    }

    /// Waits (bounded) for the process to end; returns its output with all of stderr.
    pub fn finish(mut self) -> Out {
        let child = self.child.take().expect("child");
        let mut out = wait_with_timeout(child);
        if let Some(t) = self.rest.take() {
            let _ = t.join();
        }
        let mut stderr: Vec<String> = std::mem::take(&mut self.seen);
        while let Ok(l) = self.lines.try_recv() {
            stderr.push(l);
        }
        out.stderr = stderr.join("\n");
        out
    }
}

/// The workflow every harness is run with (tests/cli_harness.rs, tests/http_harness.rs): two
/// turns on one agent, with an effort change between them, returning both outcomes and usages.
pub fn two_turn_workflow() -> String {
    let schema = r#"#{ type: "object", properties: #{ verdict: #{ type: "string" } }, required: ["verdict"] }"#;
    format!(
        r#"
let a = ctx.agents.open(#{{ key: "a", instructions: "You judge carefully." }});
let one = a.run(#{{ prompt: "Give a first verdict.", schema: {schema} }});
a.set(#{{ effort: "high" }});
let two = a.run(#{{ prompt: "Give a second verdict.", schema: {schema} }});
#{{ one: one.kind, v1: one.value, r1: one.reason, two: two.kind, v2: two.value, r2: two.reason,
   u1: one.usage, u2: two.usage }}
"#
    )
}

/// Copies `src` into `dst`, folders included.
pub fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).expect("create the copy");
    for entry in std::fs::read_dir(src).expect("read the folder to copy") {
        let entry = entry.expect("a folder entry");
        let to = dst.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &to);
        } else {
            std::fs::copy(entry.path(), &to).expect("copy a file");
        }
    }
}

/// The path of a test agent program under tests/fixtures/agents/.
pub fn agent_fixture(name: &str) -> String {
    format!("{}/tests/fixtures/agents/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// A name no other test or process uses.
pub fn unique_name(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{prefix}-{}-{nanos}", std::process::id())
}

/// A free port on 127.0.0.1 (bound and released: a small race, fine for tests).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("local addr").port()
}

/// The permission bits of `path`.
pub fn file_mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap_or_else(|e| panic!("stat {}: {e}", path.display())).permissions().mode() & 0o777
}

/// The id of the run whose folder is `dir` (its name).
pub fn run_id_of(dir: &Path) -> String {
    dir.file_name().expect("a run id").to_string_lossy().into_owned()
}

/// Whether process `pid` (as a file holds it, whitespace allowed) runs. A zombie is dead for our
/// purpose: it runs nothing.
pub fn process_alive(pid: &str) -> bool {
    // The state follows the command name, which is in parentheses and may hold spaces.
    match std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())) {
        Ok(stat) => stat.rsplit(')').next().and_then(|r| r.split_whitespace().next()).is_some_and(|s| s != "Z"),
        Err(_) => false,
    }
}

/// Every process's id and command line (its arguments joined by spaces), as every local user
/// may read them in /proc.
pub fn command_lines() -> Vec<(String, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("read /proc").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        // A process may end between the listing and the read.
        let Ok(bytes) = std::fs::read(entry.path().join("cmdline")) else { continue };
        found.push((name, String::from_utf8_lossy(&bytes).replace('\0', " ")));
    }
    found
}
