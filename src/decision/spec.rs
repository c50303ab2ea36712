//! A decision's spec as a workflow gives it (`ctx.decisions.decide(spec)`), checked before
//! anything is asked: its key, question, options (ids, each with an optional doc), the state it
//! is about, the confidence floor and the fallback. Every bad input is refused by name.

use serde_json::Value;

/// One option: the id the model answers with, and what it means.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub id: String,
    pub doc: Option<String>,
}

/// What happens when the model's confidence is under the floor, or it gave no valid answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Fallback {
    /// A checkpoint asks the operator, showing the model's pick and confidence.
    Operator,
    /// This option is taken.
    Default(String),
    /// A catchable error.
    Fail,
}

impl Fallback {
    /// `"operator"`, `"default:<option>"` or `"fail"`.
    pub fn parse(text: &str) -> Result<Fallback, SpecError> {
        match text {
            "operator" => Ok(Fallback::Operator),
            "fail" => Ok(Fallback::Fail),
            other => match other.strip_prefix("default:") {
                Some(option) => Ok(Fallback::Default(option.to_string())),
                None => Err(SpecError::UnknownFallback(other.to_string())),
            },
        }
    }

    /// As the spec writes it.
    pub fn text(&self) -> String {
        match self {
            Fallback::Operator => "operator".into(),
            Fallback::Default(o) => format!("default:{o}"),
            Fallback::Fail => "fail".into(),
        }
    }
}

/// A decision to make.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    pub key: String,
    pub question: String,
    pub options: Vec<Choice>,
    /// What the decision is about: shown to the model as fenced, untrusted data.
    pub state: Option<Value>,
    /// Under this confidence (0..1) the fallback decides.
    pub min_confidence: f64,
    pub fallback: Fallback,
    /// How long the model has to answer (ms); past it, the fallback decides.
    pub timeout_ms: Option<u64>,
}

/// What is wrong with a spec.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecError {
    /// A field of the wrong type or an unknown one (the script host says which).
    #[error("{0}")]
    Field(String),
    #[error("`key` must not be empty")]
    EmptyKey,
    #[error("`question` must not be empty")]
    EmptyQuestion,
    #[error("`options` must not be empty: give the choices, e.g. [\"yes\", \"no\"]")]
    NoOptions,
    #[error("option {index} has an empty id")]
    BlankOption { index: usize },
    #[error("option {id:?} has a line break or a control character in its id")]
    BadOptionId { id: String },
    #[error("option `{id}` is given twice: each option needs an id of its own")]
    DuplicateOption { id: String },
    #[error("`min_confidence` must be between 0 and 1, got {0}")]
    Floor(f64),
    #[error("unknown fallback `{0}`: give \"operator\", \"default:<option>\" or \"fail\"")]
    UnknownFallback(String),
    #[error("fallback `default:{default}` names no option (the options: {options})")]
    DefaultNotAnOption { default: String, options: String },
    #[error("`timeout_ms` must be a positive number of milliseconds, got {0}")]
    Timeout(i64),
}

impl Spec {
    /// Checks what types alone cannot: non-empty key, question and options, option ids unique
    /// and on one line, the floor in 0..1, a default that is one of the options.
    pub fn validate(&self) -> Result<(), SpecError> {
        if self.key.trim().is_empty() {
            return Err(SpecError::EmptyKey);
        }
        if self.question.trim().is_empty() {
            return Err(SpecError::EmptyQuestion);
        }
        if self.options.is_empty() {
            return Err(SpecError::NoOptions);
        }
        let mut seen = std::collections::HashSet::new();
        for (index, o) in self.options.iter().enumerate() {
            if o.id.trim().is_empty() {
                return Err(SpecError::BlankOption { index });
            }
            if o.id.chars().any(char::is_control) {
                return Err(SpecError::BadOptionId { id: o.id.clone() });
            }
            if !seen.insert(o.id.as_str()) {
                return Err(SpecError::DuplicateOption { id: o.id.clone() });
            }
        }
        if !(0.0..=1.0).contains(&self.min_confidence) {
            return Err(SpecError::Floor(self.min_confidence));
        }
        if let Fallback::Default(d) = &self.fallback {
            if !self.options.iter().any(|o| o.id == *d) {
                return Err(SpecError::DefaultNotAnOption { default: d.clone(), options: self.ids().join(", ") });
            }
        }
        Ok(())
    }

    /// The options' ids, in order.
    pub fn ids(&self) -> Vec<String> {
        self.options.iter().map(|o| o.id.clone()).collect()
    }

    /// What a later attempt must ask the same to be answered from the journal: the key, the
    /// question and the options (ids and docs). The state may change: it is what the question is
    /// about, not the question.
    pub fn hash(&self) -> String {
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        for part in [&self.key, &self.question] {
            h.update(part.as_bytes());
            h.update(&[0]);
        }
        for o in &self.options {
            h.update(o.id.as_bytes());
            h.update(&[1]);
            h.update(o.doc.as_deref().unwrap_or("").as_bytes());
            h.update(&[0]);
        }
        format!("{:032x}", h.digest128())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(options: &[&str]) -> Spec {
        Spec {
            key: "k".into(),
            question: "which?".into(),
            options: options.iter().map(|id| Choice { id: id.to_string(), doc: None }).collect(),
            state: None,
            min_confidence: 0.5,
            fallback: Fallback::Fail,
            timeout_ms: None,
        }
    }

    #[test]
    fn every_bad_input_is_named() {
        assert_eq!(spec(&["a", "b"]).validate(), Ok(()));
        assert_eq!(spec(&[]).validate(), Err(SpecError::NoOptions));
        assert_eq!(spec(&["a", "a"]).validate(), Err(SpecError::DuplicateOption { id: "a".into() }));
        assert_eq!(spec(&["a", " "]).validate(), Err(SpecError::BlankOption { index: 1 }));
        assert_eq!(spec(&["a\nb"]).validate(), Err(SpecError::BadOptionId { id: "a\nb".into() }));
        let floor = |f: f64| Spec { min_confidence: f, ..spec(&["a"]) }.validate();
        assert_eq!(floor(1.5), Err(SpecError::Floor(1.5)));
        assert_eq!(floor(-0.1), Err(SpecError::Floor(-0.1)));
        assert!(floor(f64::NAN).is_err(), "NaN is no floor");
        assert_eq!(floor(0.0).and(floor(1.0)), Ok(()));
        assert_eq!(Fallback::parse("ask"), Err(SpecError::UnknownFallback("ask".into())));
        let default = Spec { fallback: Fallback::parse("default:c").expect("parses"), ..spec(&["a", "b"]) };
        assert_eq!(
            default.validate(),
            Err(SpecError::DefaultNotAnOption { default: "c".into(), options: "a, b".into() })
        );
        assert_eq!(Spec { key: " ".into(), ..spec(&["a"]) }.validate(), Err(SpecError::EmptyKey));
        assert_eq!(Spec { question: "".into(), ..spec(&["a"]) }.validate(), Err(SpecError::EmptyQuestion));
    }

    #[test]
    fn the_hash_covers_key_question_and_options_not_the_state() {
        let base = spec(&["a", "b"]);
        let with_state = Spec { state: Some(serde_json::json!({ "n": 1 })), ..base.clone() };
        assert_eq!(base.hash(), with_state.hash());
        assert_ne!(base.hash(), spec(&["a", "c"]).hash());
        assert_ne!(base.hash(), Spec { question: "which one?".into(), ..base.clone() }.hash());
        let mut documented = base.clone();
        documented.options[0].doc = Some("the first".into());
        assert_ne!(base.hash(), documented.hash());
        assert_eq!(Fallback::parse("default:a").map(|f| f.text()), Ok("default:a".into()));
    }
}
