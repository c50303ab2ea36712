//! The bubblewrap provider: ONE pure function turns a policy and an agent's seat into the `bwrap`
//! argv that wraps its program, the environment bwrap is started with, and the pinned paths whose
//! descriptors it is given. No I/O: `seat.rs` found the paths, the harness opens the pinned ones
//! (`pin::open_all`) and spawns the argv with that environment and nothing else.
//!
//! The root is an allow-list: an empty tmpfs (read-only once built) holding the host's system
//! folders, private `/dev`, `/proc` and `/tmp`, and the agent's own paths; never the host's `/`
//! with holes punched. Mounts are made shallowest first, so that a deeper one (a `.git` kept
//! read-only inside the workspace, a mask over `.awf`, the agent's control folder below that mask)
//! always lands on top of the one that holds it.

use super::net::Net;
use super::pin::{Pinned, Role};
use super::policy::{Network, Policy};
use super::seat::Seat;
use std::path::{Path, PathBuf};

/// The descriptor the first pinned path is given to bwrap on; the next ones follow.
pub const FIRST_FD: i32 = 3;

fn text(p: &Path) -> String {
    // `seat` refuses paths that are not UTF-8, so nothing is lost here.
    p.display().to_string()
}

/// What runs a program in the sandbox: bwrap's argv, the whole environment bwrap starts with, and
/// the descriptors it mounts.
#[derive(Debug, Clone, PartialEq)]
pub struct Wrapped {
    /// `bwrap`, its options, `--`, then the program: paths and flags, never a variable's value.
    pub argv: Vec<String>,
    /// The only variables bwrap gets (spawn it with a cleared environment plus these); bwrap
    /// passes them on to the program. Values travel here rather than as `--setenv NAME VALUE`,
    /// because any local user can read a process's argv in `/proc/<pid>/cmdline`, while its
    /// environment is readable by its own user only.
    pub env: Vec<(String, String)>,
    /// The paths bwrap mounts by descriptor: `pinned[i]` is opened (`pin::open`) and given to
    /// bwrap as descriptor `FIRST_FD + i`.
    pub pinned: Vec<Pinned>,
}

/// One mount: where it lands, and its words in the argv.
struct Mount {
    at: PathBuf,
    words: Vec<String>,
}

impl Mount {
    fn new(at: &Path, words: Vec<String>) -> Mount {
        Mount { at: at.to_path_buf(), words }
    }

    fn path(how: &str, p: &Path) -> Mount {
        Mount::new(p, vec![how.to_string(), text(p), text(p)])
    }

    fn depth(&self) -> usize {
        self.at.components().filter(|c| matches!(c, std::path::Component::Normal(_))).count()
    }
}

/// Runs `program` inside the sandbox: `bwrap`, its options, `--`, then `program`, with the
/// allow-listed operator variables, the agent's own HOME, and the per-turn variables `vars`
/// (AWF_*), later ones replacing earlier ones of the same name so that nothing shadows AWF_*.
/// With a listed network (`net`), the program runs under `awf sandbox-bridge` (the proxy port and
/// forwarded loopback ports inside, relayed to awf's proxy on `net.socket`), with the proxy
/// variables set last.
pub fn wrap(
    bwrap: &Path,
    policy: &Policy,
    seat: &Seat,
    net: Option<&Net>,
    vars: &[(String, String)],
    program: &[String],
) -> Wrapped {
    // Every namespace bwrap can make (user, ipc, pid, net, uts, cgroup); the host network comes
    // back only when the policy says so. The sandbox dies with awf and gets a session of its own,
    // so it cannot reach awf's terminal (TIOCSTI).
    let mut a: Vec<String> = vec![text(bwrap), "--unshare-all".into()];
    if policy.network == Network::Host {
        a.push("--share-net".into());
    }
    a.extend(["--die-with-parent", "--new-session"].map(String::from));
    let home = [("HOME".to_string(), text(&seat.home))];
    let proxy = net.map(Net::proxy_env).unwrap_or_default();
    let mut env: Vec<(String, String)> = Vec::new();
    for (k, v) in seat.env.iter().chain(home.iter()).chain(vars.iter()).chain(proxy.iter()) {
        match env.iter_mut().find(|(name, _)| name == k) {
            Some(slot) => slot.1 = v.clone(),
            None => env.push((k.clone(), v.clone())),
        }
    }
    let mut mounts: Vec<Mount> = Vec::new();
    // The host's system folders, read-only (a symlink where the host has one).
    for s in &seat.system {
        mounts.push(match &s.link {
            Some(to) => Mount::new(&s.path, vec!["--symlink".into(), text(to), text(&s.path)]),
            None => Mount::path("--ro-bind", &s.path),
        });
    }
    // Private /dev, /proc and /tmp: nothing of the host's /tmp (other users' sockets) shows.
    for (how, at) in [("--dev", "/dev"), ("--proc", "/proc"), ("--tmpfs", "/tmp")] {
        mounts.push(Mount::new(Path::new(at), vec![how.into(), at.into()]));
    }
    // What the agent could replace, by the descriptor opened just before the turn: what the
    // program needs, read-only paths, the workspace, writable paths, git folders read-only.
    let pinned: Vec<Pinned> = seat.pinned().into_iter().cloned().collect();
    for (i, p) in pinned.iter().enumerate() {
        let how = match p.role {
            Role::Workspace | Role::Writable => "--bind-fd",
            Role::ReadOnly | Role::Exposed | Role::Git => "--ro-bind-fd",
        };
        mounts.push(Mount::new(&p.dest, vec![how.into(), (FIRST_FD + i as i32).to_string(), text(&p.dest)]));
    }
    // awf's own places inside what is bound: empty.
    for m in &seat.masked {
        mounts.push(Mount::new(m, vec!["--tmpfs".into(), text(m)]));
    }
    // The agent's control folder (socket, launcher) and the awf binary the launcher execs,
    // read-only; its state and home writable.
    for c in &seat.control {
        mounts.push(Mount::path("--ro-bind", c));
    }
    mounts.push(Mount::path("--ro-bind", &seat.awf));
    mounts.push(Mount::path("--bind", &seat.state));
    mounts.push(Mount::path("--bind", &seat.home));
    // Shallowest first (a stable sort: at one depth, in the order above).
    mounts.sort_by_key(Mount::depth);
    a.extend(mounts.into_iter().flat_map(|m| m.words));
    a.extend(["--remount-ro", "/", "--chdir"].map(String::from));
    a.extend([text(&seat.cwd), "--".to_string()]);
    match net {
        Some(n) => a.extend(n.bridge(&seat.awf, program)),
        None => a.extend(program.iter().cloned()),
    }
    Wrapped { argv: a, env, pinned }
}

/// The argv that checks, once, whether bwrap can build a sandbox here: every namespace, a
/// read-only root, private /dev, /proc and /tmp, and bwrap itself as the program (so that the
/// probe needs nothing from PATH).
pub fn probe_argv(bwrap: &Path) -> Vec<String> {
    let b = text(bwrap);
    [
        b.as_str(),
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--",
        b.as_str(),
        "--version",
    ]
    .map(String::from)
    .to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::root::System;
    use crate::sandbox::seat::Exposure;

    fn pinned(role: Role, p: &str) -> Pinned {
        Pinned { role, path: p.into(), dest: p.into(), dev: 1, ino: 2 }
    }

    fn seat() -> Seat {
        let agent = PathBuf::from("/work/.awf/runs/r1/agents/a");
        Seat {
            system: vec![
                System { path: "/usr".into(), link: None },
                System { path: "/bin".into(), link: Some("usr/bin".into()) },
                System { path: "/etc".into(), link: None },
            ],
            exposed: vec![Exposure {
                path: pinned(Role::Exposed, "/root/.pyenv"),
                needed_by: "/root/.pyenv/shims/python3".into(),
            }],
            workspace: pinned(Role::Workspace, "/work"),
            writable: vec![],
            read_only: vec![],
            git: vec![pinned(Role::Git, "/work/.git")],
            masked: vec!["/work/.awf".into()],
            control: vec![agent.clone()],
            awf: "/opt/awf/bin/awf".into(),
            state: agent.join("state"),
            home: agent.join("home"),
            cwd: "/work/sub".into(),
            env: vec![("PATH".into(), "/usr/bin:/bin".into()), ("LANG".into(), "C.UTF-8".into())],
        }
    }

    fn vars() -> Vec<(String, String)> {
        vec![("AWF_OP".into(), "a-1".into()), ("AWF_LAUNCHER".into(), "/work/.awf/runs/r1/agents/a/wf".into())]
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn the_default_policy_builds_the_root_from_an_allow_list_shallowest_first() {
        let got =
            wrap(Path::new("/usr/bin/bwrap"), &Policy::default(), &seat(), None, &vars(), &words("python3 agent.py"));
        let want = words(
            "/usr/bin/bwrap --unshare-all --die-with-parent --new-session \
             --ro-bind /usr /usr --symlink usr/bin /bin --ro-bind /etc /etc \
             --dev /dev --proc /proc --tmpfs /tmp \
             --bind-fd 4 /work \
             --ro-bind-fd 3 /root/.pyenv \
             --ro-bind-fd 5 /work/.git \
             --tmpfs /work/.awf \
             --ro-bind /opt/awf/bin/awf /opt/awf/bin/awf \
             --ro-bind /work/.awf/runs/r1/agents/a /work/.awf/runs/r1/agents/a \
             --bind /work/.awf/runs/r1/agents/a/state /work/.awf/runs/r1/agents/a/state \
             --bind /work/.awf/runs/r1/agents/a/home /work/.awf/runs/r1/agents/a/home \
             --remount-ro / --chdir /work/sub -- python3 agent.py",
        );
        assert_eq!(got.argv, want);
        let fds: Vec<&str> = got.pinned.iter().map(|p| p.path.to_str().unwrap_or("")).collect();
        assert_eq!(fds, ["/root/.pyenv", "/work", "/work/.git"], "descriptor 3 first, in the seat's order");
        assert_eq!(
            got.env,
            pairs(&[
                ("PATH", "/usr/bin:/bin"),
                ("LANG", "C.UTF-8"),
                ("HOME", "/work/.awf/runs/r1/agents/a/home"),
                ("AWF_OP", "a-1"),
                ("AWF_LAUNCHER", "/work/.awf/runs/r1/agents/a/wf"),
            ])
        );
        for absent in ["/", "/run", "/var", "/home", "/root", "/sys"] {
            assert!(
                !got.argv.windows(2).any(|w| w[0].starts_with("--") && w[0].contains("bind") && w[1] == absent),
                "{absent} is bound: {:?}",
                got.argv
            );
        }
    }

    #[test]
    fn network_host_shares_the_net_and_deeper_paths_land_on_top() {
        let policy = Policy { network: Network::Host, ..Default::default() };
        let mut seat = seat();
        seat.exposed.clear();
        seat.git.clear();
        seat.masked.clear();
        seat.system.truncate(1);
        seat.writable = vec![Pinned { dest: "/work/out/build".into(), ..pinned(Role::Writable, "/work/out2/build") }];
        seat.read_only = vec![pinned(Role::ReadOnly, "/root/.config/tool"), pinned(Role::ReadOnly, "/work/docs")];
        seat.control.push("/tmp/awf-0123456789".into());
        seat.env.clear();
        let got = wrap(Path::new("/usr/bin/bwrap"), &policy, &seat, None, &[], &words("./agent.sh --fast"));
        let want = words(
            "/usr/bin/bwrap --unshare-all --share-net --die-with-parent --new-session \
             --ro-bind /usr /usr --dev /dev --proc /proc --tmpfs /tmp \
             --bind-fd 5 /work \
             --ro-bind-fd 4 /work/docs \
             --ro-bind /tmp/awf-0123456789 /tmp/awf-0123456789 \
             --ro-bind-fd 3 /root/.config/tool \
             --bind-fd 6 /work/out/build \
             --ro-bind /opt/awf/bin/awf /opt/awf/bin/awf \
             --ro-bind /work/.awf/runs/r1/agents/a /work/.awf/runs/r1/agents/a \
             --bind /work/.awf/runs/r1/agents/a/state /work/.awf/runs/r1/agents/a/state \
             --bind /work/.awf/runs/r1/agents/a/home /work/.awf/runs/r1/agents/a/home \
             --remount-ro / --chdir /work/sub -- ./agent.sh --fast",
        );
        assert_eq!(got.argv, want);
        assert_eq!(got.pinned[3].path, Path::new("/work/out2/build"), "opened at its real place, shown where named");
        assert_eq!(got.env, pairs(&[("HOME", "/work/.awf/runs/r1/agents/a/home")]));
    }

    #[test]
    fn a_listed_network_keeps_no_net_of_its_own_and_runs_the_program_under_the_bridge() {
        use crate::sandbox::net::Target;
        let policy = Policy { network: Network::List(vec!["127.0.0.1:8080".into()]), ..Default::default() };
        let net = Net {
            allow: vec![
                Target { host: "api.anthropic.com".into(), port: 443 },
                Target { host: "127.0.0.1".into(), port: 8080 },
            ],
            socket: "/work/.awf/runs/r1/agents/a/net.sock".into(),
        };
        let mut seat = seat();
        seat.exposed.clear();
        seat.git.clear();
        seat.masked.clear();
        seat.system.clear();
        seat.env = vec![("HTTP_PROXY".into(), "http://operator-proxy:1".into())];
        let got = wrap(Path::new("/usr/bin/bwrap"), &policy, &seat, Some(&net), &[], &words("claude -p hi"));
        let want = words(
            "/usr/bin/bwrap --unshare-all --die-with-parent --new-session \
             --dev /dev --proc /proc --tmpfs /tmp --bind-fd 3 /work \
             --ro-bind /opt/awf/bin/awf /opt/awf/bin/awf \
             --ro-bind /work/.awf/runs/r1/agents/a /work/.awf/runs/r1/agents/a \
             --bind /work/.awf/runs/r1/agents/a/state /work/.awf/runs/r1/agents/a/state \
             --bind /work/.awf/runs/r1/agents/a/home /work/.awf/runs/r1/agents/a/home \
             --remount-ro / --chdir /work/sub -- \
             /opt/awf/bin/awf sandbox-bridge --socket /work/.awf/runs/r1/agents/a/net.sock --proxy-port 3128 \
             --forward 127.0.0.1:8080 -- claude -p hi",
        );
        assert_eq!(got.argv, want);
        let proxy = "http://127.0.0.1:3128";
        assert_eq!(
            got.env,
            pairs(&[
                ("HTTP_PROXY", proxy),
                ("HOME", "/work/.awf/runs/r1/agents/a/home"),
                ("HTTPS_PROXY", proxy),
                ("https_proxy", proxy),
                ("http_proxy", proxy),
            ]),
            "the bridge's proxy replaces any the operator let in"
        );
    }

    #[test]
    fn no_value_of_a_variable_is_on_the_command_line() {
        let mut seat = seat();
        seat.env.push(("OPENAI_API_KEY".into(), "sk-test-0123456789".into()));
        seat.env.push(("TZ".into(), "Europe/Paris now".into()));
        let vars = [("AWF_SCHEMA".to_string(), "{\"a\": 1}".to_string())];
        let got = wrap(Path::new("/b"), &Policy::default(), &seat, None, &vars, &[]);
        for (name, value) in &got.env {
            assert!(
                !got.argv.iter().any(|w| w.contains(value.as_str()) && name != "HOME"),
                "{name} is in {:?}",
                got.argv
            );
        }
        assert!(!got.argv.iter().any(|w| w == "--setenv" || w == "--clearenv"), "{:?}", got.argv);
        assert!(got.env.contains(&("OPENAI_API_KEY".into(), "sk-test-0123456789".into())));
        assert!(got.env.contains(&("TZ".into(), "Europe/Paris now".into())), "values with spaces stay whole");
        assert_eq!(got.argv.last().map(String::as_str), Some("--"));
    }

    #[test]
    fn the_turn_variables_replace_any_of_the_same_name() {
        let mut seat = seat();
        seat.env = vec![("AWF_OP".into(), "forged".into()), ("HOME".into(), "/root".into())];
        let got = wrap(Path::new("/b"), &Policy::default(), &seat, None, &vars(), &[]);
        assert_eq!(
            got.env,
            pairs(&[
                ("AWF_OP", "a-1"),
                ("HOME", "/work/.awf/runs/r1/agents/a/home"),
                ("AWF_LAUNCHER", "/work/.awf/runs/r1/agents/a/wf"),
            ])
        );
    }

    #[test]
    fn the_probe_runs_bwrap_itself_in_every_namespace() {
        assert_eq!(
            probe_argv(Path::new("/usr/bin/bwrap")),
            words(
                "/usr/bin/bwrap --unshare-all --die-with-parent --new-session --ro-bind / / --dev /dev \
                 --proc /proc --tmpfs /tmp -- /usr/bin/bwrap --version"
            )
        );
    }
}
