//! The module resolver: `import "x/y"` finds `x/y.rhai` in the script's own folder, then the
//! project's `scripts/`, then its `stdlib/`, then `$XDG_CONFIG_HOME/awf/strategies/` (where
//! `council/` is left out: `strategies/magi.rhai` overrides `council/magi`), then the stdlib
//! embedded in the binary. No `..`, no absolute paths, no other folders.

use rhai::{Engine, EvalAltResult, Module, ModuleResolver, Position, Scope, AST};
use std::path::{Component, Path, PathBuf};

/// Where an import was found.
pub enum Found {
    File(PathBuf),
    Embedded { rel: String, text: &'static str },
}

pub struct Resolver {
    roots: Vec<PathBuf>,
    strategies: Option<PathBuf>,
    /// Compiled with the same scope as the main script, so strict variables agree.
    scope: Scope<'static>,
}

/// Why an import is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImportError {
    #[error("import \"{0}\" is not allowed: imports name a file under the script's folder, scripts/ or stdlib/, without `..` or an absolute path")]
    NotAllowed(String),
    /// `places`: where it was looked for, listed.
    #[error("module \"{path}\" not found (looked in {places})")]
    NotFound { path: String, places: String },
}

impl Resolver {
    pub fn new(script_dir: &Path, cwd: &Path, scope: Scope<'static>) -> Resolver {
        let mut roots = Vec::new();
        for root in [script_dir.to_path_buf(), cwd.join("scripts"), cwd.join("stdlib")] {
            let root = root.canonicalize().unwrap_or(root);
            if !roots.contains(&root) {
                roots.push(root);
            }
        }
        let strategies = crate::config::xdg_config_home().map(|d| d.join("awf").join("strategies"));
        Resolver { roots, strategies, scope }
    }

    /// A resolver for council strategies: the project's `stdlib/`, then the user's strategies
    /// folder, then the embedded stdlib (the same order the catalog lists them in).
    pub fn for_strategies(cwd: &Path, scope: Scope<'static>) -> Resolver {
        let root = cwd.join("stdlib");
        let root = root.canonicalize().unwrap_or(root);
        let strategies = crate::config::xdg_config_home().map(|d| d.join("awf").join("strategies"));
        Resolver { roots: vec![root], strategies, scope }
    }

    /// Where an import path is found, or why it cannot be imported.
    pub fn locate(&self, path: &str) -> Result<Found, ImportError> {
        let rel = Path::new(path);
        if path.is_empty() || !rel.components().all(|c| matches!(c, Component::Normal(_))) {
            return Err(ImportError::NotAllowed(path.to_string()));
        }
        let rel = if rel.extension().is_some() { rel.to_path_buf() } else { rel.with_extension("rhai") };
        if let Some(p) = self.roots.iter().map(|root| root.join(&rel)).find(|p| p.is_file()) {
            return Ok(Found::File(p));
        }
        if let Some(dir) = &self.strategies {
            let short = rel.strip_prefix("council").unwrap_or(&rel);
            let p = dir.join(short);
            if p.is_file() {
                return Ok(Found::File(p));
            }
        }
        let rel_text = rel.to_string_lossy().replace('\\', "/");
        if let Some(text) = crate::stdlib::file(&rel_text) {
            return Ok(Found::Embedded { rel: rel_text, text });
        }
        let mut places: Vec<String> = self.roots.iter().map(|r| r.display().to_string()).collect();
        if let Some(d) = &self.strategies {
            places.push(d.display().to_string());
        }
        places.push("the stdlib built into awf".into());
        Err(ImportError::NotFound { path: path.to_string(), places: places.join(", ") })
    }

    fn compile(&self, engine: &Engine, path: &str, pos: Position) -> Result<(AST, String), Box<EvalAltResult>> {
        let found = self.locate(path).map_err(|e| EvalAltResult::ErrorRuntime(e.to_string().into(), pos))?;
        let (name, text) = match found {
            Found::File(file) => {
                let name = file.display().to_string();
                let text = std::fs::read_to_string(&file)
                    .map_err(|e| EvalAltResult::ErrorRuntime(format!("cannot read {name}: {e}").into(), pos))?;
                (name, text)
            }
            Found::Embedded { rel, text } => (crate::stdlib::source_name(&rel), text.to_string()),
        };
        let mut ast = engine
            .compile_with_scope(&self.scope, text)
            .map_err(|e| EvalAltResult::ErrorInModule(name.clone(), e.into(), pos))?;
        ast.set_source(name.clone());
        // Modules get the same static checks as workflows.
        if let Some(err) = super::check::first_problem(engine, &ast) {
            return Err(EvalAltResult::ErrorInModule(name, err.into(), pos).into());
        }
        Ok((ast, name))
    }
}

impl ModuleResolver for Resolver {
    fn resolve(
        &self,
        engine: &Engine,
        _source: Option<&str>,
        path: &str,
        pos: Position,
    ) -> Result<rhai::Shared<rhai::Module>, Box<EvalAltResult>> {
        let (ast, name) = self.compile(engine, path, pos)?;
        let module = Module::eval_ast_as_new(Scope::new(), &ast, engine)
            .map_err(|e| EvalAltResult::ErrorInModule(name, e, pos))?;
        Ok(module.into())
    }

    fn resolve_ast(
        &self,
        engine: &Engine,
        _source: Option<&str>,
        path: &str,
        pos: Position,
    ) -> Option<Result<AST, Box<EvalAltResult>>> {
        Some(self.compile(engine, path, pos).map(|(ast, _)| ast))
    }
}
