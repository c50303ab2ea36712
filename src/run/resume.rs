//! What a new attempt of a run takes from the records of the earlier ones: the stages it reuses
//! (recorded `succeeded` or `reused`, all of them or those before `--from-stage`) and the answered
//! operations it replays from the journal instead of calling a harness again.

use crate::record::docs::{self, RunDoc};
use crate::record::lines::{self, JournalRecord};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The summary of a stage value given with `awf runs resume --values` rather than recorded.
pub const GIVEN: &str = "given with --values";

/// An answered operation on record.
#[derive(Debug, Clone)]
pub struct Journaled {
    pub turn_hash: String,
    /// The hashes of its prompt, schema and nudge (`p:… s:… n:…`), to say what changed.
    pub parts: Option<String>,
    /// The stage it was asked in (lines written before stages were journalled have none: any).
    pub stage: Option<Option<String>>,
    pub outcome: Value,
}

/// An earlier run, ready to be attempted again.
#[derive(Debug)]
pub struct Resume {
    /// The run's lock, taken before its records were read; the new attempt holds it.
    pub lock: Option<crate::record::lock::RunLock>,
    pub run_id: String,
    pub dir: PathBuf,
    /// The number of the new attempt.
    pub attempt: u32,
    pub from_stage: Option<String>,
    /// `run.json` as recorded, rewritten by the new attempt (fields this version does not read kept).
    pub run_doc: Value,
    /// `run.json` read as a type.
    pub run: RunDoc,
    /// The limits the run started with (`run.json` `limits`), which stand in for awf.toml's; `None`
    /// for a run recorded before limits were kept.
    pub limits: Option<super::Limits>,
    /// Stage name → (value, summary), for the stages this attempt reuses.
    pub stages: HashMap<String, (Value, Option<String>)>,
    /// (agent, op id) → what the journal says of it, for every answered operation on record.
    pub journal: HashMap<(String, String), Journaled>,
    /// How many answered operations the journal records (its lines: older runs could record two
    /// turns under one op id, which `journal` keeps once).
    pub journalled: usize,
    /// Stage name → agent → the turns (default ids) it started in that stage, for the stages this
    /// attempt reuses: their agents' op ids count on past them.
    pub stage_runs: HashMap<String, std::collections::BTreeMap<String, u64>>,
    /// Checkpoint key → (question hash, answer), for every checkpoint the operator answered.
    pub checkpoints: HashMap<String, (String, Value)>,
    /// Every decision on record, its last line each, in the order first journalled.
    pub decisions: Vec<crate::record::lines::DecisionLine>,
    /// What the earlier attempts spent: the run's budget and accounts count on from it.
    pub spent: crate::accounting::Accounts,
    /// Whether an earlier attempt's answers came from the fake harness.
    pub simulated: bool,
}

/// Why a run's folder cannot be read for a new attempt.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    /// Another attempt holds the run (`LockError::Live`), or its lock cannot be taken.
    #[error(transparent)]
    Lock(#[from] crate::record::lock::LockError),
    #[error("cannot read {}: it is missing", .0.display())]
    Missing(std::path::PathBuf),
    #[error(transparent)]
    Doc(#[from] docs::DocError),
    #[error("{} is not a run.json this awf reads: {source}", path.display())]
    NotRunJson { path: std::path::PathBuf, source: serde_json::Error },
    /// A record file (`stages.jsonl`, ...) that cannot be read.
    #[error("cannot read {name}: {source}")]
    Read { name: &'static str, source: std::io::Error },
    /// `--from-stage` names a stage the run never recorded; `recorded` lists those it did.
    #[error("--from-stage {stage}: the run never recorded a stage of that name (recorded: {recorded})")]
    NoSuchStage { stage: String, recorded: String },
}

/// What `run.json` keeps of the run core's own types (the record layer's `RunDoc` cannot name
/// them).
#[derive(serde::Deserialize)]
struct Kept {
    #[serde(default)]
    limits: Option<super::Limits>,
}

/// Reads a run folder for a new attempt. With `from_stage`, only the stages recorded before it
/// are reused; a stage the run never recorded is refused with the list of those it did.
/// The run's lock is taken first: a run with a live attempt is refused, and of two resumes that
/// race, one reads the records and runs.
pub fn load(dir: &Path, from_stage: Option<&str>) -> Result<Resume, ResumeError> {
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let lock = crate::record::lock::RunLock::acquire(dir, &name)?;
    let run_json = dir.join("run.json");
    let run_doc: Value = docs::read(&run_json)?.ok_or_else(|| ResumeError::Missing(run_json.clone()))?;
    let run: RunDoc = serde_json::from_value(run_doc.clone())
        .map_err(|source| ResumeError::NotRunJson { path: run_json.clone(), source })?;
    let run_id = run.id.clone();
    let attempt = run.attempts.len() as u32 + 1;
    let limits = serde_json::from_value::<Kept>(run_doc.clone()).ok().and_then(|k| k.limits);
    let read = |name: &'static str| move |source| ResumeError::Read { name, source };
    let mut order: Vec<String> = Vec::new();
    let mut done: HashMap<String, (Value, Option<String>)> = HashMap::new();
    let mut stage_runs = HashMap::new();
    for line in lines::stages(dir).map_err(read("stages.jsonl"))? {
        if !order.contains(&line.name) {
            order.push(line.name.clone());
        }
        if line.status.known().is_some_and(|s| s.reusable()) {
            done.insert(line.name.clone(), (line.value, line.summary));
            stage_runs.insert(line.name, line.runs);
        }
    }
    let keep: Vec<String> = match from_stage {
        None => order.clone(),
        Some(s) => match order.iter().position(|n| n == s) {
            Some(i) => order[..i].to_vec(),
            None => {
                let recorded = if order.is_empty() { "none".to_string() } else { order.join(", ") };
                return Err(ResumeError::NoSuchStage { stage: s.to_string(), recorded });
            }
        },
    };
    let stages: HashMap<String, (Value, Option<String>)> = done.into_iter().filter(|(n, _)| keep.contains(n)).collect();
    stage_runs.retain(|n, _| stages.contains_key(n));
    // `--from-stage S`: S and everything after run fresh, so nothing is replayed.
    let mut journal = HashMap::new();
    let mut journalled = 0;
    let mut checkpoints = HashMap::new();
    let mut decisions: Vec<crate::record::lines::DecisionLine> = Vec::new();
    let journal_lines =
        if from_stage.is_some() { Vec::new() } else { lines::journal(dir).map_err(read("journal.jsonl"))? };
    for line in journal_lines {
        match line {
            JournalRecord::Checkpoint(c) => {
                checkpoints.insert(c.checkpoint, (c.question_hash, c.answer));
            }
            JournalRecord::Decision(d) => match decisions.iter_mut().find(|e| e.decision == d.decision) {
                Some(e) => *e = d,
                None => decisions.push(d),
            },
            JournalRecord::Op(op) => {
                let entry =
                    Journaled { turn_hash: op.turn_hash, parts: op.turn_parts, stage: op.stage, outcome: op.outcome };
                journal.insert((op.agent, op.op_id), entry);
                journalled += 1;
            }
        }
    }
    let mut spent = crate::accounting::Accounts::default();
    let mut simulated = false;
    for line in lines::turns(dir).map_err(read("turns.jsonl"))? {
        spent.add(&crate::accounting::Spent {
            agent: &line.agent,
            stage: line.stage.as_deref(),
            model: (line.kind != super::COUNCIL_KIND).then_some(line.model.as_str()),
            attempt: line.attempt,
            usage: &line.usage,
            unpriced: line.cost_source == Some(crate::accounting::CostSource::Unpriced),
            councils: line.councils_by_model.as_ref(),
        });
        simulated |= line.simulated;
    }
    Ok(Resume {
        lock: Some(lock),
        run_id,
        dir: dir.to_path_buf(),
        attempt,
        from_stage: from_stage.map(String::from),
        run_doc,
        run,
        limits,
        stages,
        journal,
        journalled,
        stage_runs,
        checkpoints,
        decisions,
        spent,
        simulated,
    })
}

/// What changed in a turn, from the parts' hashes journalled (`p:… s:… n:…`) and the turn's now.
pub fn what_changed(before: Option<&str>, now: &str) -> String {
    let Some(before) = before else {
        return "its prompt, schema or nudge changed since the attempt that answered it (its journal line \
                predates per-part hashes)"
            .into();
    };
    let parts = |t: &str| -> std::collections::BTreeMap<String, String> {
        t.split(' ').filter_map(|w| w.split_once(':')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
    };
    let (was, is) = (parts(before), parts(now));
    let changed: Vec<String> = [("p", "prompt"), ("s", "schema"), ("n", "nudge")]
        .iter()
        .filter(|(k, _)| was.get(*k) != is.get(*k))
        .map(|(k, name)| {
            let short = |m: &std::collections::BTreeMap<String, String>| {
                m.get(*k).map(|h| h.chars().take(8).collect::<String>()).unwrap_or_else(|| "?".into())
            };
            format!("its {name} changed (hash {} -> {})", short(&was), short(&is))
        })
        .collect();
    if changed.is_empty() {
        "its turn changed since the attempt that answered it".into()
    } else {
        format!("{} since the attempt that answered it", changed.join(", "))
    }
}
