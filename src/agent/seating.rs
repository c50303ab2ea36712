//! An agent's sandbox chosen, seated and recorded: a name from `[sandboxes]`, an inline policy, a
//! sandbox the workflow opened (`ctx.sandboxes.open`, `sandboxes.rs`), or the run-level `--sandbox`;
//! bwrap probed once; a listed network resolved (`"model"`: the agent's model server); the run's
//! record of every sandbox opened with the agents seated in it (`sandbox-opened`,
//! `sandbox-seated`, result.json `sandboxes`).

use super::error::{HandleError, SandboxRefused};
use super::sandboxes::{Asked, Workflow};
use crate::config::{HarnessKind, RuntimeConfig};
use crate::run::{Event, Run};
use crate::sandbox::net::{Net, NoModelServer, Target};
use crate::sandbox::{
    provider, seat, Chosen, Confinement, Named, Network, Policy, Sandbox, SandboxError, Scope, Seat, Unmade, NET_SOCKET,
};
use serde::Serialize;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

#[derive(Debug, Clone, Serialize)]
struct SeatRecord {
    agent: String,
    harness: HarnessKind,
    /// False for in-process harnesses: nothing to confine.
    confined: bool,
    seat: Option<Seat>,
}

#[derive(Debug, Clone, Serialize)]
struct Opened {
    name: String,
    scope: Scope,
    provider: crate::sandbox::policy::Provider,
    bwrap: Option<PathBuf>,
    policy: Policy,
    agents: Vec<SeatRecord>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Records are only appended; a poisoned lock still holds a valid list.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The run's sandboxes: the run-level one, bwrap's readiness (probed once), and every sandbox
/// opened with the agents seated in it.
#[derive(Default)]
pub struct SandboxBook {
    run_level: Option<Named>,
    ready: OnceLock<Result<PathBuf, Arc<provider::Unavailable>>>,
    opened: Mutex<Vec<Opened>>,
    /// The sandboxes the workflow opened, closed or not.
    pub(super) workflow: Workflow,
}

impl SandboxBook {
    pub fn new(run_level: Option<Named>) -> SandboxBook {
        SandboxBook { run_level, ..Default::default() }
    }

    pub(super) fn run_level(&self) -> Option<&Named> {
        self.run_level.as_ref()
    }

    /// The sandbox for agent `key` of `harness`, from its spec's `sandbox` and the run-level one;
    /// `None` when it has none. Refuses, saying which and how to fix it, when the sandbox is
    /// unknown, clashes with the run-level one, or cannot be made here. `here` is false when the
    /// agent's program does not run on this machine (a plan's agents, a worker's): its policy is
    /// checked, and bwrap is neither looked for nor started.
    pub fn choose(
        &self,
        run: &Run,
        key: &str,
        spec: Option<&Asked>,
        harness: HarnessKind,
        here: bool,
    ) -> Result<Option<Chosen>, SandboxRefused> {
        let asked = match spec {
            None => None,
            Some(Asked::Named(name)) => Some((name.clone(), Scope::Config, run.config.sandbox(name)?)),
            Some(Asked::Inline(v @ Value::Object(_))) => {
                Some((format!("inline:{key}"), Scope::Inline, Policy::from_json(v)?))
            }
            Some(Asked::Inline(_)) => return Err(SandboxRefused::NotASandbox),
            Some(Asked::Opened(h)) => Some((h.name.clone(), Scope::Workflow, self.workflow.policy(&run.id, h)?)),
        };
        let (name, scope, policy) = match (&self.run_level, asked) {
            (None, None) => return Ok(None),
            (None, Some(a)) => a,
            (Some(r), None) => (r.name.clone(), Scope::Run, r.policy.clone()),
            (Some(r), Some((name, Scope::Config, _))) if name == r.name => (name, Scope::Run, r.policy.clone()),
            (Some(r), Some((name, _, _))) => return Err(SandboxRefused::RunLevel { asked: name, run: r.name.clone() }),
        };
        if policy.network.is_listed() && harness.confinement() == Confinement::InProcess && scope != Scope::Run {
            return Err(SandboxRefused::NetworkInProcess { name, harness });
        }
        let fail = |why: Unmade| SandboxError { name: name.clone(), why };
        // Checked once resolved, so that `..` cannot sneak `/` into `writable`.
        let home = std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
        let policy = policy.resolve(&run.cwd, home.as_deref()).map_err(|e| fail(e.into()))?;
        policy.check().map_err(|e| fail(e.into()))?;
        let bwrap = match harness.confinement() {
            Confinement::InProcess => None,
            Confinement::Wrapped if !here => None,
            Confinement::Wrapped => Some(
                self.ready
                    .get_or_init(|| provider::ready().map_err(Arc::new))
                    .clone()
                    .map_err(|why| fail(Unmade::Unavailable(why)))?,
            ),
        };
        Ok(Some(Chosen { name, scope, policy, bwrap }))
    }

    /// Seats a program agent: finds its concrete paths and checks that the policy can be enforced
    /// for it. `place.workspace` is replaced by the run's working folder under a run-level
    /// sandbox, so that its agents share one, but for an agent in a `worktree` of its own, whose
    /// workspace is its worktree. Record the agent with `seated` once it opens.
    pub fn seat(
        &self,
        run: &Run,
        chosen: &Chosen,
        place: seat::Placement<'_>,
        runtime: &RuntimeConfig,
        worktree: Option<&std::path::Path>,
    ) -> Result<Sandbox, SandboxError> {
        let fail = |why: Unmade| SandboxError { name: chosen.name.clone(), why };
        let bwrap = chosen.bwrap.clone().ok_or_else(|| fail(Unmade::NotWrapped))?;
        let shared = matches!(chosen.scope, Scope::Run | Scope::Workflow);
        let workspace = match worktree {
            Some(w) => w,
            None if shared => &run.cwd,
            None => place.workspace,
        };
        let place = seat::Placement { workspace, ..place };
        let allow = match &chosen.policy.network {
            Network::None | Network::Host => None,
            Network::Model => Some(vec![model_server(runtime).map_err(|e| fail(e.into()))?]),
            Network::List(l) => {
                Some(l.iter().map(|e| Target::parse(e)).collect::<Result<_, _>>().map_err(|e| fail(e.into()))?)
            }
        };
        let net = allow.map(|allow| Net { allow, socket: place.socket.with_file_name(NET_SOCKET) });
        let seat = seat::seat(&chosen.policy, &place, &seat::Operator::current()).map_err(|e| fail(e.into()))?;
        Ok(Sandbox { name: chosen.name.clone(), scope: chosen.scope, bwrap, policy: chosen.policy.clone(), seat, net })
    }

    /// Records a program agent seated in `sandbox` (a `sandbox-seated` event, and `sandbox-opened`
    /// for the sandbox's first agent).
    pub fn seated(&self, run: &Run, sandbox: &Sandbox, agent: &str, harness: HarnessKind) {
        let seated = SeatRecord { agent: agent.into(), harness, confined: true, seat: Some(sandbox.seat.clone()) };
        let chosen = Chosen {
            name: sandbox.name.clone(),
            scope: sandbox.scope,
            policy: sandbox.policy.clone(),
            bwrap: Some(sandbox.bwrap.clone()),
        };
        self.record(run, &chosen, seated);
    }

    /// Records an in-process agent (`Confinement::InProcess`) as seated, with nothing confined.
    pub fn seated_in_process(&self, run: &Run, chosen: &Chosen, agent: &str, harness: HarnessKind) {
        self.record(run, chosen, SeatRecord { agent: agent.into(), harness, confined: false, seat: None });
    }

    fn record(&self, run: &Run, chosen: &Chosen, seated: SeatRecord) {
        let mut opened = lock(&self.opened);
        let at = entry(&mut opened, run, chosen);
        let o = &mut opened[at];
        if o.bwrap.is_none() {
            o.bwrap = chosen.bwrap.clone();
        }
        run.records.event(&Event::SandboxSeated {
            sandbox: &o.name,
            agent: &seated.agent,
            harness: seated.harness.as_str(),
            confined: seated.confined,
            seat: seated.seat.as_ref(),
        });
        o.agents.push(seated);
    }

    /// Records a sandbox opened before any agent sits in it (`ctx.sandboxes.open`).
    pub(super) fn record_opened(&self, run: &Run, chosen: &Chosen) {
        entry(&mut lock(&self.opened), run, chosen);
    }

    /// The agents seated so far in the sandbox `name` of `scope`.
    pub(super) fn seated_in(&self, name: &str, scope: Scope) -> Vec<String> {
        let opened = lock(&self.opened);
        let o = opened.iter().find(|o| o.name == name && o.scope == scope);
        o.map(|o| o.agents.iter().map(|a| a.agent.clone()).collect()).unwrap_or_default()
    }

    /// Every sandbox opened, in order, with its policy and seated agents (result.json `sandboxes`).
    pub fn summary(&self) -> Value {
        serde_json::to_value(&*lock(&self.opened)).unwrap_or(Value::Null)
    }
}

impl SandboxBook {
    /// Opens a workflow sandbox `name` with `policy` (checked now, before any agent sits in it) and
    /// records it (`sandbox-opened`, scope `workflow`).
    pub fn open_workflow(
        &self,
        run: &Run,
        name: &str,
        policy: &Policy,
    ) -> Result<super::sandboxes::Handle, HandleError> {
        if name.trim().is_empty() {
            return Err(HandleError::NoName);
        }
        let fail = |why: crate::sandbox::policy::PolicyError| crate::sandbox::SandboxError::new(name, why);
        let home = std::env::var_os("HOME").filter(|h| !h.is_empty()).map(std::path::PathBuf::from);
        let policy = policy.resolve(&run.cwd, home.as_deref()).map_err(fail)?;
        policy.check().map_err(fail)?;
        if let Some(r) = &self.run_level() {
            return Err(HandleError::RunLevel { run: r.name.clone(), name: name.to_string() });
        }
        let handle = self.workflow.add(&run.id, name, policy.clone())?;
        let chosen = Chosen { name: name.into(), scope: Scope::Workflow, policy, bwrap: None };
        self.record_opened(run, &chosen);
        Ok(handle)
    }

    /// Closes the sandbox `h` names: no agent is seated in it from now on. Returns the agents
    /// seated in it (the caller stops them).
    pub fn close_workflow(&self, run: &Run, h: &super::sandboxes::Handle) -> Result<Vec<String>, HandleError> {
        self.workflow.close(&run.id, h, "closed by the workflow")?;
        let agents = self.seated_in(&h.name, Scope::Workflow);
        run.records.event(&crate::run::Event::SandboxClosed { sandbox: &h.name, agents: &agents });
        Ok(agents)
    }
}

/// The sandbox `chosen` among those opened (`sandbox-opened` recorded when it is new): its index.
fn entry(opened: &mut Vec<Opened>, run: &Run, chosen: &Chosen) -> usize {
    if let Some(i) = opened.iter().position(|o| o.name == chosen.name && o.scope == chosen.scope) {
        return i;
    }
    let o = Opened {
        name: chosen.name.clone(),
        scope: chosen.scope,
        provider: chosen.policy.provider,
        bwrap: chosen.bwrap.clone(),
        policy: chosen.policy.clone(),
        agents: Vec::new(),
    };
    run.records.event(&Event::SandboxOpened {
        sandbox: &o.name,
        scope: o.scope,
        provider: o.provider,
        bwrap: o.bwrap.as_deref(),
        policy: &o.policy,
    });
    opened.push(o);
    opened.len() - 1
}

/// The one server `network = "model"` lets an agent reach: its runtime's `base_url`, else its
/// harness's own API host.
fn model_server(runtime: &RuntimeConfig) -> Result<Target, NoModelServer> {
    if let Some(url) = &runtime.base_url {
        return Target::of_url(url).map_err(NoModelServer::BaseUrl);
    }
    let default = match runtime.harness {
        HarnessKind::Claude => Target { host: "api.anthropic.com".into(), port: 443 },
        HarnessKind::Codex => Target { host: "api.openai.com".into(), port: 443 },
        HarnessKind::Pi => return Err(NoModelServer::Pi),
        other => return Err(NoModelServer::Unknown(other.to_string())),
    };
    Ok(default)
}
