//! How script errors are rendered for the operator: a long source line is cut to 200 characters
//! around the caret.

mod common;

use common::Env;

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
