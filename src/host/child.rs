//! The capabilities `Host::start` gives a run, for the one caller left that does not go through
//! `launch` (`serve`, until it does): `cli::main` installs them once. Every other run is given
//! its capabilities by whoever launches it; delete this file once `serve` calls `launch`.

use super::launch::{Capabilities, CouncilPool};
use std::sync::OnceLock;

static INSTALLED: OnceLock<Capabilities> = OnceLock::new();

/// Installs them; only the first call counts.
pub fn install(caps: Capabilities) {
    let _ = INSTALLED.set(caps);
}

/// The installed capabilities; without them a run convenes no councils and loads responders with
/// `fn(&Path)` that refuses.
pub(super) fn installed() -> Capabilities {
    INSTALLED.get().copied().unwrap_or(Capabilities {
        responders: |p| Err(format!("no responder loader was given to load {}", p.display())),
        convener: None,
        councils: CouncilPool::AtOnce,
    })
}
