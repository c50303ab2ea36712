//! What a run folder says of its run, for `awf runs list|show|stop|logs` and `GET /runs`: its
//! status (an attempt recorded `running` whose process is gone is `interrupted`; a background run
//! that has not started is `queued`), its age, spend and script.

use super::background;
use crate::config::Config;
use crate::record::docs::{self, RunDoc, Waiting};
use crate::record::status::Recorded;
use crate::record::{accepted, lines};
use crate::run::RunStatus;
use anyhow::Result;
use serde::Deserialize;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The runs folder: `--runs-dir`, else the config's, else `.awf/runs`, under `cwd`.
pub fn runs_dir(cwd: &Path, given: Option<&PathBuf>) -> Result<PathBuf> {
    let config = Config::load(cwd)?;
    Ok(crate::record::runs_dir(cwd, given.map(PathBuf::as_path), config.runs_dir.as_deref()))
}

fn is_run(dir: &Path) -> bool {
    dir.join("run.json").is_file() || dir.join(background::FILE).is_file() || dir.join(accepted::FILE).is_file()
}

/// The folder of run `id` under `root`, or why there is none.
pub fn run_dir(root: &Path, id: &str) -> Result<PathBuf, String> {
    let dir = root.join(id);
    if id.is_empty() || id.contains('/') || id.starts_with('.') || !is_run(&dir) {
        return Err(format!("no run {id} in {}", root.display()));
    }
    Ok(dir)
}

/// Every run id under `root`, oldest first (ids sort by time).
pub fn ids(root: &Path) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(root)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| is_run(&e.path()))
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids
}

/// The status of each attempt as shown: as recorded, except that an attempt recorded `running`
/// whose process is gone (the run's lock is free, or a later attempt started) is `interrupted`.
/// `None` for a status this version does not know.
/// Whether an attempt of the run in `dir` holds its lock now; when `/proc/locks` cannot say, the
/// record is trusted. Check it before reading run.json (see `attempt_statuses`).
pub fn live(dir: &Path) -> bool {
    crate::record::lock::held(dir) != Some(false)
}

/// `live` is whether the run's lock was held when checked BEFORE `run` was read: an attempt
/// rewrites run.json and then lets the lock go, so the other order would see a run that just
/// ended as `running` with no lock, and call it interrupted.
pub fn attempt_statuses(run: &RunDoc, live: bool) -> Vec<Option<RunStatus>> {
    let last = run.attempts.len().saturating_sub(1);
    run.attempts
        .iter()
        .enumerate()
        .map(|(i, a)| match a.status.as_ref().and_then(Recorded::known) {
            // A background council `queued` in a process that died never started.
            Some(RunStatus::Running | RunStatus::Waiting | RunStatus::Queued) if i < last || !live => {
                Some(RunStatus::Interrupted)
            }
            s => s,
        })
        .collect()
}

/// A run's status: a background run's before it starts, then its live or interrupted last
/// attempt's, else the result's.
pub fn run_status(dir: &Path) -> String {
    let live = live(dir);
    let Some(run) = docs::run(dir) else {
        return match accepted::read(dir) {
            Some(a) => not_started(dir, &a).to_string(),
            None => background::status(dir).as_str().to_string(),
        };
    };
    let result = docs::result(dir);
    let last = attempt_statuses(&run, live).pop().flatten();
    match (last, result.as_ref().map(|r| r.status.as_str())) {
        (Some(s @ (RunStatus::Running | RunStatus::Waiting | RunStatus::Interrupted)), _) => s.to_string(),
        (_, Some(r)) => r.to_string(),
        (Some(s), None) => s.to_string(),
        (None, None) => "?".into(),
    }
}

/// The status of a run `awf serve` accepted that has no attempt yet: `queued` while a serve holds
/// it, `interrupted` when the serve that held it is gone (the next serve runs it), or how it ended
/// before it started.
pub fn not_started(dir: &Path, accepted: &accepted::Accepted) -> RunStatus {
    match accepted.status {
        accepted::Admission::Queued if accepted::held(dir) == Some(false) => RunStatus::Interrupted,
        accepted::Admission::Queued => RunStatus::Queued,
        accepted::Admission::Cancelled => RunStatus::Cancelled,
        accepted::Admission::Failed => RunStatus::Failed,
    }
}

/// One run as lists show it.
pub struct Summary {
    pub id: String,
    pub status: String,
    /// When its first attempt started (or, queued, when it was queued).
    pub started_at: Option<String>,
    pub cost_usd: f64,
    pub tokens: u64,
    /// Whether any of its operations' cost is a price (else its $0 says nothing).
    pub priced: bool,
    /// The script, relative to `cwd` when under it; `council:NAME` for a strategy.
    pub script: String,
    /// The checkpoints it waits on (`waiting`): key, question, schema, asked_at, timeout_ms, agent.
    pub waiting: Vec<Waiting>,
}

impl Summary {
    pub fn json(&self) -> Value {
        let mut v = json!({ "run_id": self.id, "status": self.status, "started_at": self.started_at,
                "cost_usd": self.cost_usd, "tokens": self.tokens, "script": self.script });
        if !self.waiting.is_empty() {
            v["waiting"] = json!(self.waiting);
        }
        v
    }

    /// What it spent: tokens, and USD when priced.
    pub fn spend(&self) -> String {
        super::records::spend(self.tokens, self.cost_usd, self.priced)
    }

    /// How long ago it started: `12s`, `5m`, `3h`, `2d`.
    pub fn age(&self) -> String {
        let Some(at) = self.started_at.as_deref().and_then(|t| humantime::parse_rfc3339(t).ok()) else {
            return "-".into();
        };
        let s = SystemTime::now().duration_since(at).unwrap_or(Duration::ZERO).as_secs();
        match s {
            0..60 => format!("{s}s"),
            60..3600 => format!("{}m", s / 60),
            3600..86400 => format!("{}h", s / 3600),
            _ => format!("{}d", s / 86400),
        }
    }
}

/// The strategy a run's recorded script names (`…/council:NAME.rhai`), if it is a council's.
pub fn strategy_name(script: &Path) -> Option<String> {
    let name = script.file_name()?.to_str()?.strip_prefix("council:")?;
    Some(name.trim_end_matches(".rhai").to_string())
}

/// Reads run `id`'s folder under `root`.
pub fn summary(root: &Path, id: &str, cwd: &Path) -> Summary {
    let dir = root.join(id);
    let run = docs::run(&dir).unwrap_or_default();
    let bg = docs::background(&dir);
    let kept = accepted::read(&dir);
    let asked = kept.as_ref().map(|a| requested_script(&a.request));
    let queued = bg.as_ref().and_then(|b| b.script.as_deref());
    let script = run.script.as_deref().or(queued).or(asked.as_deref()).unwrap_or_default();
    let script = match Path::new(script).file_name().and_then(|n| n.to_str()) {
        Some(n) if n.starts_with("council:") => n.trim_end_matches(".rhai").to_string(),
        _ => Path::new(script).strip_prefix(cwd).map(|p| p.display().to_string()).unwrap_or_else(|_| script.into()),
    };
    let started_at = run
        .attempts
        .first()
        .and_then(|a| a.started_at.as_deref())
        .or(bg.as_ref().and_then(|b| b.queued_at.as_deref()))
        .map(String::from)
        .or(kept.map(|a| a.accepted_at));
    let turns = lines::turns(&dir).unwrap_or_default();
    let cost_usd = turns.iter().map(lines::TurnRecord::cost_usd).sum();
    let tokens = turns.iter().map(|t| t.tokens).sum();
    let priced = turns.iter().any(lines::TurnRecord::priced);
    let status = run_status(&dir);
    Summary {
        id: id.to_string(),
        waiting: waiting(&dir, &status),
        status,
        started_at,
        cost_usd,
        tokens,
        priced,
        script,
    }
}

/// What a run whose status is `status` waits for: run.json's open checkpoints while it is
/// `waiting` (read after the status, which checked the lock first), else nothing.
pub fn waiting(dir: &Path, status: &str) -> Vec<Waiting> {
    if status != RunStatus::Waiting.as_str() {
        return Vec::new();
    }
    docs::run(dir).map(|r| r.waiting).unwrap_or_default()
}

/// What a `POST /runs` body names: its script, or `council:NAME` for a strategy.
pub fn requested_script(request: &Value) -> String {
    #[derive(Default, serde::Deserialize)]
    #[serde(default)]
    struct Asked {
        script: Option<String>,
        strategy: Option<String>,
    }
    let asked = Asked::deserialize(request).unwrap_or_default();
    match (asked.script, asked.strategy) {
        (Some(script), _) => script,
        (None, Some(name)) => format!("council:{name}"),
        (None, None) => "?".into(),
    }
}

/// Whether the run in `dir` is not live but its last attempt was parked on a checkpoint when its
/// process ended: `awf runs resume` parks it again.
pub fn parked_when_interrupted(dir: &Path) -> bool {
    let run = docs::run(dir).unwrap_or_default();
    run.attempts.last().and_then(|a| a.status.as_ref()).is_some_and(|s| s.known() == Some(RunStatus::Waiting))
}
