//! What an earlier attempt of a run left running. A turn's leader dies with awf, but what it
//! started may not: before a new attempt opens anything, every process in a process group on
//! record (`groups.jsonl`) whose environment carries this run's `AWF_RUN_ID` is killed. The
//! environment check means a pid or group number reused by another program is never hit.

use std::collections::HashSet;
use std::path::Path;

/// How many times the process table is scanned: a process may fork while its group is killed.
const ROUNDS: usize = 20;

/// Kills what earlier attempts of run `run_id` left; returns the pids killed.
pub fn end(run_dir: &Path, run_id: &str) -> Vec<i32> {
    let groups: HashSet<i32> = crate::record::groups::read(run_dir).into_iter().collect();
    let mut killed = Vec::new();
    if groups.is_empty() {
        return killed;
    }
    let me = std::process::id() as i32;
    let tag = format!("AWF_RUN_ID={run_id}");
    for _ in 0..ROUNDS {
        let found: Vec<i32> = pids()
            .into_iter()
            .filter(|p| *p != me)
            .filter(|p| stat(*p).is_some_and(|(_, pgid)| groups.contains(&pgid)))
            .filter(|p| carries(*p, &tag))
            .collect();
        if found.is_empty() {
            break;
        }
        for pid in found {
            let sent = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
            if sent.is_ok() && !killed.contains(&pid) {
                killed.push(pid);
            }
        }
    }
    killed
}

/// Every pid in `/proc`.
fn pids() -> Vec<i32> {
    std::fs::read_dir("/proc")
        .map(|d| d.filter_map(Result::ok).filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default()
}

/// Whether process `pid`'s environment holds exactly `tag` (`NAME=value`). Unreadable (another
/// user's, or exited) means no.
fn carries(pid: i32, tag: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .map(|env| env.split(|b| *b == 0).any(|entry| entry == tag.as_bytes()))
        .unwrap_or(false)
}

/// `(ppid, pgid)` of a process, from `/proc/<pid>/stat`.
pub fn stat(pid: i32) -> Option<(i32, i32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold anything: the fields follow the last `)`.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(1);
    let ppid = fields.next()?.parse().ok()?;
    let pgid = fields.next()?.parse().ok()?;
    Some((ppid, pgid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_processes_of_a_recorded_group_with_the_run_id_are_killed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let start = |id: &str| {
            use std::os::unix::process::CommandExt;
            std::process::Command::new("sleep")
                .arg("30")
                .env("AWF_RUN_ID", id)
                .process_group(0)
                .spawn()
                .expect("spawn sleep")
        };
        let (mut ours, mut other, mut unrecorded) = (start("r1"), start("r2"), start("r1"));
        for c in [&ours, &other] {
            crate::record::groups::append(dir.path(), 1, c.id() as i32, "a", "a#1");
        }
        let killed = end(dir.path(), "r1");
        assert_eq!(killed, vec![ours.id() as i32]);
        assert!(ours.wait().expect("wait").code().is_none(), "killed by a signal");
        for c in [&mut other, &mut unrecorded] {
            assert!(c.try_wait().expect("try_wait").is_none(), "left alone");
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
