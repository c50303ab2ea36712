//! `map` and `filter` on arrays, calling their function with the arguments it declares.
//!
//! rhai's own call the function for each item in up to three forms, each tried after the one
//! before fails: with no argument and `this` bound to the item, then with the item, then with the
//! item and its index. A closure declaring one parameter (`votes.map(|v| v.choice)`, what scripts
//! write most) fails the first form for every item, and each failure formats an error's text (the
//! call's signature, each argument's type name looked up): about 7,000 instructions an item, 3,000
//! failures in a 1,000-round magi loop. Here a closure of the script is looked up once, in the
//! run's closure cache (`captures.rs`, shared with `ctx.parallel`), and called in the one form that
//! fits what it declares; any other function (`Fn("name")`, a native one) is tried in rhai's
//! order. Results and errors are rhai's: a test runs both on the same scripts.

use super::captures::{self, Cache};
use rhai::{Array, Dynamic, Engine, EvalAltResult, FnPtr, NativeCallContext, Position, INT};
use std::sync::Arc;

type Res<T> = Result<T, Box<EvalAltResult>>;

/// The arguments `f` takes past its curried values, when it is a closure of the script.
fn declared(cache: &Cache, nc: &NativeCallContext, f: &FnPtr) -> Option<usize> {
    captures::declared_args(&cache.uses(nc.namespaces(), f)?, f)
}

pub fn register(engine: &mut Engine, cache: Arc<Cache>) {
    let c = cache.clone();
    engine.register_fn("map", move |nc: NativeCallContext, array: &mut Array, f: FnPtr| -> Res<Array> {
        let args = declared(&c, &nc, &f);
        let mut out = Array::with_capacity(array.len());
        for (i, item) in array.iter_mut().enumerate() {
            out.push(call("map", &nc, &f, args, item, i)?);
        }
        Ok(out)
    });
    engine.register_fn("filter", move |nc: NativeCallContext, array: &mut Array, f: FnPtr| -> Res<Array> {
        let args = declared(&cache, &nc, &f);
        let mut out = Array::new();
        for (i, item) in array.iter_mut().enumerate() {
            if call("filter", &nc, &f, args, item, i)?.as_bool().unwrap_or(false) {
                out.push(item.clone());
            }
        }
        Ok(out)
    });
}

/// Calls `f` for the item at `i`: in the one form its declared arguments fit, or else in rhai's
/// order (`this` bound, then the item, then the item and its index), moving on only when the form
/// tried does not exist. An error is wrapped as rhai wraps it: in a call to `method`.
fn call(
    method: &str,
    nc: &NativeCallContext,
    f: &FnPtr,
    args: Option<usize>,
    item: &mut Dynamic,
    i: usize,
) -> Res<Dynamic> {
    let index = || Dynamic::from(INT::try_from(i).unwrap_or(INT::MAX));
    let result = match args {
        Some(0) => f.call_raw(nc, Some(item), []),
        Some(1) => f.call_raw(nc, None, [item.clone()]),
        Some(2) => f.call_raw(nc, None, [item.clone(), index()]),
        _ => {
            let missing = |e: &EvalAltResult| matches!(e, EvalAltResult::ErrorFunctionNotFound(sig, _) if sig.starts_with(f.fn_name()));
            match f.call_raw(nc, Some(item), []) {
                Err(e) if missing(&e) => match f.call_raw(nc, None, [item.clone()]) {
                    Err(e) if missing(&e) => f.call_raw(nc, None, [item.clone(), index()]),
                    other => other,
                },
                other => other,
            }
        }
    };
    result.map_err(|e| {
        let source = nc.call_source().unwrap_or("").to_string();
        EvalAltResult::ErrorInFunctionCall(method.to_string(), source, e, Position::NONE).into()
    })
}

#[cfg(test)]
mod tests {
    use rhai::packages::{Package, StandardPackage};
    use rhai::Engine;

    /// Every form of function `map` and `filter` take, and the errors they give.
    const CASES: &[&str] = &[
        "[1, 2, 3].map(|x| x * 2)",
        "[1, 2, 3].map(|x, i| x * 10 + i)",
        "[1, 2, 3].map(|| this * 3)",
        "{ let a = [1, 2]; let b = a.map(|| { this += 5; this }); [a, b] }",
        "{ let k = 10; let f = |x| x + k; [1, 2].map(f) }",
        "{ let k = 10; [1, 2].map(|x, i| x + k + i) }",
        "{ let k = [1]; [1, 2].map(|x| { k.push(x); k.len() }) }",
        "[#{ c: 1 }, #{ c: 2 }].map(|v| v.c)",
        "[].map(|x| x)",
        "[1, 2].map(Fn(\"double\"))",
        "[1, 2].map(double)",
        "[1, 2].map(Fn(\"with_index\"))",
        "[1, 2].map(Fn(\"to_string\"))",
        "[1, 2].map(|x| x.curry(1))",
        "{ let f = |x, y| x + y; [1, 2].map(f.curry(100)) }",
        "[1, 2, 3, 4].filter(|x| x % 2 == 0)",
        "[1, 2, 3, 4].filter(|x, i| i > 1)",
        "[1, 2, 3, 4].filter(|| this > 2)",
        "[1, 2, 3].filter(|x| x)",
        "[1, 2].filter(Fn(\"big\"))",
        // Errors: a closure taking more than rhai gives, a missing function, a failing body.
        "[1, 2].map(|a, b, c| a)",
        "[1, 2].map(Fn(\"nothing\"))",
        "[1, 2].map(|x| x / 0)",
        "[1, 2].filter(|x| missing(x))",
        "[1, 2].map(|x| throw `no ${x}`)",
    ];

    const FNS: &str = "fn double(x) { x * 2 } fn with_index(x, i) { [x, i] } fn big(x) { x > 1 }";

    fn plain() -> Engine {
        let mut e = Engine::new_raw();
        e.register_global_module(StandardPackage::new().as_shared_module());
        e
    }

    fn run(engine: &Engine, case: &str) -> String {
        match engine.eval::<rhai::Dynamic>(&format!("{FNS} {case}")) {
            Ok(v) => format!("{v:?}"),
            Err(e) => format!("error: {e}"),
        }
    }

    #[test]
    fn map_and_filter_answer_as_rhais_own_do() {
        let (rhai, mut awf) = (plain(), plain());
        super::register(&mut awf, Default::default());
        for case in CASES {
            assert_eq!(run(&awf, case), run(&rhai, case), "{case}");
        }
    }

    #[test]
    fn the_errors_are_errors() {
        let mut awf = plain();
        super::register(&mut awf, Default::default());
        for (case, says) in [
            ("[1, 2].map(|a, b, c| a)", "Function not found"),
            ("[1, 2].map(Fn(\"nothing\"))", "Function not found: nothing"),
            ("[1, 2].map(|x| x / 0)", "Division by zero"),
            ("[1, 2].map(|x| throw `no ${x}`)", "no 1"),
        ] {
            let text = run(&awf, case);
            assert!(text.starts_with("error: ") && text.contains(says), "{case}: {text}");
        }
    }
}
