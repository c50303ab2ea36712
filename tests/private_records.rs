//! Private records: under umask 022, after a run with a command agent and an HTTP agent, nothing
//! awf created under `.awf/` (run folder, JSONL streams, documents, op logs, captures, HTTP history,
//! control folders) is open to the group or to other users.

use crate::common;
use crate::common::fake_model;

use common::Env;
use fake_model::{FakeModel, Reply};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Every path under `dir` (itself included) with its mode, symlinks left out (their mode means
/// nothing; what they point at is checked where it lies).
fn modes(dir: &Path, out: &mut Vec<(PathBuf, u32)>) {
    let meta = std::fs::symlink_metadata(dir).expect("stat");
    if meta.file_type().is_symlink() {
        return;
    }
    out.push((dir.to_path_buf(), meta.permissions().mode() & 0o777));
    if meta.is_dir() {
        for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
            modes(&entry.path(), out);
        }
    }
}

#[test]
fn every_record_is_private_to_the_operator_under_umask_022() {
    let server = FakeModel::start(vec![Reply::result(json!({ "verdict": "ok" }))]);
    let env = Env::new();
    env.write(
        "awf.toml",
        &format!(
            "[runtimes.http]\nharness = \"openai\"\nmodel = \"gpt-5-mini\"\nbase_url = \"{}/v1\"\n",
            server.base()
        ),
    );
    let script = r#"
let c = ctx.agents.open(#{ key: "cmd", runtime: #{ harness: "command", command: ["sh", "-c", "echo out; echo err >&2; echo '\"fine\"' | \"$AWF_LAUNCHER\" result \"$AWF_OP\""] } });
let h = ctx.agents.open(#{ key: "http", runtime: "http" });
ctx.stage("both", #{ result: #{ type: "array" } }, || {
    [c.ask("go"), h.ask("judge", #{ type: "object", properties: #{ verdict: #{ type: "string" } }, required: ["verdict"] }).verdict]
})
"#;
    env.write("wf.rhai", script);
    let out = common::awf_after(env.path(), "umask 022", &["script", "run", "wf.rhai"]);
    out.expect_code(0);
    assert_eq!(out.json(), json!(["fine", "ok"]));
    let run = env.run_dir();
    for expected in ["agents/cmd/ops/cmd-1.stdout", "agents/cmd/ops/cmd-1.jsonl", "agents/http/history.json"] {
        assert!(run.join(expected).is_file(), "{expected} was written");
    }
    let mut all = Vec::new();
    modes(&env.path().join(".awf"), &mut all);
    let open: Vec<String> =
        all.iter().filter(|(_, m)| m & 0o077 != 0).map(|(p, m)| format!("{:o} {}", m, p.display())).collect();
    assert!(open.is_empty(), "open to group or others:\n{}", open.join("\n"));
    assert!(all.len() > 15, "the walk saw the records: {all:?}");
}
