//! What the live view shows: stages in progress, labelled parallel groups with done/total, agents
//! by state, and log lines. The engine updates it; the CLI draws it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Receives log lines and redraw hints; the CLI's terminal view implements it.
pub trait Sink: Send + Sync {
    fn line(&self, level: &str, text: &str);
}

#[derive(Debug, Clone)]
pub struct Group {
    pub id: u64,
    pub label: String,
    pub total: usize,
    pub started: usize,
    pub done: usize,
}

#[derive(Default)]
pub struct Progress {
    pub agents_open: AtomicUsize,
    pub agents_working: AtomicUsize,
    pub agents_closed: AtomicUsize,
    pub ops_settled: AtomicUsize,
    pub messages_sent: AtomicUsize,
    state: Mutex<State>,
    sink: Mutex<Option<Arc<dyn Sink>>>,
}

#[derive(Default, Clone)]
pub struct State {
    pub stages: Vec<String>,
    pub groups: Vec<Group>,
    next_group: u64,
}

impl Progress {
    pub fn set_sink(&self, sink: Arc<dyn Sink>) {
        *self.sink.lock().unwrap_or_else(|p| p.into_inner()) = Some(sink);
    }

    pub fn line(&self, level: &str, text: &str) {
        let sink = self.sink.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(s) = sink {
            s.line(level, text);
        }
    }

    pub fn snapshot(&self) -> State {
        self.lock().clone()
    }

    pub fn stage_started(&self, name: &str) {
        self.lock().stages.push(name.to_string());
    }

    pub fn stage_ended(&self, name: &str) {
        let mut s = self.lock();
        if let Some(i) = s.stages.iter().position(|n| n == name) {
            s.stages.remove(i);
        }
    }

    /// Registers a labelled group; unlabelled groups are not shown.
    pub fn group_started(&self, label: &str, total: usize) -> u64 {
        let mut s = self.lock();
        s.next_group += 1;
        let id = s.next_group;
        s.groups.push(Group { id, label: label.to_string(), total, started: 0, done: 0 });
        id
    }

    pub fn group_item(&self, id: u64, finished: bool) {
        if let Some(g) = self.lock().groups.iter_mut().find(|g| g.id == id) {
            if finished {
                g.done += 1;
            } else {
                g.started += 1;
            }
        }
    }

    pub fn group_ended(&self, id: u64) {
        self.lock().groups.retain(|g| g.id != id);
    }

    pub fn agent_working(&self, working: bool) {
        if working {
            self.agents_working.fetch_add(1, Ordering::Relaxed);
        } else {
            self.agents_working.fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}
