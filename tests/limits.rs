//! Bounded inputs: a script file over the size limit is refused before it is compiled.

mod common;

use common::Env;
use std::time::{Duration, Instant};

#[test]
fn a_script_over_the_size_limit_is_refused_before_compiling() {
    let env = Env::new();
    // 4 MiB and a bit of statements: compiling them would take seconds.
    let line = "let x = 1;\n";
    let text = line.repeat((4 << 20) / line.len() + 1);
    let size = text.len();
    env.write("big.rhai", &text);
    let started = Instant::now();
    for cmd in ["run", "check"] {
        let out = env.awf(&["script", cmd, "big.rhai"]);
        out.expect_code(2)
            .stderr_has(&format!("script big.rhai is {size} bytes, over the limit of 4194304 bytes"))
            .stderr_has("--max-script-bytes");
    }
    assert!(started.elapsed() < Duration::from_secs(5), "refused without compiling: {:?}", started.elapsed());
    assert!(env.run_dirs().is_empty());
}

#[test]
fn max_script_bytes_moves_the_limit() {
    let env = Env::new();
    env.write("wf.rhai", "let greeting = \"hello\";\ngreeting\n");
    env.awf(&["script", "run", "wf.rhai", "--max-script-bytes", "10"])
        .expect_code(2)
        .stderr_has("script wf.rhai is 33 bytes, over the limit of 10 bytes");
    env.awf(&["script", "check", "--max-script-bytes", "10", "wf.rhai"]).expect_code(2);
    let out = env.awf(&["script", "run", "wf.rhai", "--max-script-bytes", "100"]);
    out.expect_code(0).stdout_has("hello");
}
