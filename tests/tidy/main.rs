//! Tidy checks of the repository itself, run by `cargo test` (as rust-analyzer's `tidy.rs`): the
//! layering `src/lib.rs` writes, no circle of files inside a module, its code map, printing only
//! in `cli/`, files written outside
//! `record/` only where listed, processes started only through `open_files::command`, no new
//! process-wide static, each boundary crate named only by
//! the module that owns it, no error's text tested to decide what to do, and failures carried as
//! bare text (`Result<_, String>`) only where listed; and the tests' own helpers written once, in
//! `tests/common/`.

mod catches;
mod files;
mod layers;
mod map;
mod rules;
mod source;
mod test_helpers;

use std::collections::BTreeSet;
use std::path::Path;

fn src() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn lib_rs() -> String {
    std::fs::read_to_string(src().join("lib.rs")).expect("src/lib.rs")
}

#[track_caller]
fn assert_none(what: &str, problems: &[String]) {
    assert!(problems.is_empty(), "{what}:\n  {}", problems.join("\n  "));
}

fn sources_of(files: &[(&str, &str)]) -> Vec<source::Source> {
    files
        .iter()
        .map(|(path, text)| source::Source { path: path.to_string(), code: source::strip_tests(&source::blank(text)) })
        .collect()
}

#[test]
fn tidy_layers() {
    let lib = lib_rs();
    let layers = layers::parse_layers(&lib);
    let sources = source::load(&src());
    let declared: BTreeSet<String> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod ").and_then(|m| m.strip_suffix(';')))
        .map(String::from)
        .collect();
    let layered: BTreeSet<String> = layers.iter().flatten().cloned().collect();
    assert_eq!(layered, declared, "the layers of src/lib.rs list every top-level module once");
    assert_eq!(layers.iter().map(Vec::len).sum::<usize>(), layered.len(), "a module in two layers: {layers:?}");
    assert_none("the layering of src/lib.rs", &layers::problems(&layers, &layers::arrows(&sources, &declared)));
}

/// Circles of files inside a module that are known and not yet broken, each its files in order
/// (`files.rs`). A new circle fails; so does one listed here that is gone (take it off the list).
/// Break one by moving the type its files share to a file of its own.
const CIRCLES_KNOWN: &[&[&str]] = &[
    &["cli/background.rs", "cli/confirm.rs", "cli/ending.rs", "cli/plan.rs", "cli/script.rs"],
    &[
        "cluster/affinity.rs",
        "cluster/connect.rs",
        "cluster/remote.rs",
        "cluster/runs.rs",
        "cluster/sessions.rs",
        "cluster/shadow.rs",
        "cluster/worker.rs",
    ],
    &["council/background.rs", "council/child.rs"],
];

#[test]
fn tidy_no_circle_of_files_inside_a_module() {
    let sources = source::load(&src());
    let found = files::circles(&files::arrows(&sources));
    let known: Vec<Vec<String>> = CIRCLES_KNOWN.iter().map(|c| c.iter().map(|f| f.to_string()).collect()).collect();
    let mut problems: Vec<String> = found
        .iter()
        .filter(|(group, _)| !known.contains(group))
        .map(|(group, inner)| format!("{}: {}", group.join(", "), inner.join("; ")))
        .collect();
    problems.extend(
        known
            .iter()
            .filter(|k| !found.iter().any(|(g, _)| g == *k))
            .map(|k| format!("{} is no longer a circle: take it off CIRCLES_KNOWN", k.join(", "))),
    );
    assert_none("files inside a module that name each other in a loop", &problems);
}

/// Files written outside `record/`: `(file, call, how many, why)`. A new one fails until it is
/// listed here with its reason, or goes through `record/`.
const WRITES_ALLOWED: &[(&str, &str, usize, &str)] = &[
    ("host/pool.rs", "fs::rename", 1, "a queue ticket of the machine-wide pool, outside any run folder"),
    ("host/pool.rs", "OpenOptions::new", 1, "the machine-wide pool's lock files, outside any run folder"),
    ("cli/init.rs", "fs::write", 2, "`awf init` writes the user's awf.toml and example workflow"),
    ("cli/serve/private.rs", "OpenOptions::new", 1, "`awf serve`'s token file, created 0600"),
    ("cli/serve/private.rs", "fs::rename", 2, "the token file and the socket put in place atomically"),
    ("cluster/key.rs", "OpenOptions::new", 1, "the cluster key file `.awf/cluster.key`, created 0600"),
    ("harness/cli/carry.rs", "fs::rename", 1, "a carried agent home unpacked in place (in the run folder)"),
    ("harness/cli/home.rs", "OpenOptions::new", 1, "credentials seeded into an agent's home (in the run folder), 0600"),
    ("harness/cli/home.rs", "fs::rename", 1, "the same credentials file put in place atomically"),
    ("harness/cli/pi.rs", "fs::rename", 2, "pi's own session files moved inside the agent's home for a fork"),
    ("script/reference.rs", "fs::write", 1, "`awf script defs` writes editor definition files where asked"),
];

/// Process-wide statics: `(file, name, 1, why)`. A new one fails: pass what it holds down
/// instead (capabilities at construction), or list it here with its reason.
const STATICS_ALLOWED: &[(&str, &str, usize, &str)] = &[
    ("harness/cli/home.rs", "CREDENTIALS", 1, "serializes credential write-backs within the process"),
    ("harness/http/count.rs", "KNOWN", 1, "servers without /tokenize and calibrated ratios, per process"),
    ("main.rs", "ALLOCATOR", 1, "the global allocator (mimalloc, or the system's in the launcher): only a static"),
    ("main.rs", "CHOSEN", 1, "which allocator the process took at its first allocation, never changed"),
    ("open_files.rs", "STARTED", 1, "the open-file limit awf started with, read by whatever starts a process"),
    ("harness/spawn.rs", "SPAWNER", 1, "the never-exiting thread starting task-polled turns' processes (PDEATHSIG)"),
    ("script/deferred.rs", "D", 1, "the timer thread of deferred parallel joins, one per process"),
    ("script/engine.rs", "STD", 1, "rhai's standard package, built once and shared"),
    ("script/pool.rs", "POOL", 1, "parked branch threads reused across runs"),
    ("script/render.rs", "SHOWN_UNDER", 1, "set once by `awf serve`: which files errors may show"),
    ("telemetry/mod.rs", "REPORTED", 1, "an export failure is reported once per process"),
    ("telemetry/mod.rs", "REPORTER", 1, "where that report goes, installed once by `cli`"),
];

#[test]
fn tidy_code_map_names_every_file() {
    let paths: Vec<String> = source::load(&src()).into_iter().map(|s| s.path).collect();
    assert_none("files missing from the code map", &map::unmapped(&lib_rs(), &paths));
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    assert_none("files the code map names", &map::stale(&lib_rs(), &paths, |p| root.join(p).is_file()));
}

#[test]
fn tidy_only_cli_prints() {
    let sources: Vec<source::Source> =
        source::load(&src()).into_iter().filter(|s| !s.path.starts_with("cli/")).collect();
    let hits: Vec<String> = rules::calls(&sources, rules::PRINTS).iter().map(|h| format!("{h} outside cli/")).collect();
    assert_none("printing outside cli/ (pass a report callback down, as cluster's `Report`)", &hits);
}

#[test]
fn tidy_files_are_written_outside_record_only_where_listed() {
    let sources: Vec<source::Source> =
        source::load(&src()).into_iter().filter(|s| !s.path.starts_with("record/")).collect();
    let problems = rules::unallowed(&rules::calls(&sources, rules::WRITES), WRITES_ALLOWED);
    assert_none("files written outside record/ (list them in WRITES_ALLOWED with a reason)", &problems);
}

#[test]
fn tidy_processes_start_with_the_open_file_limit_awf_started_with() {
    let sources: Vec<source::Source> = source::load(&src()).into_iter().filter(|s| s.path != "open_files.rs").collect();
    let hits: Vec<String> = rules::calls(&sources, &["Command::new("])
        .iter()
        .map(|h| format!("{h}: start it with `crate::open_files::command` (tokio's `Command::from` it)"))
        .collect();
    assert_none("processes started outside open_files", &hits);
}

#[test]
fn tidy_no_new_process_wide_static() {
    let problems = rules::unallowed(&rules::statics(&source::load(&src())), STATICS_ALLOWED);
    assert_none("process-wide statics (list them in STATICS_ALLOWED with a reason)", &problems);
}

#[test]
fn tidy_no_branching_on_error_text() {
    let hits: Vec<String> =
        rules::calls(&source::load(&src()), rules::ERROR_TEXT_TESTS).iter().map(|h| h.to_string()).collect();
    assert_none("an error's text tested to decide what to do (give the error a variant and match it)", &hits);
}

/// The crates one module owns, as `src/lib.rs` says (`the only module that names rhai`).
const OWNERS: &[(&str, &str)] = &[
    ("anyhow", "cli/"),
    ("rhai", "script/"),
    ("async_nats", "cluster/"),
    ("opentelemetry", "telemetry/"),
    ("rmcp", "cli/mcp/"),
];

#[test]
fn tidy_boundary_crates_are_named_only_by_their_owners() {
    let sources = source::load(&src());
    let mut problems = Vec::new();
    for (krate, owner) in OWNERS {
        let others: Vec<source::Source> = sources
            .iter()
            .filter(|s| !s.path.starts_with(owner))
            .map(|s| source::Source { path: s.path.clone(), code: s.code.clone() })
            .collect();
        problems.extend(rules::crate_paths(&others, krate).iter().map(|h| format!("{h}: only {owner} names it")));
    }
    assert_none("boundary crates named outside their owners", &problems);
}

/// How many `Result<_, String>` the code outside tests may hold: failures are typed (a
/// `thiserror` enum with the variants callers tell apart, sources kept), text only at the edge.
/// Lower it as they go; it never rises.
const STRING_ERRORS_BUDGET: usize = 39;

/// The edge: the only top-level module whose code may carry a failure as bare text (the command
/// line, whose errors become `anyhow` errors, HTTP bodies and MCP tool errors). Every layer below
/// it holds none.
const STRING_ERRORS_EDGE: &[&str] = &["cli"];

#[test]
fn tidy_failures_are_typed_outside_the_edge() {
    let hits = rules::string_errors(&source::load(&src()));
    let top = |h: &rules::Hit| h.path.split('/').next().unwrap_or_default().trim_end_matches(".rs").to_string();
    let mut problems: Vec<String> = hits
        .iter()
        .filter(|h| !STRING_ERRORS_EDGE.contains(&top(h).as_str()))
        .map(|h| format!("{h} outside the edge ({}): give it a typed error", STRING_ERRORS_EDGE.join(", ")))
        .collect();
    if hits.len() > STRING_ERRORS_BUDGET {
        let mut by_module = std::collections::BTreeMap::<String, usize>::new();
        for h in &hits {
            *by_module.entry(top(h)).or_default() += 1;
        }
        problems.push(format!(
            "{} found, {STRING_ERRORS_BUDGET} allowed (by module: {by_module:?}); give the new ones a typed error",
            hits.len()
        ));
    }
    assert_none("failures carried as text (`Result<_, String>`)", &problems);
}
