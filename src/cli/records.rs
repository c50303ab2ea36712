//! What `awf runs show` reads beside awf's own records (those read as types in `record::lines`,
//! `record::events`, `record::docs`): an HTTP agent's `history.json`, and how a spend is said.

use crate::harness::http::Msg;
use serde::Deserialize;
use std::path::Path;

#[derive(Deserialize)]
struct History {
    #[serde(default)]
    messages: Vec<Msg>,
}

/// An HTTP agent's conversation (`agents/<slug>/history.json`), empty for other harnesses.
pub fn history(dir: &Path, agent: &str) -> Vec<Msg> {
    let slug = crate::record::agent_files::slug(agent);
    let path = crate::record::agent_files::agent_dir(dir, &slug).join("history.json");
    let Ok(text) = std::fs::read_to_string(path) else { return Vec::new() };
    serde_json::from_str::<History>(&text).map(|h| h.messages).unwrap_or_default()
}

/// `N tokens`, and the cost beside it only when it is a price (a local or fake model's $0 says
/// nothing).
pub fn spend(tokens: u64, cost_usd: f64, priced: bool) -> String {
    if priced || cost_usd > 0.0 {
        format!("{tokens} tokens, ${cost_usd:.4}")
    } else {
        format!("{tokens} tokens")
    }
}
