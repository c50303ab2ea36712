//! The `awf` binary: parse arguments, call the library, map the outcome to an exit code.

fn main() {
    let code = awf::cli::main();
    std::process::exit(code);
}
