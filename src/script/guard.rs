//! The data guard that replaces rhai's size limits. Those re-measure a whole container on every
//! mutation (a `push` costs the array's size, so building a list is quadratic); this guard instead
//! measures what a script holds now and then, at a cost proportional to the work done in between:
//! - on every variable access, the variable itself, shallowly (a string's or blob's length, an
//!   array's or map's item count), which catches a value that doubles in a loop;
//! - every `CHECK_EVERY` operations or more (the progress hook counts them down), every value in
//!   the scope, deeply: nesting depth and an estimate of the memory held;
//! - before the few built-ins that allocate a size they are given (`pad`, `blob`).
//!
//! Values captured by a closure are shared (behind a lock) and are not measured: reading them
//! could wait on a lock another branch holds.

use rhai::{
    Array, Blob, Dynamic, Engine, EvalAltResult, EvalContext, ImmutableString, NativeCallContext, Position, INT,
};
use std::cell::Cell;

/// The most memory a script thread's values may hold (an estimate: item slots, map keys, text).
pub const MAX_MEMORY: usize = 64 << 20;
/// The deepest arrays and maps may nest.
pub const MAX_DEPTH: usize = 256;
/// Operations between two deep walks, at least; after a walk that visited n values, the next one
/// waits `WALK_SPACING * n` operations, so that walking costs a fraction of the script's own work.
const CHECK_EVERY: u64 = 1024;
const WALK_SPACING: u64 = 4;
/// What one value costs before its contents: the `Dynamic` slot.
const SLOT: usize = std::mem::size_of::<Dynamic>();
/// What a string, array or map costs beside its contents: its shared or boxed header, allocated.
const HEADER: usize = 48;
/// What one map entry costs beside its key's text and its value: the key, the tree's share.
const ENTRY: usize = 48;

type Fail = Box<EvalAltResult>;

thread_local! {
    /// Operations left on this thread before the next deep walk.
    static LEFT: Cell<u64> = const { Cell::new(CHECK_EVERY) };
}

/// Counts one operation down (called by the progress hook).
pub fn tick() {
    LEFT.with(|l| l.set(l.get().saturating_sub(1)));
}

fn too_large(what: String) -> Fail {
    // A system error: a script cannot catch it and carry on holding the data.
    EvalAltResult::ErrorDataTooLarge(what, Position::NONE).into()
}

fn memory_error(name: &str, deep: bool) -> Fail {
    let held = if deep { format!("the variables up to `{name}`") } else { format!("`{name}`") };
    too_large(format!("Data held by {held} (memory limit: {} MiB)", MAX_MEMORY >> 20))
}

fn depth_error(name: &str) -> Fail {
    too_large(format!("Nesting depth of `{name}` (limit: {MAX_DEPTH} levels of arrays and maps)"))
}

/// The value's own size, not counting what its items hold: text bytes, or item slots.
fn shallow_size(v: &Dynamic) -> usize {
    // Each kind is asked with its `is_` test first: a failed `as_..._ref` spells the value's type
    // name for its error, which cost more than the rest of the check.
    if v.is_string() {
        v.as_immutable_string_ref().map(|s| HEADER + s.len()).unwrap_or(0)
    } else if v.is_array() {
        v.as_array_ref().map(|a| HEADER + a.len() * SLOT).unwrap_or(0)
    } else if v.is_blob() {
        v.as_blob_ref().map(|b| HEADER + b.len()).unwrap_or(0)
    } else if v.is_map() {
        v.as_map_ref().map(|m| HEADER + m.len() * (SLOT + ENTRY)).unwrap_or(0)
    } else {
        0
    }
}

/// Checks the variable a script is about to use, and every value in its scope when a walk is due.
/// Called from the engine's `on_var` for every variable it does not supply itself.
pub fn on_access(name: &str, index: usize, ctx: &EvalContext) -> Result<(), Fail> {
    let scope = ctx.scope();
    // `index` counts from the scope's end (1 is the last variable) when rhai knows it.
    let at = (index > 0).then(|| scope.iter_raw().nth(index - 1)).flatten().filter(|(n, ..)| *n == name);
    if let Some(v) = at.map(|(_, _, v)| v).or_else(|| scope.get(name)) {
        if !v.is_shared() && shallow_size(v) > MAX_MEMORY {
            return Err(memory_error(name, false));
        }
    }
    if LEFT.with(Cell::get) > 0 {
        return Ok(());
    }
    let mut meter = Meter::default();
    for (name, _, value) in scope.iter_raw() {
        if !value.is_shared() {
            meter.measure(name, value, 1)?;
        }
    }
    LEFT.with(|l| l.set(CHECK_EVERY.max(meter.visited.saturating_mul(WALK_SPACING))));
    Ok(())
}

#[derive(Default)]
struct Meter {
    bytes: usize,
    visited: u64,
}

impl Meter {
    /// Adds `v` and what it holds. It recurses, but never deeper than `MAX_DEPTH` (a few hundred
    /// small frames), so a deeply nested value cannot overflow the stack; and it stops once the
    /// memory limit is passed, so it visits at most `MAX_MEMORY / SLOT` values.
    fn measure(&mut self, name: &str, v: &Dynamic, depth: usize) -> Result<(), Fail> {
        if depth > MAX_DEPTH {
            return Err(depth_error(name));
        }
        self.visited += 1;
        self.bytes += SLOT;
        if v.is_string() {
            self.bytes += v.as_immutable_string_ref().map(|s| HEADER + s.len()).unwrap_or(0);
        } else if v.is_array() {
            if let Ok(items) = v.as_array_ref() {
                self.bytes += HEADER;
                for item in items.iter() {
                    self.measure(name, item, depth + 1)?;
                }
            }
        } else if v.is_blob() {
            self.bytes += v.as_blob_ref().map(|b| HEADER + b.len()).unwrap_or(0);
        } else if v.is_map() {
            if let Ok(map) = v.as_map_ref() {
                self.bytes += HEADER;
                for (key, item) in map.iter() {
                    self.bytes += ENTRY + key.len();
                    self.measure(name, item, depth + 1)?;
                }
            }
        }
        if self.bytes > MAX_MEMORY {
            return Err(memory_error(name, true));
        }
        Ok(())
    }
}

/// Refuses a size a built-in is asked to allocate when it would pass the memory limit.
fn check_request(nc: &NativeCallContext, what: &str, items: INT, each: usize) -> Result<usize, Fail> {
    let n = usize::try_from(items).unwrap_or(0);
    if n.saturating_mul(each) > MAX_MEMORY {
        let mut e = too_large(format!("`{what}` of {n} items (memory limit: {} MiB)", MAX_MEMORY >> 20));
        e.set_position(nc.call_position());
        return Err(e);
    }
    Ok(n)
}

/// Replaces the built-ins that allocate a size they are given, so that a huge one is refused
/// before it is allocated (rhai's own check is gone with its size limits). Registered functions
/// take precedence over the standard package's.
pub fn register(engine: &mut Engine) {
    engine
        .register_fn("pad", |nc: NativeCallContext, a: &mut Array, len: INT, item: Dynamic| -> Result<(), Fail> {
            let n = check_request(&nc, "pad", len, SLOT + shallow_size(&item))?;
            if n > a.len() {
                a.resize(n, item);
            }
            Ok(())
        })
        .register_fn("pad", |nc: NativeCallContext, b: &mut Blob, len: INT, byte: INT| -> Result<(), Fail> {
            let n = check_request(&nc, "pad", len, 1)?;
            if n > b.len() {
                b.resize(n, (byte & 0xff) as u8);
            }
            Ok(())
        })
        .register_fn("pad", |nc: NativeCallContext, s: &mut ImmutableString, len: INT, c: char| -> Result<(), Fail> {
            let n = check_request(&nc, "pad", len, c.len_utf8())?;
            let have = s.chars().count();
            if n > have {
                let tail: String = std::iter::repeat_n(c, n - have).collect();
                *s = format!("{s}{tail}").into();
            }
            Ok(())
        })
        .register_fn("pad", |nc: NativeCallContext, s: &mut ImmutableString, len: INT, p: &str| -> Result<(), Fail> {
            let n = check_request(&nc, "pad", len, 4)?;
            let have = s.chars().count();
            if n > have && !p.is_empty() {
                let tail: String = p.chars().cycle().take(n - have).collect();
                *s = format!("{s}{tail}").into();
            }
            Ok(())
        })
        .register_fn("blob", |nc: NativeCallContext, len: INT| -> Result<Blob, Fail> {
            Ok(vec![0; check_request(&nc, "blob", len, 1)?])
        })
        .register_fn("blob", |nc: NativeCallContext, len: INT, byte: INT| -> Result<Blob, Fail> {
            Ok(vec![(byte & 0xff) as u8; check_request(&nc, "blob", len, 1)?])
        });
}
