//! What a new attempt of a run takes from the records of the earlier ones: the stages it reuses
//! (recorded `succeeded` or `reused`, all of them or those before `--from-stage`) and the answered
//! operations it replays from the journal instead of calling a harness again.

use crate::record::read_jsonl;
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
    /// `run.json` as recorded.
    pub run_doc: Value,
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
    /// What the earlier attempts spent: the run's budget and accounts count on from it.
    pub spent: crate::accounting::Accounts,
    /// Whether an earlier attempt's answers came from the fake harness.
    pub simulated: bool,
}

/// Reads a run folder for a new attempt. With `from_stage`, only the stages recorded before it
/// are reused; a stage the run never recorded is refused with the list of those it did.
/// The run's lock is taken first: a run with a live attempt is refused, and of two resumes that
/// race, one reads the records and runs.
pub fn load(dir: &Path, from_stage: Option<&str>) -> Result<Resume, String> {
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let lock = crate::record::lock::RunLock::acquire(dir, &name)?;
    let run_json = dir.join("run.json");
    let text = std::fs::read_to_string(&run_json).map_err(|e| format!("cannot read {}: {e}", run_json.display()))?;
    let run_doc: Value = serde_json::from_str(&text).map_err(|e| format!("{} is not JSON: {e}", run_json.display()))?;
    let run_id = run_doc["id"].as_str().unwrap_or_default().to_string();
    let attempt = run_doc["attempts"].as_array().map(|a| a.len() as u32 + 1).unwrap_or(1);
    let read = |name: &str| read_jsonl(&dir.join(name)).map_err(|e| format!("cannot read {name}: {e}"));
    let mut order: Vec<String> = Vec::new();
    let mut done: HashMap<String, (Value, Option<String>)> = HashMap::new();
    let mut stage_runs = HashMap::new();
    for line in read("stages.jsonl")? {
        let Some(name) = line["name"].as_str() else { continue };
        if !order.iter().any(|n| n == name) {
            order.push(name.to_string());
        }
        if serde_json::from_value::<super::StageStatus>(line["status"].clone()).is_ok_and(|s| s.reusable()) {
            done.insert(name.to_string(), (line["value"].clone(), line["summary"].as_str().map(String::from)));
            let runs: std::collections::BTreeMap<String, u64> =
                serde_json::from_value(line["runs"].clone()).unwrap_or_default();
            stage_runs.insert(name.to_string(), runs);
        }
    }
    let keep: Vec<String> = match from_stage {
        None => order.clone(),
        Some(s) => match order.iter().position(|n| n == s) {
            Some(i) => order[..i].to_vec(),
            None => {
                let list = if order.is_empty() { "none".to_string() } else { order.join(", ") };
                return Err(format!(
                    "--from-stage {s}: the run never recorded a stage of that name (recorded: {list})"
                ));
            }
        },
    };
    let stages: HashMap<String, (Value, Option<String>)> = done.into_iter().filter(|(n, _)| keep.contains(n)).collect();
    stage_runs.retain(|n, _| stages.contains_key(n));
    // `--from-stage S`: S and everything after run fresh, so nothing is replayed.
    let mut journal = HashMap::new();
    let mut journalled = 0;
    let mut checkpoints = HashMap::new();
    for line in if from_stage.is_some() { Vec::new() } else { read("journal.jsonl")? } {
        if let (Some(key), Some(hash)) = (line["checkpoint"].as_str(), line["question_hash"].as_str()) {
            checkpoints.insert(key.to_string(), (hash.to_string(), line["answer"].clone()));
            continue;
        }
        let (Some(agent), Some(op), Some(hash)) =
            (line["agent"].as_str(), line["op_id"].as_str(), line["turn_hash"].as_str())
        else {
            continue;
        };
        let stage = line.get("stage").map(|s| s.as_str().map(String::from));
        let parts = line["turn_parts"].as_str().map(String::from);
        let entry = Journaled { turn_hash: hash.to_string(), parts, stage, outcome: line["outcome"].clone() };
        journal.insert((agent.to_string(), op.to_string()), entry);
        journalled += 1;
    }
    let mut spent = crate::accounting::Accounts::default();
    let mut simulated = false;
    for line in read("turns.jsonl")? {
        let usage: crate::accounting::Usage = serde_json::from_value(line.clone()).unwrap_or_default();
        // Lines written before attempts were recorded belong to the first.
        let attempt = line["attempt"].as_u64().unwrap_or(1) as u32;
        let text = |k: &str| line[k].as_str().unwrap_or("?").to_string();
        let (agent, model) = (text("agent"), text("model"));
        let councils: Option<std::collections::BTreeMap<String, crate::accounting::Tally>> =
            serde_json::from_value(line["councils_by_model"].clone()).ok();
        spent.add(&crate::accounting::Spent {
            agent: &agent,
            stage: line["stage"].as_str(),
            model: (line["kind"] != super::COUNCIL_KIND).then_some(model.as_str()),
            attempt,
            usage: &usage,
            unpriced: line["cost_source"] == "unpriced",
            councils: councils.as_ref(),
        });
        simulated |= line["simulated"] == true;
    }
    Ok(Resume {
        lock: Some(lock),
        run_id,
        dir: dir.to_path_buf(),
        attempt,
        from_stage: from_stage.map(String::from),
        run_doc,
        stages,
        journal,
        journalled,
        stage_runs,
        checkpoints,
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
