//! `ctx.sandboxes.open(#{ name, ...policy })` and the `Sandbox` handle: its `name`, and `close()`.
//! Agents opened with `sandbox: handle` share the sandbox's workspace, each with its own home.

use super::doc::def;
use super::{script_err, BadArg, Ctx, RResult};
use crate::agent::sandboxes::{Asked, Handle};
use crate::sandbox::Policy;
use crate::script::convert::to_json;
use rhai::{Engine, Map, NativeCallContext};
use std::sync::Arc;

/// `ctx.sandboxes`.
#[derive(Clone)]
pub struct Sandboxes(pub Arc<super::ScriptRun>);

/// A sandbox the workflow opened.
#[derive(Clone)]
pub struct SandboxHandle {
    pub host: Arc<super::ScriptRun>,
    pub handle: Handle,
}

pub fn register(engine: &mut Engine) {
    engine.register_type_with_name::<Sandboxes>("Sandboxes").register_type_with_name::<SandboxHandle>("Sandbox");
    def(engine, "get sandboxes(ctx)", SANDBOXES, |c: &mut Ctx| Sandboxes(c.0.clone()));
    def(engine, "open(sandboxes, spec)", OPEN, open);
    for form in ["get name(sandbox)", "name(sandbox)"] {
        def(engine, form, "The sandbox's name, as the records show it.", |h: &mut SandboxHandle| h.handle.name.clone());
    }
    def(engine, "close(sandbox)", CLOSE, close);
}

const SANDBOXES: &str = "The sandboxes this workflow opens: `ctx.sandboxes.open(spec)`.";
const OPEN: &str = "Opens a sandbox and returns its handle; agents opened with `sandbox: handle` are seated in it,
sharing one workspace (the run's working folder), each with a home of its own; an agent forked from
one of them sits in it too. `spec`: `name` (required, unique in the run) and the policy's fields
(`network`, `writable`, `read_only`, `env`, `provider`), as in `[sandboxes.NAME]`. The policy is
checked here: a bad one is an error before any agent opens.";
const CLOSE: &str = "Closes the sandbox: the agents seated in it are stopped (their running operations settle
`cancelled`), and an agent opened with this handle from now on is refused. Returns the keys of the
agents it stopped.";

fn open(nc: NativeCallContext, s: &mut Sandboxes, spec: Map) -> RResult<SandboxHandle> {
    let host = &s.0;
    let parsed = (|| -> Result<(String, Policy), BadArg> {
        let mut spec = spec.clone();
        let name = match spec.remove("name") {
            Some(v) if v.is_string() => v.to_string(),
            Some(v) => return Err(format!("`name` must be a string, got {}", v.type_name()).into()),
            None => return Err("the spec needs `name` (a string unique in the run)".into()),
        };
        let json = to_json(&rhai::Dynamic::from_map(spec)).map_err(|e| BadArg::Said(e.to_string()))?;
        let policy = Policy::from_json(&json)?;
        Ok((name, policy))
    })();
    let (name, policy) = parsed.map_err(|e| script_err(&nc, format!("ctx.sandboxes.open: {e}")))?;
    let handle = host
        .agents
        .sandboxes
        .open_workflow(&host.run, &name, &policy)
        .map_err(|e| script_err(&nc, format!("ctx.sandboxes.open: {e}")))?;
    Ok(SandboxHandle { host: host.clone(), handle })
}

fn close(nc: NativeCallContext, h: &mut SandboxHandle) -> RResult<rhai::Array> {
    let host = &h.host;
    let agents = host
        .agents
        .sandboxes
        .close_workflow(&host.run, &h.handle)
        .map_err(|e| script_err(&nc, format!("sandbox.close: {e}")))?;
    let why = format!("its sandbox `{}` was closed", h.handle.name);
    Ok(agents.into_iter().filter(|key| host.agents.stop(key, &why)).map(rhai::Dynamic::from).collect())
}

/// An agent spec's `sandbox`: a name, an inline policy map, or a handle.
pub(super) fn asked(v: &rhai::Dynamic) -> Result<Asked, BadArg> {
    if let Some(h) = v.clone().try_cast::<SandboxHandle>() {
        return Ok(Asked::Opened(h.handle));
    }
    if v.is_string() {
        return Ok(Asked::Named(v.to_string()));
    }
    to_json(v).map(Asked::Inline).map_err(|source| BadArg::NotJson { field: "sandbox", source })
}
