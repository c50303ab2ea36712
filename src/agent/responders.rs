//! Fake responder scripts of a run, each compiled once: found beside the script or in the working
//! folder, loaded by the script host (passed down as a loader).

use crate::harness::{Responder, ResponderError, ResponderLoader};
use crate::run::Run;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub struct Responders {
    loader: ResponderLoader,
    loaded: Mutex<HashMap<PathBuf, Arc<dyn Responder>>>,
}

impl Responders {
    pub fn new(loader: ResponderLoader) -> Responders {
        Responders { loader, loaded: Mutex::new(HashMap::new()) }
    }

    /// The responder at `path` (beside the run's script, else in its working folder).
    pub fn get(&self, run: &Run, path: &Path) -> Result<Arc<dyn Responder>, ResponderError> {
        let resolved = [run.script.parent().map(|d| d.join(path)), Some(run.cwd.join(path))]
            .into_iter()
            .flatten()
            .find(|p| p.is_file())
            .ok_or_else(|| super::error::NoResponder { path: path.to_path_buf(), cwd: run.cwd.clone() })?;
        if let Some(r) = self.lock().get(&resolved) {
            return Ok(r.clone());
        }
        let r = (self.loader)(&resolved)?;
        self.lock().insert(resolved, r.clone());
        Ok(r)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Arc<dyn Responder>>> {
        // Entries are inserted whole; a poisoned lock still holds a valid map.
        self.loaded.lock().unwrap_or_else(|p| p.into_inner())
    }
}
