//! `awf runs attach ID`: the operator's terminal attached to a run's tmux session, where its
//! pane agents run (`tmux attach` replaces awf; leave with tmux's detach key, `C-b d`). Inside a
//! tmux session of the operator's own, the run's session nests in the current pane. Off a
//! terminal it attaches nothing: it prints the command that attaches and where each pane agent
//! is, and exits 0. `awf runs clean` closes what of the session a run left.

use super::{EXIT_OK, EXIT_USAGE};
use crate::pane::{self, Tmux};
use crate::record::events::EventRecord;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// A pane agent as the run's events tell it.
struct Seen {
    agent: String,
    target: String,
    window: String,
    state: String,
}

/// The run's tmux session (its name and the socket the run recorded) and its pane agents, as its
/// events tell them; `None` when it had no pane agent.
type Session = (String, Option<PathBuf>, Vec<Seen>);

fn session_of(dir: &Path) -> std::io::Result<Option<Session>> {
    let mut session: Option<(String, Option<PathBuf>)> = None;
    let mut panes: Vec<Seen> = Vec::new();
    for line in crate::record::events::read(dir)? {
        match line.event {
            EventRecord::PaneOpened { agent, target, session: s, window, socket, .. } => {
                session = Some((s, socket));
                panes.retain(|p| p.agent != agent);
                panes.push(Seen { agent, target, window, state: "open".into() });
            }
            EventRecord::PaneClosed { agent, state, .. } => {
                if let Some(p) = panes.iter_mut().find(|p| p.agent == agent) {
                    p.state = state;
                }
            }
            _ => {}
        }
    }
    Ok(session.map(|(name, socket)| (name, socket, panes)))
}

/// `awf runs clean`: closes the tmux session a run that is over left (released panes, and those a
/// killed attempt left); how many panes it held. `None`: the run had no pane agents.
pub fn close_session(dir: &Path) -> std::io::Result<Option<usize>> {
    let Some((name, socket, _)) = session_of(dir)? else { return Ok(None) };
    let tmux = socket.as_deref().map(Tmux::at).unwrap_or_default();
    let panes = tmux.list(&name).len();
    if panes > 0 {
        let _ = tmux.kill_session(&name);
    }
    Ok(Some(panes))
}

pub fn attach(dir: &Path, run_id: &str, read_only: bool) -> anyhow::Result<i32> {
    let Some((name, socket, panes)) = session_of(dir)? else {
        eprintln!("awf: run {run_id} has no pane agents (none was opened with placement: \"pane\")");
        return Ok(1);
    };
    let tmux = socket.as_deref().map(Tmux::at).unwrap_or_default();
    if !tmux.has_session(&name) {
        eprintln!(
            "awf: run {run_id}'s tmux session {name} is gone: the run ended and kept no pane, or tmux was stopped"
        );
        return Ok(1);
    }
    let socket = socket.unwrap_or_else(|| PathBuf::from(pane::SOCKET));
    let argv = pane::attach_argv(&socket, &name, read_only);
    if !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
        super::print_line(format_args!("{}", argv.iter().map(|a| quoted(a)).collect::<Vec<_>>().join(" ")));
        for p in &panes {
            super::print_line(format_args!("  {}  {} in window {}  {}", p.agent, p.target, p.window, p.state));
        }
        return Ok(EXIT_OK);
    }
    let e = pane::exec_attach(&socket, &name, read_only);
    eprintln!("awf: cannot run `{}`: {e}", argv.join(" "));
    Ok(EXIT_USAGE)
}

/// A word as a POSIX shell reads it back.
fn quoted(word: &str) -> String {
    if !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=%:@".contains(c)) {
        return word.to_string();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}
