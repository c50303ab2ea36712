//! The one resolver of a run's limits: the caller's overrides (flags, a request's fields) over
//! the limits a resumed run recorded over awf.toml's `[limits]` over the defaults, with one error
//! for a bad value wherever the run is launched from (`script run`, `serve`, a worker).

use super::Limits;
use crate::config::{Config, ConfigError};

/// What a caller sets itself; `None` leaves the recorded or configured value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    pub max_concurrency: Option<usize>,
    pub max_agents: Option<usize>,
    pub budget_usd: Option<f64>,
    pub budget_tokens: Option<u64>,
}

/// Why a run's limits cannot be resolved.
#[derive(Debug, thiserror::Error)]
pub enum LimitsError {
    /// A `[limits]` value of awf.toml does not parse (e.g. `stall_timeout = "soon"`).
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("--max-concurrency must be at least 1")]
    NoConcurrency,
    #[error("--budget-usd must be a number of USD, not negative")]
    BadBudget,
}

/// The run's limits. `recorded`: what a resumed run's run.json keeps, which stands in for the
/// config (the run goes on with the limits it started with).
pub fn resolve(overrides: &Overrides, recorded: Option<Limits>, config: &Config) -> Result<Limits, LimitsError> {
    let base = match recorded {
        Some(r) => r,
        None => configured(config)?,
    };
    let limits = Limits {
        max_concurrency: overrides.max_concurrency.unwrap_or(base.max_concurrency),
        max_agents: overrides.max_agents.unwrap_or(base.max_agents),
        budget_usd: overrides.budget_usd.or(base.budget_usd),
        budget_tokens: overrides.budget_tokens.or(base.budget_tokens),
        ..base
    };
    if limits.max_concurrency == 0 {
        return Err(LimitsError::NoConcurrency);
    }
    if limits.budget_usd.is_some_and(|b| b.is_nan() || b < 0.0) {
        return Err(LimitsError::BadBudget);
    }
    Ok(limits)
}

/// The limits of a worker's local runs (`awf worker`): its awf.toml's, with `slots` operations at
/// once and no agent limit of its own (the owner's run counts its agents). Resolved once, as the
/// worker starts, so that a bad `[limits]` value refuses the worker rather than each run.
pub fn for_worker(slots: usize, config: &Config) -> Result<Limits, LimitsError> {
    let overrides =
        Overrides { max_concurrency: Some(slots), max_agents: Some(usize::MAX / 2), ..Overrides::default() };
    resolve(&overrides, None, config)
}

/// awf.toml's `[limits]` over the defaults.
fn configured(config: &Config) -> Result<Limits, ConfigError> {
    let d = Limits::default();
    let l = &config.limits;
    Ok(Limits {
        max_concurrency: l.max_concurrency.unwrap_or(d.max_concurrency),
        max_agents: l.max_agents.unwrap_or(d.max_agents),
        budget_usd: l.budget_usd,
        budget_tokens: l.budget_tokens,
        nudges: l.nudges.unwrap_or(d.nudges),
        stall_timeout: config.stall_timeout()?.unwrap_or(d.stall_timeout),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(toml: &str) -> Config {
        toml::from_str(toml).expect("a test config parses")
    }

    #[test]
    fn overrides_win_over_recorded_limits_which_win_over_the_config() {
        let c = config("[limits]\nmax_concurrency = 3\nmax_agents = 7\n");
        let from_config = resolve(&Overrides::default(), None, &c).expect("resolves");
        assert_eq!((from_config.max_concurrency, from_config.max_agents), (3, 7));
        let recorded = Limits { max_concurrency: 5, ..Limits::default() };
        let resumed = resolve(&Overrides::default(), Some(recorded), &c).expect("resolves");
        assert_eq!((resumed.max_concurrency, resumed.max_agents), (5, Limits::default().max_agents));
        let flags = Overrides { max_concurrency: Some(9), ..Overrides::default() };
        assert_eq!(resolve(&flags, None, &c).expect("resolves").max_concurrency, 9);
    }

    #[test]
    fn a_bad_stall_timeout_is_refused_naming_the_field() {
        let e = resolve(&Overrides::default(), None, &config("[limits]\nstall_timeout = \"soon\"\n"))
            .expect_err("a bad stall_timeout is refused");
        assert!(matches!(e, LimitsError::Config(_)), "{e:?}");
        assert!(e.to_string().contains("limits.stall_timeout"), "{e}");
    }

    #[test]
    fn no_concurrency_and_a_negative_budget_are_refused() {
        let c = Config::default();
        let zero = Overrides { max_concurrency: Some(0), ..Overrides::default() };
        assert!(matches!(resolve(&zero, None, &c), Err(LimitsError::NoConcurrency)));
        let negative = Overrides { budget_usd: Some(-1.0), ..Overrides::default() };
        assert!(matches!(resolve(&negative, None, &c), Err(LimitsError::BadBudget)));
    }
}
