//! A sandbox's listed network, the I/O half (`sandbox/net.rs` is the data): `proxy.rs` is awf's
//! proxy on the agent's Unix socket, run for each turn of a sandboxed program and letting through
//! only the listed `host:port` (each refusal a `sandbox-net-denied` event); `bridge.rs` is
//! `awf sandbox-bridge`, which runs inside the sandbox and relays loopback TCP to that socket.

pub mod bridge;
pub mod proxy;

use crate::control::server::Endpoint;
use crate::run::Event;
use crate::sandbox::Sandbox;
use std::sync::Arc;

/// Why a sandbox's network cannot be served: its proxy does not start, or `awf sandbox-bridge`
/// cannot listen or run its program.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("sandbox `{sandbox}`: cannot start its network proxy on {}: {source}", socket.display())]
    Proxy { sandbox: String, socket: std::path::PathBuf, source: std::io::Error },
    #[error("sandbox-bridge: cannot listen on {addr}: {source}")]
    Listen { addr: String, source: std::io::Error },
    #[error("sandbox-bridge: no program to run after `--`")]
    NoProgram,
    #[error("sandbox-bridge: cannot run `{program}`: {source}")]
    Run { program: String, source: std::io::Error },
}

/// Starts the proxy of `sandbox` for one turn (`op_id`) of agent `agent`, when its network is
/// listed; refusals are recorded through the agent's endpoint. Dropping it stops the proxy.
/// Must be called inside the tokio runtime.
pub fn for_turn(
    sandbox: Option<&Sandbox>,
    endpoint: &Arc<Endpoint>,
    agent: &str,
    op_id: &str,
) -> Result<Option<proxy::Proxy>, NetError> {
    let Some((s, net)) = sandbox.and_then(|s| Some((s, s.net.as_ref()?))) else { return Ok(None) };
    let (endpoint, name, agent, op) = (endpoint.clone(), s.name.clone(), agent.to_string(), op_id.to_string());
    let report: proxy::Report = Arc::new(move |host: &str, port: u16, why: &str| {
        endpoint.event(&Event::SandboxNetDenied { sandbox: &name, agent: &agent, op_id: &op, host, port, why });
    });
    proxy::Proxy::start(net.clone(), report).map(Some).map_err(|source| NetError::Proxy {
        sandbox: s.name.clone(),
        socket: net.socket.clone(),
        source,
    })
}
