//! The script host, and the only module that names rhai: loading (compile once, imports embedded,
//! static checks, META read without running), running a script on a thread of its own, and fake
//! responder scripts. Everything outside sees JSON values and rendered error texts.

mod api;
mod callbacks;
mod captures;
mod check;
mod constants;
mod convert;
mod deferred;
mod engine;
mod guard;
mod pool;
pub mod reference;
mod render;
mod resolver;
mod responder;
mod text;

use crate::host::{Failure, FailureKind, ScriptEnd};
use crate::run::scope;
use resolver::Resolver;
use rhai::{CallFnOptions, EvalAltResult, Position, Scope, AST};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use render::show_lines_only_under;
pub use responder::load_responder;

/// Writes the editor definition files of the engine scripts run on (host API and standard
/// library) into `dir`; returns their names.
pub fn write_definitions(dir: &Path) -> std::io::Result<Vec<String>> {
    reference::write_definitions(&engine::build(None, None, None), dir)
}

/// Stack size of the thread a script runs on (RHAI-HOST.md pitfall 3).
const SCRIPT_STACK: usize = 16 << 20;
/// The largest script file `load` reads (`--max-script-bytes` raises it): a bigger one is refused
/// before it is compiled, which would take seconds and gigabytes.
pub const MAX_SCRIPT_BYTES: u64 = 4 << 20;

/// A compiled script with its imports embedded: later edits to imports do not affect it.
pub struct Program {
    pub path: PathBuf,
    /// The path as shown in errors (relative to the working folder when under it).
    pub display: String,
    pub source: String,
    pub sha256: String,
    pub meta: Value,
    pub has_run_fn: bool,
    /// Imports resolve in the strategy folders only (a council call).
    strategy: bool,
    cwd: PathBuf,
    ast: Arc<AST>,
}

/// Why a script cannot be run: its text, or its file. The text is what the command line prints.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("error: cannot read script {display}: {source}")]
    Read { display: String, source: std::io::Error },
    /// `size`: the file's bytes, or `too many` when even that cannot be read.
    #[error(
        "error: script {display} is {size} bytes, over the limit of {max} bytes; raise it with --max-script-bytes N"
    )]
    TooLarge { display: String, size: String, max: u64 },
    /// A compile error or a static check's finding, rendered rustc-style with its source lines.
    #[error("{0}")]
    Rendered(String),
    #[error("error: {0}: META must be a map literal")]
    MetaNotAMap(String),
}

fn display_path(path: &Path, cwd: &Path) -> String {
    match path.strip_prefix(cwd) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".into(),
        Ok(rel) => rel.display().to_string(),
        Err(_) => path.display().to_string(),
    }
}

fn resolver_for(path: &Path, cwd: &Path) -> Resolver {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    Resolver::new(dir, cwd, engine::compile_scope())
}

/// Reads, compiles and checks a script without running any of it. The error is rendered text.
pub fn load(path: &Path, cwd: &Path) -> Result<Program, LoadError> {
    load_bounded(path, cwd, MAX_SCRIPT_BYTES)
}

/// As `load`, refusing a file of more than `max_bytes` before compiling it.
pub fn load_bounded(path: &Path, cwd: &Path, max_bytes: u64) -> Result<Program, LoadError> {
    let path = if path.is_absolute() { path.to_path_buf() } else { cwd.join(path) };
    let display = display_path(&path, cwd);
    let source =
        read_bounded(&path, max_bytes).map_err(|source| LoadError::Read { display: display.clone(), source })?;
    let Some(source) = source else {
        let size = std::fs::metadata(&path).map(|m| m.len().to_string()).unwrap_or_else(|_| "too many".into());
        return Err(LoadError::TooLarge { display, size, max: max_bytes });
    };
    load_source(path, display, source, cwd)
}

/// The text of `path`, or `None` when it holds more than `max` bytes (read no further than that,
/// so that a huge or endless file costs nothing).
fn read_bounded(path: &Path, max: u64) -> std::io::Result<Option<String>> {
    use std::io::Read;
    if std::fs::metadata(path)?.is_dir() {
        return Err(std::io::Error::other("is a directory"));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)?.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Ok(None);
    }
    String::from_utf8(bytes).map(Some).map_err(|_| std::io::Error::other("stream did not contain valid UTF-8"))
}

/// Compiles and checks script text as if it were the file `path` (imports resolve beside it).
pub fn load_source(path: PathBuf, display: String, source: String, cwd: &Path) -> Result<Program, LoadError> {
    load_with(path, display, source, cwd, false)
}

/// Compiles the workflow that runs a council strategy: its imports resolve in the strategy
/// folders only (stdlib/, the user's strategies, the embedded stdlib), as the catalog lists them.
pub fn load_strategy(path: PathBuf, display: String, source: String, cwd: &Path) -> Result<Program, LoadError> {
    load_with(path, display, source, cwd, true)
}

fn load_with(path: PathBuf, display: String, source: String, cwd: &Path, strategy: bool) -> Result<Program, LoadError> {
    let resolver =
        if strategy { Resolver::for_strategies(cwd, engine::compile_scope()) } else { resolver_for(&path, cwd) };
    let engine = engine::build(None, Some(resolver), None);
    let mut sources = render::Sources::new(&display, &source, cwd);
    let mut ast = engine
        .compile_into_self_contained(&engine::compile_scope(), &source)
        .map_err(|e| LoadError::Rendered(render::render(&e, &mut sources)))?;
    ast.set_source(display.clone());
    if let Some(err) = check::first_problem(&engine, &ast) {
        return Err(LoadError::Rendered(render::render(&err, &mut sources)));
    }
    let meta = literals_of(&ast).remove("META").unwrap_or(Value::Null);
    if !meta.is_null() && !meta.is_object() {
        return Err(LoadError::MetaNotAMap(display));
    }
    let has_run_fn = ast.iter_functions().any(|f| f.name == "run" && f.params.len() == 1);
    let sha256 = {
        use sha2::{Digest, Sha256};
        Sha256::digest(source.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
    };
    Ok(Program {
        path,
        display,
        source,
        sha256,
        meta,
        has_run_fn,
        strategy,
        cwd: cwd.to_path_buf(),
        ast: Arc::new(ast),
    })
}

/// The literal constants of a compiled script (`export const X = <literal>`), as JSON; constants
/// whose values are not JSON are left out.
fn literals_of(ast: &AST) -> serde_json::Map<String, Value> {
    ast.iter_literal_variables(true, false)
        .filter_map(|(name, _, v)| convert::to_json(&v).ok().map(|j| (name.to_string(), j)))
        .collect()
}

/// Reads a file's literal constants (META, TEAMS, ...) without running anything or resolving its
/// imports. The error is `LoadError::Rendered`.
pub fn read_literals(name: &str, text: &str) -> Result<serde_json::Map<String, Value>, LoadError> {
    let mut engine = engine::build(None, None, None);
    engine.set_strict_variables(false);
    let ast = engine.compile(text).map_err(|e| {
        let mut sources = render::Sources::new(name, text, Path::new("/"));
        LoadError::Rendered(render::render(&e.into(), &mut sources))
    })?;
    Ok(literals_of(&ast))
}

/// The keys of `META.params` in the order the file writes them (a map value keeps them sorted):
/// the catalog lists params as their author ordered them. Empty when there is no such literal.
pub fn meta_param_order(text: &str) -> Vec<String> {
    let mut engine = engine::build(None, None, None);
    engine.set_strict_variables(false);
    // Unoptimised, so that the literal stays a map expression with its keys in source order.
    engine.set_optimization_level(rhai::OptimizationLevel::None);
    let Ok(ast) = engine.compile(text) else { return Vec::new() };
    let keys = |e: &rhai::Expr| match e {
        rhai::Expr::Map(m, _) => Some(m.0.iter().map(|(k, v)| (k.name.to_string(), v.clone())).collect::<Vec<_>>()),
        _ => None,
    };
    ast.statements()
        .iter()
        .find_map(|s| match s {
            rhai::Stmt::Var(v, ..) if v.0.name == "META" => keys(&v.1),
            _ => None,
        })
        .and_then(|meta| meta.into_iter().find(|(k, _)| k == "params"))
        .and_then(|(_, params)| keys(&params))
        .map(|params| params.into_iter().map(|(k, _)| k).collect())
        .unwrap_or_default()
}

impl crate::host::Script for Program {
    /// Runs the program on a thread of its own; the receiver gets how it ended.
    fn start(
        &self,
        host: Arc<crate::host::Host>,
        args: Value,
    ) -> std::io::Result<tokio::sync::oneshot::Receiver<ScriptEnd>> {
        spawn(host, self, args)
    }
}

/// Runs `program` on a thread of its own; the receiver gets how it ended.
fn spawn(
    host: Arc<crate::host::Host>,
    program: &Program,
    args: Value,
) -> std::io::Result<tokio::sync::oneshot::Receiver<ScriptEnd>> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let ast = program.ast.clone();
    let has_run_fn = program.has_run_fn;
    let resolver = if program.strategy {
        Resolver::for_strategies(&program.cwd, engine::compile_scope())
    } else {
        resolver_for(&program.path, &program.cwd)
    };
    let (display, source, cwd) = (program.display.clone(), program.source.clone(), program.cwd.clone());
    std::thread::Builder::new().name("awf-script".into()).stack_size(SCRIPT_STACK).spawn(move || {
        let args = convert::to_dynamic(&args);
        let script_run = api::ScriptRun::new(host.clone());
        let engine = Arc::new(engine::build(Some(script_run.clone()), Some(resolver), Some(args.clone())));
        script_run.set_engine(&engine);
        let run = &host.run;
        let _root = scope::enter(Arc::new(scope::Frame::root(run.root.clone(), run.deadline)));
        let mut scope = Scope::new();
        let result = if has_run_fn {
            engine.call_fn_with_options::<rhai::Dynamic>(
                CallFnOptions::new().eval_ast(true),
                &mut scope,
                &ast,
                "run",
                (args,),
            )
        } else {
            engine.eval_ast_with_scope::<rhai::Dynamic>(&mut scope, &ast)
        };
        // Routes granted outside any stage live until the run ends: let them fall quiet first.
        let result = result.inspect(|_| {
            run.rt.block_on(async {
                tokio::select! {
                    _ = run.root.cancelled() => {}
                    _ = host.router.settle(&None) => {}
                }
            })
        });
        let end = match result {
            Ok(v) => match convert::to_json(&v) {
                Ok(json) => ScriptEnd::Value(json),
                Err(e) => ScriptEnd::Failed(Failure {
                    rendered: format!("error: the script's result is not JSON: {e}"),
                    message: format!("the script's result is not JSON: {e}"),
                    kind: FailureKind::Error,
                }),
            },
            Err(e) => {
                let e = if has_run_fn { place_in_run(e, &ast) } else { e };
                let e = explain_limit(e, engine::max_operations(Some(&script_run)));
                let mut sources = render::Sources::new(&display, &source, &cwd);
                ScriptEnd::Failed(Failure {
                    rendered: render::render(&e, &mut sources),
                    message: render::message(&e),
                    kind: match e.unwrap_inner() {
                        EvalAltResult::ErrorTerminated(..) => FailureKind::Terminated,
                        _ if api::config_caused(&e) => FailureKind::Config,
                        _ => FailureKind::Error,
                    },
                })
            }
        };
        let _ = tx.send(end);
    })?;
    Ok(rx)
}

/// Rhai's bare "Too many operations" said as the limit it is: which, its value, how to raise it
/// (inside the call of `fn run` that `place_in_run` put it in, too).
fn explain_limit(err: Box<EvalAltResult>, max: u64) -> Box<EvalAltResult> {
    match *err {
        EvalAltResult::ErrorInFunctionCall(name, src, inner, pos) => {
            EvalAltResult::ErrorInFunctionCall(name, src, explain_limit(inner, max), pos).into()
        }
        EvalAltResult::ErrorTooManyOperations(pos) => EvalAltResult::ErrorRuntime(
            format!(
                "the script made more than {max} operations ([limits] script_operations, the guard against \
                 runaway loops): look for a loop that does not end, or raise script_operations in awf.toml \
                 if the work is real"
            )
            .into(),
            pos,
        )
        .into(),
        _ => err,
    }
}

/// Rhai passes a limit error (too many operations, stack overflow, data too large) through every
/// function boundary unwrapped, moved to the call site (RHAI-HOST.md section 7), and the host's
/// call of `fn run` has no site: the error would name no place at all. It is placed at `fn run`'s
/// body instead, under a note that it happened in that call, so it still names file:line:col.
fn place_in_run(err: Box<EvalAltResult>, ast: &AST) -> Box<EvalAltResult> {
    let limit = matches!(
        *err,
        EvalAltResult::ErrorTooManyOperations(_)
            | EvalAltResult::ErrorStackOverflow(_)
            | EvalAltResult::ErrorDataTooLarge(..)
            | EvalAltResult::ErrorTooManyVariables(_)
            | EvalAltResult::ErrorTooManyModules(_)
    );
    if !limit || !err.position().is_none() {
        return err;
    }
    let Some(body) =
        ast.iter_fn_def().find(|f| f.name == "run" && f.params.len() == 1).map(|f| f.body.start_position())
    else {
        return err;
    };
    let mut err = err;
    err.set_position(body);
    EvalAltResult::ErrorInFunctionCall("run".into(), String::new(), err, Position::NONE).into()
}
