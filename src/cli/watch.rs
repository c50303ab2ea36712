//! `awf runs watch ID`: the board of a run started elsewhere (another terminal, `--detach`,
//! `serve`, a worker), read from its events as they are written and redrawn in place on a
//! terminal, until the run ends; then its summary (`runs show`). A run that has already ended
//! gets its summary at once.

use super::board::{self, Frame};
use super::listing;
use crate::record::view::{Follow, RunView};
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::{Duration, SystemTime};

/// How often the records are read again.
const POLL: Duration = Duration::from_millis(200);

/// The longest the summary waits for an ended run's last records.
const SETTLE: Duration = Duration::from_secs(10);

/// Agent rows shown before the rest are counted.
const ROWS: usize = 20;

/// Follows the run in `dir` to its end, then prints its summary.
pub fn watch(dir: &Path, run_id: &str) -> std::io::Result<()> {
    let mut follow = Follow::new(dir);
    let mut view = RunView::default();
    let tty = std::io::stdout().is_terminal();
    let color = tty && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let mut drawn = 0;
    loop {
        // Whether it is live is read first: a run that has ended has written its last line.
        let live = listing::live(dir) && !dir.join("result.json").exists();
        follow.poll(&mut view)?;
        if !live || view.ended() {
            break;
        }
        if tty {
            let frame = Frame { width: super::live::width(), color, rows: ROWS, now: SystemTime::now() };
            let lines = board::lines(&view, &frame);
            let mut out = std::io::stdout().lock();
            if drawn > 0 {
                write!(out, "\x1b[{drawn}A\x1b[J")?;
            }
            for l in &lines {
                writeln!(out, "{l}")?;
            }
            out.flush()?;
            drawn = lines.len();
        }
        std::thread::sleep(POLL);
    }
    if drawn > 0 {
        let mut out = std::io::stdout().lock();
        write!(out, "\x1b[{drawn}A\x1b[J")?;
        out.flush()?;
    }
    // `run-finished` is written before the attempt's status in run.json and `result.json`: the
    // summary waits (a bounded time) for the run to let its lock go, so that it shows how the run
    // ended, not `running`.
    let settled = std::time::Instant::now() + SETTLE;
    while listing::live(dir) && std::time::Instant::now() < settled {
        std::thread::sleep(POLL / 4);
    }
    super::show::run(dir, run_id)
}
