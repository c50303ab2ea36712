//! Stage bookkeeping: each name once per run, the order stages ended in, and their records.

use super::StageStatus;
use crate::record::{Recorder, Stream};
use serde_json::value::RawValue;
use std::collections::HashSet;
use std::sync::Mutex;

#[derive(Default)]
pub struct StageBook {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    names: HashSet<String>,
    ended: Vec<(String, StageStatus)>,
    failed_in: Option<String>,
}

/// A stage's end, as `stages.jsonl` records it.
pub struct StageEnd<'a> {
    pub name: &'a str,
    pub attempt: u32,
    pub status: StageStatus,
    /// The value as JSON text.
    pub value: Option<&'a RawValue>,
    pub summary: Option<&'a str>,
    pub reason: Option<&'a str>,
    /// The turns (default ids) each agent started in the stage: a later attempt that reuses it
    /// counts their op ids on past them.
    pub runs: &'a std::collections::BTreeMap<String, u64>,
}

/// A `stages.jsonl` line, serialised from borrowed fields; the value comes as JSON text (written
/// straight from the script's value when its schema asks only for a type: a 10,000-item stage's
/// JSON copy was its run's peak memory). The fields are in the order the line has always had:
/// alphabetical, as a JSON map's.
#[derive(serde::Serialize)]
struct StageLine<'a> {
    at: &'a str,
    attempt: u32,
    name: &'a str,
    reason: Option<&'a str>,
    runs: &'a std::collections::BTreeMap<String, u64>,
    status: StageStatus,
    summary: Option<&'a str>,
    value: Option<&'a RawValue>,
}

/// A stage name used a second time in a run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("stage `{0}` was already used in this run; stage names are used once")]
pub struct NameTaken(pub String);

impl StageBook {
    /// Claims a name; a name is used once per run.
    pub fn claim(&self, name: &str) -> Result<(), NameTaken> {
        let mut inner = self.lock();
        if !inner.names.insert(name.to_string()) {
            return Err(NameTaken(name.to_string()));
        }
        Ok(())
    }

    /// Records a stage's end and flushes the records to disk.
    pub fn end(&self, records: &Recorder, end: StageEnd<'_>) {
        let at = crate::record::now_iso();
        let line = StageLine {
            at: &at,
            attempt: end.attempt,
            name: end.name,
            reason: end.reason,
            runs: end.runs,
            status: end.status,
            summary: end.summary,
            value: end.value,
        };
        records.line(Stream::Stages, &line);
        records.event(&super::Event::StageFinished { name: end.name, status: end.status, reason: end.reason });
        self.lock().ended.push((end.name.to_string(), end.status));
        records.flush(true);
    }

    /// `[{name, status}]` in the order stages ended.
    pub fn summary(&self) -> Vec<crate::record::docs::StageEntry> {
        let entry = |(name, status): &(String, StageStatus)| crate::record::docs::StageEntry {
            name: name.clone(),
            status: (*status).into(),
        };
        self.lock().ended.iter().map(entry).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl StageBook {
    /// Notes the first stage an error went through, for `result.json`'s `ended_in`.
    pub fn note_failure(&self, name: &str) {
        let mut inner = self.lock();
        if inner.failed_in.is_none() {
            inner.failed_in = Some(name.to_string());
        }
    }

    pub fn failed_in(&self) -> Option<String> {
        self.lock().failed_in.clone()
    }
}
