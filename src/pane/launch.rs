//! What runs in a pane. tmux starts `awf pane-exec <file>` there; that reads the program's argv,
//! environment and folder from `<file>` (written 0600 in the agent's 0700 folder, removed as soon
//! as it is read) and replaces itself with the program, so that no variable's value goes on a
//! command line and the program gets exactly the environment a headless run of it would, whatever
//! environment awf's tmux server was started with. The pane's own terminal variables (`TERM`,
//! `TMUX`, ...) are kept. Before an agent's first turn its pane holds a placeholder,
//! `awf pane-exec --hold <text>`, which shows the text and waits to be replaced.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A program to run in a pane.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Launch {
    pub argv: Vec<String>,
    /// The program's whole environment (beside the pane's terminal variables).
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    /// A sandbox's pinned paths: opened by `awf pane-exec` just before it becomes the program
    /// (each checked against what it was when the agent was seated) and given to it as
    /// descriptors from `sandbox::bwrap::FIRST_FD` up.
    #[serde(default)]
    pub pinned: Vec<crate::sandbox::pin::Pinned>,
}

/// The variables a pane's program takes from the pane itself: its terminal's.
pub const FROM_PANE: &[&str] = &["TERM", "COLORTERM", "TMUX", "TMUX_PANE"];

/// Why `awf pane-exec` could not start the program.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("cannot read the pane's launch file {}: {why}", path.display())]
    Read { path: PathBuf, why: std::io::Error },
    #[error("the pane's launch file {} is not a launch: {why}", path.display())]
    Parse { path: PathBuf, why: serde_json::Error },
    #[error("the pane's launch file {} names no program", path.display())]
    Empty { path: PathBuf },
    #[error("cannot start `{program}` in the pane: {why}")]
    Exec { program: String, why: std::io::Error },
    #[error(transparent)]
    Pinned(#[from] crate::sandbox::pin::PinError),
}

/// Writes the launch file (0600, through the record module: it lies in the run folder).
pub fn write(path: &Path, launch: &Launch) -> std::io::Result<()> {
    let text = serde_json::to_vec(launch).map_err(std::io::Error::other)?;
    crate::record::private::write(path, text)
}

/// The argv that runs `launch_file` in a pane.
pub fn argv(awf: &Path, launch_file: &Path) -> Vec<String> {
    vec![awf.display().to_string(), "pane-exec".into(), launch_file.display().to_string()]
}

/// The argv of a placeholder showing `text` until the pane's program replaces it.
pub fn hold_argv(awf: &Path, text: &str) -> Vec<String> {
    vec![awf.display().to_string(), "pane-exec".into(), "--hold".into(), text.to_string()]
}

/// Reads and removes the launch file, then replaces this process with its program; returns only
/// when that fails.
pub fn exec(path: &Path) -> ExecError {
    use std::os::unix::process::CommandExt;
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(why) => return ExecError::Read { path: path.to_path_buf(), why },
    };
    let _ = std::fs::remove_file(path);
    let launch: Launch = match serde_json::from_slice(&bytes) {
        Ok(l) => l,
        Err(why) => return ExecError::Parse { path: path.to_path_buf(), why },
    };
    let Some((program, args)) = launch.argv.split_first() else {
        return ExecError::Empty { path: path.to_path_buf() };
    };
    if let Err(e) = place_pinned(&launch.pinned) {
        return e;
    }
    let mut cmd = crate::open_files::command(program);
    cmd.args(args).env_clear().current_dir(&launch.cwd);
    cmd.envs(launch.env.iter().filter(|(k, _)| !FROM_PANE.contains(&k.as_str())).map(|(k, v)| (k, v)));
    for var in FROM_PANE {
        if let Some(v) = std::env::var_os(var) {
            cmd.env(var, v);
        }
    }
    ExecError::Exec { program: program.clone(), why: cmd.exec() }
}

/// Opens the pinned paths and puts them at the descriptors the program expects (from
/// `FIRST_FD` up, inherited by its exec), each first copied above all of those places so that
/// placing one never closes another.
#[allow(unsafe_code)]
fn place_pinned(pinned: &[crate::sandbox::pin::Pinned]) -> Result<(), ExecError> {
    use nix::fcntl::{fcntl, FcntlArg};
    use nix::libc;
    let first = crate::sandbox::bwrap::FIRST_FD;
    let opened = crate::sandbox::pin::open_all(pinned)?;
    let above = first + pinned.len() as i32;
    let exec = |why: std::io::Error| ExecError::Exec { program: "the sandbox".into(), why };
    let mut lifted = Vec::with_capacity(opened.len());
    for fd in &opened {
        lifted.push(fcntl(fd, FcntlArg::F_DUPFD_CLOEXEC(above)).map_err(|e| exec(e.into()))?);
    }
    // The first copies may sit where the program expects its descriptors: closed before those
    // places are filled.
    drop(opened);
    for (i, &fd) in lifted.iter().enumerate() {
        // SAFETY: both descriptors are this process's; the target's old use (if any) is meant to
        // be replaced, and dup2 leaves the copy without close-on-exec, so the program inherits it.
        if unsafe { libc::dup2(fd, first + i as i32) } < 0 {
            return Err(exec(std::io::Error::last_os_error()));
        }
    }
    for fd in lifted {
        // SAFETY: `fd` is the F_DUPFD_CLOEXEC copy made above, used by nothing else now.
        unsafe { libc::close(fd) };
    }
    Ok(())
}

/// Waits until the process is killed (a placeholder, replaced by `respawn-pane -k`).
pub fn hold() -> ! {
    loop {
        std::thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_launch_file_is_private_and_read_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("pane.launch");
        let launch = Launch {
            argv: vec!["/nonexistent/program".into(), "--flag".into()],
            env: vec![("KEY".into(), "value".into())],
            cwd: dir.path().to_path_buf(),
            pinned: vec![],
        };
        write(&file, &launch).expect("write");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&file).expect("meta").permissions().mode() & 0o777, 0o600);
        let e = exec(&file);
        assert!(matches!(&e, ExecError::Exec { program, .. } if program == "/nonexistent/program"), "{e}");
        assert!(!file.exists(), "removed once read");
        assert!(matches!(exec(&file), ExecError::Read { .. }));
        assert_eq!(argv(Path::new("/bin/awf"), &file)[1], "pane-exec");
    }
}
