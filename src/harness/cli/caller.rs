//! A run's calling session as the CLIs keep it: finding its transcript in the caller's home
//! (Claude Code: `projects/<cwd>/<id>.jsonl`; pi: a session file named by or headed with its id),
//! and the probe that tells, during a turn, which session a CLI agent is in (so that a council it
//! convenes knows its caller).

use crate::config::HarnessKind;
use crate::run::caller::Caller;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A caller's session to fork: its id and the transcript found for it.
#[derive(Debug, Clone, PartialEq)]
pub struct CallerFork {
    pub harness: HarnessKind,
    pub id: String,
    pub transcript: PathBuf,
}

/// Tells, at any time, the session an agent's CLI is in (its id once the CLI wrote it).
pub type CallerProbe = Arc<dyn Fn() -> Caller + Send + Sync>;

/// The caller's home: the one recorded, else the operator's.
pub fn home_of(caller: &Caller) -> Option<PathBuf> {
    caller.home.clone().or_else(|| match caller.harness {
        HarnessKind::Claude => super::operator_dir("CLAUDE_CONFIG_DIR", ".claude"),
        HarnessKind::Pi => super::operator_dir("PI_CODING_AGENT_DIR", ".pi/agent"),
        HarnessKind::Codex => super::operator_dir("CODEX_HOME", ".codex"),
        _ => None,
    })
}

/// Why a caller's session cannot be forked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ForkError {
    #[error("the caller's {0} session has none yet: there is no conversation to fork")]
    NoSession(HarnessKind),
    #[error("the caller's {0} home is unknown (no HOME)")]
    NoHome(HarnessKind),
    #[error("a caller's {0} session cannot be forked (claude and pi sessions can)")]
    Unforkable(HarnessKind),
    #[error("no {harness} session `{id}` in {}", home.display())]
    NotFound { harness: HarnessKind, id: String, home: PathBuf },
}

/// The caller's session, ready to fork, or why it cannot be.
pub fn locate(caller: &Caller) -> Result<CallerFork, ForkError> {
    let harness = caller.harness;
    let Some(id) = caller.session.clone() else {
        return Err(ForkError::NoSession(harness));
    };
    let home = home_of(caller).ok_or(ForkError::NoHome(harness))?;
    let found = match harness {
        HarnessKind::Claude => claude_transcript(&home, &id),
        HarnessKind::Pi => pi_transcript(&home, &id, 3),
        other => return Err(ForkError::Unforkable(other)),
    };
    let transcript = found.ok_or_else(|| ForkError::NotFound { harness, id: id.clone(), home: home.clone() })?;
    Ok(CallerFork { harness, id, transcript })
}

/// `projects/<any project>/<id>.jsonl` in a Claude Code home.
pub fn claude_transcript(home: &Path, id: &str) -> Option<PathBuf> {
    let dirs = std::fs::read_dir(home.join("projects")).ok()?;
    dirs.filter_map(Result::ok).map(|d| d.path().join(format!("{id}.jsonl"))).find(|p| p.is_file())
}

/// A pi session file under `dir` (at most `depth` folders down) named `<time>_<id>.jsonl` or
/// `<id>.jsonl`, or whose header names the id.
pub fn pi_transcript(dir: &Path, id: &str, depth: u32) -> Option<PathBuf> {
    let mut subdirs = Vec::new();
    for entry in std::fs::read_dir(dir).ok()?.filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            subdirs.push(path);
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".jsonl") {
            continue;
        }
        if name == format!("{id}.jsonl") || name.ends_with(&format!("_{id}.jsonl")) {
            return Some(path);
        }
        if pi_header_id(&path).as_deref() == Some(id) {
            return Some(path);
        }
    }
    if depth == 0 {
        return None;
    }
    subdirs.into_iter().find_map(|d| pi_transcript(&d, id, depth - 1))
}

/// The id in a pi session file's header line (`{"type":"session","id":...}`).
pub fn pi_header_id(file: &Path) -> Option<String> {
    use std::io::BufRead;
    let f = std::fs::File::open(file).ok()?;
    let mut line = String::new();
    std::io::BufReader::new(f).read_line(&mut line).ok()?;
    let v: serde_json::Value = serde_json::from_str(&line).ok()?;
    (v["type"] == "session").then(|| v["id"].as_str().map(String::from)).flatten()
}

/// Claude Code's project folder name for a working folder: every character but letters and
/// digits becomes `-`.
pub fn claude_project(cwd: &Path) -> String {
    cwd.display().to_string().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transcripts_are_found_by_id_and_missing_ones_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path();
        std::fs::create_dir_all(home.join("projects/-w")).expect("mkdir");
        std::fs::write(home.join("projects/-w/abc.jsonl"), "{}\n").expect("write");
        let caller = |h: HarnessKind, id: Option<&str>| Caller {
            harness: h,
            session: id.map(String::from),
            home: Some(home.to_path_buf()),
            run: None,
            agent: None,
        };
        let f = locate(&caller(HarnessKind::Claude, Some("abc"))).expect("found");
        assert!(f.transcript.ends_with("projects/-w/abc.jsonl"));
        let e = locate(&caller(HarnessKind::Claude, Some("zzz"))).expect_err("missing");
        assert!(e.to_string().starts_with("no claude session `zzz` in "), "{e}");
        let e = locate(&caller(HarnessKind::Claude, None)).expect_err("none");
        assert_eq!(e, ForkError::NoSession(HarnessKind::Claude));
        let e = locate(&caller(HarnessKind::Codex, Some("t"))).expect_err("codex");
        assert_eq!(e, ForkError::Unforkable(HarnessKind::Codex));

        std::fs::create_dir_all(home.join("sessions/--w--")).expect("mkdir");
        std::fs::write(home.join("sessions/--w--/2026_p1.jsonl"), "{}\n").expect("write");
        std::fs::create_dir_all(home.join("awf-session")).expect("mkdir");
        std::fs::write(home.join("awf-session/session.jsonl"), "{\"type\":\"session\",\"id\":\"p2\"}\n")
            .expect("write");
        assert!(locate(&caller(HarnessKind::Pi, Some("p1"))).is_ok());
        let f = locate(&caller(HarnessKind::Pi, Some("p2"))).expect("by header");
        assert!(f.transcript.ends_with("awf-session/session.jsonl"));
        assert_eq!(claude_project(Path::new("/tmp/a_b.c")), "-tmp-a-b-c");
    }
}
