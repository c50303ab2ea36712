//! A run's child runs (councils its agents convened): which are still running, and the one billing
//! of each child's spend to the agent that convened it. A child is billed once, whichever comes
//! first: on its calling operation's line while that operation is open, on a `council` line of its
//! own when it settles after that (or in the background), or, still running when this run closes,
//! from its accounts so far on a `council` line that says so. Background councils are counted
//! here too: the run's end waits for them.

use super::{lock, Outcome, OutcomeKind, Run, Settled, COUNCIL_KIND};
use crate::accounting::{CostSource, Tally, Usage};
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// The child runs of one run, in the order they started.
#[derive(Default)]
pub(super) struct Children {
    inner: Mutex<Vec<Child>>,
    ended: Condvar,
}

struct Child {
    run: Arc<Run>,
    agent: String,
    strategy: String,
    running: bool,
    /// Its spend is billed (or being billed by whoever claimed it).
    billed: bool,
}

/// A council's spend, billed on a line of its own in the parent.
pub struct Bill<'a> {
    pub run_id: &'a str,
    pub agent: &'a str,
    pub strategy: &'a str,
    pub ok: bool,
    /// Why it did not succeed.
    pub reason: Option<String>,
    pub usage: Usage,
    /// Its spend by the model that spent it (its own `by_model`).
    pub by_model: &'a BTreeMap<String, Tally>,
    pub duration_ms: u64,
    pub simulated: bool,
    pub started_at: &'a str,
}

impl Children {
    fn lock(&self) -> MutexGuard<'_, Vec<Child>> {
        // Entries are pushed and updated whole: a poisoned lock still holds valid ones.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn ids(&self) -> Vec<String> {
        self.lock().iter().map(|c| c.run.id.clone()).collect()
    }
}

impl Run {
    /// Lists child run `child`, convened by `agent` as `strategy`, in this run's `result.json`; it
    /// runs until `child_ended`, and its spend is billed once (`claim_child_bill`).
    pub fn add_child(&self, child: &Arc<Run>, agent: &str, strategy: &str) {
        let c =
            Child { run: child.clone(), agent: agent.into(), strategy: strategy.into(), running: true, billed: false };
        self.children.lock().push(c);
    }

    /// Child run `id` has settled and its end is on this run's record.
    pub fn child_ended(&self, id: &str) {
        if let Some(c) = self.children.lock().iter_mut().find(|c| c.run.id == id) {
            c.running = false;
        }
        self.children.ended.notify_all();
    }

    /// Takes the one right to bill child run `id`'s spend: false when it is billed already (this
    /// run closed while it ran, and billed what it had spent so far).
    pub fn claim_child_bill(&self, id: &str) -> bool {
        match self.children.lock().iter_mut().find(|c| c.run.id == id) {
            Some(c) if !c.billed => {
                c.billed = true;
                true
            }
            _ => false,
        }
    }

    /// Bills a council's spend to its agent on a line of its own (kind `council`, op id
    /// `council:<run id>`), as it was priced in the council's run. The caller claimed it.
    pub fn bill_council(&self, b: &Bill<'_>) {
        let outcome = Outcome {
            kind: if b.ok { OutcomeKind::Answered } else { OutcomeKind::Failed },
            value: None,
            reason: b.reason.clone(),
            op_id: format!("council:{}", b.run_id),
            usage: b.usage,
            duration_ms: b.duration_ms,
            cost_source: if b.simulated { CostSource::Simulated } else { CostSource::Priced },
            simulated: b.simulated,
        };
        let s = Settled {
            attempt: self.attempt,
            agent: b.agent,
            harness: "council",
            outcome: &outcome,
            stage: None,
            label: Some(b.strategy),
            turn_hash: "",
            turn_parts: "",
            model: COUNCIL_KIND,
            started_at: b.started_at,
            rejections: 0,
            kind: COUNCIL_KIND,
            session: None,
            councils: Some(b.by_model),
        };
        self.settle(&s, None);
    }

    /// Waits (at most `limit`) for the child runs still running: stopped with the operation that
    /// convened them or with this run, they settle within their stop grace, and their end belongs
    /// in this record. Those still running after that are billed what they spent so far.
    pub(super) fn close_children(&self, limit: std::time::Duration) {
        let guard = self.children.lock();
        let (mut guard, _) = self
            .children
            .ended
            .wait_timeout_while(guard, limit, |c| c.iter().any(|c| c.running))
            .unwrap_or_else(|p| p.into_inner());
        let late: Vec<(Arc<Run>, String, String)> = guard
            .iter_mut()
            .filter(|c| c.running && !c.billed)
            .map(|c| {
                c.billed = true;
                (c.run.clone(), c.agent.clone(), c.strategy.clone())
            })
            .collect();
        drop(guard);
        for (child, agent, strategy) in late {
            let accounts = child.scheduler.accounts();
            let t = &accounts.totals;
            let why = format!(
                "council {strategy} (run {}) had not settled when this run ended: billed what it had spent so far",
                child.id
            );
            self.log("warn", &why, &serde_json::Value::Null);
            let bill = Bill {
                run_id: &child.id,
                agent: &agent,
                strategy: &strategy,
                ok: false,
                reason: Some(why),
                usage: t.usage(),
                by_model: &accounts.by_model,
                duration_ms: child.started.elapsed().as_millis() as u64,
                simulated: child.simulated(),
                started_at: &child.started_at,
            };
            self.bill_council(&bill);
        }
    }
}

/// Background councils (`wf council --background`): the run's end waits for them.
impl Run {
    /// Counts a background council started by one of the run's agents: the run's end waits for it.
    pub fn background_started(&self) {
        let mut b = lock(&self.background);
        b.0 += 1;
        b.1 += 1;
    }

    /// A background council settled and its output went where it belongs.
    pub fn background_ended(&self) {
        {
            let mut b = lock(&self.background);
            b.0 = b.0.saturating_sub(1);
        }
        self.background_changed.notify_waiters();
    }

    /// Background councils (still running, started in this attempt).
    pub fn background(&self) -> (usize, usize) {
        *lock(&self.background)
    }

    /// Waits until no background council is running. Cancel safety: dropping it waits no more.
    pub async fn background_settled(&self) {
        loop {
            let changed = self.background_changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.background().0 == 0 {
                return;
            }
            changed.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::{RunSpec, Settled};
    use serde_json::json;

    fn start(dir: &std::path::Path, id: &str, rt: &tokio::runtime::Runtime) -> Arc<Run> {
        let spec = RunSpec {
            script: dir.join("wf.rhai"),
            script_sha256: String::new(),
            cwd: dir.to_path_buf(),
            runs_dir: dir.join("runs"),
            args: json!({}),
            meta: json!({}),
            config: Default::default(),
            limits: Default::default(),
            deadline: None,
            default_runtime: "fake".into(),
            sandbox: None,
            resume: None,
            isolation: Default::default(),
        };
        Run::start_with_id(spec, id.into(), rt.handle().clone()).expect("a run")
    }

    /// One answered operation of `usage` by `agent` on `model`.
    fn spend(run: &Run, agent: &str, model: &str, usage: Usage) {
        let outcome = Outcome {
            kind: OutcomeKind::Answered,
            value: None,
            reason: None,
            op_id: format!("{agent}#1"),
            usage,
            duration_ms: 1,
            cost_source: CostSource::Harness,
            simulated: false,
        };
        let s = Settled {
            attempt: 1,
            agent,
            harness: "command",
            outcome: &outcome,
            stage: None,
            label: None,
            turn_hash: "",
            turn_parts: "",
            model,
            started_at: "",
            rejections: 0,
            kind: "turn",
            session: None,
            councils: None,
        };
        run.settle(&s, None);
    }

    #[test]
    fn a_child_still_running_at_close_is_billed_its_spend_so_far_once() {
        let rt = tokio::runtime::Runtime::new().expect("a runtime");
        let dir = tempfile::tempdir().expect("a folder");
        let parent = start(dir.path(), "parent", &rt);
        let child = start(dir.path(), "child", &rt);
        parent.add_child(&child, "boss", "gated");
        spend(&child, "member", "member-model", Usage { input_tokens: 100, output_tokens: 20, ..Default::default() });
        // The child never settles: the parent stops waiting and bills what it spent so far.
        parent.close_children(std::time::Duration::from_millis(20));
        let a = parent.scheduler.accounts();
        assert_eq!(a.by_agent["boss"].tokens, 120);
        assert_eq!(a.by_model["member-model"].tokens, 120);
        assert!(!a.by_model.contains_key(COUNCIL_KIND), "{:?}", a.by_model);
        parent.records.flush(true);
        let lines = crate::record::read_jsonl(&parent.dir().join("turns.jsonl")).expect("turns");
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert_eq!(lines[0]["op_id"], "council:child");
        assert!(lines[0]["reason"].as_str().unwrap_or("").contains("had not settled when this run ended"), "{lines:?}");
        // Its settle, later, bills nothing more.
        assert!(!parent.claim_child_bill("child"));
    }
}
