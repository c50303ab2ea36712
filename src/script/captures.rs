//! Which variables a closure captured its body can change, so that `ctx.parallel` can give its
//! branches a copy of the others. Under rhai's `sync` feature a captured variable is shared, and
//! even reading it takes its write lock (`eval/expr.rs` `search_scope_only`, then
//! `Target::try_from`); a branch that asks while another branch holds the lock tries five times
//! 10 ms apart, then fails with a data race. A branch the OS pauses for 50 ms while holding the lock
//! (a loaded machine) or one holding it for a whole call (`names.map(..)` over agent turns) made its
//! siblings fail though none of them changed anything. A copy contends with nobody, and for a
//! variable no branch changes it reads the same as the shared value.
//!
//! The analysis reads the closure's body and is conservative: a use counts as a change unless it is
//! plainly a read (an operand, an argument after the first, a property or an index read, or a
//! method known not to change its receiver). A closure nested in the body passes on the uses of the
//! variables it captures in turn.

use rhai::{ASTNode, Dynamic, Expr, FnPtr, ImmutableString, Module, ScriptFuncDef, Shared, Stmt, AST};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// How a closure's body uses one of the variables it captured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Use {
    /// Assigned, as a whole or in part: `x = ..`, `x += ..`, `x.a = ..`, `x[i] = ..`.
    pub assigned: bool,
    /// Given to something that may change it in place: a method not known to leave its receiver
    /// alone, the first argument of a function call, a call that sees the caller's scope (`f!()`).
    pub changed: bool,
}

impl Use {
    const ALL: Use = Use { assigned: true, changed: true };

    fn merge(&mut self, other: Use) {
        self.assigned |= other.assigned;
        self.changed |= other.changed;
    }
}

/// Methods of rhai's standard library that never change their receiver (they take it by
/// reference only because rhai passes every receiver that way). `trim`, `sort`, `push`, `clear`,
/// `pad`, `make_upper` and the like change it, and are not here. `call` and `curry` are a function
/// pointer's: calling it binds no `this`.
const PURE_METHODS: &[&str] = &[
    "all",
    "bytes",
    "call",
    "chars",
    "contains",
    "curry",
    "ends_with",
    "filter",
    "find",
    "find_map",
    "get",
    "index_of",
    "is_empty",
    "keys",
    "len",
    "map",
    "reduce",
    "reduce_rev",
    "some",
    "split",
    "split_rev",
    "starts_with",
    "sub_string",
    "to_array",
    "to_blob",
    "to_chars",
    "to_debug",
    "to_json",
    "to_lower",
    "to_string",
    "to_upper",
    "values",
];

/// The methods of `PURE_METHODS` that call a function with `this` bound to the receiver's item
/// (rhai's first try, which a closure without parameters takes): through `this` that function may
/// change the receiver, so they leave it alone only when their first argument, the one they call,
/// is a closure that never names `this`.
const CALLBACK_METHODS: &[&str] =
    &["all", "filter", "find", "find_map", "index_of", "map", "reduce", "reduce_rev", "some"];

/// The uses found so far, by closure name. A closure's name (`anon$` and a hash of its parameters
/// and body) identifies its body, so an entry never goes stale, hot reloads included.
#[derive(Default)]
pub struct Cache(Mutex<HashMap<ImmutableString, Arc<[Use]>>>);

impl Cache {
    /// How the closure `f` uses each of its parameters, the captured ones first (so the count past
    /// its curried values is the parameters it declares); `None` when `f` is not a closure of this
    /// run's script.
    pub fn uses(&self, namespaces: &[Shared<Module>], f: &FnPtr) -> Option<Arc<[Use]>> {
        if !f.is_anonymous() {
            return None;
        }
        let mut cache = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(found) = cache.get(f.fn_name()) {
            return Some(found.clone());
        }
        let lookup = |name: &str| {
            namespaces.iter().flat_map(|m| m.iter_script_fn_info()).find(|f| f.2 == name).map(|f| f.4.clone())
        };
        let def = lookup(f.fn_name())?;
        let uses: Arc<[Use]> = body_uses(&def, &lookup, 0).into();
        cache.insert(def.name.clone(), uses.clone());
        Some(uses)
    }
}

/// The arguments a closure with these `uses` (from `Cache::uses`) declares past `f`'s curried
/// values: what a call must give it.
pub fn declared_args(uses: &[Use], f: &FnPtr) -> Option<usize> {
    uses.len().checked_sub(f.curry().len())
}

/// Replaces `f`'s shared curried values by plain copies wherever `copyable` says the use (from
/// `Cache::uses`) allows it for that value; returns their positions, for `shared_copies`.
pub fn copy_unchanged(f: &mut FnPtr, uses: &[Use], copyable: impl Fn(&Dynamic, Use) -> bool) -> Vec<usize> {
    let mut copied = Vec::new();
    for (i, (value, used)) in f.iter_curry_mut().zip(uses.iter()).enumerate() {
        if !value.is_shared() {
            continue;
        }
        if !items_within(value, &mut { COPY_LIMIT }) {
            continue;
        }
        // A blocking read is not offered by rhai; on the rare contention `flatten_clone` gives
        // the shared value back and the branches read it as before.
        let copy = value.flatten_clone();
        if !copy.is_shared() && copyable(&copy, *used) {
            *value = copy;
            copied.push(i);
        }
    }
    copied
}

/// The most array items and map entries, nested ones included, a value may hold to be copied:
/// each worker holds a copy, so a larger one stays shared (read under rhai's lock, as before)
/// rather than be multiplied by the workers. Text is not counted: a copy shares it.
const COPY_LIMIT: usize = 1 << 16;

/// Whether `v` holds at most `budget` items, counting down, nested no deeper than the data guard
/// lets a variable nest; stops as soon as either is passed.
fn items_within(v: &Dynamic, budget: &mut usize) -> bool {
    items_within_at(v, budget, 0)
}

fn items_within_at(v: &Dynamic, budget: &mut usize, depth: usize) -> bool {
    if depth > super::guard::MAX_DEPTH {
        return false;
    }
    let mut take = |n: usize| match budget.checked_sub(n) {
        Some(left) => {
            *budget = left;
            true
        }
        None => false,
    };
    if let Some(items) = v.read_lock::<rhai::Array>() {
        take(items.len()) && items.iter().all(|item| items_within_at(item, budget, depth + 1))
    } else if let Some(map) = v.read_lock::<rhai::Map>() {
        take(map.len()) && map.values().all(|item| items_within_at(item, budget, depth + 1))
    } else {
        true
    }
}

/// `f` for one parallel worker: the values at `copied` (plain copies) each in a shared cell of its
/// own. Rhai clones a closure's curried values into every call, which for a plain array or map
/// is a deep copy; a shared cell is cloned by reference. One copy a worker, not one a branch, and
/// the worker's branches run one after another, so nobody else ever locks it.
pub fn shared_copies(f: &FnPtr, copied: &[usize]) -> FnPtr {
    let mut f = f.clone();
    for (i, value) in f.iter_curry_mut().enumerate() {
        if copied.contains(&i) {
            *value = std::mem::take(value).into_shared();
        }
    }
    f
}

/// Finds a closure's definition by its name, among the script's functions.
type Lookup<'a> = &'a dyn Fn(&str) -> Option<Shared<ScriptFuncDef>>;

/// How deep closures nested in closures are followed; past it every capture counts as changed.
const MAX_NESTING: usize = 32;

/// The use of each of `def`'s parameters by its body (the captured ones come first).
fn body_uses(def: &Shared<ScriptFuncDef>, lookup: Lookup, depth: usize) -> Vec<Use> {
    let params = &def.params;
    if depth > MAX_NESTING {
        return vec![Use::ALL; params.len()];
    }
    let mut uses = vec![Use::default(); params.len()];
    let mut everything = false;
    walk_body(def, &mut |path: &[ASTNode]| {
        match path.last() {
            Some(ASTNode::Expr(Expr::Custom(..))) => everything = true,
            Some(ASTNode::Expr(Expr::FnCall(f, _)) | ASTNode::Stmt(Stmt::FnCall(f, _)))
                if f.capture_parent_scope || f.name == "eval" =>
            {
                everything = true
            }
            Some(ASTNode::Expr(Expr::Variable(v, ..))) if v.2.is_empty() => {
                if let Some(i) = params.iter().position(|p| *p == v.1) {
                    uses[i].merge(use_at(path, lookup, depth));
                }
            }
            _ => {}
        }
        true
    });
    if everything {
        uses.fill(Use::ALL);
    }
    uses
}

/// The use a variable gets where `path` (ending at it) puts it.
fn use_at(path: &[ASTNode], lookup: Lookup, depth: usize) -> Use {
    let Some((ASTNode::Expr(var), above)) = path.split_last() else { return Use::ALL };
    match above.last() {
        Some(ASTNode::Stmt(Stmt::Assignment(x))) if std::ptr::eq(&x.1.lhs, *var) => {
            Use { assigned: true, changed: false }
        }
        Some(ASTNode::Expr(Expr::Dot(b, ..) | Expr::Index(b, ..))) if std::ptr::eq(&b.lhs, *var) => {
            chain_use(above, lookup)
        }
        Some(ASTNode::Expr(Expr::FnCall(f, _)) | ASTNode::Stmt(Stmt::FnCall(f, _))) => {
            let at = f.args.iter().position(|a| std::ptr::eq(a, *var));
            match at {
                Some(i) if i > 0 && f.name == "curry" => nested_use(&f.args[0], i - 1, lookup, depth),
                Some(0) if f.op_token.is_none() => Use { assigned: false, changed: true },
                _ => Use::default(),
            }
        }
        _ => Use::default(),
    }
}

/// The use of the variable at the root of the chain whose innermost node ends `path`: changed when
/// a method in the chain may change what it is called on, assigned when the chain is assigned to.
fn chain_use(path: &[ASTNode], lookup: Lookup) -> Use {
    let mut top = path.len() - 1;
    while top > 0 {
        match (&path[top - 1], &path[top]) {
            (ASTNode::Expr(Expr::Dot(b, ..) | Expr::Index(b, ..)), ASTNode::Expr(e)) if std::ptr::eq(&b.lhs, *e) => {
                top -= 1
            }
            _ => break,
        }
    }
    let mut used = Use::default();
    if let ASTNode::Expr(chain) = &path[top] {
        chain.walk(&mut Vec::new(), &mut |p: &[ASTNode]| {
            if let Some(ASTNode::Expr(Expr::MethodCall(m, _))) = p.last() {
                let name = m.name.as_str();
                used.changed |= !PURE_METHODS.contains(&name)
                    || (CALLBACK_METHODS.contains(&name) && !m.args.first().is_none_or(|a| leaves_this(a, lookup)));
            }
            true
        });
        if let Some(ASTNode::Stmt(Stmt::Assignment(x))) = top.checked_sub(1).map(|i| &path[i]) {
            used.assigned |= std::ptr::eq(&x.1.lhs, *chain);
        }
    }
    used
}

/// Whether `arg`, the first argument of one of `CALLBACK_METHODS`, cannot change the item bound
/// to `this`: a constant that is no function pointer, or a closure written in place whose body
/// never names `this`. A variable or a named function pointer may be anything, and counts as
/// changing it.
fn leaves_this(arg: &Expr, lookup: Lookup) -> bool {
    match closure_name(arg) {
        Some(name) => lookup(&name).is_some_and(|def| !names_this(&def)),
        None => match arg {
            Expr::DynamicConstant(v, _) => !v.is_fnptr(),
            other => other.is_constant(),
        },
    }
}

/// The name of the closure an expression writes in place: `|x| ..` (a constant), or `|x| .. y ..`
/// (rhai's capture block: `Share` then `curry(Fn(anon$..), y)`).
fn closure_name(e: &Expr) -> Option<String> {
    match e {
        Expr::DynamicConstant(v, _) => {
            v.read_lock::<FnPtr>().filter(|p| p.is_anonymous()).map(|p| p.fn_name().to_string())
        }
        Expr::FnCall(f, _) if f.name == "curry" => f.args.first().and_then(closure_name),
        Expr::Stmt(block) => block.statements().iter().find_map(|s| match s {
            Stmt::Expr(e) => closure_name(e),
            Stmt::FnCall(f, _) if f.name == "curry" => f.args.first().and_then(closure_name),
            _ => None,
        }),
        _ => None,
    }
}

/// Walks a script function's body, every node with its path. Rhai walks only whole ASTs, so the
/// definition goes in one of its own.
fn walk_body(def: &Shared<ScriptFuncDef>, on_node: &mut dyn FnMut(&[ASTNode]) -> bool) {
    let mut module = Module::new();
    module.set_script_fn(def.clone());
    AST::new(std::iter::empty::<Stmt>(), module).walk(on_node);
}

/// Whether a closure's body names `this`.
fn names_this(def: &Shared<ScriptFuncDef>) -> bool {
    let mut found = false;
    walk_body(def, &mut |path: &[ASTNode]| {
        found |= matches!(path.last(), Some(ASTNode::Expr(Expr::ThisPtr(..))));
        !found
    });
    found
}

/// A variable handed to a closure nested in the body (`curry(Fn(anon$..), .., x, ..)`, as rhai
/// writes a capture): it is used as that closure uses its parameter `i`.
fn nested_use(f: &Expr, i: usize, lookup: Lookup, depth: usize) -> Use {
    let Expr::DynamicConstant(value, _) = f else { return Use::ALL };
    let Some(name) = value.read_lock::<FnPtr>().map(|p| p.fn_name().to_string()) else { return Use::ALL };
    let Some(def) = lookup(&name) else { return Use::ALL };
    body_uses(&def, lookup, depth + 1).get(i).copied().unwrap_or(Use::ALL)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How the closure that `src` evaluates to uses the variable `x` it captured.
    fn use_of_x(src: &str) -> Use {
        let engine = rhai::Engine::new();
        let ast = engine.compile(src).expect("compiles");
        let f: FnPtr = engine.eval_ast(&ast).expect("a closure");
        let lib = ast.shared_lib().clone();
        let lookup = |name: &str| lib.iter_script_fn_info().find(|f| f.2 == name).map(|f| f.4.clone());
        let def = lookup(f.fn_name()).expect("the closure's definition");
        let at = def.params.iter().position(|p| p == "x").expect("x is captured");
        body_uses(&def, &lookup, 0)[at]
    }

    const READ: Use = Use { assigned: false, changed: false };
    const ASSIGNED: Use = Use { assigned: true, changed: false };
    const CHANGED: Use = Use { assigned: false, changed: true };

    #[test]
    fn reads_are_reads() {
        for body in [
            "`item ${x}`",
            "x + 1",
            "1 + x",
            "x == 2",
            "#{ a: x, b: [x] }",
            "let y = x; y",
            "x ?? 0",
            "if x > 0 { 1 } else { 2 }",
            "for v in x { } 0",
            "x.len()",
            "x.a",
            "x[0]",
            "x.a.b[2]",
            "x.map(|v| v + 1).filter(|v| v > 1).len()",
            "x.contains(3) && x.to_json().len() > 0",
            "max(1, x)",
            "[].push(x)",
            "x.call(1)",
            "x.map(|v| v + i)",
            "x.reduce(|s, v| s + v, 0)",
            "x.reduce(|s, v| s + v, i)",
            "x.filter(|v| v > x.len())",
        ] {
            assert_eq!(use_of_x(&format!("let x = [1]; |i| {{ {body} }}")), READ, "{body}");
        }
    }

    #[test]
    fn assignments_are_assignments() {
        for body in ["x = 2", "x += 1", "x.a = 1", "x[0] = 1", "x.a.b += 1", "x[0].c = 2"] {
            assert_eq!(use_of_x(&format!("let x = #{{}}; |i| {{ {body} }}")), ASSIGNED, "{body}");
        }
    }

    #[test]
    fn calls_that_may_change_the_value_are_changes() {
        for body in [
            "x.push(1)",
            "x.trim()",
            "x.a.push(1)",
            "x[0].clear()",
            "len(x)",
            "x.sort(); x.len()",
            "x.map(|| { this.a = 1; this })",
            "let f = |v| v; x.map(f)",
            "x.filter(Fn(\"is_big\"))",
            "x.index_of(i)",
        ] {
            assert_eq!(use_of_x(&format!("let x = [1]; |i| {{ {body} }}")), CHANGED, "{body}");
        }
    }

    #[test]
    fn a_nested_closure_passes_on_how_it_uses_the_capture() {
        assert_eq!(use_of_x("let x = [1]; |i| { let g = || x.len(); g.call() }"), READ);
        assert_eq!(use_of_x("let x = [1]; |i| { let g = || x.push(i); g.call() }"), CHANGED);
        assert_eq!(use_of_x("let x = [1]; |i| { let g = |v| || { x = v; }; g.call(1) }"), ASSIGNED);
    }

    #[test]
    fn a_worker_gets_its_copies_in_cells_of_its_own() {
        let engine = rhai::Engine::new();
        let f: FnPtr = engine.eval("let x = [1, 2]; let y = 3; |i| x.len() + y").expect("a closure");
        let mut plain = f.clone();
        plain.iter_curry_mut().for_each(|v| *v = v.flatten_clone());
        let (a, b) = (shared_copies(&plain, &[0]), shared_copies(&plain, &[0]));
        assert!(a.curry()[0].is_shared() && !a.curry()[1].is_shared(), "only the copied one is shared");
        // Each worker's cell is its own: holding one's lock leaves the other free.
        let mut a_again = a.clone();
        let cell = a_again.iter_curry_mut().next().expect("x");
        let held = cell.write_lock::<rhai::Array>().expect("a's cell");
        assert_eq!(b.curry()[0].read_lock::<rhai::Array>().map(|v| v.len()), Some(2));
        drop(held);
    }

    #[test]
    fn values_past_the_copy_limit_stay_shared() {
        let list = |n: usize| Dynamic::from_array((0..n).map(|i| Dynamic::from(i as rhai::INT)).collect());
        assert!(items_within(&list(COPY_LIMIT), &mut { COPY_LIMIT }));
        assert!(!items_within(&list(COPY_LIMIT + 1), &mut { COPY_LIMIT }));
        // Nested items count: 300 lists of 300.
        let nested = Dynamic::from_array((0..300).map(|_| list(300)).collect());
        assert!(!items_within(&nested, &mut { COPY_LIMIT }));
        // And so does depth: a list in a list, 300 deep, is too deep to walk.
        let deep = (0..300).fold(list(1), |inner, _| Dynamic::from_array(vec![inner]));
        assert!(!items_within(&deep, &mut { COPY_LIMIT }));
        let engine = rhai::Engine::new();
        let mut f: FnPtr = engine.eval("let x = []; x.pad(70000, 0); |i| x.len()").expect("a closure");
        assert_eq!(copy_unchanged(&mut f, &[Use::default(), Use::default()], |_, _| true), Vec::<usize>::new());
        assert!(f.curry()[0].is_shared(), "the large list stays shared");
        let mut g: FnPtr = engine.eval("let x = [1, 2]; |i| x.len()").expect("a closure");
        assert_eq!(copy_unchanged(&mut g, &[Use::default(), Use::default()], |_, _| true), vec![0]);
    }

    #[test]
    fn a_call_that_sees_the_callers_scope_changes_everything() {
        let src = "fn bump() { x += 1; } let x = 1; |i| { let y = x; bump!(); y }";
        assert_eq!(use_of_x(src), Use::ALL);
    }
}
