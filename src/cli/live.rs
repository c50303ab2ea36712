//! The live view on stderr: on a terminal, a redrawn block (cut to the terminal's width) with a
//! row per agent from the run's own events (`board.rs`: state, operation, last activity, spend;
//! working and troubled ones first), stages, labelled parallel groups (done/total), the questions
//! the run waits on the operator for and the spend against the budget, with log lines printed
//! above it; elsewhere, log lines only. `NO_COLOR` is honoured.

use super::board::{self, Frame};
use crate::record::view::{Follow, RunView};
use crate::run::progress::Sink;
use crate::run::Run;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub struct Live {
    run: Arc<Run>,
    tty: bool,
    color: bool,
    quiet: bool,
    drawn: Mutex<usize>,
    done: AtomicBool,
    /// The run's events folded as they are written.
    view: Mutex<(Follow, RunView)>,
}

/// Agent rows the live view shows before it counts the rest.
const ROWS: usize = 12;

/// The terminal's width in columns (stderr's), else `COLUMNS`, else 100.
pub fn width() -> usize {
    match terminal_size::terminal_size_of(std::io::stderr()) {
        Some((terminal_size::Width(w), _)) if w > 0 => w as usize,
        _ => std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()).unwrap_or(100),
    }
}

impl Live {
    /// Attaches to `run` and, on a terminal, starts redrawing every 100 ms.
    pub fn start(run: Arc<Run>, tty: bool, quiet: bool) -> Arc<Live> {
        let color = tty && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        let view = Mutex::new((Follow::new(run.dir()), RunView::default()));
        let live = Arc::new(Live {
            run: run.clone(),
            tty,
            color,
            quiet,
            drawn: Mutex::new(0),
            done: AtomicBool::new(false),
            view,
        });
        run.progress.set_sink(live.clone());
        if tty && !quiet {
            let l = live.clone();
            let _ = std::thread::Builder::new().name("awf-live".into()).spawn(move || {
                while !l.done.load(Ordering::Relaxed) {
                    l.redraw(None);
                    std::thread::sleep(Duration::from_millis(100));
                }
            });
        }
        live
    }

    /// Clears the block for good.
    pub fn finish(&self) {
        self.done.store(true, Ordering::Relaxed);
        if self.tty && !self.quiet {
            let mut drawn = self.drawn.lock().unwrap_or_else(|p| p.into_inner());
            let mut err = std::io::stderr().lock();
            clear(&mut err, *drawn);
            *drawn = 0;
        }
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    fn block(&self, width: usize) -> Vec<String> {
        let p = &self.run.progress;
        let s = p.snapshot();
        let (tokens, usd) = self.run.scheduler.spent();
        // Nothing priced yet (a local model): the tokens say it all, "$0.0000" would say nothing.
        let usd = if usd > 0.0 { format!(" · ${usd:.4}") } else { String::new() };
        let mut lines = vec![format!(
            "{} {:.1}s · agents {} open, {} working, {} closed · {} ops · {} messages · {} tokens{}",
            self.paint("36", "awf"),
            self.run.started.elapsed().as_secs_f64(),
            p.agents_open.load(Ordering::Relaxed),
            p.agents_working.load(Ordering::Relaxed),
            p.agents_closed.load(Ordering::Relaxed),
            p.ops_settled.load(Ordering::Relaxed),
            p.messages_sent.load(Ordering::Relaxed),
            tokens,
            usd
        )];
        let mut view = self.view.lock().unwrap_or_else(|p| p.into_inner());
        let (follow, folded) = &mut *view;
        // A read that fails leaves the rows as they were; the next redraw tries again.
        let _ = follow.poll(folded);
        let frame = Frame { width, color: self.color, rows: ROWS, now: std::time::SystemTime::now() };
        lines.extend(board::agent_lines(folded, &frame));
        if !s.stages.is_empty() {
            lines.push(format!("  stage {}", s.stages.join(", ")));
        }
        for g in s.groups.iter().take(8) {
            lines.push(format!("  {} {}/{} done ({} started)", g.label, g.done, g.total, g.started));
        }
        for w in self.run.waiting().iter().take(4) {
            lines.push(format!(
                "  waiting for the operator ({}): {} · awf runs answer {} --key {} --json VALUE",
                w.key, w.question, self.run.id, w.key
            ));
        }
        lines
    }

    fn redraw(&self, line: Option<String>) {
        if self.done.load(Ordering::Relaxed) && line.is_none() {
            return;
        }
        let mut drawn = self.drawn.lock().unwrap_or_else(|p| p.into_inner());
        let mut err = std::io::stderr().lock();
        clear(&mut err, *drawn);
        if let Some(l) = line {
            let _ = writeln!(err, "{l}");
        }
        if self.done.load(Ordering::Relaxed) {
            *drawn = 0;
            return;
        }
        // Cut to the width, so that no line wraps and the next redraw clears what this one drew.
        let width = width();
        let block = self.block(width);
        for l in &block {
            let _ = writeln!(err, "{}", board::cut(l, width));
        }
        *drawn = block.len();
        let _ = err.flush();
    }
}

fn clear(err: &mut impl Write, lines: usize) {
    if lines > 0 {
        let _ = write!(err, "\x1b[{lines}A\x1b[J");
    }
}

impl Sink for Live {
    fn line(&self, level: &str, text: &str) {
        if self.quiet {
            return;
        }
        let tag = match level {
            "warn" => self.paint("33", "warn:"),
            "print" => String::new(),
            other => self.paint("2", &format!("{other}:")),
        };
        let line = if tag.is_empty() { text.to_string() } else { format!("{tag} {text}") };
        if self.tty {
            self.redraw(Some(line));
        } else {
            eprintln!("{line}");
        }
    }
}
