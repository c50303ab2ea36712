//! The one control dispatcher: an agent's control state (its open operations, where its events go,
//! how it messages) and the handling of a `Command` against it. The socket server and the HTTP
//! harnesses' `wf_*` tools both call [`dispatch`], so a command gets the same `Response` and leaves
//! the same events (`op-submission`, `op-waiting`, `control-refused`) whichever way it came.

use super::messenger::MessageError;
use super::protocol::{exit, Command, Response};
use super::slot::Submission;
use super::state::{lock, DEFAULT_WAIT};
pub use super::state::{Control, EventSink, OpControl};
use crate::run::Event;
use serde_json::json;
use std::time::{Duration, Instant};

/// Carries out `cmd` for the agent whose control state is `control`: the answer it gets, and the
/// events it leaves. An accepted answer is in the records before this returns.
pub async fn dispatch(control: &Control, cmd: Command) -> Response {
    match cmd {
        Command::Result { op, json } => {
            let o = match control.op(&op) {
                Ok(o) => o,
                Err(r) => return r,
            };
            let sub = o.slot.submit_text_recorded(&json).await;
            let verdict = match &sub {
                Submission::Accepted => "accepted",
                Submission::Rejected(_) => "rejected",
                Submission::Closed(_) => "closed",
            };
            control.event(&Event::OpSubmission {
                agent: &control.key,
                op_id: &op,
                accepted: sub == Submission::Accepted,
                verdict,
                bytes: json.len(),
            });
            if sub == Submission::Accepted {
                let _ = o.answered_at.set(Instant::now());
                o.answered.notify_waiters();
                o.answered.notify_one();
            }
            Response::new(sub.exit_code(), sub.text_for(control.mode))
        }
        Command::Waiting { op, reason, timeout_ms } => {
            let o = match control.op(&op) {
                Ok(o) => o,
                Err(r) => return r,
            };
            let wait = timeout_ms.map(Duration::from_millis).unwrap_or(DEFAULT_WAIT);
            *lock(&o.waiting) = Some((Instant::now() + wait, reason.clone()));
            control.event(&Event::OpWaiting {
                agent: &control.key,
                op_id: &op,
                reason: &reason,
                timeout_ms: wait.as_millis() as u64,
            });
            let text = format!(
                "waiting acknowledged: no check-in for {}s; this does not extend the deadline ({})",
                wait.as_secs(),
                match o.deadline {
                    Some(d) => format!("deadline in {} s", d.remaining().as_secs()),
                    None => "no deadline".into(),
                }
            );
            Response::new(exit::OK, text)
        }
        Command::Usage { input, output, cost_usd } => match control.current() {
            None => {
                control.refuse("usage refused: this agent has no operation running".into(), json!({ "cmd": "usage" }))
            }
            Some(o) => {
                let mut u = lock(&o.usage);
                u.input_tokens += input;
                u.output_tokens += output;
                if let Some(c) = cost_usd {
                    u.cost_usd += c;
                }
                Response::new(exit::OK, "usage recorded")
            }
        },
        Command::Send { to, text } => match control.messenger("send").map(|m| m.send(&to, &text)) {
            Err(r) => r,
            Ok(Ok(n)) => Response::new(exit::OK, format!("sent #{n}")),
            Ok(Err(e)) => control.refuse(e.to_string(), json!({ "cmd": "send", "to": to })),
        },
        Command::Ask { to, text } => {
            let m = match control.messenger("ask") {
                Ok(m) => m,
                Err(r) => return r,
            };
            let deadline = control.current().and_then(|o| o.deadline);
            match m.ask(&to, &text, deadline).await {
                Ok(reply) => Response::new(exit::OK, reply),
                Err(e @ MessageError::Refused(_)) => control.refuse(e.to_string(), json!({ "cmd": "ask", "to": to })),
                Err(MessageError::Failed(why)) => Response::new(exit::REFUSED, format!("ask failed: {why}")),
            }
        }
        Command::Reply { n, text } => match control.messenger("reply").map(|m| m.reply(n, &text)) {
            Err(r) => r,
            Ok(Ok(())) => Response::new(exit::OK, format!("replied to #{n}")),
            Ok(Err(e)) => control.refuse(e.to_string(), json!({ "cmd": "reply", "n": n })),
        },
        Command::AskOperator { question, schema } => super::operator::dispatch(control, question, schema).await,
        Command::Council { name, params, json, background } => {
            super::convene::dispatch(control, name, &params, json, background).await
        }
        Command::CouncilWait { ids } => super::convene::wait(control, ids).await,
        Command::CouncilList => super::convene::list(control),
        Command::CouncilCancel { id } => super::convene::cancel(control, id),
        Command::Inbox { json, all } => match control.messenger("inbox") {
            Err(r) => r,
            Ok(m) => Response::new(exit::OK, inbox_text(&m.inbox(all), json)),
        },
    }
}

/// The inbox as `wf inbox` prints it: one JSON object a line, or each message under its number.
fn inbox_text(held: &[super::messenger::Held], json: bool) -> String {
    if json {
        return held.iter().filter_map(|m| serde_json::to_string(m).ok()).collect::<Vec<_>>().join("\n");
    }
    if held.is_empty() {
        return "no messages".to_string();
    }
    use super::messenger::InboxStatus;
    let shown: Vec<String> = held
        .iter()
        .map(|m| {
            let note = match (m.status, m.asks) {
                (InboxStatus::New | InboxStatus::AwaitsReply, true) => " (asks for a reply: wf reply N)",
                (InboxStatus::Closed, true) => " (a question, closed)",
                (InboxStatus::Read, _) => " (read before)",
                _ => "",
            };
            format!("#{} from {}{note}:\n{}", m.n, m.from, m.text)
        })
        .collect();
    shown.join("\n")
}
