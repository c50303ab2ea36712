//! Why a harness could not do what it was asked: start a session, fork it, compact it, take over
//! a stored one, change its settings, or prepare a turn. The agent layer tells a session that
//! cannot start (a configuration error, exit 2) from an operation that fails by where it asked,
//! not by these variants; the variants say what kind of failure each is, and keep their sources.

use std::path::PathBuf;

/// A harness's failure.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// What this harness does not do: fork, compact, resume, be given skills, take over a stored
    /// session of another harness.
    #[error("{0}")]
    Cannot(String),
    /// The runtime or the agent's spec asks for what this harness cannot be set up with.
    #[error("{0}")]
    Config(String),
    /// A file or folder of the agent's own (its home, history, state, control folder, skills):
    /// what was being done to it, and the I/O error.
    #[error("{doing}: {source}")]
    Io { doing: String, source: std::io::Error },
    /// A program that could not be started; `install` says how to get it when awf knows.
    #[error("cannot start `{program}`: {}", start_reason(install, source))]
    Start { program: String, install: Option<String>, source: std::io::Error },
    /// A stored session (from another machine) that cannot be taken over as it is.
    #[error("{0}")]
    Stored(String),
    #[error("the stored file {} does not decode: {source}", file.display())]
    Decode { file: PathBuf, source: base64::DecodeError },
    /// The work ran and did not do what was asked (a compaction's turn): the harness's verdict.
    #[error("{0}")]
    Failed(String),
    #[error(transparent)]
    Skill(#[from] super::cli::skills::SkillError),
    #[error(transparent)]
    Fork(#[from] super::cli::caller::ForkError),
    #[error(transparent)]
    Http(#[from] super::http::HttpError),
    #[error(transparent)]
    Net(#[from] super::net::NetError),
    #[error(transparent)]
    Sandbox(#[from] crate::sandbox::SandboxError),
    /// The same failure for another agent's (`agent {key}: ...`).
    #[error("agent {agent}: {source}")]
    Agent { agent: String, source: Box<HarnessError> },
    /// A failure whose text held a secret of the run, as shown once redacted (`scrubbed.rs`).
    #[error("{0}")]
    Scrubbed(String),
}

fn start_reason(install: &Option<String>, source: &std::io::Error) -> String {
    match install {
        Some(how) if source.kind() == std::io::ErrorKind::NotFound => {
            format!("not found on PATH (install it: {how})")
        }
        _ => source.to_string(),
    }
}

impl HarnessError {
    /// A file operation that failed: `doing` says what, and on which path.
    pub fn io(doing: impl Into<String>, source: std::io::Error) -> HarnessError {
        HarnessError::Io { doing: doing.into(), source }
    }

    /// `cannot create <path>` (the most common one).
    pub fn create(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> HarnessError + '_ {
        move |source| HarnessError::io(format!("cannot create {}", path.display()), source)
    }

    /// The failure of agent `agent`'s session, saying so.
    pub fn of_agent(self, agent: &str) -> HarnessError {
        HarnessError::Agent { agent: agent.to_string(), source: Box::new(self) }
    }

    /// The failure with the run's secrets redacted: itself when its text holds none.
    pub fn scrubbed(self, redactor: &crate::redact::Redactor) -> HarnessError {
        let text = self.to_string();
        let clean = redactor.scrub(&text);
        if clean == text {
            self
        } else {
            HarnessError::Scrubbed(clean)
        }
    }
}
