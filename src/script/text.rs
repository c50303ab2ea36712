//! The text of arrays and maps (`${list}` in a prompt, `to_string`, `to_debug`, `print`,
//! `debug`): rhai's standard package's output, made without its per-element function call.
//!
//! rhai formats each element through `to_debug`, resolved with a fresh call context every time
//! (about 2,400 instructions an element: a three-string array cost 8,700, which a council's
//! "the votes were ${votes}" pays per prompt). Strings, integers and booleans are written here;
//! any other element goes through rhai's `to_debug` as before. A test compares the two on every
//! kind of value a script can hold.

use rhai::{Array, Dynamic, Engine, ImmutableString, Map, NativeCallContext, INT};
use std::fmt::Write;

const NAMES: [&str; 4] = ["to_string", "to_debug", "print", "debug"];

pub fn register(engine: &mut Engine) {
    for name in NAMES {
        engine.register_fn(name, array_text);
        engine.register_fn(name, map_text);
    }
}

fn array_text(nc: NativeCallContext, array: &mut Array) -> ImmutableString {
    let mut out = String::with_capacity(2 + 8 * array.len());
    out.push('[');
    for (i, x) in array.iter_mut().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        element(&nc, x, &mut out);
    }
    out.push(']');
    out.into()
}

fn map_text(nc: NativeCallContext, map: &mut Map) -> ImmutableString {
    let mut out = String::with_capacity(3 + 16 * map.len());
    out.push_str("#{");
    for (i, (k, v)) in map.iter_mut().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        // Writing to a String cannot fail.
        let _ = write!(out, "{k:?}: ");
        element(&nc, v, &mut out);
    }
    out.push('}');
    out.into()
}

/// One element in debug form, as rhai's `print_with_func("to_debug", ..)` gives it.
fn element(nc: &NativeCallContext, x: &mut Dynamic, out: &mut String) {
    // A shared value (captured by a closure) is resolved by rhai as it always was.
    if !x.is_shared() {
        if let Some(s) = x.read_lock::<ImmutableString>() {
            let _ = write!(out, "{:?}", s.as_str());
            return;
        }
        if let Some(n) = x.read_lock::<INT>() {
            let _ = write!(out, "{}", *n);
            return;
        }
        if let Some(b) = x.read_lock::<bool>() {
            out.push_str(if *b { "true" } else { "false" });
            return;
        }
    }
    match nc.call_native_fn_raw("to_debug", true, &mut [x]) {
        Ok(r) if r.is_string() => out.push_str(&r.into_immutable_string().unwrap_or_default()),
        Ok(r) => out.push_str(nc.engine().map_type_name(r.type_name())),
        Err(_) => {
            let text = format!("{x:?}");
            out.push_str(nc.engine().map_type_name(&text));
        }
    }
}

#[cfg(test)]
mod tests {
    use rhai::packages::{Package, StandardPackage};
    use rhai::Engine;

    /// Values of every kind a script can hold, alone and nested, shared and not.
    const CASES: &[&str] = &[
        "[]",
        "#{}",
        r#"["approve", "reject", "abstain"]"#,
        r#"["quote \" and \\ backslash", "tab\tnewline\n", "ünïcödé ✓", "", "\u0001"]"#,
        "[1, -2, 0, 9223372036854775807, -9223372036854775808]",
        "[true, false, (), 'c', '\\n', 1.5, -0.0, 1e300, 3.0]",
        r#"[[1, "a"], [[]], #{ b: 2, a: "x", "with space": [true] }]"#,
        r#"#{ z: 1, a: "two", "k\"q": [1, 2], n: #{ deep: #{ deeper: ["s"] } }, u: () }"#,
        "[Fn(\"f\"), |x| x + 1, blob(3, 7), 1..3, 2..=4]",
        r#"{ let s = "shared"; let n = 7; let f = || s + n; [s, n, f.call()] }"#,
        r#"{ let a = [1, "x"]; let f = || a.len(); [a, f.call()] }"#,
        r#"{ let m = #{ k: "v" }; let f = || m.k; #{ m: m, r: f.call() } }"#,
        r#"timestamp().elapsed > -1.0"#,
    ];

    fn plain() -> Engine {
        let mut e = Engine::new_raw();
        e.register_global_module(StandardPackage::new().as_shared_module());
        e
    }

    fn with_text() -> Engine {
        let mut e = plain();
        super::register(&mut e);
        e
    }

    /// The text of `value` through every way a script makes it.
    fn texts(engine: &Engine, value: &str) -> Vec<String> {
        ["`${v}`", "v.to_string()", "to_debug(v)", "`x${[v]}y`", "`${#{ v: v }}`"]
            .iter()
            .map(|form| {
                let script = format!("let v = {value}; {form}");
                engine.eval::<String>(&script).unwrap_or_else(|e| panic!("{script}: {e}"))
            })
            .collect()
    }

    #[test]
    fn arrays_and_maps_read_as_rhais_standard_package_writes_them() {
        let (theirs, ours) = (plain(), with_text());
        for value in CASES {
            assert_eq!(texts(&ours, value), texts(&theirs, value), "{value}");
        }
    }

    #[test]
    fn print_and_debug_give_the_same_text_as_before() {
        use std::sync::{Arc, Mutex};
        let lines = |mut engine: Engine, value: &str| {
            let got = Arc::new(Mutex::new(vec![]));
            let (p, d) = (got.clone(), got.clone());
            engine.on_print(move |s| p.lock().expect("the lines").push(s.to_string()));
            engine.on_debug(move |s, _, _| d.lock().expect("the lines").push(s.to_string()));
            let script = format!("let v = {value}; print(v); debug(v); print([v]); debug(#{{ v: v }});");
            engine.run(&script).unwrap_or_else(|e| panic!("{script}: {e}"));
            let got = got.lock().expect("the lines").clone();
            got
        };
        for value in CASES {
            assert_eq!(lines(with_text(), value), lines(plain(), value), "{value}");
        }
    }
}
