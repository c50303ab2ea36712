//! One turn of an HTTP agent: requests chained by the tool calls the model makes, until it answers,
//! ends its reply, or runs out of chances. In tools mode an answer the model wrote as text instead
//! of calling `wf_result` counts; in structured mode the reply is the submission. Every submission
//! goes through the one dispatcher (an `op-submission` event each). Rejections count against the
//! nudge limit and an answer rejected twice is not asked for again (`TurnInput::may_retry`).

use super::answer::{answer_in_text, cut_off, no_tool_calls, structured_submission, NO_TOOL_CALL_LIMIT};
use super::session::HttpSession;
use super::tools::{call_tool, result_parameters, tool_specs};
use super::Msg;
use crate::control::dispatch::{dispatch, Control};
use crate::control::prompt::{tool_wraps, AnswerMode};
use crate::control::protocol::{exit, Command};
use crate::harness::{Session, TurnEnd, TurnInput, TurnKind};

/// Model requests one turn may make before it ends (tool calls chain requests).
const MAX_STEPS: usize = 24;

impl HttpSession {
    pub(super) async fn run_turn(&mut self, input: &TurnInput) -> TurnEnd {
        let turn_start = self.history.len();
        self.push(Msg::User { text: input.shown.clone() });
        let schema = input.slot.schema().value.clone();
        let structured = self.cfg.structured && input.kind == TurnKind::Turn;
        let councils = input.messenger.as_ref().is_some_and(|m| m.may_convene());
        let operator = input.messenger.as_ref().is_some_and(|m| m.may_ask_operator());
        let tools = if structured { Vec::new() } else { tool_specs(&schema, &input.op_id, councils, operator) };
        self.compact_if_full(input, &tools, turn_start).await;
        // The schema a structured reply is held to: the op's own, wrapped in `{value}` only for a
        // server that takes nothing but an object (and unwrapped before the slot sees it).
        let wrapped = structured && self.cfg.object_only && tool_wraps(&schema);
        let reply_schema = if wrapped { result_parameters(&schema).0 } else { (*schema).clone() };
        let mode = if structured { self.answer_mode() } else { AnswerMode::Tool };
        // The turn's control state: its answers and messages go through the one dispatcher.
        let control = Control::new(&self.info.key, self.events.clone(), input.messenger.clone()).answering(mode);
        control.open_turn(&input.op_id, input.slot.clone(), input.deadline, input.meter.clone());
        for _ in 0..MAX_STEPS {
            let reply = match self.request(&tools, structured.then_some(&reply_schema), &input.meter).await {
                Ok(r) => r,
                Err(e) => return TurnEnd::Failed(e.to_string()),
            };
            self.push(Msg::Assistant { text: reply.text.clone(), calls: reply.calls.clone() });
            if reply.usage.tokens() > 0 {
                self.measured = Some((self.history.len(), reply.usage.tokens()));
            }
            // A structured reply cut off is a partial answer. In tools mode a reply cut off at
            // max_tokens is one more reply without an answer (the model may still call the tool
            // when nudged); one cut off by the context ends the turn: nothing more fits.
            if let Some(cut) = cut_off(&reply, &self.cfg) {
                if structured || cut.by_context {
                    return TurnEnd::Failed(cut.why);
                }
            }
            if structured {
                // What the reply's tokens were, when the runtime asked: a decision reads its
                // distribution over the options from them.
                let tokens = (!reply.logprobs.is_empty()).then(|| serde_json::Value::Array(reply.logprobs.clone()));
                input.slot.set_logprobs(tokens);
                let json = structured_submission(&reply.text, wrapped);
                let answer = dispatch(&control, Command::Result { op: input.op_id.clone(), json }).await;
                if answer.exit != exit::REJECTED {
                    return TurnEnd::Ended;
                }
                self.push(Msg::User { text: answer.text });
                if !input.may_retry() {
                    return TurnEnd::Ended;
                }
                continue;
            }
            if reply.calls.is_empty() {
                return self.without_tool_call(input, &control, &reply.text).await;
            }
            self.toolless = 0;
            let rejected = input.slot.rejections();
            for call in &reply.calls {
                let text = call_tool(&control, call, input).await;
                self.push(Msg::Tool { id: call.id.clone(), name: call.name.clone(), text });
            }
            if input.slot.answer().is_some() || (input.slot.rejections() > rejected && !input.may_retry()) {
                return TurnEnd::Ended;
            }
        }
        TurnEnd::Ended
    }

    /// A reply with no tool call ends the turn. When the turn wants an answer, one written in the
    /// text is taken as the submission; a model that has made no tool call in `NO_TOOL_CALL_LIMIT`
    /// replies fails the turn, saying so and naming structured mode.
    async fn without_tool_call(&mut self, input: &TurnInput, control: &Control, text: &str) -> TurnEnd {
        if input.kind != TurnKind::Turn || input.slot.answer().is_some() {
            return TurnEnd::Ended;
        }
        let wrapped = tool_wraps(&input.slot.schema().value);
        if let Some(v) = answer_in_text(text, input.slot.schema(), wrapped) {
            let answer = dispatch(control, Command::Result { op: input.op_id.clone(), json: v.to_string() }).await;
            if answer.exit == exit::OK {
                self.toolless = 0;
                return TurnEnd::Ended;
            }
        }
        self.toolless += 1;
        if self.toolless >= NO_TOOL_CALL_LIMIT {
            return TurnEnd::Failed(no_tool_calls(&self.cfg.model, self.toolless));
        }
        TurnEnd::Ended
    }
}
