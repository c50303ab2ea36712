//! `awf doctor`'s checks of the CLI harnesses: each one installed, and at its pinned version.

use super::{install_hint, PINNED};
use crate::config::HarnessKind;
use std::process::Stdio;
use std::time::Duration;

/// The first `x.y.z` in a version banner.
fn version_in(text: &str) -> Option<String> {
    text.split(|c: char| c.is_whitespace() || c == '(' || c == ')' || c == 'v').find_map(|w| {
        let parts: Vec<&str> = w.split('.').collect();
        (parts.len() == 3 && parts.iter().all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit())))
            .then(|| w.to_string())
    })
}

/// Why a CLI's version is not known; the text follows the program's name in the check's detail.
#[derive(Debug, thiserror::Error)]
enum NoVersion {
    #[error("not found on PATH")]
    NotFound,
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("`{program} --version` printed no version: {printed}")]
    Unprinted { program: String, printed: String },
    #[error("`{0} --version` did not answer within 20 s")]
    Silent(String),
}

/// Runs `program --version`, bounded.
fn installed_version(program: &str) -> Result<String, NoVersion> {
    let child = crate::open_files::command(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("DISABLE_AUTOUPDATER", "1")
        .env("PI_OFFLINE", "1")
        .spawn()
        .map_err(|e| if e.kind() == std::io::ErrorKind::NotFound { NoVersion::NotFound } else { NoVersion::Io(e) })?;
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(Ok(out)) => {
            let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            version_in(&text)
                .ok_or_else(|| NoVersion::Unprinted { program: program.to_string(), printed: text.trim().to_string() })
        }
        Ok(Err(e)) => Err(NoVersion::Io(e)),
        Err(_) => {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGKILL);
            Err(NoVersion::Silent(program.to_string()))
        }
    }
}

/// `awf doctor`'s checks of the CLI harnesses: per CLI, whether it is installed and is the pinned
/// version: `(name, usable, detail)`.
/// `program` gives the program configured for a harness (`[harnesses.X] command`), if any.
pub fn doctor_checks(program: &dyn Fn(HarnessKind) -> Option<String>) -> Vec<(String, bool, String)> {
    PINNED
        .iter()
        .map(|(harness, _, pinned)| {
            let name = format!("cli: {harness}");
            let exe = program(*harness).unwrap_or_else(|| harness.as_str().to_string());
            match installed_version(&exe) {
                Ok(v) if v == *pinned => (name, true, format!("`{exe}` {v} (the pinned version)")),
                Ok(v) => (
                    name,
                    false,
                    format!("`{exe}` is {v}, but awf is verified with {pinned}: {}", install_hint(*harness)),
                ),
                Err(e) => (name, false, format!("`{exe}` {e}: {}", install_hint(*harness))),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_banners() {
        assert_eq!(version_in("2.1.197 (Claude Code)").as_deref(), Some("2.1.197"));
        assert_eq!(version_in("codex-cli 0.171.0\n").as_deref(), Some("0.171.0"));
        assert_eq!(version_in("0.73.1\n").as_deref(), Some("0.73.1"));
        assert_eq!(version_in("v1.2.3").as_deref(), Some("1.2.3"));
        assert_eq!(version_in("nothing"), None);
    }
}
