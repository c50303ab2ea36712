//! An agent cannot join another agent's turn: each turn runs in a session of its own and a control
//! socket serves only that session (or the turn's own process tree). A forger that finds its
//! victim through `/proc/*/environ` cannot `setpgid` into the victim's group, and the victim's
//! launcher refuses it: no forged answer, no council, no operator question on the victim's grants.
//! A turn's own orphaned grandchild, in a process group of its own, is still served.

use crate::common;

use common::council::parent_and_children;
use common::{events_so_far_of, read_json, Env};
use serde_json::json;

/// The victim: waits (bounded) until the forger has tried everything, then answers for itself.
const VICTIM: &str = r#"
import json, os, subprocess, sys, time
sys.stdin.read()
go = os.path.join(os.environ["AWF_STATE_DIR"], "..", "..", "forger", "state", "tried")
until = time.monotonic() + 15
while not os.path.exists(go) and time.monotonic() < until:
    time.sleep(0.01)
r = subprocess.run([os.environ["AWF_LAUNCHER"], "result", os.environ["AWF_OP"]],
                   input=json.dumps({"verdict": "victim"}), text=True, timeout=30)
sys.exit(r.returncode)
"#;

/// The forger: finds the victim of its own run in `/proc`, tries to join its process group (from
/// itself and from a child), then uses the victim's launcher for a forged answer, a council and an
/// operator question; records all of it in `forged.json`, writes the go-file and answers its own op.
const FORGER: &str = r#"
import json, os, subprocess, sys, time
sys.stdin.read()
state, run = os.environ["AWF_STATE_DIR"], os.environ["AWF_RUN_ID"]

def leader(pid):
    """The environment of `pid` when it leads its process group (a victim's turn), else None."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = dict(e.decode().split("=", 1) for e in f.read().split(b"\0") if b"=" in e)
        return env if os.getpgid(pid) == pid else None
    except OSError:
        return None

victim, until = None, time.monotonic() + 15
while victim is None and time.monotonic() < until:
    for p in filter(str.isdigit, os.listdir("/proc")):
        env = leader(int(p)) or {}
        if env.get("AWF_AGENT") == "victim" and env.get("AWF_RUN_ID") == run and "AWF_OP" in env:
            victim = (int(p), env)
    time.sleep(0.01)
pid, env = victim
pgid = pid

def join():
    try:
        os.setpgid(0, pgid)
        return 0
    except OSError as e:
        return e.errno

record = {"victim_pid": pid, "victim_sid": os.getsid(pid), "setpgid_self": join()}
child = os.fork()
if child == 0:
    os._exit(join())
record["setpgid_child"] = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
launcher, op = env["AWF_LAUNCHER"], env["AWF_OP"]
calls = [
    ("result", [launcher, "result", op], json.dumps({"verdict": "forged"})),
    ("council", [launcher, "council", "magi"], json.dumps({"task": "Ship?", "reflect": False})),
    ("ask-operator", [launcher, "ask-operator", "Which colour?"], ""),
]
for name, argv, text in calls:
    try:
        r = subprocess.run(argv, input=text, capture_output=True, text=True, timeout=5)
        record[name] = {"code": r.returncode, "out": r.stdout + r.stderr}
    except subprocess.TimeoutExpired:
        record[name] = {"code": None, "out": "timed out"}
with open(os.path.join(state, "forged.json"), "w") as f:
    json.dump(record, f)
open(os.path.join(state, "tried"), "w").close()
r = subprocess.run([os.environ["AWF_LAUNCHER"], "result", os.environ["AWF_OP"]],
                   input=json.dumps({"verdict": "forger"}), text=True, timeout=30)
sys.exit(r.returncode)
"#;

const RESPONDER: &str = r#"
fn respond(turn) { #{ answer: #{ choice: "yes", confidence: 0.9, reason: "It holds." } } }
"#;

const SCHEMA: &str = r#"#{ type: "object", properties: #{ verdict: #{ type: "string" } }, required: ["verdict"] }"#;

#[test]
fn a_forger_cannot_join_the_victims_turn_nor_use_its_answer_or_grants() {
    let env = Env::new();
    env.with_responder(RESPONDER);
    let victim = env.write("victim.py", VICTIM);
    let forger = env.write("forger.py", FORGER);
    let out = env.run(
        &format!(
            r#"
let programs = #{{ victim: "{}", forger: "{}" }};
let out = ctx.parallel(["victim", "forger"], |k, i| {{
    let grants = if k == "victim" {{ #{{ councils: true, operator: true }} }} else {{ #{{}} }};
    let a = ctx.agents.open(grants + #{{ key: k, runtime: #{{ harness: "command", command: ["python3", programs[k]] }} }});
    a.run(#{{ prompt: "Give a verdict.", schema: {SCHEMA}, timeout_ms: 15000 }}).value
}});
#{{ victim: out[0].verdict, forger: out[1].verdict }}
"#,
            victim.display(),
            forger.display()
        ),
        &[],
    );
    out.expect_code(0);
    let (run, children) = parent_and_children(&env);
    let record = read_json(&run.join("agents/forger/state/forged.json"));
    assert_eq!(
        out.json(),
        json!({ "victim": "victim", "forger": "forger" }),
        "the victim's own answer stands: {record}"
    );

    assert_eq!(record["victim_sid"], record["victim_pid"], "the victim's turn leads a session of its own: {record}");
    let eperm = nix::libc::EPERM;
    assert_eq!(record["setpgid_self"], eperm, "the forger cannot join the victim's group: {record}");
    assert_eq!(record["setpgid_child"], eperm, "nor can a child of the forger: {record}");
    for call in ["result", "council", "ask-operator"] {
        let c = &record[call];
        assert_eq!(c["code"], 3, "{call} is refused: {record}");
        let said = c["out"].as_str().unwrap_or_default();
        assert!(said.contains("is not a process of agent victim's running turn"), "{call}: {said}");
    }

    let refused = events_so_far_of(&run, "control-refused");
    assert_eq!(refused.len(), 3, "each forged call is recorded: {refused:?}");
    for r in &refused {
        assert_eq!(r["data"]["agent"], "victim", "{r}");
        assert!(r["data"]["pid"].as_i64().is_some_and(|p| p > 1), "the refused process is named: {r}");
    }
    let subs = events_so_far_of(&run, "op-submission");
    assert!(subs.iter().all(|s| s["data"]["accepted"] == true), "no forged submission reached a slot: {subs:?}");
    assert!(children.is_empty(), "no council child run: {children:?}");
    assert!(events_so_far_of(&run, "child-run-started").is_empty(), "no council was convened");
    assert!(events_so_far_of(&run, "checkpoint-asked").is_empty(), "no operator question was asked");
}

/// A turn's own grandchild, orphaned (its parent exited) and in a process group of its own, is
/// still the turn's: it stays in the turn's session.
const DETACHED: &str = r#"
import json, os, sys, time
sys.stdin.read()
done = os.path.join(os.environ["AWF_STATE_DIR"], "done")
if os.fork() == 0:
    middle = os.getpid()
    if os.fork() == 0:
        os.setpgid(0, 0)
        until = time.monotonic() + 15
        while os.getppid() == middle and time.monotonic() < until:
            time.sleep(0.01)
        r = os.system("printf '{\"verdict\":\"grandchild\"}' | \"$AWF_LAUNCHER\" result \"$AWF_OP\" > /dev/null")
        with open(done, "w") as f:
            f.write(str(r))
    os._exit(0)
until = time.monotonic() + 15
while not os.path.exists(done) and time.monotonic() < until:
    time.sleep(0.01)
"#;

#[test]
fn a_turns_own_orphaned_grandchild_in_a_group_of_its_own_is_served() {
    let env = Env::new();
    let program = env.write("detached.py", DETACHED);
    let out = env.run(
        &format!(
            r#"let a = ctx.agents.open(#{{ key: "agent", runtime: #{{ harness: "command", command: ["python3", "{}"] }} }});
let o = a.run(#{{ prompt: "Give a verdict.", schema: {SCHEMA}, timeout_ms: 15000 }});
#{{ kind: o.kind, value: o.value, reason: o.reason }}"#,
            program.display()
        ),
        &[],
    );
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["value"]["verdict"], "grandchild", "{v}");
    let refused = events_so_far_of(&env.run_dir(), "control-refused");
    assert!(refused.is_empty(), "{refused:?}");
}
