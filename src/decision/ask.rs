//! Asking the decision model: its runtime from `[decisions]` (an `openai` one answers in
//! structured mode and is asked for log-probabilities), one turn through the agent layer
//! (`agent::decide`), and its answer read into a `ModelAnswer`: the distribution from the
//! log-probabilities of the tokens where it wrote its choice when the server sent them (none when
//! they do not yield that choice: the fallback decides), else the model's own claim, and the
//! record says which.

use super::record::{ModelAnswer, Spend};
use super::spec::Spec;
use super::{logprobs, prompt, DecideError};
use crate::agent::decide::{Ask, AskError};
use crate::agent::supervise::Nudge;
use crate::agent::{AgentBook, RuntimeChoice};
use crate::config::{Config, DecisionProvider, DecisionsConfig, HarnessKind, RuntimeConfig};
use crate::control::prompt::DEFAULT_NUDGE;
use crate::record::status::DecisionSource;
use crate::run::scope::Frame;
use crate::run::OutcomeKind;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The key the decision model's turns are recorded and billed under (`by_agent`).
pub const AGENT: &str = "decisions";

/// How many alternatives an `openai` decision model is asked for at each token (the most OpenAI
/// takes).
const TOP_LOGPROBS: u32 = 20;

/// The decision model's runtime as `[decisions]` gives it: as chosen (by name, which workers
/// resolve in their own awf.toml under `--nats`, or inline) and as it runs here.
pub fn provider(config: &Config, decisions: &DecisionsConfig) -> Result<(RuntimeChoice, RuntimeConfig), DecideError> {
    let mut r = match &decisions.provider {
        DecisionProvider::Runtime(alias) => {
            config.runtime(alias).map_err(|e| DecideError::Config(format!("[decisions] runtime: {e}")))?
        }
        DecisionProvider::Inline(r) => (**r).clone(),
    };
    if r.harness == HarnessKind::Openai {
        // A closed answer is a JSON object: structured mode, unless the runtime says otherwise.
        r.answer.get_or_insert_with(|| "structured".into());
        if decisions.logprobs {
            r.top_logprobs = Some(TOP_LOGPROBS);
        }
    }
    let choice = match &decisions.provider {
        DecisionProvider::Runtime(alias) => RuntimeChoice::Alias { alias: alias.clone(), effort: None },
        DecisionProvider::Inline(_) => RuntimeChoice::Inline(Box::new(r.clone())),
    };
    Ok((choice, r))
}

/// Asks the model `spec` under `frame`. An answer that is no option is rejected and re-asked
/// within the run's nudge limit; after that, past the spec's `timeout_ms`, or when the turn failed
/// after the model replied (a reply cut off), the answer is `None` (the fallback decides). A turn
/// that fails before any reply (an unreachable server, a harness error) is an error, as an
/// agent's is.
pub fn model(
    agents: &Arc<AgentBook>,
    decisions: &DecisionsConfig,
    spec: &Spec,
    first: bool,
    frame: &Frame,
) -> Result<ModelAnswer, DecideError> {
    let run = &agents.run;
    let (choice, runtime) = provider(&run.config, decisions)?;
    let schema = run.schemas.compile(&prompt::schema(spec)).map_err(DecideError::Schema)?;
    let turn = crate::agent::operation::Turn {
        prompt: prompt::text(spec),
        schema,
        id: None,
        label: None,
        timeout_ms: spec.timeout_ms,
        deadline_ms: None,
        nudge: Nudge { text: DEFAULT_NUDGE.into(), max: run.scheduler.limits.nudges },
    };
    let label = format!("decision {}", spec.key);
    let ask = Ask { agent: AGENT, op_id: format!("{AGENT}#{}", spec.key), label: &label, choice, runtime, turn, first };
    let answered = crate::agent::decide::ask(agents, ask, frame).map_err(|e| match e {
        // Exit 2 for what the configuration gets wrong, as an agent's open decides it.
        AskError::Open(e) if e.is_config() => DecideError::Config(e.to_string()),
        AskError::Open(e) => DecideError::Provider(e.to_string()),
        AskError::Op(crate::agent::operation::OpError::Terminated(why)) => DecideError::Terminated(why),
        AskError::Op(crate::agent::operation::OpError::Invalid(why)) => DecideError::Provider(why),
        AskError::Op(e @ crate::agent::operation::OpError::Limit(_)) => DecideError::Provider(e.to_string()),
    })?;
    let o = &answered.outcome;
    let spend = Spend { tokens: o.usage.tokens(), cost_usd: o.usage.cost_usd };
    let none = |why: Option<String>| ModelAnswer {
        choice: None,
        distribution: BTreeMap::new(),
        source: DecisionSource::None,
        reason: None,
        model: answered.model.clone(),
        sampled: None,
        approximate: false,
        why_none: why,
        spend,
    };
    // The decision's own time, while its scope's has not run out (that one ends the script).
    let own_timeout = spec.timeout_ms.filter(|_| frame.expired().is_none());
    match (o.kind, &o.value, own_timeout) {
        (OutcomeKind::Answered, Some(v), _) => Ok(read(run, spec, v, answered.logprobs.as_ref(), none(None))),
        (OutcomeKind::Unanswered, ..) => Ok(none(o.reason.clone().or_else(|| Some("no valid answer".into())))),
        (OutcomeKind::TimedOut, _, Some(ms)) => Ok(none(Some(format!("no answer within timeout_ms {ms}")))),
        // A turn that failed after the model wrote something (its reply cut off at max_tokens or
        // by the context, a stream broken mid-answer) is an answer that is no option: the
        // fallback decides. One the model never replied to is the provider's failure.
        (OutcomeKind::Failed, ..) if o.usage.output_tokens > 0 => {
            Ok(none(Some(format!("its reply failed: {}", o.reason.as_deref().unwrap_or("no reason given")))))
        }
        (kind, ..) => Err(DecideError::Provider(format!(
            "its turn on {} {}: {}",
            answered.model,
            kind.as_str(),
            o.reason.as_deref().unwrap_or("no reason given")
        ))),
    }
}

/// The model's answer `v` (valid against the decision's schema) with its distribution: from the
/// log-probabilities when the reply came with them and they yield the choice it wrote; none at
/// all when it came with them and they do not (the fallback decides: a model must not get past
/// the floor on its claim by writing a choice its tokens cannot be read at); the model's claim
/// only when the reply came without any.
fn read(run: &crate::run::Run, spec: &Spec, v: &Value, tokens: Option<&Value>, base: ModelAnswer) -> ModelAnswer {
    let ids = spec.ids();
    let written = v.get("choice").and_then(Value::as_str).unwrap_or_default().to_string();
    let claimed = v.get("confidence").and_then(Value::as_f64).unwrap_or(0.0);
    let reason = v.get("reason").and_then(Value::as_str).map(String::from);
    let Some(tokens) = tokens else {
        return ModelAnswer {
            choice: Some(written.clone()),
            distribution: claimed_distribution(&ids, &written, claimed),
            source: DecisionSource::Claimed,
            reason,
            ..base
        };
    };
    let r = match logprobs::read(tokens, &ids, v) {
        Ok(r) => r,
        Err(why) => {
            let why = format!("its log-probabilities do not yield the choice it wrote (`{written}`): {why}");
            run.log("warn", &format!("decision {}: {why}; the fallback decides", spec.key), &Value::Null);
            return ModelAnswer {
                choice: None,
                distribution: BTreeMap::new(),
                source: DecisionSource::LogprobsUnread,
                reason,
                why_none: Some(why),
                ..base
            };
        }
    };
    let distribution: BTreeMap<String, f64> = ids.iter().cloned().zip(r.probabilities.iter().copied()).collect();
    // The option the model put most on; a tie goes to the one it wrote.
    let mut best = written.clone();
    for (id, p) in ids.iter().zip(&r.probabilities) {
        if *p > distribution.get(&best).copied().unwrap_or(0.0) {
            best = id.clone();
        }
    }
    let sampled = (best != written).then_some(written);
    ModelAnswer {
        choice: Some(best),
        distribution,
        source: DecisionSource::Logprobs,
        reason,
        sampled,
        approximate: r.approximate,
        ..base
    }
}

/// The model's claim as a distribution: its confidence on its choice, the rest spread evenly.
fn claimed_distribution(ids: &[String], choice: &str, confidence: f64) -> BTreeMap<String, f64> {
    let others = ids.len().saturating_sub(1).max(1) as f64;
    ids.iter().map(|id| (id.clone(), if id == choice { confidence } else { (1.0 - confidence) / others })).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_spreads_the_rest_evenly() {
        let ids: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let d = claimed_distribution(&ids, "b", 0.6);
        assert_eq!(d["b"], 0.6);
        assert!((d["a"] - 0.2).abs() < 1e-12 && (d["c"] - 0.2).abs() < 1e-12, "{d:?}");
        assert_eq!(claimed_distribution(&ids[..1], "a", 0.9)["a"], 0.9);
    }
}
