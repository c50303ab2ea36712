//! `ctx.worktrees.merge(list, opts)` and `a.worktree`: agents' worktree branches brought back,
//! the report as data; an agent's worktree as a map.

use super::doc::def;
use super::{script_err, AgentHandle, Ctx, Fields, RResult, ScriptRun};
use crate::script::convert::to_dynamic;
use rhai::{Array, Dynamic, Engine, Map, NativeCallContext};
use serde_json::json;
use std::sync::Arc;

/// `ctx.worktrees`.
#[derive(Clone)]
pub struct Worktrees(pub Arc<ScriptRun>);

pub fn register(engine: &mut Engine) {
    engine.register_type_with_name::<Worktrees>("Worktrees");
    def(engine, "get worktrees(ctx)", "Agents' git worktrees: `ctx.worktrees.merge(list, opts)`.", |c: &mut Ctx| {
        Worktrees(c.0.clone())
    });
    def(engine, "merge(worktrees, list)", MERGE, |nc: NativeCallContext, w: &mut Worktrees, list: Array| {
        merge(&nc, w, list, Map::new())
    });
    def(
        engine,
        "merge(worktrees, list, options)",
        MERGE,
        |nc: NativeCallContext, w: &mut Worktrees, list: Array, options: Map| merge(&nc, w, list, options),
    );
    for form in ["get worktree(agent)", "worktree(agent)"] {
        def(engine, form, WORKTREE, |h: &mut AgentHandle| {
            match h.host.agents.worktrees.describe(&h.host.run, &h.agent.key) {
                Some(v) => to_dynamic(&v),
                None => Dynamic::UNIT,
            }
        });
    }
}

const WORKTREE: &str = "The agent's git worktree (an agent opened with `isolation: \"worktree\"`):
`#{ path, branch, base, head, changed, state }` (`changed`: the paths that differ from `base`,
uncommitted ones too while it is open; `state`: `open`, `kept` or `removed`; and `reason` when awf
kept it because it could not commit all the agent left), or `()`.";
const MERGE: &str = "Merges worktree branches, in the given order, into the run's checkout (its branch), or into
the branch `options.into`. `list`: agent handles, agent keys or branch names. A branch that
conflicts is left out whole (the checkout is never half-merged) and reported; the script decides
what next. Returns `#{ into, merged: [#{ branch, commit, fast_forward }], skipped: [#{ branch,
reason }], conflicts: [#{ branch, paths }], before, head }`. Refused, merging nothing: an unknown
branch, or uncommitted changes in the checkout it merges into.";

fn merge(nc: &NativeCallContext, w: &mut Worktrees, list: Array, options: Map) -> RResult<Dynamic> {
    let fail = |e: String| script_err(nc, format!("ctx.worktrees.merge: {e}"));
    let f = Fields { map: &options, what: "merge options" };
    f.check_known(&["into"]).map_err(|e| fail(e.to_string()))?;
    let into = f.string("into").map_err(|e| fail(e.to_string()))?;
    let book = &w.0.agents.worktrees;
    let mut branches = Vec::new();
    for item in list {
        let branch = if let Some(h) = item.clone().try_cast::<AgentHandle>() {
            book.branch_of(&h.agent.key).ok_or_else(|| {
                fail(format!("agent {} has no worktree (open it with isolation: \"worktree\")", h.agent.key))
            })?
        } else if item.is_string() {
            let s = item.to_string();
            book.branch_of(&s).unwrap_or(s)
        } else {
            return Err(fail(format!(
                "the list holds agent handles, agent keys or branch names; got {}",
                item.type_name()
            )));
        };
        branches.push(branch);
    }
    let run = &w.0.run;
    let report = book.merge(run, &branches, into.as_deref()).map_err(|e| fail(e.to_string()))?;
    let conflicts: Vec<String> =
        report.conflicts.iter().map(|c| format!("{} ({})", c.branch, c.paths.join(", "))).collect();
    let text = format!(
        "worktrees: {} merged into {}, {} skipped, {} in conflict{}",
        report.merged.len(),
        report.into,
        report.skipped.len(),
        report.conflicts.len(),
        if conflicts.is_empty() { String::new() } else { format!(": {}", conflicts.join("; ")) }
    );
    let level = if report.conflicts.is_empty() { "info" } else { "warn" };
    let value = json!(report);
    run.log(level, &text, &value);
    Ok(to_dynamic(&value))
}
