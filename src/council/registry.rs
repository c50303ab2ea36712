//! The strategy registry: every installed strategy compiled once into a runnable program (its
//! imports embedded, so a run keeps the version it started with), recompiled when its files
//! change; a strategy that no longer compiles keeps its last good version and reports the error;
//! one whose file is gone leaves the registry. A version is a content hash of the strategy's file
//! and every file it imports, so only strategies whose text changed are compiled again.

use super::{self as council, stdlib_text, Strategy};
use crate::script::{self, Program};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// How long a change waits for the rest of the same save before the registry reloads: short,
/// so an edit is live for the next request within 200 ms.
const SETTLE: Duration = Duration::from_millis(15);

/// One strategy's compiled state.
#[derive(Clone)]
pub struct Entry {
    /// The strategy as the catalog found it last (its META, where it came from).
    pub strategy: Strategy,
    /// The last version that compiled.
    pub program: Option<Arc<Program>>,
    /// The content hash of the version `program` was compiled from.
    pub version: Option<String>,
    /// Why the newest version did not compile, if it did not.
    pub error: Option<String>,
    /// The version last compiled (or tried): an unchanged file is not read again.
    tried: Option<String>,
}

/// What a reload did, for the caller to report.
#[derive(Debug, Clone, PartialEq)]
pub enum Reload {
    Compiled { name: String, version: String },
    Failed { name: String, error: String },
    Removed(String),
}

pub struct Registry {
    cwd: PathBuf,
    entries: RwLock<BTreeMap<String, Entry>>,
    watchers: Mutex<Vec<notify::RecommendedWatcher>>,
}

/// The workflow that runs strategy `name` with the host-built input as its args.
pub fn wrapper(name: &str) -> String {
    format!("import \"council/{name}\" as strategy;\n\nfn run(args) {{\n    strategy::run(args)\n}}\n")
}

/// The module paths a Rhai text imports (`import "council/common" as c;`).
fn imports(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim_start().strip_prefix("import"))
        .filter_map(|rest| rest.trim_start().strip_prefix('"'))
        .filter_map(|rest| rest.split('"').next().map(String::from))
        .collect()
}

/// The content hash of strategy `name` as the resolver would find it now: its file and every
/// file it imports, transitively (12 hex digits of sha256).
pub fn version(cwd: &Path, name: &str) -> Option<String> {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    let mut todo = vec![format!("council/{name}")];
    let mut seen = HashSet::new();
    while let Some(module) = todo.pop() {
        if !seen.insert(module.clone()) {
            continue;
        }
        let rel = if module.ends_with(".rhai") { module.clone() } else { format!("{module}.rhai") };
        let (text, _) = stdlib_text(cwd, &rel)?;
        hash.update(module.as_bytes());
        hash.update([0]);
        hash.update(text.as_bytes());
        hash.update([0]);
        todo.extend(imports(&text));
    }
    Some(hash.finalize().iter().take(6).map(|b| format!("{b:02x}")).collect())
}

/// Compiles strategy `name` as it stands now. The program's `sha256` is the strategy's version,
/// so `run.json` records which version a run used and a resume notices a change.
pub fn compile(cwd: &Path, name: &str) -> Result<Program, script::LoadError> {
    let path = cwd.join(format!("council:{name}.rhai"));
    let mut program = script::load_strategy(path, format!("council:{name}"), wrapper(name), cwd)?;
    if let Some(v) = version(cwd, name) {
        program.sha256 = v;
    }
    Ok(program)
}

impl Registry {
    /// Compiles every installed strategy.
    pub fn load(cwd: &Path) -> Arc<Registry> {
        let reg = Arc::new(Registry {
            cwd: cwd.to_path_buf(),
            entries: RwLock::new(BTreeMap::new()),
            watchers: Mutex::new(Vec::new()),
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

    /// Every strategy, by name.
    pub fn entries(&self) -> Vec<Entry> {
        self.entries.read().unwrap_or_else(|p| p.into_inner()).values().cloned().collect()
    }

    /// Brings every strategy up to date: those whose version changed (or that never compiled)
    /// are compiled again; those no longer installed are removed (runs holding their program
    /// finish on it).
    pub fn reload_all(&self) -> Vec<Reload> {
        let mut out = Vec::new();
        let names = council::names(&self.cwd);
        let mut gone: Vec<String> = {
            let entries = self.entries.read().unwrap_or_else(|p| p.into_inner());
            entries.keys().filter(|n| !names.contains(n)).cloned().collect()
        };
        for name in names {
            // Only a file whose text (or an import's) changed is read again: a reload costs one
            // hash per strategy plus the work for what changed.
            let version = version(&self.cwd, &name);
            if let (Some(e), Some(v)) = (self.entry(&name), &version) {
                if e.tried.as_ref() == Some(v) {
                    continue;
                }
            }
            let Some(s) = council::describe(&self.cwd, name.clone()) else {
                gone.push(name);
                continue;
            };
            let compiled = match &s.error {
                Some(e) => Err(e.clone()),
                None => compile(&self.cwd, &s.name).map_err(|e| e.to_string()),
            };
            let mut entries = self.entries.write().unwrap_or_else(|p| p.into_inner());
            let entry = entries.entry(s.name.clone()).or_insert(Entry {
                strategy: s.clone(),
                program: None,
                version: None,
                error: None,
                tried: None,
            });
            entry.tried = version;
            match compiled {
                Ok(p) => {
                    // A strategy whose META no longer reads keeps the META it was compiled with.
                    entry.strategy = s.clone();
                    entry.version = Some(p.sha256.clone());
                    entry.program = Some(Arc::new(p));
                    entry.error = None;
                    out.push(Reload::Compiled { name: s.name, version: entry.version.clone().unwrap_or_default() });
                }
                Err(error) => {
                    if entry.program.is_none() {
                        entry.strategy = s.clone();
                    }
                    entry.error = Some(error.clone());
                    out.push(Reload::Failed { name: s.name, error });
                }
            }
        }
        let mut entries = self.entries.write().unwrap_or_else(|p| p.into_inner());
        for name in gone {
            if entries.remove(&name).is_some() {
                out.push(Reload::Removed(name));
            }
        }
        out
    }

    /// Watches the project's `stdlib/` and the user's strategies folder (also when one of them is
    /// made after the start); after each change every strategy is brought up to date and `report`
    /// is told what happened. Runs until the registry is dropped.
    pub fn watch(self: &Arc<Self>, report: impl Fn(&[PathBuf], Vec<Reload>) + Send + 'static) -> notify::Result<()> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.rewatch(&tx)?;
        let weak = Arc::downgrade(self);
        std::thread::Builder::new().name("awf-registry".into()).spawn(move || {
            while let Ok(first) = rx.recv() {
                let mut changed = vec![first];
                while let Ok(p) = rx.recv_timeout(SETTLE) {
                    if !changed.contains(&p) {
                        changed.push(p);
                    }
                }
                let Some(reg) = weak.upgrade() else { break };
                // A folder made on the way to a watched one: watch again (what it already holds
                // is read by the reload below).
                if changed.iter().any(|p| p.extension().is_none_or(|e| e != "rhai")) {
                    if let Err(e) = reg.rewatch(&tx) {
                        tracing::warn!("cannot watch the strategy folders again: {e}");
                    }
                }
                report(&changed, reg.reload_all());
            }
        })?;
        Ok(())
    }

    /// (Re)starts the watchers: the strategy folders that exist, and the folders above the ones
    /// that do not yet.
    fn rewatch(&self, tx: &std::sync::mpsc::Sender<PathBuf>) -> notify::Result<()> {
        let mut dirs = vec![(self.cwd.join("stdlib"), true)];
        if let Some(d) = crate::config::xdg_config_home() {
            dirs.push((d.join("awf").join("strategies"), true));
        }
        let mut watchers = vec![crate::watch::watch(&dirs, tx.clone())?];
        watchers.extend(crate::watch::watch_missing(&dirs, tx.clone())?);
        *self.watchers.lock().unwrap_or_else(|p| p.into_inner()) = watchers;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imports_are_read_from_import_lines() {
        let text = "import \"council/common\" as common;\n  import \"teams\" as t;\nlet x = \"import\";\n";
        assert_eq!(imports(text), vec!["council/common".to_string(), "teams".to_string()]);
    }

    #[test]
    fn a_version_changes_with_the_strategy_and_with_what_it_imports() {
        let dir = tempfile::tempdir().expect("tempdir");
        let council = dir.path().join("stdlib").join("council");
        std::fs::create_dir_all(&council).expect("mkdir");
        std::fs::write(council.join("demo.rhai"), "import \"council/helper\" as h;\n").expect("write");
        std::fs::write(council.join("helper.rhai"), "fn f() { 1 }\n").expect("write");
        let one = version(dir.path(), "demo").expect("a version");
        assert_eq!(one.len(), 12);
        std::fs::write(council.join("helper.rhai"), "fn f() { 2 }\n").expect("write");
        let two = version(dir.path(), "demo").expect("a version");
        assert_ne!(one, two, "a helper's edit is a new version");
        assert_eq!(version(dir.path(), "missing"), None);
    }
}
