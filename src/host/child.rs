//! The hook through which a run's agents convene councils. The layer that can run councils
//! (`council::child`) installs a factory once per process; `Host::start` gives every run's agent
//! book a convener made by it. Without one installed, `wf council` is refused.

use super::Host;
use crate::control::convene::Convener;
use std::sync::{Arc, OnceLock};

/// Makes the convener of one run's agents.
pub type ConvenerFactory = fn(&Arc<Host>) -> Arc<dyn Convener>;

static FACTORY: OnceLock<ConvenerFactory> = OnceLock::new();

/// Installs the factory; only the first call counts.
pub fn install(factory: ConvenerFactory) {
    let _ = FACTORY.set(factory);
}

/// Gives a new run's agent book its convener, when a factory is installed.
pub(super) fn attach(host: &Arc<Host>) {
    if let Some(factory) = FACTORY.get() {
        host.agents.set_convener(factory(host));
    }
}
