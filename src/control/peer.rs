//! Who may use an agent's control socket: the processes of its running turns. Each turn leads a
//! session of its own (`harness/spawn.rs`), which no other process can join. A connecting process
//! (its pid from `SO_PEERCRED`, a host pid even for a sandbox's pid namespace) is one of them when
//! it or an ancestor (the ppid chain in `/proc`) is a running turn's leader or in its session. The
//! ancestry covers the sandboxed case, where bwrap leads the session and runs the program in a
//! session of its own (`--new-session`). Process groups prove nothing (a process may `setpgid`
//! into any group of its session) and are not looked at. Whatever the uid.

use crate::run::leftovers::stat;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// How far up the ppid chain a connecting process is followed.
const MAX_DEPTH: usize = 64;
/// How long a connection from an unknown process waits for a turn being spawned to be registered.
const SPAWN_WAIT: Duration = Duration::from_secs(5);

#[derive(Default)]
struct Inner {
    leaders: Vec<i32>,
    spawning: usize,
}

/// The leaders of an agent's running turns (each the leader of its session).
#[derive(Default)]
pub struct Turns {
    inner: Mutex<Inner>,
    changed: Notify,
}

fn lock(m: &Mutex<Inner>) -> std::sync::MutexGuard<'_, Inner> {
    // The registry holds plain numbers; a panic elsewhere cannot leave it half-written.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Turns {
    /// Marks a turn process as being spawned: until it is admitted (or the guard drops), an
    /// unknown caller waits for it instead of being refused, since the new process may call first.
    pub fn spawning(self: &Arc<Self>) -> Spawning {
        lock(&self.inner).spawning += 1;
        Spawning { turns: self.clone() }
    }

    /// Whether process `pid` belongs to one of the running turns.
    pub async fn admits(&self, pid: i32) -> bool {
        let until = tokio::time::Instant::now() + SPAWN_WAIT;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (leaders, spawning) = {
                let g = lock(&self.inner);
                (g.leaders.clone(), g.spawning)
            };
            if !leaders.is_empty() && belongs(pid, &leaders) {
                return true;
            }
            if spawning == 0 || tokio::time::timeout_at(until, notified).await.is_err() {
                return false;
            }
        }
    }
}

/// A turn process being spawned (see [`Turns::spawning`]).
pub struct Spawning {
    turns: Arc<Turns>,
}

impl Spawning {
    /// Registers the spawned leader; it stays admitted until the returned guard drops.
    pub fn admit(self, pid: i32) -> Admission {
        lock(&self.turns.inner).leaders.push(pid);
        Admission { turns: self.turns.clone(), pid }
    }
}

impl Drop for Spawning {
    fn drop(&mut self) {
        let mut g = lock(&self.turns.inner);
        g.spawning = g.spawning.saturating_sub(1);
        drop(g);
        self.turns.changed.notify_waiters();
    }
}

/// A running turn's leader, admitted while this lives.
pub struct Admission {
    turns: Arc<Turns>,
    pid: i32,
}

impl Drop for Admission {
    fn drop(&mut self) {
        let mut g = lock(&self.turns.inner);
        if let Some(i) = g.leaders.iter().position(|p| *p == self.pid) {
            g.leaders.swap_remove(i);
        }
    }
}

/// Whether `pid`, or an ancestor, is one of `leaders` or in one of their sessions (which no
/// process can join: `setsid` makes a new one, led by the caller).
fn belongs(pid: i32, leaders: &[i32]) -> bool {
    // The common case in one system call: a turn's own process, in its leader's session. (A
    // session led from outside this pid namespace reads as 0, which is nobody's.)
    let sid = nix::unistd::getsid(Some(nix::unistd::Pid::from_raw(pid))).map_or(0, |s| s.as_raw());
    if sid > 0 && leaders.contains(&sid) {
        return true;
    }
    let mut cur = pid;
    for _ in 0..MAX_DEPTH {
        if leaders.contains(&cur) {
            return true;
        }
        let Some(s) = stat(cur) else { return false };
        // A session led from outside this pid namespace reads as 0 (a container's init session).
        if s.sid > 0 && leaders.contains(&s.sid) {
            return true;
        }
        if s.ppid <= 1 {
            return false;
        }
        cur = s.ppid;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_belongs_to_its_session_and_ancestry() {
        let me = std::process::id() as i32;
        let s = stat(me).expect("own stat");
        assert!(s.ppid > 0, "a parent in this namespace: {}", s.ppid);
        assert!(belongs(me, &[me]));
        // In a container the session (and group) may be led from outside the pid namespace, where
        // /proc reads them as 0; a session of 0 is nobody's.
        if s.sid > 0 {
            assert!(belongs(me, &[s.sid]), "its session's leader");
        } else {
            assert!(!belongs(me, &[0]), "session 0 is outside the namespace, not a leader");
        }
        if s.ppid > 1 {
            assert!(belongs(me, &[s.ppid]), "a parent is an ancestor");
        }
        assert!(!belongs(me, &[0]), "0 is no process's session, whatever getsid or /proc reads");
        assert!(!belongs(me, &[i32::MAX - 7]));
        assert!(!belongs(i32::MAX - 7, &[me]), "a process that does not exist belongs nowhere");
    }

    #[test]
    fn joining_a_leaders_process_group_admits_nothing() {
        use std::os::unix::process::CommandExt;
        let sleep = |group: i32| std::process::Command::new("sleep").arg("30").process_group(group).spawn();
        let mut leader = sleep(0).expect("spawn the leader");
        let mut joiner = sleep(leader.id() as i32).expect("spawn a process in the leader's group");
        let (l, j) = (leader.id() as i32, joiner.id() as i32);
        assert_eq!(stat(j).map(|s| s.pgid), Some(l), "the joiner is in the leader's group");
        assert!(belongs(l, &[l]));
        assert!(!belongs(j, &[l]), "same group, but neither the leader's session nor its descendant");
        for c in [&mut leader, &mut joiner] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    #[tokio::test]
    async fn a_caller_waits_for_a_turn_being_spawned_and_is_refused_once_it_is_not() {
        let turns = Arc::new(Turns::default());
        let me = std::process::id() as i32;
        assert!(!turns.admits(me).await, "no turn running");
        let spawning = turns.spawning();
        let t = turns.clone();
        let waiter = tokio::spawn(async move { t.admits(me).await });
        let admitted = spawning.admit(me);
        assert!(waiter.await.expect("join"), "admitted once registered");
        drop(admitted);
        assert!(!turns.admits(me).await, "no longer once the turn ended");
        let spawning = turns.spawning();
        let t = turns.clone();
        let waiter = tokio::spawn(async move { t.admits(me).await });
        drop(spawning);
        assert!(!waiter.await.expect("join"), "refused when the spawn failed");
    }
}
