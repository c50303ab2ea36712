//! A run folder an older awf wrote (`tests/fixtures/older_run`: lines without `attempt`, journal
//! lines without `stage` or `turn_parts`, attempts without their own script hash, an event type
//! this version does not know) still lists, shows, logs and is refused a resume for the right
//! reason; and no reader under `src/cli/` indexes awf's own documents as JSON.

use crate::common;

use common::Env;
use std::path::Path;

const ID: &str = "20250102-030405678-01d0ff";

fn older_run() -> Env {
    let env = Env::new();
    let dir = env.runs_root().join(ID);
    std::fs::create_dir_all(&dir).expect("run folder");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/older_run");
    for entry in std::fs::read_dir(&fixture).expect("fixture").flatten() {
        std::fs::copy(entry.path(), dir.join(entry.file_name())).expect("copy");
    }
    env
}

#[test]
fn an_older_run_folder_lists_and_shows() {
    let env = older_run();
    let list = env.awf(&["runs", "list"]);
    list.expect_code(0).stdout_has(&format!("{ID}  succeeded")).stdout_has("42 tokens  /nowhere/review.rhai");
    let show = env.awf(&["runs", "show", ID]);
    show.expect_code(0)
        .stdout_has(&format!("run {ID}: succeeded"))
        .stdout_has("script: /nowhere/review.rhai")
        .stdout_has("attempt 1: succeeded (2025-01-02T03:04:05.678Z → 2025-01-02T03:04:09.000Z)")
        .stdout_has("stage review: succeeded")
        .stdout_has("agent judge (fake, fake): 1 operation")
        .stdout_has("judge#1  [review] answered · 42 tokens")
        .stdout_has("spend (all attempts): 1 operation, 42 tokens");
    let agent = env.awf(&["runs", "show", ID, "--agent", "judge"]);
    agent
        .expect_code(0)
        .stdout_has(&format!("agent judge of run {ID}: 1 operation"))
        .stdout_has(r#"  answer: {"verdict":"yes"}"#);
}

#[test]
fn an_older_run_folder_logs_and_an_unknown_event_type_is_shown_as_written() {
    let env = older_run();
    let logs = env.awf(&["runs", "logs", ID]);
    logs.expect_code(0)
        .stdout_has("03:04:05.678  run started (attempt 1): /nowhere/review.rhai")
        .stdout_has("03:04:05.720  [review]  judge  turn judge#1 started")
        .stdout_has(r#"03:04:06.000  [review]  judge  made-up-event {"agent":"judge","note":"from another awf"}"#)
        .stdout_has("03:04:08.000  [review]  judge  judge#1 answered · 42 tokens · spent 42 tokens")
        .stdout_has("03:04:08.100  stage review succeeded")
        .stdout_has("03:04:09.000  run succeeded · spent 42 tokens");
}

#[test]
fn an_older_succeeded_run_is_refused_a_resume_for_having_succeeded() {
    let env = older_run();
    let out = env.awf(&["runs", "resume", ID]);
    out.expect_code(2).stderr_has(&format!("run {ID} already succeeded (attempt 1)"));
}

/// Lines of `src/cli/` that index a JSON value by a key (`x["key"]`), other than these: JSON
/// that is not one of awf's run documents (responses a command builds, control-socket replies, a
/// run's value, a strategy's meta, the live run's `waiting`), and the readers others own
/// (`cli/background.rs` with `background.json`, `cli/script.rs` with the recorded limits).
const ALLOWED: &[(&str, &str)] = &[
    ("background.rs", "doc["),
    ("script.rs", "run_doc[\"limits\"]"),
    ("listing.rs", "bg["),
    ("listing.rs", "v[\"waiting\"]"),
    ("mcp/runs.rs", "out["),
    ("mcp/runs.rs", "background.json\"))[\"error\"]"),
    ("mcp/mod.rs", "status[\"cursor\"]"),
    ("serve/runs.rs", "row["),
    ("serve/runs.rs", "o[\"run_id\"]"),
    ("serve/runs.rs", "v[\"status\"] = o["),
    ("serve/runs.rs", "reply[\"pid\"]"),
    ("answer.rs", "reply[\"key\"]"),
    ("stop.rs", "reply["),
    ("council.rs", "m[\"name\"]"),
    ("council.rs", "input["),
    ("ending.rs", "v[\"output\"]"),
    ("live.rs", "w["),
    ("init.rs", "# "),
];

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src/cli").flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_reader_in_src_cli_indexes_awfs_own_documents_as_json() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cli");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut found = Vec::new();
    for file in files {
        let rel = file.strip_prefix(&root).expect("under src/cli").display().to_string();
        let text = std::fs::read_to_string(&file).expect("read");
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") || !indexes(code) {
                continue;
            }
            if !ALLOWED.iter().any(|(f, what)| rel == *f && code.contains(what)) {
                found.push(format!("src/cli/{rel}:{}: {}", n + 1, code));
            }
        }
    }
    assert!(found.is_empty(), "read awf's documents through record's types, not by key:\n{}", found.join("\n"));
}

/// Whether a line indexes a value by a string key: `x["key"]`, `)["key"]`, `]["key"]`.
fn indexes(code: &str) -> bool {
    code.match_indices("[\"").any(|(i, _)| {
        let before = code[..i].chars().last();
        let key_end = code[i + 2..].find('"').map(|e| i + 2 + e);
        let closed = key_end.is_some_and(|e| code[e + 1..].starts_with(']'));
        closed && before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ')' || c == ']')
    })
}

#[test]
fn the_tidy_check_catches_an_index() {
    assert!(indexes(r#"let s = run["script"].as_str();"#));
    assert!(indexes(r#"read(&p)["status"]"#));
    assert!(!indexes(r#"for key in ["team", "roster"] {"#));
    assert!(!indexes(r#"&["run_id"],"#));
}
