//! A run's panes (agents with `placement: "pane"`): one tmux session per run, `awf-<run id>`, on
//! awf's own tmux server; a window per stage (named after it; `run` for agents opened outside
//! any stage), which becomes the current one as the run reaches it. An agent's pane is made as
//! it opens, holding a placeholder until its first turn starts the CLI there: beside the agent
//! its `layout` names (`split` right, the default, or below), or, without one, as a split of the
//! largest pane of its stage's window (right when that pane is wide, else below), or a window of
//! its own when the window has no room (a pane under 40x8 is too small for a CLI). A `beside`
//! that cannot be honoured (the agent is not open, was stopped, is headless, its pane is gone
//! or too small) places the pane as without one, and the reason is recorded. When the run ends,
//! or the agent is stopped, its pane is closed or, as `keep_pane` says, released: marked kept and
//! left running for the operator. A new attempt of the run first closes the panes an earlier one
//! left (after a kill -9), except released ones. `result.json` `panes` lists them all.

use crate::pane::spec::{Elsewhere, PaneRecord, PaneSpec, PaneState, Split, Went};
use crate::pane::{self, PaneId, PaneInfo, Tmux};
use crate::run::Run;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The records are replaced field by field under the lock, each write whole.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Why an agent cannot have a pane.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refused {
    #[error("placement \"pane\" is for the CLI harnesses (claude, codex, pi): harness `{0}` has no CLI to show in a pane; drop `placement` or give it a CLI runtime")]
    NotCli(crate::config::HarnessKind),
    #[error(
        "placement \"pane\" is not built for an agent forking the calling session (fork_caller): open it headless"
    )]
    ForksCaller,
    #[error("placement \"pane\" runs the agent's CLI in a tmux pane on this machine: it is not built for agents run by workers (--nats); run here, or drop it")]
    OnWorkers,
}

/// Why an agent's pane is refused or cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum PaneOpenError {
    #[error(transparent)]
    Refused(#[from] Refused),
    /// tmux is missing or its server cannot start.
    #[error(transparent)]
    Tmux(#[from] pane::Error),
    /// The CLI cannot run in the pane.
    #[error(transparent)]
    Seat(#[from] crate::harness::cli::interactive::PaneError),
}

/// Where a `beside` points, as the agent book finds it.
#[derive(Debug, Clone)]
pub enum Beside {
    Pane(String, PaneId),
    Not(Elsewhere),
}

/// The run's panes.
#[derive(Default)]
pub struct PaneBook {
    tmux: Tmux,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Whether this attempt has looked at the run's session (and closed what an earlier one left).
    started: bool,
    socket: Option<PathBuf>,
    records: Vec<PaneRecord>,
}

/// Whether a pane has room for a split that way.
fn fits(p: &PaneInfo, split: Split) -> bool {
    match split {
        Split::Right => p.width > 2 * pane::MIN_WIDTH,
        Split::Below => p.height > 2 * pane::MIN_HEIGHT,
    }
}

/// The way to split a pane that has no neighbour asked: along its longer side on screen (a cell
/// is about twice as tall as it is wide), else the other way, else none.
fn auto_split(p: &PaneInfo) -> Option<Split> {
    let wide = p.width >= 2 * p.height;
    let order = if wide { [Split::Right, Split::Below] } else { [Split::Below, Split::Right] };
    order.into_iter().find(|s| fits(p, *s))
}

impl PaneBook {
    /// The pane of agent `key`, while it is open.
    pub fn pane_of(&self, key: &str) -> Option<PaneId> {
        let inner = lock(&self.inner);
        inner.records.iter().find(|r| r.agent == key && r.state == PaneState::Open).map(|r| r.target.clone())
    }

    /// Agent `key`'s pane record, once made.
    pub fn record_of(&self, key: &str) -> Option<PaneRecord> {
        lock(&self.inner).records.iter().rev().find(|r| r.agent == key).cloned()
    }

    /// Makes agent `key`'s pane (holding a placeholder until its first turn), placed as `spec`
    /// asks when it can be (`beside`: what the book found the neighbour to be).
    #[allow(clippy::too_many_arguments)]
    pub fn open(
        &self,
        run: &Run,
        key: &str,
        harness: &str,
        spec: &PaneSpec,
        beside: Option<Beside>,
        stage: Option<&str>,
        awf: &Path,
        cwd: &Path,
    ) -> Result<(Tmux, PaneRecord), pane::Error> {
        self.tmux.probe()?;
        let mut inner = lock(&self.inner);
        let session = pane::session_name(&run.id);
        if !inner.started {
            inner.started = true;
            for left in self.tmux.list(&session).into_iter().filter(|p| p.run == run.id && !p.kept) {
                let _ = self.tmux.kill_pane(&left.id);
            }
        }
        let window = stage.unwrap_or("run").to_string();
        let hold = pane::launch::hold_argv(awf, &format!("awf: agent {key} ({harness}) waits for its first turn"));
        let split = spec.layout.split;
        // The neighbour's pane, or why not (nothing when no neighbour was asked).
        let target = match beside {
            Some(Beside::Pane(agent, id)) => match self.tmux.list(&session).into_iter().find(|p| p.id == id) {
                None => Err(Some(Elsewhere::Gone { agent })),
                Some(p) if !fits(&p, split) => {
                    Err(Some(Elsewhere::NoRoom { agent, width: p.width, height: p.height, split }))
                }
                Some(p) => Ok(p.id),
            },
            Some(Beside::Not(why)) => Err(Some(why)),
            None => Err(None),
        };
        let (id, went, elsewhere) = match target {
            Ok(id) => (self.tmux.split(&id, split, cwd, &hold)?, Went::Beside, None),
            Err(why) => {
                let (id, went) = self.place(&session, &window, cwd, &hold)?;
                (id, went, why)
            }
        };
        for (option, value) in [("@awf_agent", key), ("@awf_harness", harness), ("@awf_run", run.id.as_str())] {
            self.tmux.set(&id, option, value)?;
        }
        if inner.socket.is_none() {
            inner.socket = self.tmux.socket_path(&session);
        }
        let record = PaneRecord {
            agent: key.to_string(),
            harness: harness.to_string(),
            target: id,
            session,
            window,
            socket: inner.socket.clone(),
            layout: spec.layout.clone(),
            went,
            reason: elsewhere.as_ref().map(|e| e.to_string()),
            elsewhere,
            keep: spec.keep,
            state: PaneState::Open,
        };
        inner.records.push(record.clone());
        Ok((self.tmux.clone(), record))
    }

    /// A pane with no neighbour asked (or one that could not take it): a split of the window's
    /// largest pane, or a window of its own.
    fn place(&self, session: &str, window: &str, cwd: &Path, argv: &[String]) -> Result<(PaneId, Went), pane::Error> {
        if !self.tmux.has_session(session) {
            return Ok((self.tmux.new_session(session, window, cwd, argv)?, Went::Window));
        }
        let largest = self
            .tmux
            .list(session)
            .into_iter()
            .filter(|p| p.window == window && !p.dead)
            .max_by_key(|p| p.width * p.height);
        match largest.and_then(|p| auto_split(&p).map(|s| (p.id, s))) {
            Some((id, split)) => Ok((self.tmux.split(&id, split, cwd, argv)?, Went::Split)),
            None => Ok((self.tmux.new_window(session, window, cwd, argv)?, Went::Window)),
        }
    }

    /// The agent was stopped: its pane is closed, unless `keep_pane: "always"` releases it.
    pub fn stop(&self, key: &str) -> Option<PaneRecord> {
        let mut inner = lock(&self.inner);
        let r = inner.records.iter_mut().find(|r| r.agent == key && r.state == PaneState::Open)?;
        r.state = self.settle(r, false);
        Some(r.clone())
    }

    /// At the run's end: every open pane closed or released (`failed`: whether an agent's last
    /// operation failed or timed out). Returns what changed, and `result.json` `panes`.
    pub fn finish(&self, failed: &dyn Fn(&str) -> bool) -> (Vec<PaneRecord>, serde_json::Value) {
        let mut inner = lock(&self.inner);
        let mut changed = Vec::new();
        for i in 0..inner.records.len() {
            if inner.records[i].state != PaneState::Open {
                continue;
            }
            let failed = failed(&inner.records[i].agent);
            let state = self.settle(&inner.records[i], failed);
            inner.records[i].state = state;
            changed.push(inner.records[i].clone());
        }
        let summary = match inner.records.is_empty() {
            true => serde_json::Value::Null,
            false => serde_json::to_value(&inner.records).unwrap_or_default(),
        };
        (changed, summary)
    }

    /// Closes or releases one pane.
    fn settle(&self, r: &PaneRecord, failed: bool) -> PaneState {
        if self.tmux.state(&r.target) == pane::State::Gone {
            return PaneState::Gone;
        }
        if r.keep.keeps(failed) {
            let _ = self.tmux.set(&r.target, "@awf_kept", "1");
            return PaneState::Kept;
        }
        let _ = self.tmux.kill_pane(&r.target);
        PaneState::Closed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pane(width: u32, height: u32) -> PaneInfo {
        PaneInfo {
            id: PaneId("%1".into()),
            window: "w".into(),
            width,
            height,
            pid: 1,
            dead: false,
            dead_status: None,
            agent: String::new(),
            run: String::new(),
            kept: false,
        }
    }

    #[test]
    fn a_pane_is_split_along_its_longer_side_while_there_is_room() {
        assert_eq!(auto_split(&pane(200, 50)), Some(Split::Right));
        assert_eq!(auto_split(&pane(99, 50)), Some(Split::Below), "narrow on screen: below");
        assert_eq!(auto_split(&pane(200, 16)), Some(Split::Right));
        assert_eq!(auto_split(&pane(80, 16)), None, "too small either way: a window of its own");
        assert!(!fits(&pane(80, 50), Split::Right) && fits(&pane(81, 50), Split::Right));
    }
}
