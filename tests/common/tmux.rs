//! tmux for the pane tests: each test gives awf a `TMUX_TMPDIR` of its own (in its temp folder),
//! so awf's tmux server (`tmux -L awf`) is the test's alone and is killed when the test ends;
//! the panes read back, captured, typed into and closed as an operator would.
#![allow(dead_code)]

use super::Env;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The test's tmux folder: awf's server for the test, and an outer one the test may start.
pub struct Tmux {
    pub dir: PathBuf,
}

/// A pane of awf's server.
#[derive(Debug, Clone)]
pub struct Pane {
    pub id: String,
    pub window: String,
    pub agent: String,
    pub kept: bool,
    pub dead: bool,
    pub width: u32,
    pub height: u32,
}

impl Drop for Tmux {
    fn drop(&mut self) {
        for socket in ["awf", "outer"] {
            let _ = self.cmd(socket, &["kill-server"]).stderr(Stdio::null()).status();
        }
    }
}

impl Tmux {
    /// A tmux folder inside the test's own (short enough for a socket path).
    pub fn new(env: &Env) -> Tmux {
        let dir = env.path().join("tmux");
        std::fs::create_dir_all(&dir).expect("the test's tmux folder");
        Tmux { dir }
    }

    /// `tmux -L <socket> ARGS` on the test's servers.
    pub fn cmd(&self, socket: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.args(["-L", socket, "-f", "/dev/null"]).args(args).env("TMUX_TMPDIR", &self.dir);
        cmd.env_remove("TMUX").env_remove("TMUX_PANE").stdin(Stdio::null());
        cmd
    }

    /// stdout of a tmux command on awf's server, or `None` when it failed.
    pub fn run(&self, args: &[&str]) -> Option<String> {
        let out = self.cmd("awf", args).stderr(Stdio::null()).output().ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Every pane of awf's server.
    pub fn panes(&self) -> Vec<Pane> {
        let format =
            "#{pane_id}\t#{window_name}\t#{@awf_agent}\t#{@awf_kept}\t#{pane_dead}\t#{pane_width}\t#{pane_height}\t.";
        let out = self.run(&["list-panes", "-a", "-F", format]).unwrap_or_default();
        out.lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                (f.len() >= 7).then(|| Pane {
                    id: f[0].into(),
                    window: f[1].into(),
                    agent: f[2].into(),
                    kept: f[3] == "1",
                    dead: f[4] == "1",
                    width: f[5].parse().unwrap_or(0),
                    height: f[6].parse().unwrap_or(0),
                })
            })
            .collect()
    }

    /// Agent `key`'s pane, when it has one.
    pub fn pane_of(&self, key: &str) -> Option<Pane> {
        self.panes().into_iter().find(|p| p.agent == key)
    }

    /// What the pane shows.
    pub fn capture(&self, target: &str) -> String {
        self.run(&["capture-pane", "-p", "-t", target]).unwrap_or_default()
    }

    /// Types `text` into the pane, key by key as an operator would, then Enter.
    pub fn type_line(&self, target: &str, text: &str) {
        assert!(self.run(&["send-keys", "-t", target, "-l", text]).is_some(), "type into {target}");
        assert!(self.run(&["send-keys", "-t", target, "Enter"]).is_some(), "Enter into {target}");
    }

    /// Closes the pane, as an operator would (`kill-pane`).
    pub fn kill_pane(&self, target: &str) {
        assert!(self.run(&["kill-pane", "-t", target]).is_some(), "kill pane {target}");
    }

    pub fn kill_server(&self) {
        let _ = self.cmd("awf", &["kill-server"]).stderr(Stdio::null()).status();
    }
}

/// `awf ARGS` in the test's folder with the test's tmux folder, HOME at `home` and the operator's
/// CLI variables removed; not waited for.
pub fn awf_command(env: &Env, tmux: &Tmux, home: &Path, args: &[&str]) -> Command {
    let mut cmd = super::command(env.path(), args);
    cmd.env("HOME", home).env("TMUX_TMPDIR", &tmux.dir).env_remove("TMUX").env_remove("TMUX_PANE");
    for var in super::cli::OPERATOR_VARS {
        cmd.env_remove(var);
    }
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd
}
