//! One agent's HTTP session: its message history (in memory and in the run folder), turns that
//! chain requests and tool calls (or take a structured reply as the submission), forks, compaction.

use super::tools::{call_tool, result_parameters, tool_specs};
use super::{HttpConfig, Msg};
use crate::accounting::{CostSource, Usage};
use crate::control::dispatch::{dispatch, Control, EventSink};
use crate::control::protocol::{exit, Command};
use crate::harness::{AgentInfo, BoxFuture, Session, TurnEnd, TurnInput, TurnReport};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

/// Model requests one turn may make before it ends (tool calls chain requests).
const MAX_STEPS: usize = 24;

pub struct HttpSession {
    pub(super) info: AgentInfo,
    pub(super) cfg: HttpConfig,
    pub(super) client: reqwest::Client,
    pub(super) history: Vec<Msg>,
    history_file: PathBuf,
    pub(super) events: EventSink,
}

/// A model's JSON answer without a surrounding code fence.
fn unfence(text: &str) -> &str {
    let t = text.trim();
    let Some(rest) = t.strip_prefix("```") else { return t };
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_alphanumeric());
    rest.strip_suffix("```").unwrap_or(rest).trim()
}

impl HttpSession {
    pub fn new(info: AgentInfo, cfg: HttpConfig, history_file: PathBuf, events: EventSink) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(HttpSession { info, cfg, client, history: Vec::new(), history_file, events })
    }

    fn save(&self) {
        let doc = json!({ "model": self.cfg.model, "messages": self.history });
        if let Some(dir) = self.history_file.parent() {
            let _ = crate::record::private::create_dir(dir);
        }
        if let Err(e) = crate::record::write_document(&self.history_file, &doc) {
            tracing::error!("cannot write {}: {e}", self.history_file.display());
        }
    }

    async fn run_turn(&mut self, input: TurnInput) -> TurnReport {
        let mut usage = Usage::default();
        let report = |end, usage| TurnReport { end, usage, cost_source: CostSource::Priced, simulated: false };
        self.history.push(Msg::User { text: input.shown.clone() });
        let schema = input.slot.schema().value.clone();
        let structured = self.cfg.structured && input.kind == crate::harness::TurnKind::Turn;
        let tools = if structured { Vec::new() } else { tool_specs(&schema, &input.op_id) };
        let wrapped_schema = result_parameters(&schema).0;
        // The turn's control state: its answers and messages go through the one dispatcher.
        let control = Control::new(&self.info.key, self.events.clone(), input.messenger.clone());
        control.open_turn(&input.op_id, input.slot.clone(), input.deadline);
        for _ in 0..MAX_STEPS {
            let reply = match self.request(&tools, structured.then_some(&wrapped_schema)).await {
                Ok(r) => r,
                Err(e) => {
                    self.save();
                    return report(TurnEnd::Failed(e), usage);
                }
            };
            usage.add(&reply.usage);
            self.history.push(Msg::Assistant { text: reply.text.clone(), calls: reply.calls.clone() });
            if structured {
                if reply.finish.as_deref() == Some("length") {
                    self.save();
                    return report(TurnEnd::Failed("the reply was cut off at max_tokens (finish_reason: length): a partial answer is not a result".into()), usage);
                }
                let (_, wrapped) = result_parameters(&schema);
                let json = match serde_json::from_str::<Value>(unfence(&reply.text)) {
                    Ok(v) if wrapped => v.get("value").cloned().unwrap_or(v).to_string(),
                    Ok(v) => v.to_string(),
                    Err(_) => unfence(&reply.text).to_string(),
                };
                let answer = dispatch(&control, Command::Result { op: input.op_id.clone(), json }).await;
                if answer.exit == exit::REJECTED {
                    self.history.push(Msg::User { text: answer.text });
                    continue;
                }
                self.save();
                return report(TurnEnd::Ended, usage);
            }
            if reply.calls.is_empty() {
                self.save();
                return report(TurnEnd::Ended, usage);
            }
            for call in &reply.calls {
                let text = call_tool(&control, call, &input).await;
                self.history.push(Msg::Tool { id: call.id.clone(), name: call.name.clone(), text });
            }
            if input.slot.answer().is_some() {
                self.save();
                return report(TurnEnd::Ended, usage);
            }
        }
        self.save();
        report(TurnEnd::Ended, usage)
    }
}

impl Session for HttpSession {
    fn turn(&mut self, input: TurnInput) -> BoxFuture<'_, TurnReport> {
        Box::pin(self.run_turn(input))
    }

    fn fork(&self, info: AgentInfo) -> Result<Box<dyn Session>, String> {
        let file =
            self.history_file.with_file_name(format!("history-{}.json", crate::record::agent_files::slug(&info.key)));
        let mut s = HttpSession::new(info, self.cfg.clone(), file, self.events.clone())?;
        s.history = self.history.clone();
        s.save();
        Ok(Box::new(s))
    }

    fn compact(&mut self, prompt: &str) -> BoxFuture<'_, crate::harness::Compaction> {
        let prompt = prompt.to_string();
        Box::pin(async move {
            let c = self.compact_history(prompt).await;
            let (summary, usage) = match c {
                Ok((s, u)) => (Ok(s), u),
                Err(e) => (Err(e), Usage::default()),
            };
            crate::harness::Compaction { summary, usage, cost_source: CostSource::Priced, simulated: false }
        })
    }

    fn set(&mut self, model: Option<&str>, effort: Option<&str>) -> Result<(), String> {
        if let Some(m) = model {
            self.cfg.model = m.to_string();
            self.info.model = m.to_string();
        }
        if let Some(e) = effort {
            self.cfg.effort = Some(e.to_string());
        }
        Ok(())
    }
}

impl HttpSession {
    /// Asks the model to summarise the conversation and keeps only the summary.
    async fn compact_history(&mut self, prompt: String) -> Result<(String, Usage), String> {
        {
            self.history.push(Msg::User { text: prompt });
            let reply = self.request(&[], None).await?;
            let summary = reply.text.trim().to_string();
            self.history = vec![
                Msg::User { text: format!("A summary of our conversation so far:\n\n{summary}") },
                Msg::Assistant { text: "Understood.".into(), calls: Vec::new() },
            ];
            self.save();
            Ok((summary, reply.usage))
        }
    }
}
