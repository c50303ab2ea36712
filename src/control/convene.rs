//! Councils convened from inside a turn (`wf council`, the `wf_council` tool): what an agent may
//! convene (its grant), the `council` command as the dispatcher carries it out, what comes back,
//! and the prompt text that tells the agent how. The council itself runs above this layer, behind
//! [`Convener`].

pub use super::calls::{Call, Convened, Settled};
use super::messenger::MessageError;
use super::prompt::AnswerMode;
use super::protocol::{exit, Response};
use super::state::Control;
use crate::run::deadline::Deadline;
use crate::run::BoxFuture;
use serde_json::{json, Value};

/// The councils an agent may convene (agent spec `councils`): none unless the workflow says.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Grant {
    #[default]
    None,
    /// `councils: true`: every strategy in the catalog.
    All,
    /// `councils: ["magi", ...]`.
    Named(Vec<String>),
}

impl Grant {
    pub fn allows(&self, name: &str) -> bool {
        match self {
            Grant::None => false,
            Grant::All => true,
            Grant::Named(names) => names.iter().any(|n| n == name),
        }
    }
}

/// A council grant naming a strategy the catalog does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`councils` names \"{name}\", which is not in the catalog ({catalog})")]
pub struct NotInCatalog {
    pub name: String,
    /// The catalog's strategies, listed.
    pub catalog: String,
}

/// Runs councils for the agents of one run. Implemented by `council::child`.
pub trait Convener: Send + Sync {
    /// Refuses a grant naming a strategy the catalog does not have, naming the catalog.
    fn check_grant(&self, grant: &Grant) -> Result<(), NotInCatalog>;
    /// The granted strategies' catalog lines, for the prompt.
    fn catalog(&self, grant: &Grant) -> Vec<String>;
    /// Runs a council as a child run of this run, to its end.
    fn convene(&self, call: Call) -> BoxFuture<'static, Result<Convened, MessageError>>;
    /// Starts a council as a child run that outlives the calling operation (checked as `convene`
    /// checks): its receipt (`run_id`, `status`, `note`). Its agent is woken once with its output.
    fn convene_background(&self, call: Call) -> BoxFuture<'static, Result<Value, MessageError>>;
    /// Waits (until `deadline` at most) for background councils `agent` started: their outputs,
    /// which then wake it no more. An id that is not one of them is refused, named.
    fn join(
        &self,
        agent: &str,
        ids: Vec<String>,
        deadline: Option<Deadline>,
    ) -> BoxFuture<'static, Result<Vec<Settled>, MessageError>>;
    /// The background councils `agent` started: `run_id`, `strategy`, `status`, `spent`.
    fn list(&self, agent: &str) -> Vec<Value>;
    /// Those still running, as (run id, strategy): each turn of the agent's says so.
    fn active(&self, agent: &str) -> Vec<(String, String)>;
    /// Stops a background council `agent` started; refused for any other id, or a settled one.
    fn cancel(&self, agent: &str, id: &str) -> Result<Value, MessageError>;
}

/// What an agent with a grant is told about convening, as prompt text; empty without one.
pub fn council_text(mode: AnswerMode, launcher: &str, catalog: &[String]) -> String {
    if catalog.is_empty() || matches!(mode, AnswerMode::Reply { .. }) {
        return String::new();
    }
    let mut out =
        String::from("You may convene these councils (each runs several agents on a task and returns their output):\n");
    for line in catalog {
        out.push_str(line);
        out.push('\n');
    }
    if mode == AnswerMode::Tool {
        out.push_str(
            "Convene one with the `wf_council` tool: `name` and `params` (an object with at least `task`). \
             With `background: true` it answers at once with the council's run id, and you are woken once with its output.\n\n",
        );
    } else {
        out.push_str(&format!(
            "Convene one with: {launcher} council <name> <<'WF_JSON'\n{{\"task\": \"<the task>\"}}\nWF_JSON\nIt prints the council's output (add --json for its whole result).\n\
             Add --background to go on at once: it prints the council's run id, and you are woken once with its output; \
             {launcher} council --wait <run id>... waits for such councils and prints their outputs instead.\n\n"
        ));
    }
    out
}

/// What a turn is told of the background councils its agent started that still run; empty when none.
pub fn active_text(active: &[(String, String)]) -> String {
    if active.is_empty() {
        return String::new();
    }
    let list: Vec<String> = active.iter().map(|(id, name)| format!("{name} ({id})")).collect();
    format!(
        "Still active: the background councils you started: {}. They have not finished: do not report them complete; you will be woken with each one's output.\n\n",
        list.join(", ")
    )
}

/// `wf council --list`: the agent's background councils as a JSON list.
pub(super) fn list(control: &Control) -> Response {
    match control.messenger("council") {
        Ok(m) => Response::new(exit::OK, serde_json::to_string_pretty(&m.list_councils()).unwrap_or_default()),
        Err(r) => r,
    }
}

/// `wf council --cancel ID`: stops one of the agent's background councils; another id is
/// refused (exit `REJECTED`).
pub(super) fn cancel(control: &Control, id: String) -> Response {
    let frame = json!({ "cmd": "council-cancel", "id": id });
    let m = match control.messenger("council") {
        Ok(m) => m,
        Err(r) => return r,
    };
    match m.cancel_council(&id) {
        Ok(receipt) => Response::new(exit::OK, serde_json::to_string_pretty(&receipt).unwrap_or_default()),
        Err(e @ MessageError::Refused(_)) => Response { exit: exit::REJECTED, ..control.refuse(e.to_string(), frame) },
        Err(MessageError::Failed(why)) => Response::new(exit::REFUSED, why),
    }
}

/// Convenes a council for the agent's running operation; its spend is billed (by the convener) on
/// the operation's meter, as it was priced in the council's run. A council that ran but failed is exit `REFUSED` with its reason.
pub(super) async fn dispatch(control: &Control, name: String, params: &str, json: bool, background: bool) -> Response {
    let frame = json!({ "cmd": "council", "name": name, "background": background });
    let m = match control.messenger("council") {
        Ok(m) => m,
        Err(r) => return r,
    };
    let Some(op) = control.current() else {
        return control.refuse("council refused: this agent has no operation running".into(), frame);
    };
    let text = if params.trim().is_empty() { "{}" } else { params };
    let params: Value = match serde_json::from_str(text) {
        Ok(v @ Value::Object(_)) => v,
        Ok(other) => {
            let why = format!("council {name}: params must be a JSON object, got {other}");
            return Response::new(exit::REFUSED, why);
        }
        Err(e) => return Response::new(exit::REFUSED, format!("council {name}: params are not valid JSON: {e}")),
    };
    let op_id = control.current_id().unwrap_or_default();
    let call = super::convene::Call {
        agent: control.key().to_string(),
        op_id,
        name: name.clone(),
        params,
        // A background council outlives the operation: the run's deadline is its own.
        deadline: if background { None } else { op.deadline },
        spent: {
            let mut u = op.usage();
            u.add(&op.meter.total());
            u.add(&op.meter.convened());
            u
        },
        ended: op.ended.clone(),
        meter: op.meter.clone(),
    };
    if background {
        return match m.convene_background(call).await {
            Ok(receipt) => Response::new(exit::OK, receipt.to_string()),
            Err(e @ MessageError::Refused(_)) => control.refuse(e.to_string(), frame),
            Err(MessageError::Failed(why)) => Response::new(exit::REFUSED, why),
        };
    }
    match m.convene(call).await {
        Err(e @ MessageError::Refused(_)) => control.refuse(e.to_string(), frame),
        Err(MessageError::Failed(why)) => Response::new(exit::REFUSED, why),
        Ok(c) => {
            // As `result.json` reads as JSON: keys sorted.
            let doc = serde_json::to_value(&c.result).unwrap_or_default();
            let text = if json { serde_json::to_string_pretty(&doc).unwrap_or_default() } else { c.output };
            if c.ok {
                Response::new(exit::OK, text)
            } else if json {
                Response::new(exit::REFUSED, text)
            } else {
                Response::new(exit::REFUSED, format!("council {name} failed (run {}): {text}", c.run_id))
            }
        }
    }
}

/// `wf council --wait ID...`: waits, within the running operation's deadline, for background
/// councils this agent started; prints their outputs as a JSON list (`run_id`, `strategy`,
/// `status`, `ok`, `output`), exit `REFUSED` when one did not succeed. An id that is not one of
/// them is refused with exit `REJECTED`, naming it.
pub(super) async fn wait(control: &Control, ids: Vec<String>) -> Response {
    let frame = json!({ "cmd": "council-wait", "ids": ids });
    let m = match control.messenger("council") {
        Ok(m) => m,
        Err(r) => return r,
    };
    let Some(op) = control.current() else {
        return control.refuse("council --wait refused: this agent has no operation running".into(), frame);
    };
    match m.join_councils(ids, op.deadline).await {
        Ok(outputs) => {
            let ok = outputs.iter().all(|o| o.ok);
            let text = serde_json::to_string_pretty(&outputs).unwrap_or_default();
            Response::new(if ok { exit::OK } else { exit::REFUSED }, text)
        }
        Err(e @ MessageError::Refused(_)) => Response { exit: exit::REJECTED, ..control.refuse(e.to_string(), frame) },
        Err(MessageError::Failed(why)) => Response::new(exit::REFUSED, why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_allows_what_it_names() {
        assert!(!Grant::None.allows("magi"));
        assert!(Grant::All.allows("magi"));
        assert!(Grant::Named(vec!["pair".into()]).allows("pair"));
        assert!(!Grant::Named(vec!["pair".into()]).allows("magi"));
    }

    #[test]
    fn the_prompt_says_how_to_convene() {
        let lines = vec!["- magi(task*) — a decision".to_string()];
        let text = council_text(AnswerMode::Launcher, "/x/wf", &lines);
        assert!(text.contains("/x/wf council <name>"), "{text}");
        assert!(council_text(AnswerMode::Tool, "", &lines).contains("wf_council"));
        assert!(council_text(AnswerMode::Launcher, "/x/wf", &[]).is_empty());
    }
}
