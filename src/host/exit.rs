//! Exit codes: 0 succeeded, 1 the workflow failed, 2 bad usage, script or config, 3 stopped by
//! `ctx.stop`, 4 cancelled or past its deadline.

pub const OK: i32 = 0;
pub const FAILED: i32 = 1;
pub const USAGE: i32 = 2;
pub const STOPPED: i32 = 3;
pub const CANCELLED: i32 = 4;
