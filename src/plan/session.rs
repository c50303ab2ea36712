//! A plan run's sessions: every agent, whatever its runtime, answers from the fake harness through
//! the agent book's `Remote` hook, so no program, CLI or HTTP request is started; each turn's
//! real sizes (what the agent is shown, its instructions, its history, the answer) are measured
//! under the agent's own harness and model for the estimate.

use crate::agent::remote::Remote;
use crate::agent::OpenRequest;
use crate::config::RuntimeConfig;
use crate::control::prompt::AnswerMode;
use crate::harness::fake::FakeSession;
use crate::harness::{AgentInfo, BoxFuture, Compaction, Session, TurnInput, TurnReport};
use crate::run::Run;
use std::sync::{Arc, Mutex, Weak};

/// Who an operation was planned for: the identity its real session would have.
#[derive(Debug, Clone, PartialEq)]
pub struct Seat {
    pub agent: String,
    pub harness: String,
    pub model: String,
    /// The runtime's `max_tokens`, when it sets one.
    pub max_tokens: Option<u64>,
}

/// One measured operation: sizes in bytes of text, as the agent would be sent them.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    pub seat: Seat,
    /// The first turn of its session (a CLI's own system prompt and tools come with it).
    pub fresh: bool,
    /// What the agent is shown this turn: the prompt with awf's answer instructions and the
    /// schema, and its instructions.
    pub shown_bytes: u64,
    /// Earlier turns of the same session (prompts and answers), sent again.
    pub history_bytes: u64,
    /// The answer the fake gave (a real answer is at least a valid value of the schema).
    pub answer_bytes: u64,
}

/// What a plan run measured, shared by its sessions.
#[derive(Default)]
pub struct Measures(Mutex<Vec<Measured>>);

impl Measures {
    fn push(&self, m: Measured) {
        // Entries are pushed whole; a poisoned lock still holds a valid list.
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(m);
    }

    pub fn all(&self) -> Vec<Measured> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The hook a plan run installs on its agent book.
pub struct PlanRemote {
    run: Weak<Run>,
    responders: crate::agent::Responders,
    pub measures: Arc<Measures>,
}

impl PlanRemote {
    pub fn new(run: &Arc<Run>, measures: Arc<Measures>) -> PlanRemote {
        let responders = crate::agent::Responders::new(Box::new(crate::script::load_responder));
        PlanRemote { run: Arc::downgrade(run), responders, measures }
    }
}

impl Remote for PlanRemote {
    /// A plan checks that a worktree could be made, and adds none.
    fn worktrees(&self) -> crate::agent::remote::RemoteWorktrees {
        crate::agent::remote::RemoteWorktrees::Planned
    }

    /// A plan's pane agents are planned as any other: no pane is made.
    fn panes(&self) -> bool {
        true
    }

    fn session(
        &self,
        req: &OpenRequest,
        runtime: &RuntimeConfig,
        info: &AgentInfo,
    ) -> Result<Box<dyn Session>, crate::agent::OpenError> {
        use crate::agent::OpenError;
        // What a remote session refuses counts as the configuration's, as a local session's start.
        let run = self.run.upgrade().ok_or_else(|| OpenError::Config("the plan run has ended".into()))?;
        // A fake runtime with a responder script plans along that script's answers.
        let responder = match (&runtime.harness, &runtime.responder) {
            (crate::config::HarnessKind::Fake, Some(path)) => {
                Some(self.responders.get(&run, path).map_err(|e| OpenError::Config(e.to_string()))?)
            }
            _ => None,
        };
        let weak = self.run.clone();
        let events: crate::control::dispatch::EventSink = Arc::new(move |e| {
            if let Some(r) = weak.upgrade() {
                r.records.event(e);
            }
        });
        let stall = run.scheduler.limits.stall_timeout;
        let fake = FakeSession::new(info.clone(), responder, events, stall);
        let seat = Seat {
            agent: req.key.clone(),
            harness: runtime.harness.as_str().to_string(),
            model: info.model.clone(),
            max_tokens: runtime.max_tokens,
        };
        Ok(Box::new(PlanSession {
            inner: Box::new(fake),
            mode: mode_of(runtime),
            seat,
            instructions: info.instructions.as_ref().map_or(0, |i| i.len() as u64),
            history: 0,
            turns: 0,
            measures: self.measures.clone(),
        }))
    }
}

/// The answer mode the runtime's own session would have: an HTTP agent's tools or structured
/// reply (whose prompts carry no launcher text), else the launcher.
fn mode_of(runtime: &RuntimeConfig) -> AnswerMode {
    use crate::config::HarnessKind;
    match runtime.harness {
        HarnessKind::Openai if runtime.answer.as_deref() == Some("structured") => {
            let url = crate::harness::http::Target::of(runtime).base_url;
            AnswerMode::Reply { object_only: url.contains("api.openai.com") }
        }
        HarnessKind::Openai | HarnessKind::Anthropic => AnswerMode::Tool,
        _ => AnswerMode::Launcher,
    }
}

/// A fake session that measures each turn as the agent's real session would be sent it.
struct PlanSession {
    inner: Box<dyn Session>,
    /// How the agent's real session answers: its prompts are measured as they would be sent.
    mode: AnswerMode,
    seat: Seat,
    instructions: u64,
    history: u64,
    turns: u64,
    measures: Arc<Measures>,
}

impl Session for PlanSession {
    fn answer_mode(&self) -> AnswerMode {
        self.mode
    }

    fn turn(&mut self, input: TurnInput) -> BoxFuture<'_, TurnReport> {
        Box::pin(async move {
            let shown = input.shown.len() as u64 + self.instructions;
            let slot = input.slot.clone();
            let report = self.inner.turn(input).await;
            let answer = slot.answer().map_or(0, |v| v.to_string().len() as u64);
            self.measures.push(Measured {
                seat: self.seat.clone(),
                fresh: self.turns == 0,
                shown_bytes: shown,
                history_bytes: self.history,
                answer_bytes: answer,
            });
            self.turns += 1;
            self.history += shown - self.instructions + answer;
            report
        })
    }

    fn fork(&self, info: AgentInfo) -> Result<Box<dyn Session>, crate::harness::HarnessError> {
        let inner = self.inner.fork(info.clone())?;
        let seat = Seat { agent: info.key.clone(), ..self.seat.clone() };
        Ok(Box::new(PlanSession {
            inner,
            mode: self.mode,
            seat,
            instructions: info.instructions.as_ref().map_or(0, |i| i.len() as u64),
            history: self.history,
            turns: 0,
            measures: self.measures.clone(),
        }))
    }

    fn compact(&mut self, prompt: &str) -> BoxFuture<'_, Compaction> {
        let prompt = prompt.to_string();
        Box::pin(async move {
            let done = self.inner.compact(&prompt).await;
            let summary = done.summary.as_ref().map_or(0, |s| s.len() as u64);
            // A compaction is a model call over the whole history, answered by a summary.
            self.measures.push(Measured {
                seat: self.seat.clone(),
                fresh: self.turns == 0,
                shown_bytes: prompt.len() as u64 + self.instructions,
                history_bytes: self.history,
                answer_bytes: summary,
            });
            self.turns += 1;
            self.history = summary;
            done
        })
    }

    fn set(&mut self, model: Option<&str>, effort: Option<&str>) -> Result<(), crate::harness::HarnessError> {
        self.inner.set(model, effort)?;
        if let Some(m) = model {
            self.seat.model = m.to_string();
        }
        Ok(())
    }
}
