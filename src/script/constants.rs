//! The script's global constants, copied per parallel worker. Under rhai's `sync` feature a
//! `global::X` read takes a write lock on the constants shared by every thread that runs the
//! script, and gives up after five tries 10 ms apart by panicking (`rhai` `eval/expr.rs`, an
//! `unwrap` on `locked_write`): branches reading constants at once waited for those 10 ms naps and,
//! under contention, lost a branch to the panic. A worker with its own copy contends with nobody.
//! Constants are only ever added at the script's top level, before any branch runs, so the copy
//! is the whole set.

use std::sync::{Arc, RwLock};

/// `store` with a private copy of its global constants, for one worker thread.
#[allow(deprecated)] // NativeCallContextStore is marked volatile, not deprecated
pub fn own_copy(store: &rhai::NativeCallContextStore) -> rhai::NativeCallContextStore {
    let mut store = store.clone();
    if let Some(shared) = &store.global.constants {
        // A blocking read: unlike rhai's own lock calls, it waits rather than giving up.
        let copy = shared.read().unwrap_or_else(|p| p.into_inner()).clone();
        store.global.constants = Some(Arc::new(RwLock::new(copy)));
    }
    store
}
