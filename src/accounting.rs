//! Usage and prices: what one operation spent, the built-in price table, and the folds by agent,
//! stage and model that `result.json` and `ctx.spent()` report.

use serde::Serialize;
use std::collections::BTreeMap;

/// USD per million tokens.
#[derive(Debug, Clone, Copy, Default, serde::Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    #[serde(default)]
    pub cache_read: f64,
    #[serde(default)]
    pub cache_write: f64,
}

/// USD rounded to the micro-dollar, as values and records show it (no `0.10999999999999999`).
pub fn micro(usd: f64) -> f64 {
    (usd * 1e6).round() / 1e6
}

/// Serialises USD rounded to the micro-dollar.
pub fn serialize_usd<S: serde::Serializer>(usd: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(micro(*usd))
}

/// What one operation spent.
#[derive(Debug, Clone, Copy, Default, Serialize, serde::Deserialize, PartialEq)]
#[serde(default)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    #[serde(serialize_with = "serialize_usd")]
    pub cost_usd: f64,
}

impl Usage {
    pub fn tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens
    }

    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.cost_usd += other.cost_usd;
    }

    /// What was spent since `earlier` (an earlier reading of the same running total).
    pub fn since(&self, earlier: &Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens.saturating_sub(earlier.input_tokens),
            output_tokens: self.output_tokens.saturating_sub(earlier.output_tokens),
            cache_read_tokens: self.cache_read_tokens.saturating_sub(earlier.cache_read_tokens),
            cache_write_tokens: self.cache_write_tokens.saturating_sub(earlier.cache_write_tokens),
            cost_usd: (self.cost_usd - earlier.cost_usd).max(0.0),
        }
    }
}

/// What an operation has spent so far, shared by its harness (which adds each reply's usage the
/// moment it has it) and the operation pipeline, which bills it when the operation is cancelled or
/// times out mid-turn: tokens a server spent are billed even when no turn report comes back.
/// What councils the operation convened spent is kept apart: it was priced in their own runs, and
/// is added to the operation's spend as it is.
#[derive(Debug, Default)]
pub struct Meter(std::sync::Mutex<Usage>, std::sync::Mutex<Convened>);

/// What the councils an operation convened spent, by the model that spent it; closed once the
/// operation settled (what a council spends later is billed on a line of its own).
#[derive(Debug, Default)]
struct Convened {
    usage: Usage,
    by_model: BTreeMap<String, Tally>,
    closed: bool,
}

impl Meter {
    fn convened_lock(&self) -> std::sync::MutexGuard<'_, Convened> {
        // A plain value replaced whole: a poisoned lock still holds a valid one.
        self.1.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds what a council convened by the operation spent (already priced), by model. False when
    /// the operation has settled already: the caller bills it elsewhere.
    pub fn add_convened(&self, usage: &Usage, by_model: &BTreeMap<String, Tally>) -> bool {
        let mut c = self.convened_lock();
        if c.closed {
            return false;
        }
        c.usage.add(usage);
        for (model, t) in by_model {
            c.by_model.entry(model.clone()).or_default().merge(t);
        }
        true
    }

    /// What the councils the operation convened spent.
    pub fn convened(&self) -> Usage {
        self.convened_lock().usage
    }

    /// The operation settles: what its councils spent, by model; later spend is not taken.
    pub fn close_convened(&self) -> (Usage, BTreeMap<String, Tally>) {
        let mut c = self.convened_lock();
        c.closed = true;
        (c.usage, c.by_model.clone())
    }

    pub fn add(&self, usage: &Usage) {
        // A plain value replaced whole: a poisoned lock still holds a valid one.
        self.0.lock().unwrap_or_else(|p| p.into_inner()).add(usage);
    }

    pub fn total(&self) -> Usage {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Where an operation's cost came from.
#[derive(Debug, Clone, Copy, Serialize, serde::Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum CostSource {
    /// The harness reported its own cost.
    Harness,
    /// Tokens priced from the price table.
    Priced,
    /// The model has no known price: the cost is counted as zero.
    Unpriced,
    /// The `fake` harness: nothing was spent.
    Simulated,
    /// Read from a pane agent's own session file, cost included (pi, when its model has prices).
    SessionFile,
    /// Tokens read from a pane agent's own session file, priced from the price table (Claude Code
    /// and Codex write no cost there).
    SessionPriced,
}

impl CostSource {
    /// Whether the cost is the harness's own (not priced here).
    pub fn reported(self) -> bool {
        matches!(self, CostSource::Harness | CostSource::SessionFile)
    }
}

/// USD per million tokens for models whose prices are published; config `[prices]` overrides.
pub fn builtin_price(model: &str) -> Option<Price> {
    let (input, output, cache_read, cache_write) = match model {
        "claude-opus-4-1" | "claude-opus-4" => (15.0, 75.0, 1.5, 18.75),
        "claude-sonnet-4-5" | "claude-sonnet-4" => (3.0, 15.0, 0.3, 3.75),
        "claude-haiku-4-5" => (1.0, 5.0, 0.1, 1.25),
        "gpt-5" | "gpt-5-codex" => (1.25, 10.0, 0.125, 0.0),
        "gpt-5-mini" => (0.25, 2.0, 0.025, 0.0),
        "gpt-5-nano" => (0.05, 0.4, 0.005, 0.0),
        "gpt-4.1" => (2.0, 8.0, 0.5, 0.0),
        "gpt-4.1-mini" => (0.4, 1.6, 0.1, 0.0),
        "fake" => (0.0, 0.0, 0.0, 0.0),
        _ => return None,
    };
    Some(Price { input, output, cache_read, cache_write })
}

/// Input tokens a harness sends on a fresh session beyond awf's own prompt, as a (low, high)
/// range for `awf script plan`: a CLI's system prompt and tool definitions, an HTTP agent's
/// `wf_*` tool definitions. Measured once (`tests/plan_overhead.rs`, the CLIs pinned by `.ci/setup`
/// against the fake model server): the first request's bytes at 4 and at 3 bytes a token, claude
/// 115.8 kB, codex 40.7 kB, pi 5.8 kB, the `openai` tools 1.2 kB. A harness that is not a model
/// (`fake`, `command`) sends none.
pub fn harness_overhead(harness: &str) -> (u64, u64) {
    match harness {
        "claude" => (29_000, 39_000),
        "codex" => (10_000, 14_000),
        "pi" => (1_400, 2_000),
        "openai" | "anthropic" => (300, 450),
        _ => (0, 0),
    }
}

/// Prices tokens; `None` when the model has no price.
pub fn price_tokens(price: Option<Price>, u: &Usage) -> Option<f64> {
    let p = price?;
    let m = 1_000_000.0;
    Some(
        u.input_tokens as f64 * p.input / m
            + u.output_tokens as f64 * p.output / m
            + u.cache_read_tokens as f64 * p.cache_read / m
            + u.cache_write_tokens as f64 * p.cache_write / m,
    )
}

/// Totals kept per key.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, PartialEq)]
#[serde(default)]
pub struct Tally {
    pub operations: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    pub tokens: u64,
    #[serde(serialize_with = "serialize_usd")]
    pub cost_usd: f64,
}

impl Tally {
    fn add(&mut self, u: &Usage) {
        self.add_operations(u, 1);
    }

    /// Adds `operations` operations that spent `u` between them.
    fn add_operations(&mut self, u: &Usage, operations: u64) {
        self.operations += operations;
        self.input_tokens += u.input_tokens;
        self.output_tokens += u.output_tokens;
        self.cache_read_tokens += u.cache_read_tokens;
        self.cache_write_tokens += u.cache_write_tokens;
        self.tokens += u.tokens();
        self.cost_usd += u.cost_usd;
    }

    /// Adds another tally (its operations too).
    pub fn merge(&mut self, t: &Tally) {
        self.operations += t.operations;
        self.input_tokens += t.input_tokens;
        self.output_tokens += t.output_tokens;
        self.cache_read_tokens += t.cache_read_tokens;
        self.cache_write_tokens += t.cache_write_tokens;
        self.tokens += t.tokens;
        self.cost_usd += t.cost_usd;
    }

    /// The usage it sums.
    pub fn usage(&self) -> Usage {
        Usage {
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cache_read_tokens: self.cache_read_tokens,
            cache_write_tokens: self.cache_write_tokens,
            cost_usd: self.cost_usd,
        }
    }
}

/// The accounting section of `result.json` (read back with what an older awf did not write empty).
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Accounts {
    pub by_agent: BTreeMap<String, Tally>,
    pub by_stage: BTreeMap<String, Tally>,
    pub by_model: BTreeMap<String, Tally>,
    /// By attempt number: what each try of the run spent.
    pub by_attempt: BTreeMap<u32, Tally>,
    pub totals: Tally,
    /// Operations that spent tokens on a model with no price (counted at $0), by model.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub unpriced: BTreeMap<String, u64>,
}

/// One settled operation, as the accounts file it. Its operations are its own (none for a
/// council's line of its own, which ran no model) and those of the councils it billed, so that
/// `totals` and every breakdown count the same operations as they sum the same spend.
pub struct Spent<'a> {
    pub agent: &'a str,
    /// `None`: work outside any stage, filed under `(none)`.
    pub stage: Option<&'a str>,
    /// `None`: the line ran no model of its own (a council billed on a line of its own).
    pub model: Option<&'a str>,
    pub attempt: u32,
    /// Everything it spent, councils included.
    pub usage: &'a Usage,
    /// Its model has no price: its tokens cost $0 here, which the summary says.
    pub unpriced: bool,
    /// The part of `usage` that councils it convened spent, by the model that spent it: filed
    /// under those models in `by_model` (with their operations), the rest under `model`.
    pub councils: Option<&'a BTreeMap<String, Tally>>,
}

impl Accounts {
    /// Adds one settled operation.
    pub fn add(&mut self, s: &Spent<'_>) {
        let u = s.usage;
        let mut councils = Usage::default();
        let mut operations = u64::from(s.model.is_some());
        for (model, t) in s.councils.into_iter().flatten() {
            councils.add(&t.usage());
            operations += t.operations;
            self.by_model.entry(model.clone()).or_default().merge(t);
        }
        if let Some(model) = s.model {
            self.by_model.entry(model.to_string()).or_default().add(&u.since(&councils));
            if s.unpriced && u.tokens() > 0 {
                *self.unpriced.entry(model.to_string()).or_default() += 1;
            }
        }
        self.by_attempt.entry(s.attempt).or_default().add_operations(u, operations);
        self.by_agent.entry(s.agent.to_string()).or_default().add_operations(u, operations);
        self.by_stage.entry(s.stage.unwrap_or("(none)").to_string()).or_default().add_operations(u, operations);
        self.totals.add_operations(u, operations);
    }

    /// Operations priced at $0 because their model has no price.
    pub fn unpriced_operations(&self) -> u64 {
        self.unpriced.values().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_per_million_and_folds() {
        let u = Usage { input_tokens: 1_000_000, output_tokens: 100_000, ..Default::default() };
        let cost = price_tokens(builtin_price("claude-sonnet-4-5"), &u).expect("priced");
        assert!((cost - 4.5).abs() < 1e-9, "{cost}");
        assert_eq!(price_tokens(builtin_price("nope"), &u), None);
        let mut a = Accounts::default();
        let (one, two) = (
            Usage { cost_usd: 1.0, input_tokens: 3, ..Default::default() },
            Usage { cost_usd: 2.0, output_tokens: 4, ..Default::default() },
        );
        a.add(&Spent {
            agent: "x",
            stage: Some("s"),
            model: Some("m"),
            attempt: 1,
            usage: &one,
            unpriced: false,
            councils: None,
        });
        a.add(&Spent {
            agent: "y",
            stage: None,
            model: Some("m"),
            attempt: 2,
            usage: &two,
            unpriced: true,
            councils: None,
        });
        assert_eq!(a.unpriced_operations(), 1);
        assert_eq!(a.totals.tokens, 7);
        assert_eq!(a.by_model["m"].operations, 2);
        assert_eq!(a.by_stage["(none)"].cost_usd, 2.0);
        // A turn whose council spent on another model: each part under the model that spent it.
        let mut child = Tally::default();
        child.add(&Usage { input_tokens: 5, cost_usd: 0.5, ..Default::default() });
        let councils = BTreeMap::from([("c".to_string(), child)]);
        let both = Usage { input_tokens: 7, cost_usd: 1.5, ..Default::default() };
        a.add(&Spent {
            agent: "x",
            stage: None,
            model: Some("m"),
            attempt: 1,
            usage: &both,
            unpriced: false,
            councils: Some(&councils),
        });
        assert_eq!(a.by_model["c"].tokens, 5);
        assert_eq!(a.by_model["m"].tokens, 9);
        assert_eq!(a.by_agent["x"].tokens, 10);
        // A council's line of its own: only the council's operations count.
        let mut late = Tally::default();
        late.add_operations(&Usage { output_tokens: 2, ..Default::default() }, 3);
        let late = BTreeMap::from([("c".to_string(), late)]);
        a.add(&Spent {
            agent: "y",
            stage: Some("s"),
            model: None,
            attempt: 2,
            usage: &Usage { output_tokens: 2, ..Default::default() },
            unpriced: false,
            councils: Some(&late),
        });
        assert_eq!(a.by_model["c"].operations, 4, "{a:?}");
        assert_eq!(a.totals.operations, 7, "two turns, one that convened a council of one, and a council of three");
        assert_operations_agree(&a);
    }

    fn assert_operations_agree(a: &Accounts) {
        for (name, fold) in [("by_agent", &a.by_agent), ("by_stage", &a.by_stage), ("by_model", &a.by_model)] {
            let sum: u64 = fold.values().map(|t| t.operations).sum();
            assert_eq!(sum, a.totals.operations, "{name}: {a:?}");
        }
        let sum: u64 = a.by_attempt.values().map(|t| t.operations).sum();
        assert_eq!(sum, a.totals.operations, "by_attempt: {a:?}");
    }
}
