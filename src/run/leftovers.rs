//! What an earlier attempt of a run left running. A turn's leader dies with awf, but what it
//! started may not: before a new attempt opens anything, every process in a process group or
//! session on record (`groups.jsonl`: a turn's leader leads both) whose environment carries this
//! run's `AWF_RUN_ID` is killed. The environment check means a pid or group number reused by
//! another program is never hit.

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
            .filter(|p| stat(*p).is_some_and(|s| groups.contains(&s.pgid) || groups.contains(&s.sid)))
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

/// Where a process sits: its parent, process group and session (pids as this process sees them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub ppid: i32,
    pub pgid: i32,
    pub sid: i32,
}

/// A process's [`Stat`], from fields 4 to 6 of `/proc/<pid>/stat`.
pub fn stat(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold anything: the fields follow the last `)`.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(1).map(|f| f.parse().ok());
    let mut next = || fields.next().flatten();
    Some(Stat { ppid: next()?, pgid: next()?, sid: next()? })
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

    #[test]
    fn a_process_that_left_a_recorded_group_but_not_its_session_is_killed() {
        use std::io::BufRead;
        // A leader of its own session whose child moves to a group of its own, prints its pid and
        // sleeps; the leader sleeps too.
        let script = "import os, sys, time\nos.setsid()\nif os.fork() == 0:\n    os.setpgid(0, 0)\n    print(os.getpid(), flush=True)\ntime.sleep(30)\n";
        let mut leader = std::process::Command::new("python3")
            .args(["-c", script])
            .env("AWF_RUN_ID", "r1")
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("spawn python3");
        let mut line = String::new();
        let out = leader.stdout.take().expect("piped stdout");
        std::io::BufReader::new(out).read_line(&mut line).expect("the child's pid");
        let child: i32 = line.trim().parse().expect("a pid");
        let l = leader.id() as i32;
        assert_eq!(stat(child).map(|s| (s.pgid, s.sid)), Some((child, l)), "its own group, the leader's session");
        let dir = tempfile::tempdir().expect("tempdir");
        crate::record::groups::append(dir.path(), 1, l, "a", "a#1");
        let mut killed = end(dir.path(), "r1");
        killed.sort();
        assert_eq!(killed, {
            let mut k = vec![l, child];
            k.sort();
            k
        });
        assert!(leader.wait().expect("wait").code().is_none(), "killed by a signal");
    }
}
