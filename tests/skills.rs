//! Agent spec `skills`: each skill folder is copied into a claude or pi agent's home, where its CLI
//! loads it, and recorded in `agents/<slug>/skills.json`; the agent sees those skills and none of
//! the operator's (sandboxed or not). The pinned CLIs run against the fake model server, and the
//! test reads what the CLI sent the model. A missing folder, a folder without SKILL.md and a
//! harness without skills are refused as the agent opens (exit 2).

use crate::common;
use crate::common::fake_model;

use common::cli::{awf_as, installed, rerun_in_netns, setup};
use common::{read_json, Env};
use fake_model::{FakeModel, Reply};
use serde_json::json;

const SKILL: &str =
    "---\nname: zebra-facts\ndescription: Knows the stripes of zebras ZEBRA-SKILL-7731.\n---\n\nCount the stripes.\n";

/// Skills in the operator's own places, which no agent may see.
fn operator_skills(home: &std::path::Path) {
    for (dir, mark) in [
        (".claude/skills/operator-only", "OPERATOR-SKILL-1"),
        (".agents/skills/operator-agents", "OPERATOR-SKILL-2"),
        (".pi/agent/skills/operator-pi", "OPERATOR-SKILL-3"),
    ] {
        let d = home.join(dir);
        std::fs::create_dir_all(&d).expect("mkdir");
        let name = d.file_name().expect("name").to_string_lossy().into_owned();
        std::fs::write(d.join("SKILL.md"), format!("---\nname: {name}\ndescription: {mark}.\n---\nBody\n"))
            .expect("write");
    }
}

fn loads_its_skills(cli: &str, test: &str, sandboxed: bool) {
    if !installed(cli, test) || rerun_in_netns(test) {
        return;
    }
    let server = FakeModel::start_cli(vec![Reply::answer(json!("done"))]);
    let extra = if sandboxed { "[sandboxes.cli]\nnetwork = \"host\"\n" } else { "" };
    let env = setup(cli, &server.base(), extra);
    // The operator's home lies outside the workspace and /tmp, as a sandbox requires.
    let operator = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("the operator's home");
    operator_skills(operator.path());
    env.write("skills/zebra-facts/SKILL.md", SKILL);
    env.write("skills/zebra-facts/scripts/count.sh", "echo 42\n");
    let sandbox = if sandboxed { r#", sandbox: "cli""# } else { "" };
    env.write(
        "wf.rhai",
        &format!(
            r#"ctx.agents.open(#{{ key: "a", skills: ["skills/zebra-facts"]{sandbox} }}).ask("Count the stripes.")"#
        ),
    );
    let out = awf_as(&env, &["script", "run", "wf.rhai"], operator.path());
    out.expect_code(0);
    let first = server.bodies().into_iter().next().expect("a request").to_string();
    assert!(first.contains("zebra-facts") && first.contains("ZEBRA-SKILL-7731"), "{cli}: the skill is listed: {first}");
    for mark in ["OPERATOR-SKILL-1", "OPERATOR-SKILL-2", "OPERATOR-SKILL-3"] {
        assert!(!first.contains(mark), "{cli}: the operator's skill {mark} is not seen");
    }
    let home = env.run_dir().join("agents/a/home");
    assert!(home.join("skills/zebra-facts/scripts/count.sh").is_file(), "{cli}: the whole folder is copied");
    let record = read_json(&env.run_dir().join("agents/a/skills.json"));
    assert_eq!(record[0]["name"], "zebra-facts", "{record}");
    assert_eq!(record[0]["source"], env.path().join("skills/zebra-facts").display().to_string());
    assert_eq!(record[0]["sha256"].as_str().map(str::len), Some(64), "{record}");
}

#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn claude_loads_the_skills_it_is_given() {
    loads_its_skills("claude", "claude_loads_the_skills_it_is_given", false);
}

#[test]
#[ignore = "needs the pinned agent CLIs (.ci/setup installs them; the README's test command runs these)"]
fn pi_loads_the_skills_it_is_given() {
    loads_its_skills("pi", "pi_loads_the_skills_it_is_given", false);
}

#[test]
#[ignore = "needs the pinned agent CLIs and bubblewrap (.ci/setup installs them)"]
fn claude_sandboxed_sees_only_its_skills() {
    loads_its_skills("claude", "claude_sandboxed_sees_only_its_skills", true);
}

#[test]
#[ignore = "needs the pinned agent CLIs and bubblewrap (.ci/setup installs them)"]
fn pi_sandboxed_sees_only_its_skills() {
    loads_its_skills("pi", "pi_sandboxed_sees_only_its_skills", true);
}

/// A folder with a claude default runtime (never started: the refusals come first).
fn claude_folder() -> Env {
    let env = Env::new();
    env.write(
        "awf.toml",
        "default_runtime = \"m\"\n[runtimes.m]\nharness = \"claude\"\nbase_url = \"http://127.0.0.1:9\"\n\
         [runtimes.scripted]\nharness = \"fake\"\nmodel = \"fake\"\n",
    );
    env
}

#[test]
fn a_missing_skill_folder_is_refused_naming_it() {
    let env = claude_folder();
    let out = env.run(r#"ctx.agents.open(#{ key: "a", skills: ["skills/nope"] })"#, &[]);
    out.expect_code(2);
    let missing = env.path().join("skills/nope");
    out.stderr_has(&format!("agent a: skill folder {} does not exist", missing.display()));
    assert!(!env.run_dir().join("agents/a").exists(), "nothing opened");
}

#[test]
fn a_folder_without_skill_md_is_refused() {
    let env = claude_folder();
    env.write("skills/empty/README.md", "not a skill");
    let out = env.run(r#"ctx.agents.open(#{ key: "a", skills: ["skills/empty"] })"#, &[]);
    out.expect_code(2);
    out.stderr_has("skills/empty has no SKILL.md");
}

#[test]
fn a_harness_without_skills_refuses_them() {
    let env = claude_folder();
    env.write("skills/zebra-facts/SKILL.md", SKILL);
    let out = env.run(r#"ctx.agents.open(#{ key: "a", runtime: "scripted", skills: ["skills/zebra-facts"] })"#, &[]);
    out.expect_code(2);
    out.stderr_has("agent a: harness `fake` cannot be given skills");
    let out = env.run(r#"ctx.agents.open(#{ key: "a", skills: "skills/zebra-facts" })"#, &[]);
    out.expect_code(1);
    out.stderr_has("`skills` must be a list of skill folder paths, got string");
}
