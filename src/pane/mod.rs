//! tmux panes for agents, **the only module that runs tmux**: awf's own tmux server (`tmux -L
//! awf`, no configuration file read, so the operator's own server and `~/.tmux.conf` are never
//! touched), a session per run (`awf-<run id>`), windows and splits, a pane's process started or
//! replaced (`launch.rs`: the program runs through `awf pane-exec`, which reads its argv and
//! environment from a private file, so no value goes on a command line), text pasted into a pane
//! (from tmux's stdin, never its command line), keys sent, its screen captured, its state and
//! whether its program reads keys read, panes closed. Every command is `tmux` with
//! explicit arguments (never a shell; a pane's command always has several arguments, so tmux
//! never hands it to `sh -c`), `TMUX` removed from its environment, and errors are typed.
//! `spec.rs` holds the agent spec's pane fields as data.

pub mod launch;
pub mod spec;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The tmux server awf uses: `tmux -L awf` (in `$TMUX_TMPDIR`, as tmux places every socket).
pub const SOCKET: &str = "awf";
/// The size of a run's window before anyone attaches (a detached tmux session is 80x24, too small
/// to split); an attached client resizes it to its own.
const WIDTH: u32 = 200;
const HEIGHT: u32 = 50;
/// The smallest pane a split may leave (columns, rows): a CLI's screen is unusable below.
pub const MIN_WIDTH: u32 = 40;
pub const MIN_HEIGHT: u32 = 8;

/// What running tmux can fail with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    #[error("tmux is not on PATH ({why}): an agent with placement: \"pane\" runs in a tmux pane; install tmux (Debian: `apt-get install tmux`), or open the agent with placement: \"headless\"")]
    Missing { why: String },
    #[error("awf's tmux server cannot be reached ({stderr}); check that $TMUX_TMPDIR (else /tmp) is writable, or open the agent with placement: \"headless\"")]
    Unreachable { stderr: String },
    #[error("`tmux {args}` failed: {stderr}")]
    Failed { args: String, stderr: String },
    #[error("cannot read the settings of pane {pane}'s terminal {tty}: {why}")]
    Terminal { pane: String, tty: String, why: String },
}

/// A pane, by tmux's id for it (`%3`), unique in the server for its life.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct PaneId(pub String);

impl std::fmt::Display for PaneId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A pane as `list-panes` describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct PaneInfo {
    pub id: PaneId,
    pub window: String,
    pub width: u32,
    pub height: u32,
    pub pid: i32,
    pub dead: bool,
    pub dead_status: Option<i32>,
    /// The pane options awf sets: the agent and run it serves, whether it was released.
    pub agent: String,
    pub run: String,
    pub kept: bool,
}

/// Whether a pane's process runs.
#[derive(Debug, Clone, PartialEq)]
pub enum State {
    Alive {
        pid: i32,
    },
    /// Its process exited (the pane stays: `remain-on-exit`), with this status when tmux knows it.
    Dead {
        status: Option<i32>,
    },
    /// The pane is no more (closed by the operator, or its session or server ended).
    Gone,
}

/// Which tmux server: by name (`-L`, in `$TMUX_TMPDIR`), or by its socket's path (`-S`, as a run
/// recorded it).
#[derive(Debug, Clone, PartialEq)]
pub enum Socket {
    Name(String),
    Path(PathBuf),
}

/// How tmux is run: the program, and the server's socket.
#[derive(Debug, Clone)]
pub struct Tmux {
    pub program: PathBuf,
    pub socket: Socket,
}

impl Default for Tmux {
    fn default() -> Tmux {
        Tmux { program: "tmux".into(), socket: Socket::Name(SOCKET.into()) }
    }
}

const LIST_FORMAT: &str = "#{pane_id}\t#{window_name}\t#{pane_width}\t#{pane_height}\t#{pane_pid}\t#{pane_dead}\t#{pane_dead_status}\t#{@awf_agent}\t#{@awf_run}\t#{@awf_kept}";

impl Tmux {
    /// The server whose socket is at `path`.
    pub fn at(path: &Path) -> Tmux {
        Tmux { socket: Socket::Path(path.to_path_buf()), ..Tmux::default() }
    }

    fn command(&self, args: &[&str]) -> Command {
        // tmux's server starts from here, and every pane's program from it.
        let mut cmd = crate::open_files::command(&self.program);
        match &self.socket {
            Socket::Name(name) => cmd.args(["-L", name]),
            Socket::Path(path) => cmd.arg("-S").arg(path),
        };
        cmd.args(["-f", "/dev/null"]).args(args).stdin(Stdio::null());
        cmd.env_remove("TMUX").env_remove("TMUX_PANE");
        cmd
    }

    /// Runs tmux and returns its stdout without its last newlines, or why it failed.
    fn run(&self, args: &[&str]) -> Result<String, Error> {
        self.run_with(self.command(args), args)
    }

    fn run_with(&self, mut cmd: Command, args: &[&str]) -> Result<String, Error> {
        let out = cmd.output().map_err(|e| Error::Missing { why: format!("`{}`: {e}", self.program.display()) })?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
            return Err(Error::Failed { args: args.join(" "), stderr });
        }
        // Only the newlines go: a listing's last field may be empty, its tab the line's end.
        Ok(String::from_utf8_lossy(&out.stdout).trim_end_matches('\n').to_string())
    }

    /// Checks that tmux runs here.
    pub fn probe(&self) -> Result<(), Error> {
        self.version().map(|_| ())
    }

    /// What `tmux -V` says (`tmux 3.3a`).
    pub fn version(&self) -> Result<String, Error> {
        self.run(&["-V"])
    }

    /// Whether the server holds session `name`.
    pub fn has_session(&self, name: &str) -> bool {
        self.run(&["has-session", "-t", &format!("={name}")]).is_ok()
    }

    /// Starts session `name` (and the server, with awf's options) with one window running `argv`.
    pub fn new_session(&self, name: &str, window: &str, cwd: &Path, argv: &[String]) -> Result<PaneId, Error> {
        let (w, h) = (WIDTH.to_string(), HEIGHT.to_string());
        let cwd = cwd.display().to_string();
        let mut args = vec!["new-session", "-d", "-s", name, "-n", window, "-x", &w, "-y", &h, "-c", &cwd];
        args.extend(["-P", "-F", "#{pane_id}", "--"]);
        args.extend(argv.iter().map(String::as_str));
        let id = self.run(&args).map_err(|e| match e {
            Error::Failed { stderr, .. } => Error::Unreachable { stderr },
            other => other,
        })?;
        self.options(name)?;
        Ok(PaneId(id))
    }

    /// The options a run's session needs (the window options server-wide: every session of this
    /// server is a run's): a dead pane stays (its exit is seen and shown), each pane is titled
    /// with its agent, keys reach the CLIs as they expect (extended keys, focus events, an Escape
    /// not held back), 256 colours. A CLI starts after them (`respawn`: the first pane holds a
    /// placeholder), so it gets them all.
    fn options(&self, session: &str) -> Result<(), Error> {
        // `set-option` takes no `=` (exact) session target; the name is awf's own, unique.
        let target = session.to_string();
        for args in [
            ["set-option", "-s", "extended-keys", "on"].as_slice(),
            &["set-option", "-s", "focus-events", "on"],
            &["set-option", "-s", "escape-time", "10"],
            // 256 colours, as the CLIs draw (screen-256color's terminfo is in every ncurses).
            &["set-option", "-g", "default-terminal", "screen-256color"],
            &["set-option", "-g", "-w", "remain-on-exit", "on"],
            &["set-option", "-g", "-w", "pane-border-status", "top"],
            &[
                "set-option",
                "-g",
                "-w",
                "pane-border-format",
                " #{?@awf_agent,#{@awf_agent} (#{@awf_harness}),#{pane_current_command}} #{?pane_dead,[exited] ,}",
            ],
            &["set-option", "-t", &target, "status-left", "[awf #{session_name}] "],
            &["set-option", "-t", &target, "status-left-length", "40"],
        ] {
            self.run(args)?;
        }
        Ok(())
    }

    /// A new window of `session` named `window` running `argv`; it becomes the session's current one.
    pub fn new_window(&self, session: &str, window: &str, cwd: &Path, argv: &[String]) -> Result<PaneId, Error> {
        let target = format!("={session}:");
        let cwd = cwd.display().to_string();
        let mut args = vec!["new-window", "-t", &target, "-n", window, "-c", &cwd, "-P", "-F", "#{pane_id}", "--"];
        args.extend(argv.iter().map(String::as_str));
        self.run(&args).map(PaneId)
    }

    /// Splits pane `target` (`right` or `below`), the new pane running `argv`.
    pub fn split(&self, target: &PaneId, split: spec::Split, cwd: &Path, argv: &[String]) -> Result<PaneId, Error> {
        let dir = match split {
            spec::Split::Right => "-h",
            spec::Split::Below => "-v",
        };
        let cwd = cwd.display().to_string();
        let mut args = vec!["split-window", "-d", dir, "-t", &target.0, "-c", &cwd, "-P", "-F", "#{pane_id}", "--"];
        args.extend(argv.iter().map(String::as_str));
        self.run(&args).map(PaneId)
    }

    /// Replaces whatever runs in the pane (killed) with `argv`.
    pub fn respawn(&self, pane: &PaneId, cwd: &Path, argv: &[String]) -> Result<(), Error> {
        let cwd = cwd.display().to_string();
        let mut args = vec!["respawn-pane", "-k", "-t", &pane.0, "-c", &cwd, "--"];
        args.extend(argv.iter().map(String::as_str));
        self.run(&args).map(|_| ())
    }

    /// Sets a user option of the pane (`@awf_agent` and the like: shown in its border, read back
    /// by `list`).
    pub fn set(&self, pane: &PaneId, option: &str, value: &str) -> Result<(), Error> {
        self.run(&["set-option", "-p", "-t", &pane.0, option, value]).map(|_| ())
    }

    /// The panes of `session` (none when it is not running).
    pub fn list(&self, session: &str) -> Vec<PaneInfo> {
        let target = format!("={session}");
        self.run(&["list-panes", "-s", "-t", &target, "-F", LIST_FORMAT])
            .map(|out| out.lines().filter_map(parse_pane).collect())
            .unwrap_or_default()
    }

    /// Whether the pane's process runs, has exited, or the pane is gone.
    pub fn state(&self, pane: &PaneId) -> State {
        let Ok(out) = self.run(&["list-panes", "-a", "-F", LIST_FORMAT]) else { return State::Gone };
        match out.lines().filter_map(parse_pane).find(|p| p.id == *pane) {
            Some(p) if p.dead => State::Dead { status: p.dead_status },
            Some(p) => State::Alive { pid: p.pid },
            None => State::Gone,
        }
    }

    /// Pastes `text` into the pane as one bracketed paste (the CLI takes it as typed text, its
    /// newlines included, not as keys), through a buffer of its own that the paste deletes; the
    /// text goes to tmux on its stdin, never on a command line. Newlines stay LF (`-r`), not CR:
    /// Claude Code 2.1.197 asks for bracketed pastes ~1.75 s after its terminal turns raw, and a
    /// CR pasted in between submitted the first line alone (measured), where a LF stays text.
    pub fn paste(&self, pane: &PaneId, text: &str) -> Result<(), Error> {
        let buffer = format!("awf-{}", uuid::Uuid::new_v4().simple());
        let load = ["load-buffer", "-b", &buffer, "-"];
        let mut cmd = self.command(&load);
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child =
            cmd.spawn().map_err(|e| Error::Missing { why: format!("`{}`: {e}", self.program.display()) })?;
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(text.as_bytes());
        }
        let out =
            child.wait_with_output().map_err(|e| Error::Failed { args: load.join(" "), stderr: e.to_string() })?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
            return Err(Error::Failed { args: load.join(" "), stderr });
        }
        self.run(&["paste-buffer", "-p", "-r", "-d", "-b", &buffer, "-t", &pane.0]).map(|_| ())
    }

    /// Whether the pane's program reads its terminal key by key: the terminal has left canonical
    /// (line by line) mode, as a CLI's does once its input starts, so that text pasted now reaches
    /// it whole. A pane's terminal starts canonical, also after `respawn` (a new one).
    pub fn reads_keys(&self, pane: &PaneId) -> Result<bool, Error> {
        use nix::fcntl::{open, OFlag};
        use nix::sys::termios::{tcgetattr, LocalFlags};
        let tty = self.run(&["display-message", "-p", "-t", &pane.0, "#{pane_tty}"])?;
        let failed = |why: nix::Error| Error::Terminal { pane: pane.0.clone(), tty: tty.clone(), why: why.to_string() };
        // Opened only to read its settings: never as awf's controlling terminal, never waited on.
        let flags = OFlag::O_RDONLY | OFlag::O_NOCTTY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        let fd = open(tty.as_str(), flags, nix::sys::stat::Mode::empty()).map_err(failed)?;
        let settings = tcgetattr(&fd).map_err(failed)?;
        Ok(!settings.local_flags.contains(LocalFlags::ICANON))
    }

    /// Sends keys (tmux key names: `Enter`, `Escape`, `C-c`) to the pane.
    pub fn keys(&self, pane: &PaneId, keys: &[&str]) -> Result<(), Error> {
        let mut args = vec!["send-keys", "-t", &pane.0];
        args.extend(keys);
        self.run(&args).map(|_| ())
    }

    /// The pane's screen as text (with its colours as escape sequences when `escapes`).
    pub fn capture(&self, pane: &PaneId, escapes: bool) -> Result<String, Error> {
        let mut args = vec!["capture-pane", "-p", "-t", &pane.0];
        if escapes {
            args.push("-e");
        }
        self.run(&args)
    }

    pub fn kill_pane(&self, pane: &PaneId) -> Result<(), Error> {
        self.run(&["kill-pane", "-t", &pane.0]).map(|_| ())
    }

    pub fn kill_session(&self, name: &str) -> Result<(), Error> {
        self.run(&["kill-session", "-t", &format!("={name}")]).map(|_| ())
    }

    /// The server's socket, for the command that attaches to it (`tmux -S <socket> attach`).
    pub fn socket_path(&self, session: &str) -> Option<PathBuf> {
        let target = format!("={session}");
        self.run(&["display-message", "-p", "-t", &target, "#{socket_path}"]).ok().map(PathBuf::from)
    }
}

fn parse_pane(line: &str) -> Option<PaneInfo> {
    let f: Vec<&str> = line.split('\t').collect();
    if f.len() < 10 {
        return None;
    }
    Some(PaneInfo {
        id: PaneId(f[0].to_string()),
        window: f[1].to_string(),
        width: f[2].parse().ok()?,
        height: f[3].parse().ok()?,
        pid: f[4].parse().unwrap_or(0),
        dead: f[5] == "1",
        dead_status: f[6].parse().ok(),
        agent: f[7].to_string(),
        run: f[8].to_string(),
        kept: f[9] == "1",
    })
}

/// The argv that attaches a terminal to a run's session on the server at `socket`.
pub fn attach_argv(socket: &Path, session: &str, read_only: bool) -> Vec<String> {
    let mut argv = vec!["tmux".to_string(), "-S".into(), socket.display().to_string(), "attach-session".into()];
    if read_only {
        argv.push("-r".into());
    }
    argv.extend(["-t".into(), format!("={session}")]);
    argv
}

/// Replaces this process with a tmux client attached to `session` on the server at `socket`
/// (`TMUX` unset: inside the operator's own tmux it nests); returns only when that fails.
pub fn exec_attach(socket: &Path, session: &str, read_only: bool) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    let argv = attach_argv(socket, session, read_only);
    crate::open_files::command(&argv[0]).args(&argv[1..]).env_remove("TMUX").env_remove("TMUX_PANE").exec()
}

/// A run's session name.
pub fn session_name(run_id: &str) -> String {
    format!("awf-{run_id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_pane_is_read_back() {
        let p = parse_pane("%4\treview\t99\t50\t1234\t0\t\treviewer\t20260101-1\t").expect("a pane");
        assert_eq!((p.id.0.as_str(), p.window.as_str(), p.width, p.height, p.pid), ("%4", "review", 99, 50, 1234));
        assert!(!p.dead && !p.kept && p.dead_status.is_none());
        assert_eq!(p.agent, "reviewer");
        let dead = parse_pane("%5\tw\t10\t10\t0\t1\t3\ta\tr\t1").expect("a pane");
        assert!(dead.dead && dead.kept);
        assert_eq!(dead.dead_status, Some(3));
        assert_eq!(parse_pane("%5\tw"), None);
    }

    #[test]
    fn tmux_missing_is_told_with_the_fix() {
        let t = Tmux { program: "/nonexistent/tmux".into(), socket: Socket::Name("x".into()) };
        let e = t.probe().expect_err("missing");
        assert!(matches!(e, Error::Missing { .. }));
        assert!(e.to_string().contains("apt-get install tmux"), "{e}");
    }

    #[test]
    fn whether_a_panes_program_reads_keys_is_its_terminals_mode() {
        use nix::sys::termios::{cfmakeraw, tcgetattr, tcsetattr, SetArg};
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let pty = nix::pty::openpty(None, None).expect("a pseudo-terminal");
        let tty = nix::unistd::ttyname(&pty.slave).expect("its name");
        // Stand-ins for tmux naming the pane's terminal: the pty, and one that is not there.
        let standin = |name: &str, tty: &Path| {
            let path = dir.path().join(name);
            std::fs::write(&path, format!("#!/bin/sh\necho {}\n", tty.display())).expect("write");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
            Tmux { program: path, socket: Socket::Name("x".into()) }
        };
        let pane = PaneId("%1".into());
        let t = standin("tmux", &tty);
        assert!(!t.reads_keys(&pane).expect("read"), "a new terminal goes line by line");
        let mut settings = tcgetattr(&pty.slave).expect("its settings");
        cfmakeraw(&mut settings);
        tcsetattr(&pty.slave, SetArg::TCSANOW, &settings).expect("made raw");
        assert!(t.reads_keys(&pane).expect("read"), "a raw one is read key by key");
        let gone = standin("tmux-gone", Path::new("/nonexistent/pts/9"));
        let e = gone.reads_keys(&pane).expect_err("no such terminal");
        assert!(matches!(&e, Error::Terminal { pane, tty, .. } if pane == "%1" && tty == "/nonexistent/pts/9"), "{e}");
    }

    #[test]
    fn attaching_names_the_socket_and_session_exactly() {
        assert_eq!(
            attach_argv(Path::new("/tmp/tmux-0/awf"), "awf-r1", true),
            ["tmux", "-S", "/tmp/tmux-0/awf", "attach-session", "-r", "-t", "=awf-r1"]
        );
    }
}
