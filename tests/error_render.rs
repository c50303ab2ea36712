//! How script errors are rendered for the operator: a long source line is cut to 200 characters
//! around the caret, and limit errors raised inside `fn run` still name file:line:col.

use crate::common;

use common::{Env, Out};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

/// The source line an error shows (the one after `N | `), and the caret line under it.
fn shown_line(stderr: &str) -> (String, Option<String>) {
    let lines: Vec<&str> = stderr.lines().collect();
    let at = lines.iter().position(|l| l.starts_with("1 | ") || l.starts_with("2 | ")).expect("a source line");
    let text = lines[at].split_once(" | ").expect("a gutter").1.to_string();
    let caret = lines.get(at + 1).filter(|l| l.contains("^ here")).map(|l| l.split_once(" | ").expect("a gutter").1);
    (text, caret.map(String::from))
}

#[test]
fn a_long_line_is_cut_to_200_characters_with_the_caret_kept() {
    let env = Env::new();
    // The error (the second `+`) at column 12, then 5,000 characters more.
    let out = env.run(&format!("let x = 1 +* 2; let s = \"{}\";\n", "a".repeat(5_000)), &[]);
    out.expect_code(2).stderr_has("wf.rhai:1:12");
    let (text, caret) = shown_line(&out.stderr);
    assert_eq!(text.chars().count(), 201, "200 characters and the ellipsis: {text}");
    assert!(text.starts_with("let x = 1 +* 2;") && text.ends_with("a…"), "{text}");
    assert_eq!(caret.as_deref(), Some("           ^ here"));

    // The error far along the line: the part around it is shown, cut on both sides.
    let out = env
        .run(&format!("let s = \"{}\"; let y = 1 +* 2; let t = \"{}\";\n", "a".repeat(3_000), "b".repeat(3_000)), &[]);
    out.expect_code(2).stderr_has("wf.rhai:1:3024");
    let (text, caret) = shown_line(&out.stderr);
    assert!(text.starts_with('…') && text.ends_with('…'), "{text}");
    assert_eq!(text.chars().count(), 202, "{text}");
    let caret = caret.expect("a caret");
    let under = text.chars().nth(caret.find('^').expect("a caret")).expect("a character under the caret");
    assert_eq!(under, '*', "the caret points at the error: {text}\n{caret}");
}

#[test]
fn a_megabyte_line_is_not_printed_whole() {
    let env = Env::new();
    // Past column 65535 Rhai stops counting: the line's start is shown, without a caret.
    let out = env.run(&format!("fn run(args) {{\n  let s = \"{}\" + ;\n}}\n", "a".repeat(1 << 20)), &[]);
    out.expect_code(2).stderr_has("wf.rhai:2:");
    assert!(out.stderr.len() < 2_000, "{} bytes of stderr", out.stderr.len());
    let (text, caret) = shown_line(&out.stderr);
    assert!(text.starts_with("  let s = \"aaa") && text.ends_with('…'), "{text}");
    assert_eq!(caret, None);
}

/// Runs `awf script run wf.rhai` with a longer bound than usual: 50 million operations take a
/// few seconds in a debug build.
fn run_slow(env: &Env, script: &str) -> Out {
    env.write("wf.rhai", script);
    let child = common::command(env.path(), &["script", "run", "wf.rhai"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn awf");
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(Duration::from_secs(180)) {
        Ok(out) => {
            let out = out.expect("wait for awf");
            Out {
                code: out.status.code(),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            }
        }
        Err(_) => {
            common::signal(pid, "-KILL");
            panic!("awf did not stop a runaway loop within 180 s");
        }
    }
}

#[test]
fn limit_errors_inside_fn_run_name_file_line_and_column() {
    let env = Env::new();
    let cases = [
        (
            "fn run(args) {\n  let s = \"ab\";\n  loop { s += s; }\n}\n",
            "Data held by `s` (memory limit: 64 MiB) too large",
        ),
        (
            "fn run(args) {\n  let a = [1];\n  loop { a += a; }\n}\n",
            "Data held by `a` (memory limit: 64 MiB) too large",
        ),
        ("fn deeper(n) { deeper(n + 1) }\nfn run(args) {\n  deeper(0)\n}\n", "Stack overflow"),
    ];
    for (script, message) in cases {
        let out = env.run(script, &[]);
        out.expect_code(1).stderr_has(&format!("error: {message}")).stderr_has(" --> wf.rhai:");
        out.stderr_has("= note: in call to fn run");
    }
    let out = env.run("fn deeper(n) { deeper(n + 1) }\nfn run(args) {\n  deeper(0)\n}\n", &[]);
    out.stderr_has(" --> wf.rhai:2:14\n  |\n2 | fn run(args) {\n  |              ^ here");
}

#[test]
fn too_many_operations_inside_fn_run_names_file_line_and_column() {
    let env = Env::new();
    let out = run_slow(&env, "fn run(args) {\n  loop {}\n}\n");
    out.expect_code(1)
        .stderr_has("error: the script made more than 50000000 operations ([limits] script_operations, the guard against runaway loops): look for a loop that does not end, or raise script_operations in awf.toml if the work is real")
        .stderr_has(" --> wf.rhai:1:14");
}

#[test]
fn the_operation_limit_is_set_in_limits_and_named_with_its_value() {
    let env = Env::new();
    env.write("awf.toml", "[limits]\nscript_operations = 20000\n");
    // A top-level loop: rhai gives its own position.
    let out = env.run("let n = 0;\nwhile true { n += 1; }\n", &[]);
    out.expect_code(1)
        .stderr_has("error: the script made more than 20000 operations ([limits] script_operations")
        .stderr_has(" --> wf.rhai:2:");
    // Within the limit, the same work finishes.
    let out = env.run("let n = 0;\nwhile n < 100 { n += 1; }\nn\n", &[]);
    out.expect_code(0);
}
