//! Documented registration: every host function is registered with its parameter names and a doc
//! comment, so that the API reference (`awf script api`) and the editor definitions (`awf script
//! defs`) are generated from the engine itself and cannot drift from it.

use rhai::{Engine, FuncRegistration, RhaiNativeFunc, Variant};

/// Registers `func` under `sig`'s name with `sig`'s parameter names and `doc` as its comment.
///
/// `sig` is `"name(receiver, arg, ...)"`, or `"get name(receiver)"` for a property getter; the
/// parameter types come from the Rust function, so only names are written by hand. `doc` is
/// Markdown; its first line is the summary.
pub fn def<A: 'static, const N: usize, const X: bool, R, const F: bool, FUNC>(
    engine: &mut Engine,
    sig: &str,
    doc: &str,
    func: FUNC,
) where
    R: Variant + Clone,
    FUNC: RhaiNativeFunc<A, N, X, R, F> + Send + Sync + 'static,
{
    let (head, params) = sig.split_once('(').unwrap_or((sig, ")"));
    let names: Vec<&str> = params.trim_end_matches(')').split(',').map(str::trim).filter(|p| !p.is_empty()).collect();
    let types = FUNC::param_names();
    debug_assert_eq!(names.len(), types.len(), "`{sig}` names {} parameters, the function has {}", names.len(), N);
    let mut info: Vec<String> =
        names.iter().zip(types.iter()).map(|(n, t)| format!("{n}: {}", script_type(engine, t))).collect();
    let ret = script_type(engine, FUNC::return_type_name());
    if ret != "()" {
        info.push(ret);
    }
    let comment = doc.trim().lines().map(|l| format!("/// {l}").trim_end().to_string()).collect::<Vec<_>>().join("\n");
    let reg = match head.trim().strip_prefix("get ") {
        Some(prop) => FuncRegistration::new_getter(prop.trim()),
        None => FuncRegistration::new(head.trim()),
    };
    reg.with_params_info(info).with_comments([comment]).register_into_engine(engine, func);
}

/// A Rust type name as a script writer knows it: `Agent`, `String`, `int`, `Map`, `Dynamic` (any
/// value; the reference shows `any`, the definition files `?`).
pub fn script_type(engine: &Engine, rust: &str) -> String {
    let t = rust.trim();
    let t = t.strip_prefix("&mut ").or_else(|| t.strip_prefix('&')).unwrap_or(t);
    // A fallible function returns `Result<T, Box<EvalAltResult>>`: the script sees T.
    let t = t.strip_prefix("core::result::Result<").map_or(t, first_argument);
    match engine.map_type_name(t) {
        "i64" | "int" => "int".into(),
        "f64" | "float" => "float".into(),
        "string" | "&str" | "str" | "String" | "ImmutableString" | "alloc::string::String" => "String".into(),
        "map" => "Map".into(),
        "array" => "Array".into(),
        "Fn" | "FnPtr" => "FnPtr".into(),
        "range" => "Range<int>".into(),
        "range=" => "RangeInclusive<int>".into(),
        other => match other.rsplit("::").next().unwrap_or(other) {
            "Dynamic" => "Dynamic".into(),
            last => last.to_string(),
        },
    }
}

/// The first type argument of a generic's argument list: `A<B, C>, D>` → `A<B, C>`.
fn first_argument(args: &str) -> &str {
    let mut depth = 0usize;
    for (i, ch) in args.char_indices() {
        match ch {
            '<' => depth += 1,
            '>' if depth == 0 => return &args[..i],
            '>' => depth -= 1,
            ',' if depth == 0 => return &args[..i],
            _ => {}
        }
    }
    args
}
