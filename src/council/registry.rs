//! The strategy registry: every installed strategy compiled once into a runnable program (its
//! imports embedded, so a run keeps the version it started with), recompiled when its files
//! change; a strategy that no longer compiles keeps its last good version and reports the error.

use super::discover;
use crate::script::{self, Program};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

/// One strategy's compiled state.
#[derive(Clone)]
pub struct Entry {
    /// The last version that compiled.
    pub program: Option<Arc<Program>>,
    /// Why the newest version did not compile, if it did not.
    pub error: Option<String>,
}

/// What a reload did, for the caller to report.
#[derive(Debug, Clone, PartialEq)]
pub enum Reload {
    Compiled(String),
    Failed { name: String, error: String },
}

pub struct Registry {
    cwd: PathBuf,
    entries: RwLock<HashMap<String, Entry>>,
    watcher: Mutex<Option<notify::RecommendedWatcher>>,
}

/// The workflow that runs strategy `name` with the host-built input as its args.
pub fn wrapper(name: &str) -> String {
    format!("import \"council/{name}\" as strategy;\n\nfn run(args) {{\n    strategy::run(args)\n}}\n")
}

/// Compiles strategy `name` as it stands now.
pub fn compile(cwd: &Path, name: &str) -> Result<Program, String> {
    let path = cwd.join(format!("council:{name}.rhai"));
    script::load_strategy(path, format!("council:{name}"), wrapper(name), cwd)
}

impl Registry {
    /// Compiles every installed strategy.
    pub fn load(cwd: &Path) -> Arc<Registry> {
        let reg = Arc::new(Registry {
            cwd: cwd.to_path_buf(),
            entries: RwLock::new(HashMap::new()),
            watcher: Mutex::new(None),
        });
        reg.reload_all();
        reg
    }

    /// The last good version of a strategy.
    pub fn get(&self, name: &str) -> Option<Arc<Program>> {
        self.entries.read().unwrap_or_else(|p| p.into_inner()).get(name).and_then(|e| e.program.clone())
    }

    pub fn entry(&self, name: &str) -> Option<Entry> {
        self.entries.read().unwrap_or_else(|p| p.into_inner()).get(name).cloned()
    }

    /// Recompiles every strategy (they share helpers, so any change may touch any of them).
    pub fn reload_all(&self) -> Vec<Reload> {
        let mut out = Vec::new();
        for s in discover(&self.cwd) {
            let compiled = match &s.error {
                Some(e) => Err(e.clone()),
                None => compile(&self.cwd, &s.name),
            };
            let mut entries = self.entries.write().unwrap_or_else(|p| p.into_inner());
            let entry = entries.entry(s.name.clone()).or_insert(Entry { program: None, error: None });
            match compiled {
                Ok(p) => {
                    entry.program = Some(Arc::new(p));
                    entry.error = None;
                    out.push(Reload::Compiled(s.name));
                }
                Err(error) => {
                    entry.error = Some(error.clone());
                    out.push(Reload::Failed { name: s.name, error });
                }
            }
        }
        out
    }

    /// Watches the strategy folders; after each debounced change every strategy is recompiled and
    /// `report` is told what happened. Runs until the registry is dropped.
    pub fn watch(self: &Arc<Self>, report: impl Fn(&[PathBuf], Vec<Reload>) + Send + 'static) -> notify::Result<()> {
        let (tx, rx) = std::sync::mpsc::channel();
        let mut dirs = vec![(self.cwd.join("stdlib"), true)];
        if let Some(d) = crate::config::xdg_config_home() {
            dirs.push((d.join("awf").join("strategies"), true));
        }
        let watcher = crate::watch::watch(&dirs, tx)?;
        *self.watcher.lock().unwrap_or_else(|p| p.into_inner()) = Some(watcher);
        let weak = Arc::downgrade(self);
        std::thread::Builder::new().name("awf-registry".into()).spawn(move || {
            while let Some(changed) = crate::watch::next_change(&rx) {
                let Some(reg) = weak.upgrade() else { break };
                report(&changed, reg.reload_all());
            }
        })?;
        Ok(())
    }
}
