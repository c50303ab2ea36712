//! The configuration as users meet it: `awf init` writes every key (each runtime variant loads,
//! every commented setting is valid), README's reference table lists exactly the keys the
//! configuration types take, and a configuration problem met as an agent opens exits 2.

use crate::common;
use common::Env;
use serde::de::{self, Visitor};
use std::collections::BTreeSet;

/// The field names a serde struct accepts (what `deny_unknown_fields` checks against).
fn fields<T: de::DeserializeOwned>() -> BTreeSet<String> {
    struct Probe<'a>(&'a mut Vec<&'static str>);
    impl<'de> de::Deserializer<'de> for Probe<'_> {
        type Error = de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("probe"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            self.0.extend(fields);
            Err(de::Error::custom("probe"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option
            unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
        }
    }
    let mut found = Vec::new();
    let _ = T::deserialize(Probe(&mut found));
    found.into_iter().map(String::from).collect()
}

/// (section, key) for every row of README's configuration table.
fn readme_keys() -> BTreeSet<(String, String)> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).expect("README");
    let start = readme.find("| section | key | type | default | what it does |").expect("the configuration table");
    readme[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            (cells[1].trim_matches('`').to_string(), cells[2].trim_matches('`').to_string())
        })
        .collect()
}

#[test]
fn the_readme_table_lists_exactly_the_keys_the_configuration_takes() {
    use awf::config::{ClusterConfig, Config, HarnessConfig, LimitsConfig, RuntimeConfig, TelemetryConfig};
    let tables = ["runtimes", "harnesses", "limits", "prices", "sandboxes", "telemetry", "cluster", "decisions"];
    let mut expected: BTreeSet<(String, String)> = BTreeSet::new();
    for f in fields::<Config>().into_iter().filter(|f| !tables.contains(&f.as_str())) {
        expected.insert(("(top)".into(), f));
    }
    for (section, keys) in [
        ("[runtimes.NAME]", fields::<RuntimeConfig>()),
        ("[harnesses.NAME]", fields::<HarnessConfig>()),
        ("[limits]", fields::<LimitsConfig>()),
        ("[prices.MODEL]", fields::<awf::accounting::Price>()),
        ("[sandboxes.NAME]", fields::<awf::sandbox::Policy>()),
        ("[telemetry]", fields::<TelemetryConfig>()),
        ("[cluster]", fields::<ClusterConfig>()),
        ("[decisions]", awf::config::DecisionsConfig::KEYS.iter().map(|k| k.to_string()).collect()),
    ] {
        assert!(!keys.is_empty(), "{section}: no fields found");
        expected.extend(keys.into_iter().map(|k| (section.to_string(), k)));
    }
    assert_eq!(readme_keys(), expected, "README's configuration table and the configuration types differ");
}

#[test]
fn init_writes_every_key_and_each_runtime_loads() {
    let env = Env::new();
    env.awf(&["init"]).expect_code(0).stdout_has("runtime: fake");
    let text = std::fs::read_to_string(env.path().join("awf.toml")).expect("awf.toml");
    for (section, key) in readme_keys() {
        assert!(text.contains(&format!("{key} = ")), "awf init's file lacks {section} {key}");
    }
    // The offline example runs as written.
    env.awf(&["script", "run", "scripts/hello.rhai"]).expect_code(0);
    env.awf(&["init"]).expect_code(2).stderr_has("already exists; awf init does not overwrite files");

    // Every commented setting, uncommented, is a valid configuration.
    let all: String =
        text.lines()
            .map(|l| match l.strip_prefix("# ") {
                Some(rest)
                    if rest.starts_with('[')
                        || rest.split(" = ").next().is_some_and(|k| {
                            !k.is_empty() && k.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                        }) =>
                {
                    rest
                }
                _ => l,
            })
            .collect::<Vec<_>>()
            .join("\n");
    assert!(all.contains("\n[sandboxes.default]\n") && all.contains("\nbudget_usd = 5.0"), "{all}");
    let every = Env::new();
    every.write("awf.toml", &all);
    let out = every.awf(&["doctor", "--json"]);
    assert!(!out.stderr.contains("awf.toml"), "the file with every setting on does not load: {}", out.stderr);

    for harness in ["claude", "codex", "pi", "openai", "anthropic"] {
        let env = Env::new();
        env.awf(&["init", "--runtime", harness]).expect_code(0);
        let text = std::fs::read_to_string(env.path().join("awf.toml")).expect("awf.toml");
        assert!(text.contains(&format!("default_runtime = \"{harness}\"\n")), "{text}");
        assert!(text.contains(&format!("\n[runtimes.{harness}]\nharness = \"{harness}\"\n")), "{text}");
        let out = env.awf(&["doctor", "--json"]);
        let report: serde_json::Value =
            serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{harness}: {e}: {out:?}"));
        assert!(report.to_string().contains(&format!("runtime: {harness}")), "{harness}: doctor checks it: {report}");
    }
    Env::new().awf(&["init", "--runtime", "gpt"]).expect_code(2).stderr_has("unknown harness `gpt`");
}

#[test]
fn a_configuration_problem_met_as_an_agent_opens_exits_2() {
    let env = Env::new();
    let out = env.run(r#"ctx.agents.open(#{ key: "a", runtime: "nope" }).ask("hi")"#, &[]);
    out.expect_code(2).stderr_has("nope");
    env.write(
        "awf.toml",
        "[runtimes.remote]\nharness = \"openai\"\nmodel = \"m\"\napi_key_env = \"AWF_TEST_NO_SUCH_KEY\"\n",
    );
    let out = env.run(r#"ctx.agents.open(#{ key: "a", runtime: "remote" }).ask("hi")"#, &[]);
    out.expect_code(2).stderr_has("AWF_TEST_NO_SUCH_KEY");
    // A workflow that handles the problem is not failed by it.
    let out = env.run(
        r#"let r = "opened"; try { ctx.agents.open(#{ key: "a", runtime: "nope" }); } catch { r = "fell back"; } r"#,
        &[],
    );
    out.expect_code(0).stdout_has("fell back");
    // Through a function, a parallel branch and a rethrow, it is still the configuration's.
    let out = env.run(
        r#"fn open_it() { ctx.agents.open(#{ key: "a", runtime: "nope" }) }
        ctx.parallel([1, 2], |n| { try { open_it() } catch (e) { throw e } })"#,
        &[],
    );
    out.expect_code(2).stderr_has("nope");
    // Caught, then another failure: that one decides.
    let out = env.run(r#"try { ctx.agents.open(#{ key: "a", runtime: "nope" }); } catch { throw "mine" }"#, &[]);
    out.expect_code(1).stderr_has("mine");
    // Any other failure still exits 1.
    env.run(r#"throw "plain failure""#, &[]).expect_code(1);
}

#[test]
fn doctor_checks_the_configured_cli_runtimes_and_programs() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let env = Env::new();
    env.write(
        "awf.toml",
        &format!(
            "[harnesses.codex]\ncommand = \"awf-test-no-such-codex\"\n\n[runtimes.c]\nharness = \"codex\"\n\n\
             [runtimes.p]\nharness = \"pi\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\n"
        ),
    );
    let out = env.awf(&["doctor", "--json"]);
    out.expect_code(1);
    let checks: Vec<serde_json::Value> = serde_json::from_str(&out.stdout).expect("JSON");
    let check = |name: &str| {
        checks.iter().find(|c| c["name"] == name).cloned().unwrap_or_else(|| panic!("no {name}: {checks:?}"))
    };
    let codex = check("cli: codex");
    assert_eq!(codex["ok"], false);
    assert!(codex["detail"].as_str().unwrap_or("").contains("`awf-test-no-such-codex` not found on PATH"), "{codex}");
    let c = check("runtime: c");
    assert_eq!(c["ok"], false, "{c}");
    assert!(c["detail"].as_str().unwrap_or("").contains("not usable"), "{c}");
    let p = check("runtime: p");
    if check("cli: pi")["ok"] == true {
        assert_eq!(p["ok"], false, "{p}");
        assert!(p["detail"].as_str().unwrap_or("").contains("server unreachable"), "{p}");
    }
}

/// tmux (for pane agents) and the `[decisions]` provider, resolved as a decision resolves it.
#[test]
fn doctor_checks_tmux_and_the_decision_model() {
    let env = Env::new();
    let doctor = |env: &Env, path: Option<&str>| {
        let mut cmd = common::command(env.path(), &["doctor", "--json"]);
        if let Some(p) = path {
            cmd.env("PATH", p);
        }
        let out = cmd.output().expect("awf doctor");
        let checks: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("JSON");
        move |name: &str| {
            checks.iter().find(|c| c["name"] == name).cloned().unwrap_or_else(|| panic!("no {name}: {checks:?}"))
        }
    };
    env.write("awf.toml", "[decisions]\nruntime = \"nope\"\n");
    let check = doctor(&env, None);
    let tmux = check("panes: tmux");
    assert_eq!(tmux["ok"], true, "tmux is installed where the tests run: {tmux}");
    assert!(tmux["detail"].as_str().unwrap_or("").starts_with("tmux "), "{tmux}");
    let decisions = check("decisions");
    assert_eq!(decisions["ok"], false, "{decisions}");
    assert!(decisions["detail"].as_str().unwrap_or("").contains("unknown runtime alias `nope`"), "{decisions}");

    env.write("awf.toml", "[decisions]\nharness = \"fake\"\nresponder = \"r.rhai\"\n");
    let check = doctor(&env, Some("/nonexistent"));
    assert_eq!(check("decisions")["ok"], true);
    let tmux = check("panes: tmux");
    assert_eq!(tmux["ok"], false);
    assert!(tmux["detail"].as_str().unwrap_or("").contains("tmux is not on PATH"), "{tmux}");
}

#[test]
fn a_model_with_no_price_is_warned_about_once_and_counted_in_the_summary() {
    let env = Env::new();
    env.write(
        "agent.sh",
        "cat > /dev/null\n\"$AWF_LAUNCHER\" usage --input 100 --output 20 > /dev/null || exit 9\necho '\"ok\"' | \"$AWF_LAUNCHER\" result \"$AWF_OP\" > /dev/null\n",
    );
    env.write(
        "awf.toml",
        "default_runtime = \"p\"\n[runtimes.p]\nharness = \"command\"\nmodel = \"mystery-model\"\ncommand = [\"sh\", \"agent.sh\"]\n",
    );
    let out = env.run(r#"ctx.parallel(["a", "b", "c"], |k, i| ctx.agents.open(#{ key: k }).ask("go"))"#, &[]);
    out.expect_code(0);
    assert_eq!(out.stderr.matches("model `mystery-model` (command) has no price").count(), 1, "{}", out.stderr);
    out.stderr_has("360 tokens · 3 operations unpriced (mystery-model: counted at $0");
    assert!(!out.stderr.contains("$0.0000"), "no dollar figure when nothing is priced: {}", out.stderr);
    assert_eq!(env.events_of("model-unpriced").len(), 1);
    assert_eq!(env.result()["accounting"]["unpriced"], serde_json::json!({ "mystery-model": 3 }));
    // A priced model says nothing.
    env.write(
        "awf.toml",
        "default_runtime = \"p\"\n[runtimes.p]\nharness = \"command\"\nmodel = \"mystery-model\"\ncommand = [\"sh\", \"agent.sh\"]\n[prices.\"mystery-model\"]\ninput = 1.0\noutput = 2.0\n",
    );
    let out = env.run(r#"ctx.agents.open(#{ key: "a" }).ask("go")"#, &[]);
    out.expect_code(0);
    assert!(!out.stderr.contains("unpriced") && !out.stderr.contains("no price"), "{}", out.stderr);
}
