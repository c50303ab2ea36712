//! Sandboxes: where an agent's program runs confined, as data and pure functions. This file says how
//! each harness meets a sandbox and holds a seated agent's sandbox (what wraps its turns);
//! `policy.rs` is the policy as data, `seat.rs` an agent's concrete paths, `bwrap.rs` the one pure
//! argv builder, `provider.rs` whether bwrap works here. Choosing and recording an agent's sandbox
//! is the agent layer's (`agent/seating.rs`). Fail closed: an agent whose sandbox cannot be made is
//! refused, never run without it.

pub mod bwrap;
pub mod net;
pub mod pin;
pub mod policy;
pub mod provider;
pub mod root;
pub mod seat;

pub use policy::{Named, Network, Policy};
pub use seat::Seat;

/// The first executable file named `name` in the absolute folders of `path` (a PATH value), as
/// exec finds a program; relative entries are skipped, since they would name folders of awf's own
/// working directory, not the program's.
pub fn on_path(name: &std::ffi::OsStr, path: &std::ffi::OsStr) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path)
        .filter(|d| d.is_absolute())
        .map(|d| d.join(name))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

/// Why a sandbox cannot be made for an agent: the agent is refused, never run without it.
#[derive(Debug, thiserror::Error)]
#[error("sandbox `{name}` cannot be made: {why}")]
pub struct SandboxError {
    pub name: String,
    #[source]
    pub why: Unmade,
}

/// What stood in a sandbox's way.
#[derive(Debug, thiserror::Error)]
pub enum Unmade {
    #[error(transparent)]
    Policy(#[from] policy::PolicyError),
    #[error(transparent)]
    Network(#[from] net::BadTarget),
    #[error(transparent)]
    Seat(#[from] seat::SeatError),
    /// bubblewrap cannot build sandboxes on this machine (probed once per run, so shared).
    #[error("{0}; the agent was not started (awf never runs a sandboxed agent without its sandbox)")]
    Unavailable(std::sync::Arc<provider::Unavailable>),
    /// The harness runs inside awf: there is no program to wrap.
    #[error("its harness does not wrap a program")]
    NotWrapped,
    #[error("network = \"model\": {0}")]
    ModelServer(#[from] net::NoModelServer),
}

impl SandboxError {
    pub fn new(name: &str, why: impl Into<Unmade>) -> SandboxError {
        SandboxError { name: name.to_string(), why: why.into() }
    }
}

use serde::Serialize;
use std::path::PathBuf;

/// How a harness meets a sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confinement {
    /// It spawns a program per turn and wraps it in the sandbox (`command`, and the CLI harnesses
    /// `claude`, `codex`, `pi`, whose homes and session files are the seat's writable home).
    Wrapped,
    /// It runs inside awf (`fake`, the HTTP harnesses): there is no program to confine, so the
    /// agent is seated and recorded (`confined: false`) and nothing else changes.
    InProcess,
}

/// Where an agent's sandbox was named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// `--sandbox NAME`: every agent of the run, one shared workspace (the run's working folder).
    Run,
    /// `sandbox: "NAME"` in the agent spec, from `[sandboxes.NAME]`.
    Config,
    /// `sandbox: #{ ... }` in the agent spec; named `inline:<key>` in the records.
    Inline,
    /// `sandbox: handle` from `ctx.sandboxes.open(#{ name, ... })`: one workspace (the run's
    /// working folder) shared by the agents seated in it, each with its own home.
    Workflow,
}

/// The sandbox chosen for an agent, before it is seated.
#[derive(Debug, Clone)]
pub struct Chosen {
    pub name: String,
    pub scope: Scope,
    /// Resolved: absolute paths.
    pub policy: Policy,
    /// bwrap, found and probed; `None` for in-process harnesses.
    pub bwrap: Option<PathBuf>,
}

/// A seated agent's sandbox, as its harness holds it: what wraps each turn's program.
#[derive(Debug, Clone)]
pub struct Sandbox {
    pub name: String,
    pub scope: Scope,
    pub bwrap: PathBuf,
    pub policy: Policy,
    pub seat: Seat,
    /// A listed network (`"model"` or `["host:port", ...]`), resolved: what awf's proxy lets
    /// through, and its socket.
    pub net: Option<net::Net>,
}

/// The name of a listed network's proxy socket, beside the agent's control socket.
pub const NET_SOCKET: &str = "net.sock";

impl Sandbox {
    /// What runs `program` in this sandbox with the turn's variables `vars`: bwrap's argv, and
    /// the only environment to start it with (values never go on the command line).
    pub fn wrap(&self, program: &[String], vars: &[(String, String)]) -> bwrap::Wrapped {
        bwrap::wrap(&self.bwrap, &self.policy, &self.seat, self.net.as_ref(), vars, program)
    }

    /// The same sandbox for an agent forked from this one, whose control folder (socket, launcher,
    /// state, home) is `control`: the fork is confined as its parent was.
    pub fn reseat(&self, control: &std::path::Path, socket: &std::path::Path) -> Result<Sandbox, SandboxError> {
        let seat = self.seat.moved(control, socket).map_err(|why| SandboxError::new(&self.name, why))?;
        let net = self.net.as_ref().map(|n| net::Net { socket: socket.with_file_name(NET_SOCKET), ..n.clone() });
        Ok(Sandbox { seat, net, ..self.clone() })
    }
}
