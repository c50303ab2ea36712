//! The one engine builder. Every engine gets the same limits (the data guard in place of rhai's
//! size limits), no `eval`, a `sleep` that says to use `ctx.sleep`, `print`/`debug` to the run
//! log, `ctx` and `args` from the host (never scope variables), a progress hook that stops tight
//! loops, and the folder-limited module resolver.

use super::api;
use super::guard;
use super::resolver::Resolver;
use crate::run::scope;
use rhai::packages::{Package, StandardPackage};
use rhai::{Dynamic, Engine, EvalAltResult, NativeCallContext, OptimizationLevel, Scope};
use std::sync::{Arc, OnceLock};

/// Operations a single script thread (or one parallel branch) may make by default: a CPU guard
/// against runaway loops, not a budget (`[limits] script_operations` sets it for a run). The
/// deadline bounds wall-clock time.
pub const MAX_OPERATIONS: u64 = 50_000_000;

/// The operation limit of a run's engine: `[limits] script_operations`, else the default.
pub fn max_operations(host: Option<&api::ScriptRun>) -> u64 {
    host.and_then(|h| h.host.run.config.limits.script_operations).filter(|n| *n > 0).unwrap_or(MAX_OPERATIONS)
}
pub const MAX_CALL_LEVELS: usize = 48;

fn std_package() -> rhai::Shared<rhai::Module> {
    static STD: OnceLock<rhai::Shared<rhai::Module>> = OnceLock::new();
    STD.get_or_init(|| StandardPackage::new().as_shared_module()).clone()
}

/// The scope scripts are compiled with: `ctx` and `args` declared (not constant, so the optimizer
/// does not fold them), so that strict variables accept them; at run time `on_var` supplies them.
pub fn compile_scope() -> Scope<'static> {
    let mut scope = Scope::new();
    scope.push("ctx", ());
    scope.push("args", ());
    scope
}

/// Builds an engine. With a run, `ctx` resolves to it and its cancellation reaches loops; without
/// one (checking, responders), `ctx` is absent.
pub fn build(host: Option<Arc<api::ScriptRun>>, resolver: Option<Resolver>, args: Option<Dynamic>) -> Engine {
    let mut engine = Engine::new_raw();
    engine.register_global_module(std_package());
    engine
        .set_optimization_level(OptimizationLevel::Simple)
        .set_max_operations(max_operations(host.as_deref()))
        .set_max_call_levels(MAX_CALL_LEVELS)
        .set_max_expr_depths(128, 96)
        // No string, array or map size limits: rhai re-measures a whole container on every
        // mutation when any is set (RHAI-HOST.md section 6). `guard` bounds data instead.
        .set_max_variables(1_000)
        .set_max_functions(1_000)
        .set_max_modules(64)
        .set_strict_variables(true);
    engine.disable_symbol("eval");
    engine.register_fn("sleep", |nc: NativeCallContext, _ms: rhai::INT| -> Result<(), Box<EvalAltResult>> {
        Err(EvalAltResult::ErrorRuntime(
            "sleep is not available in awf scripts: use ctx.sleep(ms), which a stop can interrupt".into(),
            nc.call_position(),
        )
        .into())
    });
    engine.register_fn("sleep", |nc: NativeCallContext, _ms: rhai::FLOAT| -> Result<(), Box<EvalAltResult>> {
        Err(EvalAltResult::ErrorRuntime(
            "sleep is not available in awf scripts: use ctx.sleep(ms), which a stop can interrupt".into(),
            nc.call_position(),
        )
        .into())
    });
    // An integer's text, for interpolation (`key: `c-${i}``) and `to_string`: rhai's standard
    // package has no integer overload, so its generic one formats through `Dynamic` and then looks
    // the text up as a type name to rename (5% of the instructions of a loop that builds keys).
    // itoa's digits, not `ToString`'s trip through the formatter: 445 instructions a call to 274
    // (the string's allocation included).
    engine.register_fn("to_string", |n: rhai::INT| -> rhai::ImmutableString { itoa::Buffer::new().format(n).into() });
    if let Some(resolver) = resolver {
        engine.set_module_resolver(resolver);
    }
    super::text::register(&mut engine);
    super::callbacks::register(&mut engine, host.as_ref().map(|h| h.captures.clone()).unwrap_or_default());
    guard::register(&mut engine);
    api::register(&mut engine);
    if let Some(host) = host {
        let run = host.run.clone();
        let r = run.clone();
        engine.on_print(move |s| r.log("print", s, &serde_json::Value::Null));
        let r = run.clone();
        engine.on_debug(move |s, src, pos| {
            let at = match (src, pos.line()) {
                (Some(src), Some(l)) => format!("{src}:{l}: "),
                (None, Some(l)) => format!("line {l}: "),
                _ => String::new(),
            };
            r.log("debug", &format!("{at}{s}"), &serde_json::Value::Null)
        });
        engine.on_progress(move |ops| {
            guard::tick();
            if ops & 0x3ff != 0 {
                return None;
            }
            interruption()
        });
        let ctx = api::Ctx(host);
        #[allow(deprecated)] // on_var is marked volatile, not deprecated (RHAI-HOST.md pitfall 1)
        engine.on_var(move |name, index, context| match name {
            "ctx" => Ok(Some(Dynamic::from(ctx.clone()))),
            "args" => Ok(args.clone()),
            _ => guard::on_access(name, index, &context).map(|_| None),
        });
    } else {
        engine.on_print(|_| {});
        engine.on_debug(|_, _, _| {});
        engine.on_progress(|_| {
            guard::tick();
            None
        });
        #[allow(deprecated)] // on_var is marked volatile, not deprecated (RHAI-HOST.md pitfall 1)
        engine.on_var(|name, index, context| guard::on_access(name, index, &context).map(|_| None));
    }
    engine
}

/// The reason the current thread's scope must stop, if it must: cancelled or past its deadline.
pub fn interruption() -> Option<Dynamic> {
    let frame = scope::current()?;
    if frame.cancel.is_cancelled() {
        return Some(Dynamic::from("cancelled"));
    }
    frame.expired().map(|d| match &d.kind {
        scope::DeadlineKind::Run => Dynamic::from("run deadline exceeded"),
        scope::DeadlineKind::Parallel(_) => Dynamic::from("parallel deadline exceeded"),
    })
}

#[cfg(test)]
mod tests {
    /// The integer `to_string` writes what rhai's generic one wrote, in interpolation, as a
    /// method and as a function, at both ends of the range.
    #[test]
    fn integers_print_as_rhais_generic_to_string_printed_them() {
        let engine = super::build(None, None, None);
        let text: String = engine
            .eval(r#"let n = -42; `${0}|${n}|${9223372036854775807}|${-9223372036854775807 - 1}|` + n.to_string() + "|" + to_string(7)"#)
            .expect("the expression evaluates");
        assert_eq!(text, "0|-42|9223372036854775807|-9223372036854775808|-42|7");
        let float: String = engine.eval("`${1.5}`").expect("a float interpolates");
        assert_eq!(float, "1.5");
    }
}
