//! The integration tests' own helpers written once: a bounded wait, a test agent's path, a run
//! folder's id and the like live in `tests/common/`, and a test file that writes its copy again,
//! spells a test agent's path itself or sleeps to synchronise fails here.

use super::source::blank;
use std::path::Path;

/// The helpers of `tests/common/`, each defined in its home file only: `(name, home)`. A test's
/// own function by one of these names is a second copy: call the common one.
const HOMES: &[(&str, &str)] = &[
    ("wait_until", "common/wait.rs"),
    ("wait_until_within", "common/wait.rs"),
    ("poll", "common/wait.rs"),
    ("poll_seeing", "common/wait.rs"),
    ("wait_for_file", "common/wait.rs"),
    ("wait_for_run_dir", "common/wait.rs"),
    ("wait_for_attempt_waiting", "common/wait.rs"),
    ("agent_fixture", "common/mod.rs"),
    ("events_so_far_of", "common/mod.rs"),
    ("unique_name", "common/mod.rs"),
    ("free_port", "common/mod.rs"),
    ("file_mode", "common/mod.rs"),
    ("run_id_of", "common/mod.rs"),
    ("process_alive", "common/mod.rs"),
    ("command_lines", "common/mod.rs"),
    ("run_result", "common/nats.rs"),
];

/// The names the copies went by before they were gathered, with the helper that replaced them.
const COPIES: &[(&str, &str)] = &[
    ("until", "common::wait_until"),
    ("fixture", "common::agent_fixture"),
    ("events_of", "Env::events_of or common::events_so_far_of"),
    ("the_run", "common::wait_for_run_dir"),
    ("until_waiting", "common::wait_for_attempt_waiting"),
    ("unique", "common::unique_name"),
    ("alive", "common::process_alive"),
    ("id_of", "common::run_id_of"),
    ("mode", "common::file_mode"),
];

/// Sleeps outside `common/wait.rs`: `(file, how many, why)`. Each is not a wait for something the
/// test could poll with a `common::wait` helper; a new one fails until it is listed with its
/// reason, or becomes a wait.
const SLEEPS_ALLOWED: &[(&str, usize, &str)] = &[
    ("checkpoints.rs", 1, "time for the stall clock to pass: nothing to wait for"),
    ("serve.rs", 1, "the second run must stay queued: nothing happens to wait for"),
    ("serve_host.rs", 1, "measures how soon an edit is served, to 5 ms"),
    ("panes.rs", 1, "presses Enter again while it waits, as the operator would"),
    ("walls_sockets.rs", 1, "kills the flooding run and shows its output when the wait fails"),
    ("telemetry.rs", 1, "a collector that hangs: the fake's behaviour"),
    ("common/fake_model.rs", 2, "the fake model's scripted pause, and its reply held until n requests came"),
    ("common/nats.rs", 2, "a worker killed before failing when it will not stop; an async wait on a bucket"),
];

/// The test sources: `tests/*.rs` and `tests/common/*.rs`, as `(path under tests/, text)`.
fn test_sources() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut out = Vec::new();
    for dir in ["", "common"] {
        let entries = std::fs::read_dir(root.join(dir)).unwrap_or_else(|e| panic!("cannot list tests/{dir}: {e}"));
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "rs") {
                let name = entry.file_name().to_string_lossy().into_owned();
                let rel = if dir.is_empty() { name } else { format!("{dir}/{name}") };
                let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {rel}: {e}"));
                out.push((rel, text));
            }
        }
    }
    out.sort();
    out
}

/// The name of the function a line defines at the top level of its file (`fn x`, `pub fn x`,
/// `pub(crate) async fn x`); methods and nested functions are indented and not counted.
fn top_level_fn(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("pub(crate) ").or_else(|| line.strip_prefix("pub ")).unwrap_or(line);
    let rest = rest.strip_prefix("async ").unwrap_or(rest);
    let rest = rest.strip_prefix("fn ")?;
    let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len());
    Some(&rest[..end])
}

#[test]
fn tidy_test_helpers_are_written_once_in_common() {
    let mut problems = Vec::new();
    for (path, text) in test_sources() {
        for (n, line) in blank(&text).lines().enumerate() {
            let Some(name) = top_level_fn(line) else { continue };
            if let Some((_, home)) = HOMES.iter().find(|(h, _)| *h == name) {
                if *home != path {
                    problems.push(format!("tests/{path}:{}: fn {name} again: it is tests/{home}'s", n + 1));
                }
            }
            if let Some((_, instead)) = COPIES.iter().find(|(c, _)| *c == name) {
                problems.push(format!("tests/{path}:{}: fn {name}, a copy: use {instead}", n + 1));
            }
        }
    }
    super::assert_none("test helpers written again outside tests/common (use the common one)", &problems);
}

#[test]
fn tidy_test_agents_are_found_through_agent_fixture() {
    let mut problems = Vec::new();
    for (path, text) in test_sources() {
        if path == "common/mod.rs" {
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            if line.contains("CARGO_MANIFEST_DIR") && line.contains("fixtures/agents") {
                problems.push(format!("tests/{path}:{}: a test agent's path spelled again", n + 1));
            }
        }
    }
    super::assert_none("test agents found without common::agent_fixture", &problems);
}

/// The lines of `text` that sleep (a thread, or a task with tokio's timer).
fn sleeps(text: &str) -> Vec<usize> {
    let code = blank(text);
    let sleeping = |l: &str| l.contains("thread::sleep(") || l.contains("time::sleep(");
    code.lines().enumerate().filter(|(_, l)| sleeping(l)).map(|(n, _)| n + 1).collect()
}

#[test]
fn tidy_tests_sleep_only_where_listed() {
    let mut problems = Vec::new();
    let sources = test_sources();
    for (path, text) in &sources {
        if path == "common/wait.rs" {
            continue;
        }
        let lines = sleeps(text);
        let listed = SLEEPS_ALLOWED.iter().find(|a| a.0 == path).map_or(0, |a| a.1);
        if lines.len() > listed {
            let places: Vec<String> = lines.iter().map(|n| format!("tests/{path}:{n}")).collect();
            problems.push(format!("{} found, {listed} allowed: {}", lines.len(), places.join(", ")));
        }
    }
    for (path, count, why) in SLEEPS_ALLOWED {
        let found = sources.iter().find(|(p, _)| p == path).map_or(0, |(_, t)| sleeps(t).len());
        if found < *count || why.trim().is_empty() {
            problems.push(format!("stale or unexplained entry: tests/{path} allows {count}, {found} found"));
        }
    }
    super::assert_none(
        "sleeps in the tests (wait with tests/common/wait.rs, or list it in SLEEPS_ALLOWED with a reason)",
        &problems,
    );
}

#[test]
fn a_top_level_copy_and_a_sleep_are_found_but_not_a_method_or_a_comment() {
    let code = "fn wait_until(x: u8) {}\nimpl A {\n    fn wait_until(&self) {}\n}\npub(crate) async fn fixture() {}\n";
    let names: Vec<&str> = code.lines().filter_map(top_level_fn).collect();
    assert_eq!(names, ["wait_until", "fixture"]);
    let text = "// std::thread::sleep(d) in prose\nlet s = \"thread::sleep(\";\n    std::thread::sleep(d);\ntokio::time::sleep(d).await;\n";
    assert_eq!(sleeps(text), [3, 4]);
}
