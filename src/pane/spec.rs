//! An agent spec's pane fields as data: `placement`, `layout` (`beside`, `split`) and
//! `keep_pane`, parsed with typed errors; and where a pane went and what became of it
//! (`PaneRecord`), as `result.json` `panes` and the `pane-opened` event record it.

use serde::{Deserialize, Serialize};

/// Why a pane field of an agent spec is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("unknown placement `{0}`: use \"pane\" or \"headless\" (the default)")]
    Placement(String),
    #[error("unknown split `{0}`: use \"right\" (the default) or \"below\"")]
    Split(String),
    #[error("unknown keep_pane `{0}`: use \"never\" (the default), \"always\" or \"on-failure\"")]
    Keep(String),
    #[error("`{0}` is for an agent with placement: \"pane\", which this one has not")]
    NotInPane(&'static str),
}

/// Where a CLI agent runs: headless (as every agent by default), or interactively in a tmux pane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    #[default]
    Headless,
    Pane,
}

impl Placement {
    pub fn parse(s: &str) -> Result<Placement, SpecError> {
        match s {
            "headless" => Ok(Placement::Headless),
            "pane" => Ok(Placement::Pane),
            _ => Err(SpecError::Placement(s.to_string())),
        }
    }
}

/// Which way a pane is split off its neighbour: the new pane to its right, or below it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Split {
    #[default]
    Right,
    Below,
}

impl Split {
    pub fn parse(s: &str) -> Result<Split, SpecError> {
        match s {
            "right" => Ok(Split::Right),
            "below" => Ok(Split::Below),
            _ => Err(SpecError::Split(s.to_string())),
        }
    }
}

/// `layout`: the agent whose pane this one goes beside, and which way.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Layout {
    pub beside: Option<String>,
    pub split: Split,
}

/// What becomes of an agent's pane when the run ends or the agent is stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeepPane {
    /// Closed.
    #[default]
    Never,
    /// Released, its CLI left running for the operator.
    Always,
    /// Released when the agent's last operation failed or timed out (which closes the agent).
    OnFailure,
}

impl KeepPane {
    pub fn parse(s: &str) -> Result<KeepPane, SpecError> {
        match s {
            "never" => Ok(KeepPane::Never),
            "always" => Ok(KeepPane::Always),
            "on-failure" => Ok(KeepPane::OnFailure),
            _ => Err(SpecError::Keep(s.to_string())),
        }
    }

    pub fn keeps(self, failed: bool) -> bool {
        match self {
            KeepPane::Never => false,
            KeepPane::Always => true,
            KeepPane::OnFailure => failed,
        }
    }
}

/// A pane agent's spec fields together.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PaneSpec {
    pub layout: Layout,
    pub keep: KeepPane,
}

/// Where a pane went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Went {
    /// Beside the agent `layout.beside` named, as asked.
    Beside,
    /// A split of its stage's window (no `beside` asked, or the one asked could not take it).
    Split,
    /// A window of its own (its stage's first pane, or no room left in the window).
    Window,
}

/// Why a pane is not where its layout asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Elsewhere {
    #[error("`beside` names {agent}, which is not open in this run")]
    NotOpen { agent: String },
    #[error("`beside` names {agent}, which was stopped")]
    Stopped { agent: String },
    #[error("`beside` names {agent}, which is headless: it has no pane to go beside")]
    Headless { agent: String },
    #[error("`beside` names {agent}, whose pane is gone (closed by the operator)")]
    Gone { agent: String },
    #[error("`beside` names {agent}, whose pane ({width}x{height}) has no room for a split {}", split.as_str())]
    NoRoom { agent: String, width: u32, height: u32, split: Split },
}

impl Split {
    pub fn as_str(self) -> &'static str {
        match self {
            Split::Right => "right",
            Split::Below => "below",
        }
    }
}

/// What became of a pane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PaneState {
    Open,
    /// Released: left running for the operator.
    Kept,
    Closed,
    /// Closed by the operator (or its session or server ended) before awf closed it.
    Gone,
}

/// One agent's pane, as `result.json` `panes` records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PaneRecord {
    pub agent: String,
    pub harness: String,
    /// tmux's target for the pane (`%3`), in `session` on the server at `socket`.
    pub target: super::PaneId,
    pub session: String,
    pub window: String,
    pub socket: Option<std::path::PathBuf>,
    /// The layout the spec asked for.
    pub layout: Layout,
    pub went: Went,
    /// Why it is not where the layout asked, when it is not.
    pub elsewhere: Option<Elsewhere>,
    pub reason: Option<String>,
    pub keep: KeepPane,
    pub state: PaneState,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_and_unknown_ones_say_what_is_known() {
        assert_eq!(Placement::parse("pane"), Ok(Placement::Pane));
        assert_eq!(Split::parse("below"), Ok(Split::Below));
        assert_eq!(KeepPane::parse("on-failure"), Ok(KeepPane::OnFailure));
        assert_eq!(
            KeepPane::parse("sometimes").map_err(|e| e.to_string()),
            Err("unknown keep_pane `sometimes`: use \"never\" (the default), \"always\" or \"on-failure\"".into())
        );
        assert!(matches!(Split::parse("left"), Err(SpecError::Split(_))));
        assert!(matches!(Placement::parse("window"), Err(SpecError::Placement(_))));
        assert!(KeepPane::OnFailure.keeps(true) && !KeepPane::OnFailure.keeps(false));
        assert!(KeepPane::Always.keeps(false) && !KeepPane::Never.keeps(true));
    }

    #[test]
    fn a_reason_is_recorded_as_a_tagged_value() {
        let why = Elsewhere::NoRoom { agent: "a".into(), width: 30, height: 9, split: Split::Right };
        let v = serde_json::to_value(&why).expect("json");
        assert_eq!(v["kind"], "no-room");
        assert_eq!(why.to_string(), "`beside` names a, whose pane (30x9) has no room for a split right");
    }
}
