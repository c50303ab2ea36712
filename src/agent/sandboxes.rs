//! The sandboxes a workflow opens (`ctx.sandboxes.open`): what an agent spec's `sandbox` asks for
//! (`Asked`), the handle a script holds, and the run's list of them, each open until `close`.
//! A handle is good only in the run that opened it and only while its sandbox is open.

use super::error::HandleError;
use crate::sandbox::Policy;
use serde_json::Value;
use std::sync::Mutex;

/// What an agent spec's `sandbox` asked for.
#[derive(Debug, Clone, PartialEq)]
pub enum Asked {
    /// A name from `[sandboxes]` in awf.toml.
    Named(String),
    /// An inline policy map (JSON), checked when the agent opens.
    Inline(Value),
    /// A sandbox the workflow opened.
    Opened(Handle),
}

impl Asked {
    /// From the JSON an agent spec travels in (a cluster message): a name or an inline policy.
    pub fn from_json(v: Value) -> Asked {
        match v {
            Value::String(name) => Asked::Named(name),
            other => Asked::Inline(other),
        }
    }

    /// As JSON for another machine: a handle is this machine's, so it is refused.
    pub fn to_json(&self) -> Result<Value, HandleError> {
        match self {
            Asked::Named(name) => Ok(Value::String(name.clone())),
            Asked::Inline(v) => Ok(v.clone()),
            Asked::Opened(h) => Err(HandleError::Abroad(h.name.clone())),
        }
    }
}

/// A sandbox the workflow opened, as its script holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handle {
    /// The run that opened it.
    pub run: String,
    pub name: String,
}

struct Entry {
    name: String,
    /// Resolved and checked.
    policy: Policy,
    /// Why it is closed, once it is.
    closed: Option<String>,
}

/// The run's workflow sandboxes, in the order they were opened.
#[derive(Default)]
pub struct Workflow {
    list: Mutex<Vec<Entry>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Entries are only added or marked closed; a poisoned lock still holds a valid list.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Workflow {
    /// The policy of the sandbox `h` names, or why it cannot seat an agent of run `run`.
    pub fn policy(&self, run: &str, h: &Handle) -> Result<Policy, HandleError> {
        if h.run != run {
            return Err(HandleError::OtherRun { name: h.name.clone(), of: h.run.clone(), run: run.to_string() });
        }
        let list = lock(&self.list);
        let e = list.iter().find(|e| e.name == h.name).ok_or_else(|| HandleError::NotOpened(h.name.clone()))?;
        match &e.closed {
            Some(why) => Err(HandleError::Closed { name: h.name.clone(), why: why.clone() }),
            None => Ok(e.policy.clone()),
        }
    }

    pub(super) fn add(&self, run: &str, name: &str, policy: Policy) -> Result<Handle, HandleError> {
        let mut list = lock(&self.list);
        if list.iter().any(|e| e.name == name) {
            return Err(HandleError::NameTaken(name.to_string()));
        }
        list.push(Entry { name: name.into(), policy, closed: None });
        Ok(Handle { run: run.into(), name: name.into() })
    }

    pub(super) fn close(&self, run: &str, h: &Handle, why: &str) -> Result<(), HandleError> {
        self.policy(run, h)?;
        let mut list = lock(&self.list);
        if let Some(e) = list.iter_mut().find(|e| e.name == h.name) {
            e.closed = Some(why.into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_does_not_travel_to_another_machine() {
        let named = Asked::from_json(Value::String("locked".into()));
        assert_eq!(named, Asked::Named("locked".into()));
        assert_eq!(named.to_json().expect("a name"), Value::String("locked".into()));
        let inline = Asked::from_json(serde_json::json!({ "network": "host" }));
        assert_eq!(inline.to_json().expect("a policy"), serde_json::json!({ "network": "host" }));
        let e = Asked::Opened(Handle { run: "r".into(), name: "team".into() }).to_json().expect_err("a handle");
        assert!(matches!(&e, HandleError::Abroad(n) if n == "team"), "{e}");
    }

    #[test]
    fn a_handle_seats_agents_only_in_its_own_run_and_only_while_open() {
        let w = Workflow::default();
        let h = w.add("run-1", "team", Policy::default()).expect("opened");
        assert_eq!(w.policy("run-1", &h).expect("open"), Policy::default());
        let e = w.policy("run-2", &h).expect_err("another run's");
        assert!(e.to_string().contains("belongs to run run-1, not this one (run-2)"), "{e}");
        let e = w.add("run-1", "team", Policy::default()).expect_err("twice");
        assert!(matches!(&e, HandleError::NameTaken(n) if n == "team"), "{e}");
        w.close("run-1", &h, "closed by the workflow").expect("closed");
        let e = w.policy("run-1", &h).expect_err("closed");
        assert_eq!(
            e.to_string(),
            "sandbox `team` is closed (closed by the workflow); open another with ctx.sandboxes.open"
        );
        assert!(matches!(w.close("run-1", &h, "again"), Err(HandleError::Closed { .. })));
        let ghost = Handle { run: "run-1".into(), name: "ghost".into() };
        assert!(matches!(w.policy("run-1", &ghost), Err(HandleError::NotOpened(n)) if n == "ghost"));
    }
}
