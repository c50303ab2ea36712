//! Result slots: where an operation's answer is submitted, validated against the op's schema, and
//! kept. Every harness answers through one, so every agent sees the same rejection language.

use super::prompt::{fix_hint, AnswerMode};
use crate::run::schema::{Schema, Violation};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;

/// What a submission got back; `text()` is exactly what the agent is shown.
#[derive(Debug, Clone, PartialEq)]
pub enum Submission {
    Accepted,
    Rejected(Vec<Violation>),
    /// The op is already settled or was never opened.
    Closed(String),
}

impl Submission {
    /// What an agent that answers through the launcher is shown.
    pub fn text(&self) -> String {
        self.text_for(AnswerMode::Launcher)
    }

    /// What an agent that answers in `mode` is shown: a rejection ends with what to do next.
    pub fn text_for(&self, mode: AnswerMode) -> String {
        match self {
            Submission::Accepted => "accepted".into(),
            Submission::Rejected(errors) => rejection_text(errors, mode),
            Submission::Closed(why) => why.clone(),
        }
    }

    /// The exit code `awf wf result` uses: 0 accepted, 2 rejected, 3 unknown or closed op.
    pub fn exit_code(&self) -> i32 {
        match self {
            Submission::Accepted => 0,
            Submission::Rejected(_) => 2,
            Submission::Closed(_) => 3,
        }
    }
}

/// The text an agent gets for a rejected answer: every error with its JSON pointer, then how to
/// fix it in the agent's terms.
pub fn rejection_text(errors: &[Violation], mode: AnswerMode) -> String {
    let mut out = String::from("rejected:\n");
    for e in errors {
        out.push_str("- ");
        out.push_str(&e.to_string());
        out.push('\n');
    }
    out.push_str(fix_hint(mode));
    out
}

enum State {
    Open,
    Answered(Value),
    Closed(String),
}

/// How many times one same answer may be rejected: it is not asked for a third time.
pub const MAX_REPEATS: u32 = 2;

/// Records an accepted answer; the receiver is answered once the record is written.
pub type OnAccept = Box<dyn Fn(&Value) -> tokio::sync::oneshot::Receiver<()> + Send + Sync>;

/// Records a rejected submission: what was submitted and its errors.
pub type OnReject = Box<dyn Fn(&str, &[Violation]) + Send + Sync>;

/// How long an agent waits for its accepted answer to reach the records before it is told anyway.
const RECORD_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// One operation's slot. The first accepted answer wins; later ones are refused with the reason.
pub struct ResultSlot {
    op_id: String,
    schema: Schema,
    state: Mutex<State>,
    rejections: std::sync::atomic::AtomicU32,
    last_rejection: Mutex<Option<String>>,
    /// How many times each rejected answer (its JSON text, or the raw text when it is no JSON) was
    /// submitted.
    rejected: Mutex<HashMap<String, u32>>,
    on_accept: std::sync::OnceLock<OnAccept>,
    on_reject: std::sync::OnceLock<OnReject>,
    recorded: Mutex<Option<tokio::sync::oneshot::Receiver<()>>>,
    /// The token log-probabilities of the reply submitted last while the slot was open (an
    /// `openai` structured reply whose runtime asked for them), as chat completions sends them.
    logprobs: Mutex<Option<Value>>,
}

impl ResultSlot {
    pub fn new(op_id: impl Into<String>, schema: Schema) -> Self {
        ResultSlot {
            op_id: op_id.into(),
            schema,
            state: Mutex::new(State::Open),
            rejections: std::sync::atomic::AtomicU32::new(0),
            last_rejection: Mutex::new(None),
            rejected: Mutex::new(HashMap::new()),
            on_accept: std::sync::OnceLock::new(),
            on_reject: std::sync::OnceLock::new(),
            recorded: Mutex::new(None),
            logprobs: Mutex::new(None),
        }
    }

    /// Records every accepted answer with `hook` the moment it is accepted (set once).
    pub fn record_with(&self, hook: OnAccept) {
        let _ = self.on_accept.set(hook);
    }

    /// Records every rejected submission with `hook`, as it is rejected (set once).
    pub fn record_rejections_with(&self, hook: OnReject) {
        let _ = self.on_reject.set(hook);
    }

    /// As [`ResultSlot::submit_text`], but an accepted answer is in the records before this
    /// returns: the agent is told `accepted` only once a crash can no longer lose it.
    pub async fn submit_text_recorded(&self, text: &str) -> Submission {
        let sub = self.submit_text(text);
        self.recorded(&sub).await;
        sub
    }

    /// As [`ResultSlot::submit`], recorded as [`ResultSlot::submit_text_recorded`] is.
    pub async fn submit_recorded(&self, value: Value) -> Submission {
        let sub = self.submit(value);
        self.recorded(&sub).await;
        sub
    }

    async fn recorded(&self, sub: &Submission) {
        if *sub != Submission::Accepted {
            return;
        }
        let pending = self.recorded.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(done) = pending {
            // A dropped sender means the records are closed: nothing more can be written.
            if tokio::time::timeout(RECORD_WAIT, done).await.is_err() {
                tracing::error!("the answer to {} was not recorded within {RECORD_WAIT:?}", self.op_id);
            }
        }
    }

    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// Submits raw text as an agent would pipe it to `wf result`: one JSON value, no object in it
    /// giving a key twice (`strict`).
    pub fn submit_text(&self, text: &str) -> Submission {
        match super::strict::parse(text.trim()) {
            Ok(v) => self.submit(v),
            Err(e) => self.reject(
                text.trim(),
                vec![Violation { pointer: String::new(), message: format!("not valid JSON: {e}") }],
            ),
        }
    }

    pub fn submit(&self, value: Value) -> Submission {
        {
            let state = self.lock();
            match &*state {
                State::Answered(_) => {
                    return Submission::Closed(format!(
                        "op {} already has an accepted answer; the first accepted answer stands",
                        self.op_id
                    ))
                }
                State::Closed(why) => return Submission::Closed(format!("op {} is closed: {why}", self.op_id)),
                State::Open => {}
            }
        }
        let errors = self.schema.violations(&value);
        if !errors.is_empty() {
            return self.reject(&value.to_string(), errors);
        }
        let mut state = self.lock();
        match &*state {
            State::Open => {
                // Queued under the lock: the op's later records (its settled line) come after it.
                if let Some(hook) = self.on_accept.get() {
                    *self.recorded.lock().unwrap_or_else(|p| p.into_inner()) = Some(hook(&value));
                }
                *state = State::Answered(value);
                Submission::Accepted
            }
            State::Answered(_) => Submission::Closed(format!(
                "op {} already has an accepted answer; the first accepted answer stands",
                self.op_id
            )),
            State::Closed(why) => Submission::Closed(format!("op {} is closed: {why}", self.op_id)),
        }
    }

    fn reject(&self, answer: &str, errors: Vec<Violation>) -> Submission {
        self.rejections.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        *self.rejected.lock().unwrap_or_else(|p| p.into_inner()).entry(answer.to_string()).or_insert(0) += 1;
        let summary: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        *self.last_rejection.lock().unwrap_or_else(|p| p.into_inner()) = Some(summary.join("; "));
        if let Some(hook) = self.on_reject.get() {
            hook(answer, &errors);
        }
        Submission::Rejected(errors)
    }

    /// Notes the token log-probabilities of the reply about to be submitted (`None`: it has none).
    /// Once an answer is accepted they are those of its reply, and later ones are ignored.
    pub fn set_logprobs(&self, tokens: Option<Value>) {
        if matches!(&*self.lock(), State::Open) {
            *self.logprobs.lock().unwrap_or_else(|p| p.into_inner()) = tokens;
        }
    }

    /// The token log-probabilities of the reply that gave the accepted answer, when it had them.
    pub fn logprobs(&self) -> Option<Value> {
        match &*self.lock() {
            State::Answered(_) => self.logprobs.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            _ => None,
        }
    }

    /// The accepted answer, if any.
    pub fn answer(&self) -> Option<Value> {
        match &*self.lock() {
            State::Answered(v) => Some(v.clone()),
            _ => None,
        }
    }

    /// How many submissions were rejected, before or after an answer was accepted.
    pub fn rejections(&self) -> u32 {
        self.rejections.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The most times one same answer was submitted and rejected: an agent that sends back an
    /// answer already rejected twice is not asked again.
    pub fn repeats(&self) -> u32 {
        self.rejected.lock().unwrap_or_else(|p| p.into_inner()).values().copied().max().unwrap_or(0)
    }

    /// Whether one same answer was rejected `MAX_REPEATS` times: asking again is pointless.
    pub fn stuck(&self) -> bool {
        self.repeats() >= MAX_REPEATS
    }

    /// The errors of the last rejected submission, on one line.
    pub fn last_rejection(&self) -> Option<String> {
        self.last_rejection.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Settles the slot without an answer; later submissions get `why`.
    pub fn close(&self, why: impl Into<String>) {
        let mut state = self.lock();
        if let State::Open = &*state {
            *state = State::Closed(why.into());
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is a plain enum; a panic elsewhere cannot leave it half-written.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::schema::SchemaCache;
    use serde_json::json;

    fn slot() -> ResultSlot {
        let schema = SchemaCache::default()
            .compile(&json!({"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}))
            .expect("schema");
        ResultSlot::new("a#1", schema)
    }

    #[test]
    fn rejection_lists_pointers_then_accepts_and_refuses_a_second_answer() {
        let s = slot();
        let r = s.submit_text(r#"{"n":"x"}"#);
        assert_eq!(r.exit_code(), 2);
        assert!(r.text().contains("at /n:"), "{}", r.text());
        assert!(r.text().ends_with("Fix the JSON and run the command again."));
        assert!(r.text_for(AnswerMode::Tool).ends_with("call the `wf_result` tool again."));
        assert_eq!(s.submit_text("{not json").exit_code(), 2);
        assert_eq!(s.repeats(), 1);
        assert_eq!(s.submit_text(r#" {"n": "x"} "#).exit_code(), 2);
        assert_eq!(s.repeats(), 2, "the same answer, however spaced, counts as repeated");
        assert_eq!(s.submit_text(r#"{"n":1}"#), Submission::Accepted);
        let again = s.submit_text(r#"{"n":2}"#);
        assert_eq!(again.exit_code(), 3);
        assert_eq!(s.answer(), Some(json!({"n":1})));
    }

    #[test]
    fn an_answer_giving_a_key_twice_is_rejected_naming_it() {
        let s = slot();
        // serde_json alone would keep the last `n` and accept it.
        let r = s.submit_text(r#"{"n":"x","n":1}"#);
        assert_eq!(r.exit_code(), 2);
        assert!(r.text().contains("not valid JSON: the key `n` is given twice at line 1 column 12"), "{}", r.text());
        assert_eq!(s.answer(), None);
    }

    #[tokio::test]
    async fn an_accepted_answer_is_recorded_once_before_the_caller_hears_it() {
        let s = slot();
        let seen = std::sync::Arc::new(Mutex::new(Vec::new()));
        let (ack_tx, ack_rx) = tokio::sync::oneshot::channel();
        let pending = std::sync::Arc::new(Mutex::new(Some(ack_rx)));
        let (log, rx) = (seen.clone(), pending.clone());
        s.record_with(Box::new(move |v| {
            log.lock().expect("log").push(v.clone());
            rx.lock().expect("rx").take().unwrap_or_else(|| tokio::sync::oneshot::channel().1)
        }));
        assert_eq!(s.submit_text_recorded(r#"{"n":"x"}"#).await.exit_code(), 2);
        assert!(seen.lock().expect("log").is_empty(), "a rejection is not recorded");
        let submit = s.submit_text_recorded(r#"{"n":1}"#);
        tokio::pin!(submit);
        assert!(
            futures_util::FutureExt::now_or_never(submit.as_mut()).is_none(),
            "not told before the record is written"
        );
        assert_eq!(*seen.lock().expect("log"), vec![json!({"n":1})]);
        ack_tx.send(()).expect("ack");
        assert_eq!(submit.await, Submission::Accepted);
        assert_eq!(s.submit_text_recorded(r#"{"n":2}"#).await.exit_code(), 3);
        assert_eq!(seen.lock().expect("log").len(), 1, "recorded once");
    }

    #[test]
    fn closed_slot_refuses_with_why() {
        let s = slot();
        s.close("cancelled");
        let r = s.submit_text(r#"{"n":1}"#);
        assert_eq!(r.exit_code(), 3);
        assert!(r.text().contains("cancelled"));
    }
}
