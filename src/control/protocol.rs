//! The control-plane wire format between `awf wf` and the engine: one JSON object per line, each
//! with a version. Types only: this module does no I/O.

use serde::{Deserialize, Serialize};

/// The protocol version every frame carries.
pub const VERSION: u32 = 1;

/// What an agent asks of the engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "kebab-case")]
pub enum Command {
    /// Submits the answer to an operation; `json` is the text the agent piped in.
    Result {
        op: String,
        json: String,
    },
    /// Acknowledges a wait: no nudge before `timeout_ms` passes; the deadline stands.
    Waiting {
        op: String,
        reason: String,
        timeout_ms: Option<u64>,
    },
    Send {
        to: String,
        text: String,
    },
    Ask {
        to: String,
        text: String,
    },
    Reply {
        n: u64,
        text: String,
    },
    Inbox {
        json: bool,
        /// Every message delivered to the agent, not only the new and the unanswered.
        #[serde(default)]
        all: bool,
    },
    /// Convenes a granted council as a child run; `params` is the JSON text the agent piped in.
    Council {
        name: String,
        params: String,
        #[serde(default)]
        json: bool,
        /// Start it and answer with a receipt at once; the agent is woken with its output later.
        #[serde(default)]
        background: bool,
    },
    /// Waits for background councils the agent started and prints their outputs.
    CouncilWait {
        ids: Vec<String>,
    },
    /// Lists the background councils the agent started, with status and spend so far.
    CouncilList,
    /// Stops one of the background councils the agent started.
    CouncilCancel {
        id: String,
    },
    /// Asks the run's operator and waits for the answer; `schema` is JSON Schema text (a string
    /// answer when none is given).
    AskOperator {
        question: String,
        #[serde(default)]
        schema: Option<String>,
    },
    /// What the agent's current turn spent.
    Usage {
        input: u64,
        output: u64,
        cost_usd: Option<f64>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub v: u32,
    #[serde(flatten)]
    pub cmd: Command,
}

/// The engine's answer: the text to print and the exit code `awf wf` ends with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub v: u32,
    pub exit: i32,
    pub text: String,
}

impl Response {
    pub fn new(exit: i32, text: impl Into<String>) -> Response {
        Response { v: VERSION, exit, text: text.into() }
    }
}

/// Exit codes of `awf wf`.
pub mod exit {
    pub const OK: i32 = 0;
    /// The engine could not be reached or the frame was malformed.
    pub const ERROR: i32 = 1;
    pub const REJECTED: i32 = 2;
    /// An unknown or settled operation, or a refused route.
    pub const REFUSED: i32 = 3;
}

/// Why a request line is not a request this engine takes; the text is what the agent is told.
#[derive(Debug, thiserror::Error)]
pub enum BadFrame {
    #[error("malformed frame: {0}")]
    Malformed(#[source] serde_json::Error),
    #[error("malformed frame: missing `v`")]
    NoVersion,
    #[error("protocol version {0} is not supported (this engine speaks {VERSION})")]
    Version(u64),
}

/// Parses a request line, refusing other versions with a message the agent can act on.
pub fn parse_request(line: &str) -> Result<Request, BadFrame> {
    let value: serde_json::Value = serde_json::from_str(line).map_err(BadFrame::Malformed)?;
    match value.get("v").and_then(|v| v.as_u64()) {
        Some(v) if v == VERSION as u64 => {}
        Some(v) => return Err(BadFrame::Version(v)),
        None => return Err(BadFrame::NoVersion),
    }
    serde_json::from_value(value).map_err(BadFrame::Malformed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_versions_are_checked() {
        let req = Request { v: VERSION, cmd: Command::Result { op: "a#1".into(), json: "{}".into() } };
        let line = serde_json::to_string(&req).expect("serialise");
        assert_eq!(line, r#"{"v":1,"cmd":"result","op":"a#1","json":"{}"}"#);
        assert_eq!(parse_request(&line).expect("parse"), req);
        assert!(matches!(parse_request(r#"{"v":2,"cmd":"inbox","json":false}"#), Err(BadFrame::Version(2))));
        assert!(matches!(parse_request(r#"{"cmd":"inbox"}"#), Err(BadFrame::NoVersion)));
        let e = parse_request("{").expect_err("not JSON");
        assert!(matches!(e, BadFrame::Malformed(_)) && e.to_string().starts_with("malformed frame: "), "{e}");
    }
}
