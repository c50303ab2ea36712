//! How an agent is told to answer, in the terms of its harness (`AnswerMode`): the instructions
//! that end every turn's prompt, the nudge sent when a turn ends unanswered, and what a rejection
//! asks the agent to do next.

use serde_json::Value;

/// How an agent's answer reaches its result slot. The harness's session reports it
/// (`Session::answer_mode`), and every text below is written for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AnswerMode {
    /// A program runs the launcher: `<launcher> result <op> <<'WF_JSON'` (command and CLI agents).
    #[default]
    Launcher,
    /// The model calls the `wf_result` tool (HTTP tools mode); an answer whose schema is not an
    /// object goes in the tool's `value` argument, since tool arguments are an object.
    Tool,
    /// The model's reply is the answer (HTTP structured mode). `object_only`: the server takes
    /// only an object at the root of a schema, so an answer that is not an object is replied as
    /// `{"value": <answer>}`.
    Reply { object_only: bool },
}

/// Whether an answer to `schema` travels as `{"value": <answer>}` through the `wf_result` tool:
/// when the schema does not describe an object.
pub fn tool_wraps(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) != Some("object")
}

/// What the answer instructions are written for.
pub struct Answering<'a> {
    pub mode: AnswerMode,
    /// The launcher's path (used in `Launcher` mode).
    pub launcher: &'a str,
    pub op_id: &'a str,
}

/// Appends how to answer, and the schema the answer must match.
pub fn with_answer_instructions(prompt: &str, how: &Answering<'_>, schema: &Value, schema_text: &str) -> String {
    let (launcher, op_id) = (how.launcher, how.op_id);
    match how.mode {
        AnswerMode::Launcher => format!(
            "{prompt}\n\nWhen the answer is ready, return it by running:\n\n{launcher} result {op_id} <<'WF_JSON'\n<json>\nWF_JSON\n\nThe JSON must match this schema:\n{schema_text}\n"
        ),
        AnswerMode::Tool if tool_wraps(schema) => format!(
            "{prompt}\n\nWhen the answer is ready, call the `wf_result` tool with the answer as its `value` argument: {{\"value\": <answer>}}. The answer must match this schema:\n{schema_text}\n"
        ),
        AnswerMode::Tool => format!(
            "{prompt}\n\nWhen the answer is ready, call the `wf_result` tool with the answer as its arguments. They must match this schema:\n{schema_text}\n"
        ),
        AnswerMode::Reply { object_only: true } if tool_wraps(schema) => format!(
            "{prompt}\n\nReply with only a JSON object {{\"value\": <answer>}}, nothing before or after it. The answer must match this schema:\n{schema_text}\n"
        ),
        AnswerMode::Reply { .. } => format!(
            "{prompt}\n\nReply with only the JSON answer, nothing before or after it. It must match this schema:\n{schema_text}\n"
        ),
    }
}

pub const DEFAULT_NUDGE: &str = "You finished without reporting the requested result. Report it now.";

/// The check-in turn's text: the nudge, then how to answer again.
pub fn nudge_text(nudge: &str, how: &Answering<'_>, schema: &Value, schema_text: &str) -> String {
    with_answer_instructions(nudge, how, schema, schema_text)
}

/// The last line of a rejection: what to do next, in the agent's terms.
pub fn fix_hint(mode: AnswerMode) -> &'static str {
    match mode {
        AnswerMode::Launcher => "Fix the JSON and run the command again.",
        AnswerMode::Tool => "Fix the answer and call the `wf_result` tool again.",
        AnswerMode::Reply { .. } => "Reply again with only the corrected JSON.",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shown(mode: AnswerMode, schema: &Value) -> String {
        let how = Answering { mode, launcher: "/run/a/wf", op_id: "a#1" };
        with_answer_instructions("Rate it.", &how, schema, &schema.to_string())
    }

    #[test]
    fn each_mode_names_only_its_own_way_to_answer() {
        let object = json!({ "type": "object" });
        let launcher = shown(AnswerMode::Launcher, &object);
        assert!(launcher.contains("/run/a/wf result a#1 <<'WF_JSON'"), "{launcher}");
        for mode in
            [AnswerMode::Tool, AnswerMode::Reply { object_only: false }, AnswerMode::Reply { object_only: true }]
        {
            let text = shown(mode, &object);
            assert!(!text.contains("WF_JSON") && !text.contains("/run/a/wf"), "{mode:?}: {text}");
            assert!(!fix_hint(mode).contains("command"), "{mode:?}");
        }
        assert!(shown(AnswerMode::Tool, &object).contains("call the `wf_result` tool with the answer as its arguments"));
        assert!(shown(AnswerMode::Reply { object_only: true }, &object).contains("Reply with only the JSON answer"));
    }

    #[test]
    fn a_wrapped_answer_is_described_as_the_wrapper_it_travels_in() {
        let string = json!({ "type": "string" });
        assert!(shown(AnswerMode::Tool, &string).contains("as its `value` argument: {\"value\": <answer>}"));
        assert!(shown(AnswerMode::Reply { object_only: true }, &string)
            .contains("only a JSON object {\"value\": <answer>}"));
        assert!(!shown(AnswerMode::Reply { object_only: false }, &string).contains("value"));
    }
}
