//! The `awf` binary: parse arguments, call the library, map the outcome to an exit code.

/// mimalloc in place of the system allocator: a run allocates a few hundred times per operation
/// (records, JSON values, the script's values), and glibc's malloc and free were a quarter of
/// the instructions of a 10,000-agent map.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let code = awf::cli::main();
    std::process::exit(code);
}
