//! The tidy checks against sources made to break them: each check reports what it is for, and
//! nothing in comments, literals or tests.

use super::{layers, map, rules, source, sources_of};
use std::collections::BTreeSet;

const LIB: &str = "//! # Layers\n//!\n//! 1. `a`, `b`: the bottom.\n//! 2. `c`: above.\n//!\n//! # Code map\n//!\n\
                   //! - `a/`: `mod.rs`, `named.rs`, `x` (its stem).\n//! - `b.rs`: b.\n//!\n//! # Invariants\n";

#[test]
fn the_layers_are_read_from_lib_rs() {
    assert_eq!(layers::parse_layers(LIB), vec![vec!["a".to_string(), "b".to_string()], vec!["c".to_string()]]);
}

#[test]
fn an_arrow_up_and_a_cycle_within_a_layer_are_reported_and_prose_is_not_code() {
    let sources = sources_of(&[
        ("a/mod.rs", "use crate::{b::f, x::{c}};\n// crate::c in a comment\nconst S: &str = \"crate::c\";\n"),
        ("b.rs", "fn g() {\n    crate::a::h();\n}\n"),
        ("c.rs", "use crate::a;\n"),
    ]);
    let modules: BTreeSet<String> = ["a", "b", "c"].map(String::from).into();
    let arrows = layers::arrows(&sources, &modules);
    let drawn: Vec<(&str, &str, &str)> =
        arrows.iter().map(|a| (a.from.as_str(), a.to.as_str(), a.at.as_str())).collect();
    assert_eq!(drawn, [("a", "b", "a/mod.rs:1"), ("b", "a", "b.rs:2"), ("c", "a", "c.rs:1")]);
    let problems = layers::problems(&layers::parse_layers(LIB), &arrows);
    assert_eq!(problems, ["cycle: a -> b (a/mod.rs:1), b -> a (b.rs:2)"]);
    let up = sources_of(&[("a/mod.rs", "fn f() { crate::c::g() }\n")]);
    let problems = layers::problems(&layers::parse_layers(LIB), &layers::arrows(&up, &modules));
    assert_eq!(problems, ["`a` (layer 1) names `c` (layer 2), a layer above it, at a/mod.rs:1"]);
}

#[test]
fn a_file_the_code_map_does_not_name_is_reported() {
    let paths = ["a/mod.rs", "a/named.rs", "a/x.rs", "a/new.rs", "b.rs", "d.rs", "e/mod.rs"].map(String::from);
    assert_eq!(
        map::unmapped(LIB, &paths),
        [
            "src/a/new.rs: not named in the code map's entry `a/` in src/lib.rs",
            "src/d.rs: not in the code map of src/lib.rs",
            "src/e/mod.rs: the code map of src/lib.rs has no entry `e/`",
        ]
    );
}

#[test]
fn a_file_the_code_map_names_that_is_gone_is_reported() {
    let paths = ["a/mod.rs", "a/named.rs", "a/x.rs", "b.rs"].map(String::from);
    let lib = LIB.replace("`x` (its stem)", "`x.rs`, `gone.rs`, `build.rs`, `b.rs`");
    assert_eq!(
        map::stale(&lib, &paths, |p| p == "build.rs"),
        ["src/lib.rs: the code map's entry of `a/` names `gone.rs`, which does not exist"]
    );
}

#[test]
fn a_print_is_found_but_not_in_tests_comments_or_literals() {
    let sources = sources_of(&[(
        "run/x.rs",
        "fn f() {\n    eprintln!(\"{}\", 1);\n}\n// println!(\"no\")\nconst R: &str = r#\"print!(\"no\")\"#;\n\
         const C: char = '\"';\nfn g() { eprint!(\"x\") }\n#[cfg(test)]\nmod tests {\n    fn t() { println!(\"ok\"); }\n}\n",
    )]);
    let found: Vec<String> = rules::calls(&sources, rules::PRINTS).iter().map(|h| h.to_string()).collect();
    assert_eq!(found, ["src/run/x.rs:2: eprintln!", "src/run/x.rs:7: eprint!"]);
}

#[test]
fn a_write_beyond_the_allow_list_and_a_stale_entry_are_reported() {
    let sources = sources_of(&[("run/w.rs", "fn f() {\n    std::fs::write(p, b)?;\n    std::fs::write(q, b)?;\n}\n")]);
    let hits = rules::calls(&sources, rules::WRITES);
    let problems =
        rules::unallowed(&hits, &[("run/w.rs", "fs::write", 1, "one is fine"), ("run/v.rs", "fs::rename", 1, "gone")]);
    assert_eq!(
        problems,
        [
            "2 found, 1 allowed: src/run/w.rs:2: fs::write, src/run/w.rs:3: fs::write",
            "stale allow-list entry: src/run/v.rs `fs::rename` allows 1, 0 found",
        ]
    );
    assert_eq!(
        rules::unallowed(&hits, &[("run/w.rs", "fs::write", 2, " ")]),
        ["allow-list entry src/run/w.rs `fs::write` gives no reason"]
    );
}

#[test]
fn a_new_static_is_found_but_not_a_thread_local_or_a_lifetime() {
    let sources = sources_of(&[(
        "run/s.rs",
        "static A: u8 = 0;\npub static mut B: u8 = 0;\nfn f(x: &'static str) {}\nthread_local! {\n    static C: u8 = 0;\n}\n\
         #[cfg(test)]\nstatic D: u8 = 0;\n",
    )]);
    let found: Vec<String> = rules::statics(&sources).iter().map(|h| h.to_string()).collect();
    assert_eq!(found, ["src/run/s.rs:1: A", "src/run/s.rs:2: B"]);
    assert_eq!(rules::unallowed(&rules::statics(&sources), &[("run/s.rs", "A", 1, "listed")]).len(), 1);
}

#[test]
fn a_test_only_module_file_is_left_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("run")).expect("mkdir");
    std::fs::write(dir.path().join("run/mod.rs"), "#[cfg(test)]\nmod checks;\nmod real;\n").expect("write");
    std::fs::write(dir.path().join("run/checks.rs"), "fn t() { println!(\"ok\") }\n").expect("write");
    std::fs::write(dir.path().join("run/real.rs"), "fn f() { println!(\"no\") }\n").expect("write");
    let paths: Vec<String> = source::load(dir.path()).into_iter().map(|s| s.path).collect();
    assert_eq!(paths, ["run/mod.rs", "run/real.rs"]);
}

#[test]
fn a_boundary_crate_named_outside_its_owner_is_found_but_not_a_word_like_it() {
    let sources = sources_of(&[(
        "run/r.rs",
        "use rhai::Dynamic;\nfn f() -> anyhow::Result<()> { anyhow!(\"x\") }\nlet rhaiish = 1;\nuse opentelemetry_sdk::trace;\n\
         // rhai::Engine\nfn g() { crate::rhai::x() }\n",
    )]);
    let found: Vec<String> = ["rhai", "anyhow", "opentelemetry"]
        .iter()
        .flat_map(|k| rules::crate_paths(&sources, k))
        .map(|h| h.to_string())
        .collect();
    assert_eq!(
        found,
        ["src/run/r.rs:1: rhai", "src/run/r.rs:2: anyhow", "src/run/r.rs:2: anyhow", "src/run/r.rs:4: opentelemetry"]
    );
}

#[test]
fn a_test_of_an_error_text_is_found_but_not_of_other_text() {
    let sources = sources_of(&[(
        "run/e.rs",
        "fn f() {\n    if e.contains(\"x\") {}\n    if name.contains('/') {}\n    if err.to_string().starts_with(\"y\") {}\n}\n\
         #[cfg(test)]\nmod tests {\n    fn t() { assert!(e.contains(\"ok\")); }\n}\n",
    )]);
    let found: Vec<String> = rules::calls(&sources, rules::ERROR_TEXT_TESTS).iter().map(|h| h.to_string()).collect();
    assert_eq!(found, ["src/run/e.rs:2: e.contains", "src/run/e.rs:4: to_string().starts_with"]);
}

#[test]
fn a_failure_carried_as_text_is_found_once_but_not_another_error_or_in_tests() {
    let sources = sources_of(&[(
        "run/t.rs",
        "fn a() -> Result<(), String> {}\nfn b() -> Result<Vec<String>, String> {}\nfn c() -> io::Result<String> {}\n\
         fn d() -> Result<String, Error> {}\ntype F = Box<dyn Fn(&str) -> Result<u8, String>>;\nfn e() -> Result<\n    Box<dyn Fn() -> u8>,\n    String,\n> {}\n\
         fn f() -> MyResult<(), String> {}\n// Result<(), String>\n#[cfg(test)]\nfn t() -> Result<(), String> {}\n",
    )]);
    let found: Vec<String> = rules::string_errors(&sources).iter().map(|h| h.to_string()).collect();
    assert_eq!(
        found,
        [
            "src/run/t.rs:1: Result<_, String>",
            "src/run/t.rs:2: Result<_, String>",
            "src/run/t.rs:5: Result<_, String>",
            "src/run/t.rs:6: Result<_, String>",
        ]
    );
}
