//! A request's size in tokens before its reply (`PromptSize`) and how it was had (`Counted`):
//! what `count.rs` measures and `context.rs` judges against the runtime's context.

/// Characters a token until replies say otherwise: low on purpose (JSON and code tokenize densely).
pub(super) const DEFAULT_CHARS_PER_TOKEN: f64 = 3.0;

/// How a request's size was had.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Counted {
    /// The server's `/tokenize` counted the text.
    Tokenize,
    /// Estimated from the text's length at this many characters a token.
    Estimate(f64),
}

/// A request's size in tokens before its reply, and how it was had.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct PromptSize {
    pub tokens: u64,
    pub by: Counted,
    /// Part of it is the server's own count at the last reply.
    pub measured: bool,
}

impl Default for PromptSize {
    fn default() -> Self {
        PromptSize { tokens: 0, by: Counted::Estimate(DEFAULT_CHARS_PER_TOKEN), measured: false }
    }
}

impl std::fmt::Display for PromptSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} tokens (", self.tokens)?;
        if self.measured {
            f.write_str("the server's count at the last reply, the messages since ")?;
        }
        match self.by {
            Counted::Tokenize => f.write_str("counted by the server's /tokenize)"),
            Counted::Estimate(r) => write!(f, "estimated at {r:.1} characters a token)"),
        }
    }
}
