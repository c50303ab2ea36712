//! Static checks run after parsing and before anything runs: calls to functions that exist
//! nowhere (host, standard library, the script's own or its closures) are compile errors.

use rhai::{ASTNode, Engine, Expr, FnAccess, Position, Stmt, AST};
use std::collections::{HashMap, HashSet};

/// Names the engine handles itself rather than through registered functions.
const KEYWORDS: &[&str] =
    &["print", "debug", "type_of", "Fn", "call", "curry", "is_shared", "is_def_var", "is_def_fn", "this", "global"];

/// An unknown function, with where it is called and a likely intended name.
pub struct Unknown {
    pub name: String,
    pub pos: Position,
    pub suggestion: Option<String>,
}

/// What the host registers, read once for all the checks of one script: the names scripts call
/// (public functions, a sub-module's as `ns::name`) and every name's argument counts. One pass
/// over rhai's metadata, no signature text formatted.
pub struct Natives {
    names: HashSet<String>,
    arities: HashMap<String, Vec<usize>>,
}

impl Natives {
    pub fn of(engine: &Engine) -> Natives {
        let mut natives = Natives { names: HashSet::new(), arities: HashMap::new() };
        let forms = engine.collect_fn_metadata(
            None,
            |f| {
                let m = f.metadata;
                let public = m.access == FnAccess::Public;
                let called =
                    if f.namespace.is_empty() { m.name.to_string() } else { format!("{}::{}", f.namespace, m.name) };
                Some((m.name.to_string(), m.num_params, public.then_some(called)))
            },
            true,
        );
        for (name, n, called) in forms {
            natives.arities.entry(name).or_default().push(n);
            natives.names.extend(called);
        }
        natives
    }
}

/// A method call that Rhai would send to the script's own function of the same name and arity
/// instead of the host's method (`a.run(turn)` in a script that defines `fn run(args)`).
pub struct Shadowed {
    pub name: String,
    pub pos: Position,
}

/// Method calls that a script function shadows: Rhai calls a script function as a method, with
/// `this` bound, whenever name and arity match, before any host method of that name.
pub fn shadowed_methods(natives: &Natives, ast: &AST) -> Vec<Shadowed> {
    let script: HashSet<(String, usize)> = ast.iter_functions().map(|f| (f.name.to_string(), f.params.len())).collect();
    let mut found = Vec::new();
    ast.walk(&mut |path: &[ASTNode]| {
        if let Some(ASTNode::Expr(Expr::MethodCall(f, pos))) = path.last() {
            let name = f.name.to_string();
            if natives.names.contains(&name) && script.contains(&(name.clone(), f.args.len())) {
                found.push(Shadowed { name, pos: *pos });
            }
        }
        true
    });
    found
}

/// Every call in `ast` to a function that is not defined anywhere.
pub fn unknown_functions(natives: &Natives, ast: &AST) -> Vec<Unknown> {
    // The script's own names; the host's stay in `natives`, looked up beside these, not copied.
    let mut known: HashSet<String> = KEYWORDS.iter().map(|k| k.to_string()).collect();
    for f in ast.iter_functions() {
        known.insert(f.name.to_string());
        // A parameter may hold a function pointer and be called like a function.
        known.extend(f.params.iter().map(|p| p.to_string()));
    }
    let mut calls = Vec::new();
    ast.walk(&mut |path: &[ASTNode]| {
        match path.last() {
            Some(ASTNode::Expr(Expr::FnCall(f, pos))) if f.namespace.is_empty() && f.op_token.is_none() => {
                calls.push((f.name.to_string(), *pos, false))
            }
            Some(ASTNode::Stmt(Stmt::FnCall(f, pos))) if f.namespace.is_empty() && f.op_token.is_none() => {
                calls.push((f.name.to_string(), *pos, false))
            }
            Some(ASTNode::Expr(Expr::MethodCall(f, pos))) => calls.push((f.name.to_string(), *pos, true)),
            Some(ASTNode::Stmt(Stmt::Var(x, ..))) => {
                known.insert(x.0.name.to_string());
            }
            Some(ASTNode::Expr(e @ (Expr::Map(..) | Expr::DynamicConstant(..)))) => {
                // A map may carry a closure called as a method: `obj.act(x)`.
                known.extend(map_keys(e));
            }
            Some(ASTNode::Expr(Expr::Property(p, _))) => {
                known.insert(p.2.to_string());
            }
            _ => {}
        }
        true
    });
    let mut seen = HashSet::new();
    calls
        .into_iter()
        .filter(|(name, _, _)| !natives.names.contains(name) && !known.contains(name) && !name.contains('$'))
        .filter(|(name, pos, _)| seen.insert((name.clone(), *pos)))
        .map(|(name, pos, _)| Unknown { suggestion: closest(&name, natives.names.iter().chain(&known)), name, pos })
        .collect()
}

/// The keys of a map literal, also when the optimiser folded it into a constant (a map whose
/// values are all constants, closures without captures included).
fn map_keys(e: &Expr) -> Vec<String> {
    match e {
        Expr::Map(m, _) => m.0.iter().map(|(k, _)| k.name.to_string()).collect(),
        Expr::DynamicConstant(v, _) => match v.read_lock::<rhai::Map>() {
            Some(m) => m.keys().map(|k| k.to_string()).collect(),
            None => Vec::new(),
        },
        _ => Vec::new(),
    }
}

fn closest<'a>(name: &str, known: impl Iterator<Item = &'a String>) -> Option<String> {
    known
        .filter(|k| !k.contains('$'))
        .map(|k| (distance(name, k), k))
        .filter(|(d, k)| *d <= 2.max(name.len() / 4) && *d < k.len())
        .min()
        .map(|(_, k)| k.clone())
}

/// Levenshtein distance, for suggestions.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur.push((prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// A call to a host function with a number of arguments none of its forms takes, or a property
/// called like a method (`a.key()` where only `a.key` exists).
pub struct Misfit {
    pub pos: Position,
    pub message: String,
}

/// Calls to host functions that no registered form fits. Names the script defines itself (its
/// functions, variables, map keys) are left alone: those calls may go to the script's own values.
pub fn misfits(natives: &Natives, ast: &AST) -> Vec<Misfit> {
    let arities = &natives.arities;
    let mut own: HashSet<String> = KEYWORDS.iter().map(|k| k.to_string()).collect();
    for f in ast.iter_functions() {
        own.insert(f.name.to_string());
        own.extend(f.params.iter().map(|p| p.to_string()));
    }
    let mut calls = Vec::new();
    ast.walk(&mut |path: &[ASTNode]| {
        match path.last() {
            Some(ASTNode::Expr(Expr::FnCall(f, pos))) if f.namespace.is_empty() && f.op_token.is_none() => {
                calls.push((f.name.to_string(), *pos, f.args.len(), false))
            }
            Some(ASTNode::Stmt(Stmt::FnCall(f, pos))) if f.namespace.is_empty() && f.op_token.is_none() => {
                calls.push((f.name.to_string(), *pos, f.args.len(), false))
            }
            Some(ASTNode::Expr(Expr::MethodCall(f, pos))) => calls.push((f.name.to_string(), *pos, f.args.len(), true)),
            Some(ASTNode::Stmt(Stmt::Var(x, ..))) => {
                own.insert(x.0.name.to_string());
            }
            Some(ASTNode::Expr(e @ (Expr::Map(..) | Expr::DynamicConstant(..)))) => own.extend(map_keys(e)),
            _ => {}
        }
        true
    });
    let mut found = Vec::new();
    for (name, pos, args, method) in calls {
        if own.contains(&name) || name.contains('$') {
            continue;
        }
        // A method call passes its receiver as the first argument.
        let n = args + usize::from(method);
        let shown = if method { format!(".{name}(...)") } else { format!("{name}(...)") };
        match arities.get(&name) {
            Some(forms) if !forms.contains(&n) => {
                let mut takes: Vec<usize> =
                    forms.iter().map(|f| if method { f.saturating_sub(1) } else { *f }).collect();
                takes.sort_unstable();
                takes.dedup();
                let takes = takes.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(" or ");
                let message = format!(
                    "`{shown}` is given {args} argument{} here, but it takes {takes}; `awf script api` lists its forms",
                    if args == 1 { "" } else { "s" }
                );
                found.push(Misfit { pos, message });
            }
            None if method && args == 0 && arities.contains_key(&format!("get${name}")) => {
                let message = format!("`{name}` is a property: write `.{name}` without parentheses");
                found.push(Misfit { pos, message });
            }
            _ => {}
        }
    }
    found
}

/// The first problem the static checks find in `ast`, as an error at its position: a method call
/// a script function shadows, a call to a function that exists nowhere, or a host call that no
/// registered form fits.
pub fn first_problem(engine: &Engine, ast: &AST) -> Option<rhai::EvalAltResult> {
    let natives = Natives::of(engine);
    if let Some(s) = shadowed_methods(&natives, ast).into_iter().next() {
        let advice = if s.name == "run" {
            "write `run(agent, turn)` or `agent.turn(turn)` to call the agent's run".to_string()
        } else {
            format!("call the host's `{0}` as `{0}(value, ...)`, or rename the script function", s.name)
        };
        return Some(rhai::EvalAltResult::ErrorRuntime(
            format!(
                "`.{}(...)` here would call this script's own `fn {}`, not the host method: Rhai calls a script function as a method when name and arity match; {advice}",
                s.name, s.name
            )
            .into(),
            s.pos,
        ));
    }
    if let Some(m) = misfits(&natives, ast).into_iter().next() {
        return Some(rhai::EvalAltResult::ErrorRuntime(m.message.into(), m.pos));
    }
    let u = unknown_functions(&natives, ast).into_iter().next()?;
    let hint = u.suggestion.map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default();
    Some(rhai::EvalAltResult::ErrorRuntime(format!("unknown function `{}`{hint}", u.name).into(), u.pos))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names read from rhai's metadata are the names rhai's own signature list gives (the
    /// text before each signature's parenthesis), for the engine every run uses.
    #[test]
    fn the_names_read_from_metadata_are_those_of_rhais_signatures() {
        let engine = super::super::engine::build(None, None, None);
        let signed: HashSet<String> = engine
            .gen_fn_signatures(true)
            .into_iter()
            .filter_map(|s| s.split('(').next().map(|n| n.trim().to_string()))
            .collect();
        let natives = Natives::of(&engine);
        assert!(signed.len() > 100, "rhai lists {} function names", signed.len());
        assert_eq!(natives.names, signed);
        assert!(natives.arities.get("to_string").is_some_and(|forms| forms.contains(&1)));
    }
}
