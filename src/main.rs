//! The `awf` binary: parse arguments, call the library, map the outcome to an exit code; and the
//! allocator the process uses.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU8, Ordering};

/// mimalloc in place of the system allocator: a run allocates a few hundred times per operation
/// (records, JSON values, the script's values), and glibc's malloc and free were a quarter of
/// the instructions of a 10,000-agent map. But mimalloc's arenas, set up at the first allocation
/// and purged at exit, cost a short process 0.2-0.4 ms (measured on `--version`), a large share of
/// what an agent's launcher (`wf`: one call on its agent's socket, then exit) spends: awf started
/// as a launcher uses the system's allocator. The choice costs every allocation one relaxed load.
#[global_allocator]
static ALLOCATOR: Allocator = Allocator;

struct Allocator;

const UNDECIDED: u8 = 0;
const MIMALLOC: u8 = 1;
const SYSTEM: u8 = 2;

/// The allocator of this process: chosen at its first allocation, and never changed after, so
/// that every block is freed by the allocator that gave it.
static CHOSEN: AtomicU8 = AtomicU8::new(UNDECIDED);

fn chosen() -> u8 {
    match CHOSEN.load(Ordering::Relaxed) {
        UNDECIDED => {
            let choice = if started_as_launcher() { SYSTEM } else { MIMALLOC };
            // The first allocation comes before any other thread exists; were two to race, both
            // take the one value stored.
            match CHOSEN.compare_exchange(UNDECIDED, choice, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => choice,
                Err(stored) => stored,
            }
        }
        stored => stored,
    }
}

/// Whether the file awf was started as is an agent's launcher (`cli::is_launcher`, the rule
/// `cli::launcher_args` reads argv[0] by): read from the auxiliary vector, which needs no
/// allocation.
#[allow(unsafe_code)]
fn started_as_launcher() -> bool {
    use nix::libc;
    // SAFETY: getauxval reads the auxiliary vector; AT_EXECFN is the address of the NUL-ended
    // path the process was exec'd by, which the kernel put on its stack for its whole life, or 0.
    let path = unsafe { libc::getauxval(libc::AT_EXECFN) } as *const libc::c_char;
    if path.is_null() {
        return false;
    }
    // SAFETY: not null, so the kernel's NUL-ended path (above).
    awf::cli::is_launcher(unsafe { std::ffi::CStr::from_ptr(path) }.to_bytes())
}

/// The alignment every mimalloc block has (its size classes are multiples of the word): a layout
/// that asks no more goes to its plain calls, which skip the aligned calls' checks (about a
/// fifth of an allocation's instructions); a larger one to the aligned calls.
const MI_WORD: usize = std::mem::size_of::<usize>();

// SAFETY: every call goes to the one allocator chosen for the process (`chosen`), so a block is
// freed and grown by the allocator that gave it; each of the two keeps GlobalAlloc's contract
// (mimalloc's plain calls only for alignments its blocks always have, `MI_WORD`).
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        use libmimalloc_sys::{mi_malloc, mi_malloc_aligned};
        match chosen() {
            SYSTEM => System.alloc(layout),
            _ if layout.align() <= MI_WORD => mi_malloc(layout.size()).cast(),
            _ => mi_malloc_aligned(layout.size(), layout.align()).cast(),
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        use libmimalloc_sys::{mi_zalloc, mi_zalloc_aligned};
        match chosen() {
            SYSTEM => System.alloc_zeroed(layout),
            _ if layout.align() <= MI_WORD => mi_zalloc(layout.size()).cast(),
            _ => mi_zalloc_aligned(layout.size(), layout.align()).cast(),
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match chosen() {
            SYSTEM => System.dealloc(ptr, layout),
            _ => libmimalloc_sys::mi_free(ptr.cast()),
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        use libmimalloc_sys::{mi_realloc, mi_realloc_aligned};
        match chosen() {
            SYSTEM => System.realloc(ptr, layout, new_size),
            _ if layout.align() <= MI_WORD => mi_realloc(ptr.cast(), new_size).cast(),
            _ => mi_realloc_aligned(ptr.cast(), new_size, layout.align()).cast(),
        }
    }
}

/// mimalloc's option `purge_delay` (`mi_option_purge_delay` in the v3 `mimalloc.h` that
/// libmimalloc-sys builds; the sys crate names only the v2 list). A test checks the index by its
/// default and its neighbours'.
const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;

/// Memory mimalloc frees goes back to the system at once, not a second later: a run holds thousands
/// of agents' records briefly, and the delay kept a 10,000-agent map's peak about 4 MB higher and
/// less steady (57-63 MB against 54-56; 20 MB at 100,000 agents). It costs system time (madvise,
/// and page faults on memory reused): 10,000 magi rounds with new agents took 0.22 s of it
/// against 0.19 s, about 2% of the run's CPU; wall medians stayed within the runs' spread.
#[allow(unsafe_code)]
fn purge_at_once() {
    // SAFETY: sets one entry of mimalloc's static option table; called first in main, before any
    // thread but this one exists.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
}

fn main() {
    if chosen() == MIMALLOC {
        purge_at_once();
    }
    let code = awf::cli::main();
    std::process::exit(code);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_launcher_is_a_file_named_wf_and_nothing_else() {
        for path in ["wf", "/run/agents/a/wf", "./wf"] {
            assert!(awf::cli::is_launcher(path.as_bytes()), "{path}");
        }
        for path in ["awf", "/usr/bin/awf", "/run/wf/awf", "/run/agents/a/wf2", "wf/", ""] {
            assert!(!awf::cli::is_launcher(path.as_bytes()), "{path}");
        }
    }

    /// The option index is mimalloc v3's `purge_delay`: its default (1000 ms in v3's `options.c`;
    /// the header's comment still says 10) and its neighbours'
    /// (`deprecated_eager_commit_delay`, 1; `use_numa_nodes`, 0) are read where they should be.
    #[test]
    #[allow(unsafe_code)]
    fn the_purge_delay_option_is_where_awf_sets_it() {
        // SAFETY: reads of mimalloc's option table.
        let get = |o| unsafe { libmimalloc_sys::mi_option_get(o) };
        assert_eq!(
            (get(MI_OPTION_PURGE_DELAY - 1), get(MI_OPTION_PURGE_DELAY), get(MI_OPTION_PURGE_DELAY + 1)),
            (1, 1000, 0)
        );
        purge_at_once();
        assert_eq!(get(MI_OPTION_PURGE_DELAY), 0);
    }

    #[test]
    fn this_process_was_not_started_as_a_launcher_and_uses_mimalloc() {
        let block = Box::new([7u8; 64]);
        assert_eq!(CHOSEN.load(Ordering::Relaxed), MIMALLOC);
        assert!(!started_as_launcher());
        drop(block);
    }

    /// Every size and alignment a program asks gets a block so aligned, through the plain calls
    /// and the aligned ones, fresh, zeroed and grown (the grown block keeping its bytes).
    #[test]
    #[allow(unsafe_code)]
    fn blocks_have_the_alignment_their_layout_asks() {
        for align in [1, 2, 4, 8, 16, 32, 64, 4096] {
            for size in (1..=80).chain([96, 100, 128, 1000, 4096, 70_000]) {
                let layout = Layout::from_size_align(size, align).expect("a layout");
                // SAFETY: each block is written within its size, then freed once with its layout.
                unsafe {
                    let a = ALLOCATOR.alloc(layout);
                    let z = ALLOCATOR.alloc_zeroed(layout);
                    assert!(!a.is_null() && !z.is_null());
                    assert_eq!((a as usize % align, z as usize % align), (0, 0), "size {size} align {align}");
                    assert!(std::slice::from_raw_parts(z, size).iter().all(|b| *b == 0));
                    a.write_bytes(0xab, size);
                    let g = ALLOCATOR.realloc(a, layout, size * 3);
                    assert_eq!(g as usize % align, 0, "grown: size {size} align {align}");
                    assert!(std::slice::from_raw_parts(g, size).iter().all(|b| *b == 0xab));
                    ALLOCATOR.dealloc(g, Layout::from_size_align(size * 3, align).expect("a layout"));
                    ALLOCATOR.dealloc(z, layout);
                }
            }
        }
    }
}
