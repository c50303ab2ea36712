//! The one gate every agent operation passes: the concurrency limit, the agent limit and the
//! budgets. Spend is folded here as operations settle.

use crate::accounting::{Accounts, Usage};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The limits a run enforces (recorded as they are, the stall timeout in milliseconds).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct Limits {
    pub max_concurrency: usize,
    pub max_agents: usize,
    pub budget_usd: Option<f64>,
    pub budget_tokens: Option<u64>,
    pub nudges: u32,
    #[serde(rename = "stall_timeout_ms", with = "millis")]
    pub stall_timeout: std::time::Duration,
}

/// A duration as whole milliseconds.
mod millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_concurrency: 16,
            max_agents: 1000,
            budget_usd: None,
            budget_tokens: None,
            nudges: 2,
            stall_timeout: std::time::Duration::from_secs(600),
        }
    }
}

pub struct Scheduler {
    pub limits: Limits,
    slots: Arc<Semaphore>,
    agents: AtomicUsize,
    accounts: Mutex<Accounts>,
}

impl Scheduler {
    pub fn new(limits: Limits) -> Scheduler {
        let slots = Arc::new(Semaphore::new(limits.max_concurrency.max(1)));
        Scheduler { limits, slots, agents: AtomicUsize::new(0), accounts: Mutex::new(Accounts::default()) }
    }

    /// Counts a new agent against `max_agents`.
    pub fn admit_agent(&self) -> Result<(), String> {
        let n = self.agents.fetch_add(1, Ordering::SeqCst);
        if n >= self.limits.max_agents {
            self.agents.fetch_sub(1, Ordering::SeqCst);
            return Err(format!(
                "max agents reached: this run may open {} agents (--max-agents)",
                self.limits.max_agents
            ));
        }
        Ok(())
    }

    /// `Some(why)` once spend has reached a budget: no new operation may start.
    pub fn budget_exhausted(&self) -> Option<String> {
        let a = self.lock();
        if let Some(usd) = self.limits.budget_usd {
            if a.totals.cost_usd >= usd {
                return Some(format!("budget exhausted: spent ${:.4} of ${usd:.4} (--budget-usd)", a.totals.cost_usd));
            }
        }
        if let Some(tokens) = self.limits.budget_tokens {
            if a.totals.tokens >= tokens {
                return Some(format!(
                    "budget exhausted: spent {} of {tokens} tokens (--budget-tokens)",
                    a.totals.tokens
                ));
            }
        }
        None
    }

    /// Waits for an operation slot. Cancel safety: dropping the future gives up the place in line.
    pub async fn acquire(&self) -> OwnedSemaphorePermit {
        // The semaphore is never closed, so acquiring cannot fail.
        match self.slots.clone().acquire_owned().await {
            Ok(p) => p,
            Err(_) => unreachable!("the scheduler's semaphore is never closed"),
        }
    }

    pub fn record(&self, agent: &str, stage: Option<&str>, model: &str, usage: &Usage) {
        self.lock().add(agent, stage, model, usage);
    }

    pub fn accounts(&self) -> Accounts {
        self.lock().clone()
    }

    /// What one agent's settled operations spent so far (every kind: turns, message operations,
    /// compactions).
    pub fn agent_tally(&self, agent: &str) -> crate::accounting::Tally {
        self.lock().by_agent.get(agent).cloned().unwrap_or_default()
    }

    /// Tokens and USD spent so far.
    pub fn spent(&self) -> (u64, f64) {
        let a = self.lock();
        (a.totals.tokens, a.totals.cost_usd)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Accounts> {
        // Accounts are plain sums; a panic elsewhere cannot leave them half-updated.
        self.accounts.lock().unwrap_or_else(|p| p.into_inner())
    }
}
