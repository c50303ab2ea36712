//! The `awf` binary: parse arguments, call the library, map the outcome to an exit code.

/// mimalloc in place of the system allocator: a run allocates a few hundred times per operation
/// (records, JSON values, the script's values), and glibc's malloc and free were a quarter of
/// the instructions of a 10,000-agent map.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    use std::io::Write;
    let code = awf::cli::main();
    // What `std::process::exit` would do before libc's `exit`: flush what was printed.
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // Then end without libc's exit handlers: the one that matters is the allocator's, which gives
    // every page it holds back to the kernel (an madvise each) just before the kernel takes the
    // whole address space anyway. An agent's `wf` call spent a third of its run time on it.
    #[allow(unsafe_code)]
    // SAFETY: _exit ends the process at once; no Rust code runs after it, and what was printed
    // is flushed above.
    unsafe {
        nix::libc::_exit(code)
    }
}
