//! The `ctx` API as scripts see it: host types (`Ctx`, `Agents`, `Agent`, `Messages`) and the
//! registration of every method. One file per namespace; shared argument helpers live here.

mod agents;
mod caller;
mod checkpoint;
mod ctx;
mod decisions;
pub mod doc;
mod parallel;
mod sandboxes;

pub use parallel::WORKER_STACK;
mod stage;
mod worktrees;

use crate::host::Host;
use rhai::{Dynamic, Engine, EvalAltResult, Map, NativeCallContext};
use std::sync::{Arc, OnceLock, Weak};

pub type RResult<T> = Result<T, Box<EvalAltResult>>;

/// What the script host keeps for one run: the host (run, agents, router) and the run's engine,
/// which pooled branch threads need to call closures on.
pub struct ScriptRun {
    pub host: Arc<Host>,
    engine: OnceLock<Weak<Engine>>,
    /// What the script's closures declare and do with what they captured, for `ctx.parallel` and
    /// for arrays' `map` and `filter` (`callbacks.rs`), which the run's engine shares.
    pub captures: Arc<crate::script::captures::Cache>,
}

impl ScriptRun {
    pub fn new(host: Arc<Host>) -> Arc<ScriptRun> {
        Arc::new(ScriptRun { host, engine: OnceLock::new(), captures: Default::default() })
    }

    /// Notes the engine this run's script runs on (held weakly: the engine holds the run).
    pub fn set_engine(&self, engine: &Arc<Engine>) {
        let _ = self.engine.set(Arc::downgrade(engine));
    }

    /// The run's engine, while the script runs.
    pub fn engine(&self) -> Option<Arc<Engine>> {
        self.engine.get().and_then(Weak::upgrade)
    }
}

impl std::ops::Deref for ScriptRun {
    type Target = Host;
    fn deref(&self) -> &Host {
        &self.host
    }
}

/// `ctx`: a cheap handle on the run, supplied by `on_var`, never stored in a scope.
#[derive(Clone)]
pub struct Ctx(pub Arc<ScriptRun>);

/// `ctx.agents`.
#[derive(Clone)]
pub struct Agents(pub Arc<ScriptRun>);

/// `ctx.messages`.
#[derive(Clone)]
pub struct Messages(pub Arc<ScriptRun>);

/// An agent handle.
#[derive(Clone)]
pub struct AgentHandle {
    pub host: Arc<ScriptRun>,
    pub agent: Arc<crate::agent::Agent>,
}

pub fn register(engine: &mut Engine) {
    engine
        .register_type_with_name::<Ctx>("Ctx")
        .register_type_with_name::<Agents>("Agents")
        .register_type_with_name::<Messages>("Messages")
        .register_type_with_name::<AgentHandle>("Agent");
    ctx::register(engine);
    checkpoint::register(engine);
    decisions::register(engine);
    agents::register(engine);
    worktrees::register(engine);
    caller::register(engine);
    parallel::register(engine);
    sandboxes::register(engine);
    stage::register(engine);
}

/// A catchable script error at the call site.
pub fn script_err(nc: &NativeCallContext, msg: impl Into<String>) -> Box<EvalAltResult> {
    EvalAltResult::ErrorRuntime(Dynamic::from(msg.into()), nc.call_position()).into()
}

/// The tag an error's value carries when the configuration caused it (`open_err`), read back by
/// `config_caused` when the script ends, so that a run failing on it exits 2.
const CONFIG_TAG: i32 = 2;

/// A catchable error for an agent that could not be opened, tagged when the configuration caused it.
pub fn open_err(nc: &NativeCallContext, e: crate::agent::OpenError) -> Box<EvalAltResult> {
    let config = e.is_config();
    let mut value = Dynamic::from(e.to_string());
    if config {
        value.set_tag(CONFIG_TAG);
    }
    EvalAltResult::ErrorRuntime(value, nc.call_position()).into()
}

/// Whether the error a script ended with is a configuration error thrown by `open_err` (through
/// any calls of script functions in between).
pub fn config_caused(e: &EvalAltResult) -> bool {
    matches!(e.unwrap_inner(), EvalAltResult::ErrorRuntime(v, _) if v.tag() == CONFIG_TAG)
}

/// An uncatchable stop at the call site: cancellation, deadlines, `ctx.stop`.
pub fn terminated(nc: &NativeCallContext, reason: impl Into<String>) -> Box<EvalAltResult> {
    EvalAltResult::ErrorTerminated(Dynamic::from(reason.into()), nc.call_position()).into()
}

/// What a script's argument to a host function gets wrong: its text follows the function's name
/// in the script's error (`ctx.agents.open: agent spec: unknown field ...`).
#[derive(Debug, thiserror::Error)]
pub enum BadArg {
    #[error("{what}: unknown field `{key}` (known: {known})")]
    Unknown { what: String, key: String, known: String },
    /// A field of another type than it must be (`must`: `a string`, `an integer`).
    #[error("{what}: `{key}` must be {must}, got {got}")]
    Type { what: String, key: String, must: &'static str, got: String },
    #[error("{what}: `{key}` must not be negative, got {n}")]
    Negative { what: String, key: String, n: i64 },
    #[error("{0}: give `timeout_ms` or `deadline`, not both")]
    TimeoutAndDeadline(String),
    /// A field whose value is not JSON, under the field's name.
    #[error("`{field}`: {source}")]
    NotJson { field: &'static str, source: crate::script::convert::NotJson },
    #[error(transparent)]
    Choice(#[from] crate::worktree::BadChoice),
    #[error(transparent)]
    Policy(#[from] crate::sandbox::policy::PolicyError),
    #[error(transparent)]
    Schema(#[from] crate::run::schema::Invalid),
    /// `placement`, `layout` or `keep_pane`.
    #[error(transparent)]
    Pane(#[from] crate::pane::spec::SpecError),
    /// What else the argument gets wrong, said whole (`turn needs `prompt` (a string)`).
    #[error("{0}")]
    Said(String),
}

impl From<&str> for BadArg {
    fn from(said: &str) -> BadArg {
        BadArg::Said(said.to_string())
    }
}

impl From<String> for BadArg {
    fn from(said: String) -> BadArg {
        BadArg::Said(said)
    }
}

/// Reads optional typed fields out of an options map, naming the map and field in errors.
pub struct Fields<'a> {
    pub map: &'a Map,
    pub what: &'a str,
}

impl Fields<'_> {
    pub fn check_known(&self, known: &[&str]) -> Result<(), BadArg> {
        match self.map.keys().find(|k| !known.contains(&k.as_str())) {
            Some(k) => Err(BadArg::Unknown { what: self.what.into(), key: k.to_string(), known: known.join(", ") }),
            None => Ok(()),
        }
    }

    fn wrong_type(&self, key: &str, must: &'static str, got: &str) -> BadArg {
        BadArg::Type { what: self.what.into(), key: key.into(), must, got: got.into() }
    }

    pub fn get(&self, key: &str) -> Option<&Dynamic> {
        self.map.get(key).filter(|v| !v.is_unit())
    }

    pub fn string(&self, key: &str) -> Result<Option<String>, BadArg> {
        match self.get(key) {
            None => Ok(None),
            Some(v) if v.is_string() => Ok(Some(v.to_string())),
            Some(v) => Err(self.wrong_type(key, "a string", v.type_name())),
        }
    }

    pub fn int(&self, key: &str) -> Result<Option<i64>, BadArg> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.as_int().map(Some).map_err(|t| self.wrong_type(key, "an integer", t)),
        }
    }

    pub fn positive(&self, key: &str) -> Result<Option<u64>, BadArg> {
        match self.int(key)? {
            Some(n) if n < 0 => Err(BadArg::Negative { what: self.what.into(), key: key.into(), n }),
            other => Ok(other.map(|n| n as u64)),
        }
    }

    /// `timeout_ms` or `deadline`, not both.
    pub fn timeout(&self) -> Result<(Option<u64>, Option<i64>), BadArg> {
        let t = self.positive("timeout_ms")?;
        let d = self.int("deadline")?;
        if t.is_some() && d.is_some() {
            return Err(BadArg::TimeoutAndDeadline(self.what.into()));
        }
        Ok((t, d))
    }
}
