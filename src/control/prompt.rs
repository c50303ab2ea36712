//! The protocol text that ends every turn's prompt, and the nudge sent when a turn ends unanswered.

/// Appends how to answer: the launcher command with the op id, and the schema.
pub fn with_answer_instructions(prompt: &str, launcher: &str, op_id: &str, schema_text: &str) -> String {
    format!(
        "{prompt}\n\nWhen the answer is ready, return it by running:\n\n{launcher} result {op_id} <<'WF_JSON'\n<json>\nWF_JSON\n\nThe JSON must match this schema:\n{schema_text}\n"
    )
}

pub const DEFAULT_NUDGE: &str = "You finished without reporting the requested result. Report it now.";

/// The check-in turn's text: the nudge, then the command again.
pub fn nudge_text(nudge: &str, launcher: &str, op_id: &str, schema_text: &str) -> String {
    with_answer_instructions(nudge, launcher, op_id, schema_text)
}
