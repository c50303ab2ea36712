//! The part of a prompt that tells an agent about its routes and the messages held for it.

use super::Route;
use crate::control::messenger::Held;
use crate::control::prompt::AnswerMode;

/// The routes an agent has and the messages it is shown, as prompt text; empty when it has none.
/// A program agent is told the launcher's commands, a model over HTTP the `wf_*` tools; a model
/// whose reply is the answer (structured mode) can send nothing in that turn, so it is shown the
/// messages held for it and offered no route (the caller logs why, once).
pub fn context_text(mode: AnswerMode, launcher: &str, routes: &[Route], me: &str, held: &[Held]) -> String {
    let tools = mode == AnswerMode::Tool;
    let commands = mode == AnswerMode::Launcher;
    let mut out = String::new();
    if !held.is_empty() {
        out.push_str("Messages for you:\n");
        for m in held {
            out.push_str(&format!(
                "- #{} from {}{}:\n{}\n",
                m.n,
                m.from,
                if m.asks { " (asks for a reply)" } else { "" },
                m.text
            ));
            if m.asks && tools {
                out.push_str(&format!("  Reply with the `wf_reply` tool (n = {}).\n", m.n));
            } else if m.asks && commands {
                out.push_str(&format!("  Reply with: {launcher} reply {} <<'WF_MSG'\n<your reply>\nWF_MSG\n", m.n));
            }
        }
        out.push('\n');
    }
    let can_send = tools || commands;
    if can_send && routes.iter().any(|r| r.peer_of(me).is_some()) {
        out.push_str("You may message other agents:\n");
        for r in routes {
            let Some(peer) = r.peer_of(me) else { continue };
            let left = match r.remaining() {
                Some(1) => "1 message left".into(),
                Some(n) => format!("{n} messages left"),
                None => "no message limit".into(),
            };
            out.push_str(&format!("- {peer}: {} ({left})\n", r.purpose));
        }
        if tools {
            out.push_str("Send with the `wf_send` tool; ask and wait for the reply with `wf_ask`; see held messages with `wf_inbox`.\n\n");
            return out;
        }
        out.push_str(&format!(
            "Send with: {launcher} send <agent> <<'WF_MSG'\n<text>\nWF_MSG\nAsk and wait for the reply with: {launcher} ask <agent> <<'WF_MSG'\n<question>\nWF_MSG\nSee held messages with: {launcher} inbox\n\n"
        ));
    }
    out
}
