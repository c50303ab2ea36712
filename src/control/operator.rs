//! `wf ask-operator` (the agent side of an operator checkpoint): the `ask-operator` command as the
//! dispatcher carries it out. The agent's turn waits, the run parked `waiting`, until the operator
//! answers (`awf runs answer`) or the operation's deadline passes; the answer is printed as JSON.
//! Each ask is keyed by the agent, its operation and a count, so a resumed run replays it. Only
//! an agent opened with `operator: true` may ask, and only it is told how ([`operator_text`]).

pub use super::calls::OperatorCall;
use super::messenger::MessageError;
use super::prompt::AnswerMode;
use super::protocol::{exit, Response};
use super::state::Control;
use serde_json::{json, Value};
use std::sync::atomic::Ordering;

/// Asks the operator for the agent's running operation.
pub(super) async fn dispatch(control: &Control, question: String, schema: Option<String>) -> Response {
    let frame = json!({ "cmd": "ask-operator" });
    let m = match control.messenger("ask-operator") {
        Ok(m) => m,
        Err(r) => return r,
    };
    if !m.may_ask_operator() {
        let why = format!("agent {} may not ask the operator: open it with operator: true", control.key());
        return control.refuse(why, frame);
    }
    let (Some(op), Some(op_id)) = (control.current(), control.current_id()) else {
        return control.refuse("ask-operator refused: this agent has no operation running".into(), frame);
    };
    if question.trim().is_empty() {
        return Response::new(exit::REFUSED, "ask-operator: the question must not be empty");
    }
    let schema = match schema.as_deref().map(serde_json::from_str::<Value>) {
        None => json!({ "type": "string" }),
        Some(Ok(s)) => s,
        Some(Err(e)) => return Response::new(exit::REFUSED, format!("ask-operator: --schema is not JSON: {e}")),
    };
    let n = op.asks.fetch_add(1, Ordering::SeqCst) + 1;
    let call = OperatorCall {
        key: format!("{}/{op_id}/ask-{n}", control.key()),
        agent: control.key().to_string(),
        question,
        schema,
        deadline: op.deadline,
        ended: op.ended.clone(),
    };
    match m.ask_operator(call).await {
        Ok(answer) => Response::new(exit::OK, answer.to_string()),
        Err(e @ MessageError::Refused(_)) => control.refuse(e.to_string(), frame),
        Err(MessageError::Failed(why)) => Response::new(exit::REFUSED, why),
    }
}

/// What an agent granted the operator is told about asking, as prompt text for its answer mode;
/// empty in `Reply` mode, where the model has no tools.
pub fn operator_text(mode: AnswerMode, launcher: &str) -> String {
    match mode {
        AnswerMode::Reply { .. } => String::new(),
        AnswerMode::Tool => "You may ask the operator (the person running this workflow) when you cannot go on \
             without their decision: call the `wf_ask_operator` tool with `question`, and `schema` (a JSON Schema) \
             when the answer should not be a string. It waits for their answer and returns it as JSON.\n\n"
            .to_string(),
        AnswerMode::Launcher => format!(
            "You may ask the operator (the person running this workflow) when you cannot go on without their \
             decision: {launcher} ask-operator \"<question>\" (add --schema '<JSON Schema>' when the answer should \
             not be a string). It waits for their answer and prints it as JSON.\n\n"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_says_how_to_ask_in_the_agents_terms() {
        let launcher = operator_text(AnswerMode::Launcher, "/x/wf");
        assert!(launcher.contains("/x/wf ask-operator \"<question>\""), "{launcher}");
        let tool = operator_text(AnswerMode::Tool, "/x/wf");
        assert!(tool.contains("`wf_ask_operator` tool") && !tool.contains("/x/wf"), "{tool}");
        assert!(operator_text(AnswerMode::Reply { object_only: false }, "/x/wf").is_empty());
    }
}
