//! The one gate every agent operation passes: the concurrency limit, the agent limit and the
//! budgets. Spend is folded here as operations settle.

use crate::accounting::{Accounts, Spent, Usage};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

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
    book: Mutex<Book>,
    /// Woken when an operation settles or gives up its place: admissions waiting on the budget
    /// look again.
    changed: Notify,
}

/// Spend and what is set aside for the operations in flight.
#[derive(Default)]
struct Book {
    accounts: Accounts,
    /// Reserved for operations admitted and not yet settled.
    reserved: Spend,
    in_flight: usize,
    /// The most one settled operation of this run spent: the reservation for the next one.
    largest: Option<Spend>,
}

/// Tokens and USD.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spend {
    pub tokens: u64,
    pub usd: f64,
}

impl Spend {
    fn of(u: &Usage) -> Spend {
        Spend { tokens: u.tokens(), usd: u.cost_usd }
    }
}

/// An operation's place under the budget: what was set aside for it until it settles (or is
/// dropped unsettled, which gives the place up).
pub struct Admission<'a> {
    scheduler: &'a Scheduler,
    held: Option<Spend>,
}

impl Admission<'_> {
    /// Records the settled operation's spend and releases what was set aside for it, in one step.
    pub fn settle(mut self, spent: &Spent<'_>) {
        let usage = spent.usage;
        let s = self.scheduler;
        {
            let mut b = s.lock();
            if let Some(held) = self.held.take() {
                b.release(held);
            }
            b.accounts.add(spent);
            let spent = Spend::of(usage);
            b.largest = Some(match b.largest {
                Some(l) => Spend { tokens: l.tokens.max(spent.tokens), usd: l.usd.max(spent.usd) },
                None => spent,
            });
        }
        s.changed.notify_waiters();
    }
}

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        if let Some(held) = self.held.take() {
            self.scheduler.lock().release(held);
            self.scheduler.changed.notify_waiters();
        }
    }
}

impl Book {
    fn release(&mut self, held: Spend) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.reserved.tokens = self.reserved.tokens.saturating_sub(held.tokens);
        self.reserved.usd = (self.reserved.usd - held.usd).max(0.0);
    }
}

/// A limit of the run reached: no new agent, or no new operation, may start.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LimitReached {
    #[error("max agents reached: this run may open {0} agents (--max-agents)")]
    Agents(usize),
    #[error("budget exhausted: spent ${:.4} of ${usd:.4} (--budget-usd)", crate::accounting::micro(*spent))]
    Usd { spent: f64, usd: f64 },
    #[error("budget exhausted: spent {spent} of {tokens} tokens (--budget-tokens)")]
    Tokens { spent: u64, tokens: u64 },
}

impl Scheduler {
    /// A scheduler for `limits`, counting on from `spent` (earlier attempts of the run).
    pub fn new(limits: Limits, spent: Accounts) -> Scheduler {
        let slots = Arc::new(Semaphore::new(limits.max_concurrency.max(1)));
        let book = Book { accounts: spent, ..Book::default() };
        Scheduler { limits, slots, agents: AtomicUsize::new(0), book: Mutex::new(book), changed: Notify::new() }
    }

    /// Counts a new agent against `max_agents`.
    pub fn admit_agent(&self) -> Result<(), LimitReached> {
        let n = self.agents.fetch_add(1, Ordering::SeqCst);
        if n >= self.limits.max_agents {
            self.agents.fetch_sub(1, Ordering::SeqCst);
            return Err(LimitReached::Agents(self.limits.max_agents));
        }
        Ok(())
    }

    /// `Some(why)` once spend has reached a budget: no new operation may start.
    pub fn budget_exhausted(&self) -> Option<LimitReached> {
        self.exhausted(&self.lock().accounts)
    }

    fn exhausted(&self, a: &Accounts) -> Option<LimitReached> {
        if let Some(usd) = self.limits.budget_usd {
            if a.totals.cost_usd >= usd {
                return Some(LimitReached::Usd { spent: a.totals.cost_usd, usd });
            }
        }
        if let Some(tokens) = self.limits.budget_tokens {
            if a.totals.tokens >= tokens {
                return Some(LimitReached::Tokens { spent: a.totals.tokens, tokens });
            }
        }
        None
    }

    /// Whether an operation may start now: spend plus what is set aside for the operations in
    /// flight plus its own share stays within every budget; or nothing is in flight and the budget
    /// is not reached (so the overshoot is at most one operation). Until an operation of the run
    /// has settled there is no estimate, and operations start one at a time.
    fn fits(&self, b: &Book) -> bool {
        let Some(est) = b.largest else { return b.in_flight == 0 };
        if b.in_flight == 0 {
            return true;
        }
        let usd_ok =
            self.limits.budget_usd.is_none_or(|usd| b.accounts.totals.cost_usd + b.reserved.usd + est.usd <= usd);
        let tokens_ok =
            self.limits.budget_tokens.is_none_or(|t| b.accounts.totals.tokens + b.reserved.tokens + est.tokens <= t);
        usd_ok && tokens_ok
    }

    /// Admits an operation under the budget, waiting while the operations in flight may still
    /// spend what is left; the reason when the budget is spent. `waits: false` (an answer an asker
    /// is waiting for) never waits on others: it starts unless the budget is reached.
    /// Cancel safety: dropping the future gives nothing up, since nothing was taken yet.
    pub async fn admit(&self, waits: bool) -> Result<Admission<'_>, LimitReached> {
        let budgeted = self.limits.budget_usd.is_some() || self.limits.budget_tokens.is_some();
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let mut b = self.lock();
                if let Some(why) = self.exhausted(&b.accounts) {
                    return Err(why);
                }
                if !budgeted {
                    return Ok(Admission { scheduler: self, held: None });
                }
                if !waits || self.fits(&b) {
                    let held = b.largest.unwrap_or_default();
                    b.in_flight += 1;
                    b.reserved.tokens += held.tokens;
                    b.reserved.usd += held.usd;
                    return Ok(Admission { scheduler: self, held: Some(held) });
                }
            }
            changed.await;
        }
    }

    /// Waits for an operation slot. Cancel safety: dropping the future gives up the place in line.
    pub async fn acquire(&self) -> OwnedSemaphorePermit {
        // The semaphore is never closed, so acquiring cannot fail.
        match self.slots.clone().acquire_owned().await {
            Ok(p) => p,
            Err(_) => unreachable!("the scheduler's semaphore is never closed"),
        }
    }

    /// Records a settled operation that was never admitted (it ended before it could start).
    pub fn record(&self, spent: &Spent<'_>) {
        self.lock().accounts.add(spent);
    }

    /// The run's accounts: every attempt's settled operations.
    pub fn accounts(&self) -> Accounts {
        self.lock().accounts.clone()
    }

    /// What one agent's settled operations spent so far (every kind: turns, message operations,
    /// compactions).
    pub fn agent_tally(&self, agent: &str) -> crate::accounting::Tally {
        self.lock().accounts.by_agent.get(agent).cloned().unwrap_or_default()
    }

    /// What is left of each budget (tokens, USD): `None` where the run has no such budget.
    pub fn left(&self) -> (Option<u64>, Option<f64>) {
        let (tokens, usd) = self.spent();
        (
            self.limits.budget_tokens.map(|b| b.saturating_sub(tokens)),
            self.limits.budget_usd.map(|b| (b - usd).max(0.0)),
        )
    }

    /// Sets aside for a background council what is left of each budget once the spend, what is
    /// set aside already (operations in flight, other councils) and `also` (spent, not yet
    /// settled) are counted: the amounts (`None` where the run has no such budget), to be given
    /// back with `release_reserved` when the council settles. Operations started meanwhile wait
    /// for it as they wait for any operation in flight.
    pub fn reserve_left(&self, also: Spend) -> (Option<u64>, Option<f64>) {
        let mut b = self.lock();
        let tokens = self
            .limits
            .budget_tokens
            .map(|t| t.saturating_sub(b.accounts.totals.tokens + b.reserved.tokens + also.tokens));
        let usd = self.limits.budget_usd.map(|u| (u - b.accounts.totals.cost_usd - b.reserved.usd - also.usd).max(0.0));
        b.reserved.tokens += tokens.unwrap_or(0);
        b.reserved.usd += usd.unwrap_or(0.0);
        (tokens, usd)
    }

    /// Gives back what `reserve_left` set aside.
    pub fn release_reserved(&self, tokens: Option<u64>, usd: Option<f64>) {
        {
            let mut b = self.lock();
            b.reserved.tokens = b.reserved.tokens.saturating_sub(tokens.unwrap_or(0));
            b.reserved.usd = (b.reserved.usd - usd.unwrap_or(0.0)).max(0.0);
        }
        self.changed.notify_waiters();
    }

    /// Tokens and USD the run has spent so far, over every attempt.
    pub fn spent(&self) -> (u64, f64) {
        let b = self.lock();
        (b.accounts.totals.tokens, b.accounts.totals.cost_usd)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Book> {
        // Plain sums, each updated whole; a panic elsewhere cannot leave them half-updated.
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }
}
