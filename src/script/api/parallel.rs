//! `ctx.parallel` and `ctx.parallel_settled`: branches on scoped worker threads (each with a large
//! stack and the group's scope), results in input order, the first error cancelling the siblings
//! and their agents' turns, deadlines, labelled progress, captured variables copied where no branch
//! changes them, and the data races left turned into advice.

use super::doc::def;
use super::{script_err, terminated, AgentHandle, BadArg, Ctx, Fields, RResult, ScriptRun};
use crate::run::deadline::Deadline;
use crate::run::scope::{self, DeadlineKind, Frame};
use crate::run::Event;
use crate::run::Run;
use crate::script::captures;
use crate::script::render;
use crate::script::{deferred, pool};
use rhai::{Array, Dynamic, EvalAltResult, FnPtr, Map, NativeCallContext, INT};
use std::ops::{Range as ExclusiveRange, RangeInclusive as InclusiveRange};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// What one branch returned.
type Branch = Result<Dynamic, Box<EvalAltResult>>;

/// What every worker of one `ctx.parallel` call shares. Owned, so that workers can be pooled
/// threads rather than scoped ones.
struct Shared {
    engine: Arc<rhai::Engine>,
    #[allow(deprecated)] // NativeCallContextStore is marked volatile, not deprecated
    call: rhai::NativeCallContextStore,
    f: FnPtr,
    /// The positions of `f`'s curried values that are copies (`captures.rs`): each worker puts
    /// them in cells of its own.
    copied: Vec<usize>,
    items: Array,
    frame: Arc<Frame>,
    results: Vec<Mutex<Option<Branch>>>,
    first_error: Mutex<Option<usize>>,
    next: AtomicUsize,
    arity: AtomicU8,
    group: Option<u64>,
    settled: bool,
    run: Arc<Run>,
    state: Mutex<Flow>,
    changed: std::sync::Condvar,
}

impl Shared {
    /// One worker: takes items in order until none are left or the group is cancelled.
    fn work(&self) {
        // Its own copy of the constants: `global::X` in branches then contends with no one.
        let call = crate::script::constants::own_copy(&self.call);
        #[allow(deprecated)] // create_context is marked volatile, not deprecated
        let nc = call.create_context(&self.engine);
        let _in_scope = scope::enter(self.frame.clone());
        let n = self.items.len();
        // Made at the first item: a helper that arrives when none is left copies nothing.
        let mut own_f: Option<FnPtr> = None;
        loop {
            let i = {
                let mut st = self.lock_state();
                if st.exhausted {
                    break;
                }
                let i = self.next.fetch_add(1, Ordering::SeqCst);
                if i >= n || self.frame.cancel.is_cancelled() || self.frame.expired().is_some() {
                    st.exhausted = true;
                    self.wake_if_settled(&st);
                    break;
                }
                st.in_flight += 1;
                i
            };
            let _item = InFlight(self);
            if let Some(g) = self.group {
                self.run.progress.group_item(g, false);
            }
            let f = match &self.copied[..] {
                [] => &self.f,
                copied => own_f.get_or_insert_with(|| captures::shared_copies(&self.f, copied)),
            };
            let r = call_branch(&nc, f, &self.arity, self.items[i].clone(), i);
            if let Some(g) = self.group {
                self.run.progress.group_item(g, true);
            }
            // A branch stopped by the group's own deadline cancels nobody: its siblings meet the
            // same deadline and settle `timed-out` rather than `cancelled`.
            let by_deadline = self.frame.expired().is_some()
                && matches!(&r, Err(e) if matches!(**e, EvalAltResult::ErrorTerminated(..)));
            if r.is_err() && !self.settled && !by_deadline {
                self.first_error.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(i);
                self.frame.cancel.cancel();
            }
            *self.results[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
        }
    }

    /// Waits until no item will be taken any more and none is running. The caller waits for the
    /// items, not for the workers: a worker woken after the items ran out costs the caller nothing.
    fn wait_settled(&self) {
        let mut st = self.lock_state();
        while !(st.exhausted && st.in_flight == 0) {
            st = self.changed.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Wakes `wait_settled` when what it waits for came: no item will be taken and none runs.
    /// Only then: a notify is a system call even with no one waiting, and a group of instant
    /// branches would make one per item.
    fn wake_if_settled(&self, st: &Flow) {
        if st.exhausted && st.in_flight == 0 {
            self.changed.notify_all();
        }
    }

    fn lock_state(&self) -> std::sync::MutexGuard<'_, Flow> {
        // Two counters updated together under the lock: a poisoned lock still holds them whole.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Items running, and whether the queue is done handing them out.
#[derive(Default)]
struct Flow {
    in_flight: usize,
    exhausted: bool,
}

/// Counts an item as finished when dropped, even if its branch panicked.
struct InFlight<'a>(&'a Shared);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock_state();
        st.in_flight -= 1;
        self.0.wake_if_settled(&st);
    }
}

/// Stack for every script worker thread (RHAI-HOST.md pitfall 3).
pub const WORKER_STACK: usize = 16 << 20;

pub fn register(engine: &mut rhai::Engine) {
    for settled in [false, true] {
        let name = if settled { "parallel_settled" } else { "parallel" };
        let doc = if settled { PARALLEL_SETTLED } else { PARALLEL };
        let sig = |args: &str| format!("{name}(ctx, {args})");
        def(engine, &sig("items, body"), doc, move |nc: NativeCallContext, c: &mut Ctx, items: Array, f: FnPtr| {
            parallel(&nc, &c.0, items, f, Map::new(), settled)
        });
        def(
            engine,
            &sig("items, body, options"),
            doc,
            move |nc: NativeCallContext, c: &mut Ctx, items: Array, f: FnPtr, opts: Map| {
                parallel(&nc, &c.0, items, f, opts, settled)
            },
        );
        // Ranges (`0..n`, `1..=n`) are accepted wherever an array of items is.
        def(
            engine,
            &sig("items, body"),
            doc,
            move |nc: NativeCallContext, c: &mut Ctx, r: ExclusiveRange<INT>, f: FnPtr| {
                parallel(&nc, &c.0, range_items(r), f, Map::new(), settled)
            },
        );
        def(
            engine,
            &sig("items, body, options"),
            doc,
            move |nc: NativeCallContext, c: &mut Ctx, r: ExclusiveRange<INT>, f: FnPtr, opts: Map| {
                parallel(&nc, &c.0, range_items(r), f, opts, settled)
            },
        );
        def(
            engine,
            &sig("items, body"),
            doc,
            move |nc: NativeCallContext, c: &mut Ctx, r: InclusiveRange<INT>, f: FnPtr| {
                parallel(&nc, &c.0, range_items(r), f, Map::new(), settled)
            },
        );
        def(
            engine,
            &sig("items, body, options"),
            doc,
            move |nc: NativeCallContext, c: &mut Ctx, r: InclusiveRange<INT>, f: FnPtr, opts: Map| {
                parallel(&nc, &c.0, range_items(r), f, opts, settled)
            },
        );
    }
}

const PARALLEL: &str = "Calls `body(item)` for each item (an array or a range) on parallel branches and returns the
values in the items' order. The first error a branch throws cancels the other branches (their agents'
turns included) and is rethrown. `options`: `concurrency` (default: all items, capped by the run's
`--max-concurrency`), `label` (a progress group in the live view), `timeout_ms` or `deadline` (never
later than the enclosing one; when it passes the branches are cancelled and `parallel deadline
exceeded` is thrown). Each branch reads its own copy of what `body` captured, unless a branch
may change it (`seen.push(x)`) or it holds more than 65,536 items: that variable stays shared, and
a branch that finds it held too long fails; return values instead. A captured agent handle is
shared by the branches, its turns queued.";
const PARALLEL_SETTLED: &str =
    "Like `parallel`, but a failing branch does not cancel the others: returns one map per item,
`#{ ok: true, value }` or `#{ ok: false, error }`, in the items' order.";

fn range_items(r: impl Iterator<Item = INT>) -> Array {
    r.map(Dynamic::from).collect()
}

struct Opts {
    concurrency: Option<usize>,
    label: Option<String>,
    deadline: Option<Deadline>,
}

fn parse_opts(opts: &Map) -> Result<Opts, BadArg> {
    let f = Fields { map: opts, what: "parallel options" };
    f.check_known(&["concurrency", "label", "timeout_ms", "deadline"])?;
    let concurrency = match f.int("concurrency")? {
        Some(n) if n < 1 => return Err(format!("parallel options: `concurrency` must be at least 1, got {n}").into()),
        other => other.map(|n| n as usize),
    };
    let (timeout_ms, deadline_ms) = f.timeout()?;
    let deadline = timeout_ms
        .map(|ms| Deadline::after(std::time::Duration::from_millis(ms)))
        .or(deadline_ms.map(Deadline::at_unix_ms));
    Ok(Opts { concurrency, label: f.string("label")?, deadline })
}

/// Calls the branch closure with `(item, i)`, or `(item)` when it takes one parameter.
fn call_branch(
    nc: &NativeCallContext,
    f: &FnPtr,
    arity: &AtomicU8,
    item: Dynamic,
    i: usize,
) -> Result<Dynamic, Box<EvalAltResult>> {
    if arity.load(Ordering::Relaxed) == 1 {
        return f.call_within_context::<Dynamic>(nc, (item,));
    }
    match f.call_within_context::<Dynamic>(nc, (item.clone(), i as INT)) {
        Err(e) if matches!(&*e, EvalAltResult::ErrorFunctionNotFound(sig, _) if sig.starts_with(f.fn_name())) => {
            arity.store(1, Ordering::Relaxed);
            f.call_within_context::<Dynamic>(nc, (item,))
        }
        other => other,
    }
}

fn has_data_race(e: &EvalAltResult) -> bool {
    match e {
        EvalAltResult::ErrorDataRace(..) => true,
        EvalAltResult::ErrorInFunctionCall(_, _, inner, _) | EvalAltResult::ErrorInModule(_, inner, _) => {
            has_data_race(inner)
        }
        _ => false,
    }
}

/// Branches that only read what they captured get copies (`captures.rs`); what is left is a
/// variable some branch changes (`seen.push(x)`), or one too large to copy for each worker, which
/// rhai locks for each use.
const DATA_RACE_ADVICE: &str = "two parallel branches used a captured variable at once and one gave up waiting: a branch changes it (or it holds more than 65,536 items, too many to copy for each branch), so rhai locks it for each use; return what each branch makes and combine the results after ctx.parallel, instead of changing a captured variable";

fn parallel(
    nc: &NativeCallContext,
    host: &Arc<ScriptRun>,
    items: Array,
    mut f: FnPtr,
    opts: Map,
    settled: bool,
) -> RResult<Array> {
    let name = if settled { "ctx.parallel_settled" } else { "ctx.parallel" };
    let run = &host.run;
    let opts = parse_opts(&opts).map_err(|e| script_err(nc, format!("{name}: {e}")))?;
    let parent = scope::current().ok_or_else(|| script_err(nc, format!("{name} called outside a run")))?;
    let n = items.len();
    if n == 0 {
        return Ok(Array::new());
    }
    let conc = opts.concurrency.unwrap_or(n).min(run.scheduler.limits.max_concurrency.max(1)).min(n);
    let frame = Arc::new(Frame {
        cancel: parent.cancel.child_token(),
        deadline: parent.tighten(opts.deadline, DeadlineKind::Parallel(opts.label.clone())),
        stage: parent.stage.clone(),
        group: opts.label.as_deref().map(Arc::from).or(parent.group.clone()),
    });
    let group = opts.label.as_deref().map(|l| run.progress.group_started(l, n));
    run.records.event(&Event::ParallelStarted {
        label: opts.label.as_deref(),
        items: n,
        concurrency: conc,
        stage: parent.stage.as_deref(),
    });

    let engine = host.engine().ok_or_else(|| script_err(nc, format!("{name}: the script engine is gone")))?;
    // Each branch reads its own copy of what the closure captured and no branch changes: a shared
    // value would be locked for every read (`captures.rs`). An agent handle is copied unless
    // assigned: a copy is the same agent, whose turns queue.
    let uses = host.captures.uses(nc.namespaces(), &f);
    let copied = match &uses {
        Some(uses) => captures::copy_unchanged(&mut f, uses, |value, used| {
            !used.assigned && (!used.changed || value.is::<AgentHandle>())
        }),
        None => Vec::new(),
    };
    // A closure declaring one parameter is called with the item alone from the start; others are
    // tried with `(item, i)` first (`call_branch`), a failed call that costs an error's text.
    let declared = uses.and_then(|u| captures::declared_args(&u, &f));
    #[allow(deprecated)] // store_data is marked volatile, not deprecated
    let shared = Arc::new(Shared {
        engine,
        call: nc.store_data(),
        f,
        copied,
        items,
        frame: frame.clone(),
        results: (0..n).map(|_| Mutex::new(None)).collect(),
        first_error: Mutex::new(None),
        next: AtomicUsize::new(0),
        arity: AtomicU8::new(if declared == Some(1) { 1 } else { 0 }),
        group,
        settled,
        run: run.clone(),
        state: Mutex::new(Flow::default()),
        changed: std::sync::Condvar::new(),
    });
    // The calling thread is one of the workers; the others join it after a short grace, so a
    // group of instant branches runs without a single thread handoff.
    let helpers: Vec<pool::Job> = (1..conc)
        .map(|_| {
            let job = shared.clone();
            Box::new(move || job.work()) as pool::Job
        })
        .collect();
    let ticket = (!helpers.is_empty()).then(|| deferred::defer(helpers));
    shared.work();
    if let Some(t) = ticket {
        deferred::cancel_deferred(t);
    }
    shared.wait_settled();
    let first_error = *shared.first_error.lock().unwrap_or_else(|p| p.into_inner());
    let results: Vec<Option<Branch>> =
        shared.results.iter().map(|m| m.lock().unwrap_or_else(|p| p.into_inner()).take()).collect();
    if let Some(g) = group {
        run.progress.group_ended(g);
    }
    let mut results = results;
    let failed = results.iter().filter(|r| matches!(r, Some(Err(_))) || r.as_ref().is_some_and(failed_outcome)).count();
    run.records.event(&Event::ParallelFinished { label: opts.label.as_deref(), items: n, failed });

    if parent.cancel.is_cancelled() {
        return Err(terminated(nc, run.stop_reason()));
    }
    if let Some(d) = parent.expired() {
        let why = match d.kind {
            DeadlineKind::Run => "run deadline exceeded",
            DeadlineKind::Parallel(_) => "parallel deadline exceeded",
        };
        return Err(terminated(nc, why));
    }
    let past_deadline = frame.expired().is_some();
    let deadline_msg = match &opts.label {
        Some(l) => format!("parallel deadline exceeded ({l})"),
        None => "parallel deadline exceeded".to_string(),
    };
    if !settled {
        if let Some(i) = first_error {
            let terminated_by_deadline = matches!(results.get(i), Some(Some(Err(e))) if matches!(**e, EvalAltResult::ErrorTerminated(..)))
                && past_deadline;
            if !terminated_by_deadline {
                if let Some(Some(Err(e))) = results.get_mut(i).map(Option::take) {
                    if has_data_race(&e) {
                        return Err(script_err(nc, DATA_RACE_ADVICE));
                    }
                    return Err(e);
                }
            }
        }
        if past_deadline && results.iter().any(|r| !matches!(r, Some(Ok(_)))) {
            return Err(script_err(nc, deadline_msg));
        }
    }
    Ok(results
        .into_iter()
        .map(|r| match (r, settled) {
            (Some(Ok(v)), false) => v,
            (Some(Ok(v)), true) => settled_entry(true, v, Dynamic::UNIT),
            (Some(Err(e)), _) if matches!(*e, EvalAltResult::ErrorTerminated(..)) && past_deadline => {
                settled_entry(false, Dynamic::UNIT, deadline_msg.clone().into())
            }
            (Some(Err(e)), _) => {
                let msg = if has_data_race(&e) { DATA_RACE_ADVICE.to_string() } else { render::message(&e) };
                settled_entry(false, Dynamic::UNIT, msg.into())
            }
            (None, _) => settled_entry(false, Dynamic::UNIT, deadline_msg.clone().into()),
        })
        .collect())
}

fn settled_entry(ok: bool, value: Dynamic, error: Dynamic) -> Dynamic {
    let mut m = Map::new();
    m.insert("ok".into(), ok.into());
    m.insert("value".into(), value);
    m.insert("error".into(), error);
    Dynamic::from_map(m)
}

/// Whether a branch returned an operation's outcome that failed (`#{ ok: false, kind, .. }`, as
/// `agent.run` gives): the group's count of failures counts it, not only branches that threw.
fn failed_outcome(branch: &Branch) -> bool {
    let Ok(value) = branch else { return false };
    value
        .read_lock::<rhai::Map>()
        .is_some_and(|m| m.get("ok").and_then(|v| v.as_bool().ok()) == Some(false) && m.contains_key("kind"))
}
