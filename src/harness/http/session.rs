//! One agent's HTTP session: its message history, in memory and in the run folder (written when the
//! session opens and after every message, so an agent whose operation was cancelled keeps it too),
//! forks, compaction, settings. A turn is in `turn.rs`.

use super::{HttpConfig, HttpError, Msg};
use crate::accounting::{CostSource, Meter, Usage};
use crate::control::dispatch::EventSink;
use crate::control::prompt::AnswerMode;
use crate::harness::{AgentInfo, BoxFuture, HarnessError, Session, SessionExport, TurnInput, TurnReport};
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;

pub struct HttpSession {
    pub(super) info: AgentInfo,
    pub(super) cfg: HttpConfig,
    pub(super) client: reqwest::Client,
    pub(super) history: Vec<Msg>,
    /// Where the history is kept (`agents/<slug>/history.json`); `None` for a probe's session.
    history_file: Option<PathBuf>,
    pub(super) events: EventSink,
    /// The tokens the conversation held at its last reply, as the server counted them, and the
    /// history's length then: what the next request's size is estimated from.
    pub(super) measured: Option<(usize, u64)>,
    /// Replies in a row, in turns that want an answer, with no tool call and no answer in their
    /// text: a model that never calls tools is told apart from one that has not answered yet.
    pub(super) toolless: u32,
}

impl HttpSession {
    pub fn new(
        info: AgentInfo,
        cfg: HttpConfig,
        history_file: Option<PathBuf>,
        events: EventSink,
    ) -> Result<Self, HttpError> {
        let client =
            reqwest::Client::builder().connect_timeout(Duration::from_secs(30)).build().map_err(HttpError::Client)?;
        let s =
            HttpSession { info, cfg, client, history: Vec::new(), history_file, events, measured: None, toolless: 0 };
        s.save();
        Ok(s)
    }

    pub(super) fn save(&self) {
        let Some(file) = &self.history_file else { return };
        let doc = json!({ "model": self.cfg.model, "messages": self.history });
        if let Some(dir) = file.parent() {
            let _ = crate::record::private::create_dir(dir);
        }
        if let Err(e) = crate::record::write_document(file, &doc) {
            tracing::error!("cannot write {}: {e}", file.display());
        }
    }

    /// Adds a message to the history, and the history to the run folder.
    pub(super) fn push(&mut self, m: Msg) {
        self.history.push(m);
        self.save();
    }
}

impl Session for HttpSession {
    fn answer_mode(&self) -> AnswerMode {
        if self.cfg.structured {
            AnswerMode::Reply { object_only: self.cfg.object_only }
        } else {
            AnswerMode::Tool
        }
    }

    fn turn(&mut self, input: TurnInput) -> BoxFuture<'_, TurnReport> {
        Box::pin(async move {
            let before = input.meter.total();
            let end = self.run_turn(&input).await;
            self.save();
            let usage = input.meter.total().since(&before);
            TurnReport { end, usage, cost_source: CostSource::Priced, simulated: false }
        })
    }

    fn fork(&self, info: AgentInfo) -> Result<Box<dyn Session>, HarnessError> {
        let name = format!("history-{}.json", crate::record::agent_files::slug(&info.key));
        let file = self.history_file.as_ref().map(|f| f.with_file_name(name));
        let mut s = HttpSession::new(info, self.cfg.clone(), file, self.events.clone())?;
        s.history = self.history.clone();
        s.measured = self.measured;
        s.save();
        Ok(Box::new(s))
    }

    fn compact(&mut self, prompt: &str) -> BoxFuture<'_, crate::harness::Compaction> {
        let prompt = prompt.to_string();
        Box::pin(async move {
            let c = self.compact_history(prompt, &Meter::default()).await;
            let (summary, usage) = match c {
                Ok((s, u)) => (Ok(s), u),
                Err(e) => (Err(e.into()), Usage::default()),
            };
            crate::harness::Compaction { summary, usage, cost_source: CostSource::Priced, simulated: false }
        })
    }

    fn export(&self) -> Option<SessionExport> {
        serde_json::to_value(&self.history).ok().map(|messages| SessionExport::History { messages })
    }

    fn import(&mut self, session: SessionExport) -> Result<(), HarnessError> {
        let SessionExport::History { messages } = session else {
            return Err(HttpError::NotHistory.into());
        };
        self.history = serde_json::from_value(messages).map_err(HttpError::History)?;
        self.measured = None;
        self.save();
        Ok(())
    }

    fn set(&mut self, model: Option<&str>, effort: Option<&str>) -> Result<(), HarnessError> {
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

/// What a turn that starts past `context::COMPACT_AT` of the context asks first.
const AUTO_COMPACT_PROMPT: &str =
    "The conversation is about to outgrow your context. Summarise it so far: the task, what \
was decided and why, what was tried, and what is still open, in enough detail to go on from the summary alone.";

impl HttpSession {
    /// Asks the model to summarise the conversation and keeps only the summary; on failure the
    /// history is left as it was. What the request spends goes on `meter` as well as in the usage.
    async fn compact_history(&mut self, prompt: String, meter: &Meter) -> Result<(String, Usage), HttpError> {
        self.push(Msg::User { text: prompt });
        let reply = match self.request(&[], None, meter).await {
            Ok(r) => r,
            Err(e) => {
                self.history.pop();
                self.save();
                return Err(e);
            }
        };
        let summary = reply.text.trim().to_string();
        self.history = vec![
            Msg::User { text: format!("A summary of our conversation so far:\n\n{summary}") },
            Msg::Assistant { text: "Understood.".into(), calls: Vec::new() },
        ];
        self.measured = None;
        self.save();
        Ok((summary, reply.usage))
    }

    /// Auto-compaction: when the turn that starts at `turn_start` would send more than
    /// `context::COMPACT_AT` of the declared context, the history before it is summarised first,
    /// billed to the turn's operation. A summary that cannot be had leaves the history as it was
    /// (the turn's own request then says whether it still fits).
    pub(super) async fn compact_if_full(&mut self, input: &TurnInput, tools: &[super::ToolSpec], turn_start: usize) {
        let (Some(context), true) = (self.cfg.context_tokens, turn_start > 0) else { return };
        let tokens = self.prompt_size(tools).await.tokens;
        if !super::context::wants_compacting(&self.cfg, tokens) {
            return;
        }
        let turn = self.history.split_off(turn_start);
        let done = self.compact_history(AUTO_COMPACT_PROMPT.to_string(), &input.meter).await;
        self.history.extend(turn);
        self.save();
        let (summary_chars, error) = match &done {
            Ok((summary, _)) => (Some(summary.len()), None),
            Err(e) => (None, Some(e.to_string())),
        };
        (self.events)(&crate::run::Event::ContextCompacted {
            agent: &self.info.key,
            op_id: &input.op_id,
            tokens,
            context,
            summary_chars,
            error: error.as_deref(),
        });
    }
}
