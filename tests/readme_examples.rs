//! Every example of README.md and stdlib/council/README.md is checked against the real binary:
//! `rhai` blocks compile (`awf script check`) and complete workflows run on the fake harness,
//! `toml` blocks load as awf.toml, `sh` lines that run awf name real subcommands and flags, every
//! repository path the documents name exists, and every strategy has a section naming its params.
//! A block marked `<!-- not checked: reason -->` is skipped, counted and printed.

use crate::common;

use common::Env;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A fenced block: its language tag, text, the line of its opening fence, and the HTML comment
/// on the line before the fence (`<!-- ... -->`, its inside trimmed), if any.
#[derive(Clone, Debug)]
struct Block {
    lang: String,
    text: String,
    line: usize,
    marker: Option<String>,
}

/// Every fenced block of a Markdown text.
fn blocks_of(text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(lang) = lines[i].strip_prefix("```").filter(|l| !l.is_empty()) else {
            i += 1;
            continue;
        };
        let marker = lines[..i]
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .and_then(|l| l.trim().strip_prefix("<!--")?.strip_suffix("-->").map(|m| m.trim().to_string()));
        let end = (i + 1..lines.len()).find(|&j| lines[j].starts_with("```")).unwrap_or(lines.len());
        let body = lines[i + 1..end].join("\n");
        out.push(Block { lang: lang.trim().to_string(), text: body + "\n", line: i + 1, marker });
        i = end + 1;
    }
    out
}

/// A shell line's words up to its end or the first `#`, `|`, `&`, `;` or `>`, quotes removed.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut started = false;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => word.push(c),
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                started = true;
            }
            None if c.is_whitespace() => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            None if "|&;>".contains(c) || (c == '#' && !started) => break,
            None => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        words.push(word);
    }
    words
}

#[test]
fn blocks_and_words_are_read_as_markdown_and_shell_read_them() {
    let md = "x\n<!-- args: {} -->\n```rhai\nlet a = 1;\n```\n```sh\nawf runs list\n```\n";
    let b = blocks_of(md);
    assert_eq!(b.len(), 2);
    assert_eq!((b[0].lang.as_str(), b[0].line, b[0].marker.as_deref()), ("rhai", 3, Some("args: {}")));
    assert_eq!(b[1].text, "awf runs list\n");
    assert_eq!(b[1].marker, None);
    let w = shell_words("awf council run magi --task \"Ship it?\" --param 'c=[\"a\"]' # note | x");
    assert_eq!(w, ["awf", "council", "run", "magi", "--task", "Ship it?", "--param", "c=[\"a\"]"]);
    assert_eq!(shell_words("awf serve --listen 127.0.0.1:8700 &"), ["awf", "serve", "--listen", "127.0.0.1:8700"]);
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

const DOCS: &[&str] = &["README.md", "stdlib/council/README.md"];

/// Every fenced block of the documents, with the document's name.
fn all_blocks() -> Vec<(String, Block)> {
    let mut out = Vec::new();
    for doc in DOCS {
        let text = std::fs::read_to_string(root().join(doc)).unwrap_or_else(|e| panic!("read {doc}: {e}"));
        out.extend(blocks_of(&text).into_iter().map(|b| (doc.to_string(), b)));
    }
    out
}

/// The blocks of `lang`, less those marked not checked (each printed and counted).
fn checked(lang: &str) -> Vec<(String, Block)> {
    let (kept, skipped) = split_checked(all_blocks(), lang);
    for s in &skipped {
        println!("skipped: {s}");
    }
    println!("{lang}: {} block(s) checked, {} skipped (marked not checked)", kept.len(), skipped.len());
    kept
}

/// The blocks of `lang`, and where and why each one marked `<!-- not checked: reason -->` is
/// skipped. A mark without a reason is an error.
fn split_checked(blocks: Vec<(String, Block)>, lang: &str) -> (Vec<(String, Block)>, Vec<String>) {
    let mut kept = Vec::new();
    let mut skipped = Vec::new();
    for (doc, b) in blocks.into_iter().filter(|(_, b)| b.lang == lang) {
        match b.marker.as_deref().and_then(|m| m.strip_prefix("not checked")) {
            Some(why) => {
                let why = why.trim_start_matches(':').trim();
                assert!(!why.is_empty(), "{doc}:{}: `not checked` needs a reason", b.line);
                skipped.push(format!("{doc}:{} ({lang}): {why}", b.line));
            }
            None => kept.push((doc, b)),
        }
    }
    (kept, skipped)
}

#[test]
fn marked_blocks_are_skipped_with_their_reason_and_fragments_get_their_section() {
    let md = "<!-- not checked: needs a real key -->\n```toml\na = 1\n```\n\
              <!-- fragment: [limits] -->\n```toml\nnudges = 3\n```\n";
    let blocks: Vec<(String, Block)> = blocks_of(md).into_iter().map(|b| ("doc".to_string(), b)).collect();
    let (kept, skipped) = split_checked(blocks, "toml");
    assert_eq!(skipped, ["doc:2 (toml): needs a real key"]);
    assert_eq!(kept.len(), 1);
    assert_eq!(as_config(&kept[0].1), "[limits]\nnudges = 3\n");
}

#[test]
#[should_panic(expected = "`not checked` needs a reason")]
fn a_not_checked_mark_without_a_reason_is_refused() {
    let blocks = blocks_of("<!-- not checked -->\n```sh\nawf x\n```\n");
    split_checked(blocks.into_iter().map(|b| ("doc".to_string(), b)).collect(), "sh");
}

/// A config block as a whole awf.toml: a `<!-- fragment: [section] -->` goes under its section.
fn as_config(b: &Block) -> String {
    match b.marker.as_deref().and_then(|m| m.strip_prefix("fragment")) {
        Some(rest) => format!("{}\n{}", rest.trim_start_matches(':').trim(), b.text),
        None => b.text.clone(),
    }
}

#[test]
fn toml_blocks_load_as_awf_toml() {
    let blocks = checked("toml");
    assert!(blocks.len() >= 5, "expected the README's config examples, found {}", blocks.len());
    for (doc, b) in blocks {
        let env = Env::new();
        env.write("awf.toml", &as_config(&b));
        env.write("t.rhai", "()\n");
        let out = env.awf(&["script", "run", "t.rhai", "-q"]);
        assert_eq!(out.code, Some(0), "{doc}:{}: the toml block does not load as awf.toml:\n{}", b.line, out.stderr);
    }
}

/// A rhai block that is a file of its own (its first line `// NAME.rhai: ...`) rather than a workflow.
fn is_named_file(b: &Block) -> bool {
    b.text.lines().next().is_some_and(|l| l.starts_with("// ") && l.contains(".rhai:"))
}

/// Whether a workflow needs something beyond the fake harness (a config above it, a sandbox, a
/// decision model).
fn needs_more(b: &Block) -> bool {
    b.text.contains("sandbox:") || b.text.contains("runtime:") || b.text.contains("ctx.decisions.decide")
}

#[test]
fn rhai_blocks_compile_and_complete_workflows_run_on_the_fake_harness() {
    let blocks = checked("rhai");
    assert!(blocks.len() >= 4, "expected the README's workflows, found {}", blocks.len());
    let (mut ran, mut only_checked) = (0, 0);
    for (doc, b) in blocks {
        let env = Env::new();
        env.write("block.rhai", &b.text);
        let out = env.awf(&["script", "check", "block.rhai"]);
        assert_eq!(out.code, Some(0), "{doc}:{}: awf script check refused the block:\n{}", b.line, out.stderr);
        if is_named_file(&b) || needs_more(&b) {
            only_checked += 1;
            continue;
        }
        let args = b.marker.as_deref().and_then(|m| m.strip_prefix("args:")).map(str::trim);
        let mut cmd = vec!["script", "run", "block.rhai", "-q"];
        if let Some(a) = args {
            cmd.extend(["--args", a]);
        }
        let out = env.awf(&cmd);
        assert_eq!(
            out.code,
            Some(0),
            "{doc}:{}: the workflow does not run on the fake harness:\n{}",
            b.line,
            out.stderr
        );
        ran += 1;
    }
    println!("rhai: {ran} run on the fake harness, {only_checked} checked only (a file of their own, or tested below)");
    assert!(ran >= 3, "expected at least 3 complete workflows to run, ran {ran}");
}

/// The subcommands `awf <path> --help` lists, and the whole help text.
fn help(path: &[String]) -> (Vec<String>, String) {
    let env = Env::new();
    let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
    args.push("--help");
    let out = env.awf(&args);
    assert_eq!(out.code, Some(0), "awf {} --help failed:\n{}", path.join(" "), out.stderr);
    let subs = out
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect();
    (subs, out.stdout)
}

/// The awf arguments of a shell line, or `None` when it runs something else.
fn awf_args(line: &str) -> Option<Vec<String>> {
    let words = shell_words(line);
    let first = words.first()?.as_str();
    match first {
        "awf" => Some(words[1..].to_vec()),
        "$AWF_LAUNCHER" => Some(std::iter::once("wf".to_string()).chain(words[1..].iter().cloned()).collect()),
        "cargo" if words.get(1).is_some_and(|w| w == "run") => {
            let dash = words.iter().position(|w| w == "--")?;
            Some(words[dash + 1..].to_vec())
        }
        _ => None,
    }
}

#[test]
fn sh_lines_name_real_subcommands_and_flags() {
    let mut helps: BTreeMap<Vec<String>, (Vec<String>, String)> = BTreeMap::new();
    let mut lines_checked = 0;
    for (doc, b) in checked("sh") {
        let prompted = b.text.lines().any(|l| l.starts_with("$ "));
        for (i, raw) in b.text.lines().enumerate() {
            let line = match raw.strip_prefix("$ ") {
                Some(l) => l,
                None if prompted => continue, // output shown after a prompt
                None => raw,
            };
            let Some(args) = awf_args(line) else { continue };
            let at = format!("{doc}:{}", b.line + 1 + i);
            let mut path: Vec<String> = Vec::new();
            for word in &args {
                let subs = &helps.entry(path.clone()).or_insert_with(|| help(&path)).0;
                if subs.contains(word) {
                    path.push(word.clone());
                } else {
                    break;
                }
            }
            let (subs, text) = helps.entry(path.clone()).or_insert_with(|| help(&path)).clone();
            assert!(subs.is_empty(), "{at}: `{line}` names no subcommand of `awf {}` ({subs:?})", path.join(" "));
            for flag in args.iter().filter(|w| w.starts_with('-') && *w != "-") {
                let name = flag.split('=').next().unwrap_or(flag);
                let known = text.split(|c: char| c.is_whitespace() || c == ',').any(|w| w == name);
                assert!(known, "{at}: `awf {}` has no flag {name} (line: `{line}`)", path.join(" "));
            }
            lines_checked += 1;
        }
    }
    println!("sh: {lines_checked} awf command line(s) checked against --help");
    assert!(lines_checked >= 20, "expected the README's command lines, checked {lines_checked}");
}

/// Repository paths a document names: `scripts/...`, `stdlib/...`, `tests/...`, `.ci/...`.
fn named_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for prefix in ["scripts/", "stdlib/", "tests/", ".ci/"] {
        for (at, _) in text.match_indices(prefix) {
            let before = text[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '/' || c == '.' || c == '_' || c == '-' || c == '$') {
                continue;
            }
            let path: String = text[at..].chars().take_while(|c| c.is_alphanumeric() || "/._-".contains(*c)).collect();
            out.push(path.trim_end_matches(['.', ',']).to_string());
        }
    }
    out
}

/// The examples a paragraph that starts "`scripts/` holds" lists by bare name (`review.rhai`).
fn listed_examples(text: &str) -> Vec<String> {
    text.split("\n\n")
        .filter(|p| p.trim_start().starts_with("`scripts/` holds"))
        .flat_map(|p| p.split('`').skip(1).step_by(2))
        .filter(|w| w.ends_with(".rhai") && !w.contains('/'))
        .map(|w| format!("scripts/{w}"))
        .collect()
}

#[test]
fn listed_examples_are_the_bare_names_of_the_scripts_paragraph() {
    let text = "`scripts/` holds examples: `a.rhai` (x), `b.rhai`.\n\n`awf init` writes `hello.rhai`.";
    assert_eq!(listed_examples(text), ["scripts/a.rhai", "scripts/b.rhai"]);
}

#[test]
fn every_repository_path_the_documents_name_exists() {
    let mut n = 0;
    for doc in DOCS {
        let text = std::fs::read_to_string(root().join(doc)).unwrap_or_else(|e| panic!("read {doc}: {e}"));
        for path in named_paths(&text).into_iter().chain(listed_examples(&text)) {
            assert!(root().join(&path).exists(), "{doc} names {path}, which is not in the repository");
            n += 1;
        }
    }
    println!("paths: {n} named path(s) exist");
    assert!(n >= 10, "expected the README's paths, found {n}");
}

#[test]
fn named_paths_skip_paths_inside_other_paths() {
    let found = named_paths("see `scripts/review.rhai`, $XDG_CONFIG_HOME/awf/strategies/ and a/tests/x.");
    assert_eq!(found, vec!["scripts/review.rhai".to_string()]);
}

/// The text of `## NAME` in a Markdown document, up to the next `## `.
fn section<'a>(doc: &'a str, name: &str) -> Option<&'a str> {
    let start = doc.find(&format!("\n## {name}\n"))? + 1;
    let rest = &doc[start..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |e| e + 3);
    Some(&rest[..end])
}

/// What a strategy's section lacks: the section itself, or the params it does not name in backticks.
fn undocumented(doc: &str, name: &str, params: &[String]) -> Vec<String> {
    match section(doc, name) {
        None => vec![format!("## {name}")],
        Some(s) => params.iter().filter(|p| !s.contains(&format!("`{p}`"))).cloned().collect(),
    }
}

#[test]
fn undocumented_names_a_missing_section_and_a_missing_param() {
    let doc = "# x\n\n## pair\n`rounds` ...\n\n## map\n`peers`\n";
    assert!(undocumented(doc, "pair", &["rounds".into()]).is_empty());
    assert_eq!(undocumented(doc, "map", &["peers".into(), "reviewer".into()]), ["reviewer"]);
    assert_eq!(undocumented(doc, "magi", &[]), ["## magi"]);
}

#[test]
fn every_strategy_has_a_section_naming_each_of_its_params() {
    let doc = std::fs::read_to_string(root().join("stdlib/council/README.md")).expect("read the strategies' README");
    let mut names: Vec<String> = std::fs::read_dir(root().join("stdlib/council"))
        .expect("stdlib/council/")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "rhai"))
        .filter(|p| std::fs::read_to_string(p).is_ok_and(|t| t.contains("kind: \"strategy\"")))
        .filter_map(|p| p.file_stem().and_then(|s| s.to_str()).map(String::from))
        .collect();
    names.sort();
    assert!(names.len() >= 5, "expected magi, map, pair, pipeline and synthesize, found {names:?}");
    let env = Env::new();
    for name in &names {
        let out = env.awf(&["council", "show", name]);
        out.expect_code(0);
        // `council show` prints a title line, META as JSON, then the default team.
        let json: String = out.stdout.lines().skip(1).take_while(|l| *l != "}").chain(["}"]).collect();
        let meta: serde_json::Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{name}: META: {e}"));
        let params: Vec<String> = meta["params"].as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default();
        let missing = undocumented(&doc, name, &params);
        assert!(missing.is_empty(), "stdlib/council/README.md lacks for strategy {name}: {missing:?}");
    }
}

/// The blocks of `## heading` in README.md.
fn readme_section(heading: &str) -> Vec<Block> {
    let doc = std::fs::read_to_string(root().join("README.md")).expect("read README.md");
    blocks_of(section(&doc, heading).unwrap_or_else(|| panic!("README.md has no ## {heading}")))
}

fn first(blocks: &[Block], lang: &str) -> Block {
    blocks.iter().find(|b| b.lang == lang).cloned().unwrap_or_else(|| panic!("no {lang} block"))
}

#[test]
fn the_fake_harness_responder_example_answers_as_it_says() {
    let blocks = readme_section("The fake harness");
    let env = Env::new();
    env.write("awf.toml", &first(&blocks, "toml").text);
    env.write("responders/mine.rhai", &first(&blocks, "rhai").text);
    let out = env.run(
        "let flaky = ctx.agents.open(#{ key: \"flaky\", runtime: \"scripted\" });\n\
         let other = ctx.agents.open(#{ key: \"other\", runtime: \"scripted\" });\n\
         let broken = ctx.agents.open(#{ key: \"broken\", runtime: \"scripted\" });\n\
         [flaky.ask(\"hi\"), other.ask(\"hi\"), broken.turn(\"hi\").reason]\n",
        &["-q"],
    );
    out.expect_code(0);
    assert_eq!(out.json(), serde_json::json!(["ok", "ok", "model crashed"]));
}

#[test]
#[ignore = "needs bubblewrap (.ci/setup installs it; the README's test command runs these)"]
fn the_sandbox_example_runs_as_written() {
    let blocks = readme_section("Sandboxes");
    let env = Env::new();
    common::copy_dir(&root().join("scripts"), &env.path().join("scripts"));
    env.write("awf.toml", &first(&blocks, "toml").text);
    let sh = first(&blocks, "sh");
    let script = sh.text.lines().find_map(|l| awf_args(l)?.get(2).cloned()).expect("the sh block runs a script");
    env.write(&script, &first(&blocks, "rhai").text);
    let out = run_sh(&env, &sh.text);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["locked"]["interfaces"], 0, "{v}");
    assert_eq!(v["locked"]["home_entries"], 0, "{v}");
}

#[test]
fn awf_init_writes_the_hello_workflow_the_readme_names_and_it_runs() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("read README.md");
    assert!(
        readme.contains("`awf init [DIR]` writes") && readme.contains("`hello.rhai`"),
        "README changed: update this test"
    );
    let env = Env::new();
    env.awf(&["init"]).expect_code(0);
    let out = env.awf(&["script", "run", "scripts/hello.rhai", "-q"]);
    out.expect_code(0);
    assert!(out.json()["pick"].is_object(), "{}", out.stdout);
}

/// Runs a shell block as written in `env`'s folder with this build's `awf` first on PATH, then
/// `after` (e.g. ending what the block started in the background).
fn run_sh_then(env: &Env, text: &str, after: &str) -> common::Out {
    let bin_dir = env.path().join(".bin");
    std::fs::create_dir_all(&bin_dir).expect("create .bin");
    std::os::unix::fs::symlink(common::bin(), bin_dir.join("awf")).expect("link awf");
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let child = std::process::Command::new("sh")
        .args(["-ec", &format!("{text}{after}")])
        .current_dir(env.path())
        .env("PATH", path)
        .env("XDG_CONFIG_HOME", env.path().join(".xdg-config"))
        .env("XDG_STATE_HOME", env.path().join(".xdg-state"))
        .env_remove("AWF_RUNTIME")
        .env_remove("AWF_SERVE_TOKEN")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn sh");
    common::wait_with_timeout(child)
}

fn run_sh(env: &Env, text: &str) -> common::Out {
    run_sh_then(env, text, "")
}

#[test]
#[ignore = "needs curl and the fixed port 8700 free (the README's test command runs it)"]
fn the_serve_example_runs_as_written() {
    let sh = readme_section("Serving")
        .into_iter()
        .find(|b| b.lang == "sh" && b.text.contains("awf serve --listen"))
        .expect("the serve example");
    let env = Env::new();
    common::copy_dir(&root().join("scripts"), &env.path().join("scripts"));
    let out = run_sh_then(&env, &sh.text, "kill $!\nwait $! || true\n");
    out.expect_code(0);
    let ids: Vec<serde_json::Value> = out
        .stdout
        .replace("}{", "}\n{")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l} ({e})\n{}", out.stderr)))
        .collect();
    assert_eq!(ids.len(), 2, "{}", out.stdout);
    assert!(ids.iter().all(|v| v["run_id"].is_string()), "{}", out.stdout);
}
