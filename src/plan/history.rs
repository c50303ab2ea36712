//! What earlier runs of the same script really spent, per operation and model: read from the runs
//! folder's `run.json` and `turns.jsonl`, only operations a model really answered (not simulated):
//! their tokens, and their USD when every one of them was priced.

use crate::accounting::CostSource;
use std::collections::BTreeMap;
use std::path::Path;

/// One model's operations in earlier runs: how many, and the least and most one spent.
#[derive(Debug, Clone, PartialEq)]
pub struct PerOperation {
    pub operations: u64,
    pub tokens: (u64, u64),
    /// `None` when one of them had no price (a local model).
    pub usd: Option<(f64, f64)>,
}

/// What earlier runs of a script spent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observed {
    /// The runs read, oldest first.
    pub runs: Vec<String>,
    pub by_model: BTreeMap<String, PerOperation>,
}

/// The runs in `runs_dir` of `script` (as `run.json` names it) and their priced operations.
pub fn observed(runs_dir: &Path, script: &Path) -> Observed {
    let mut seen = Observed::default();
    let Ok(entries) = std::fs::read_dir(runs_dir) else { return seen };
    let mut dirs: Vec<_> = entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    let wanted = script.display().to_string();
    for dir in dirs {
        let Some(doc) = crate::record::docs::run(&dir) else { continue };
        if doc.script.as_deref() != Some(wanted.as_str()) {
            continue;
        }
        let Ok(turns) = crate::record::lines::turns(&dir) else { continue };
        let mut used = false;
        let real = |t: &&crate::record::lines::TurnRecord| {
            !t.simulated
                && t.cost_source.is_some_and(|c| c != CostSource::Simulated)
                && t.kind != crate::run::COUNCIL_KIND
        };
        for t in turns.iter().filter(real) {
            used = true;
            let tokens = t.usage.tokens().max(t.tokens);
            let usd = t.priced().then(|| t.cost_usd());
            let e = seen.by_model.entry(t.model.clone()).or_insert(PerOperation {
                operations: 0,
                tokens: (tokens, tokens),
                usd: usd.map(|u| (u, u)),
            });
            e.operations += 1;
            e.tokens = (e.tokens.0.min(tokens), e.tokens.1.max(tokens));
            e.usd = match (e.usd, usd) {
                (Some((lo, hi)), Some(u)) => Some((lo.min(u), hi.max(u))),
                _ => None,
            };
        }
        if used {
            seen.runs.push(doc.id);
        }
    }
    seen
}
