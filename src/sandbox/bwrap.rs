//! The bubblewrap provider: ONE pure function turns a policy and an agent's seat into the `bwrap`
//! argv that wraps its program and the environment bwrap is started with. No I/O: `seat.rs` found
//! the paths, the harness spawns the argv with that environment and nothing else.

use super::net::Net;
use super::policy::{Network, Policy};
use super::seat::Seat;
use std::path::Path;

fn bind(a: &mut Vec<String>, how: &str, p: &Path) {
    a.extend([how.to_string(), text(p), text(p)]);
}

fn text(p: &Path) -> String {
    // `seat` refuses paths that are not UTF-8, so nothing is lost here.
    p.display().to_string()
}

/// What runs a program in the sandbox: bwrap's argv and the whole environment bwrap starts with.
#[derive(Debug, Clone, PartialEq)]
pub struct Wrapped {
    /// `bwrap`, its options, `--`, then the program: paths and flags, never a variable's value.
    pub argv: Vec<String>,
    /// The only variables bwrap gets (spawn it with a cleared environment plus these); bwrap
    /// passes them on to the program. Values travel here rather than as `--setenv NAME VALUE`,
    /// because any local user can read a process's argv in `/proc/<pid>/cmdline`, while its
    /// environment is readable by its own user only.
    pub env: Vec<(String, String)>,
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
    // Mounts apply in argv order, and a later mount covers whatever an earlier one put at the same
    // place or beneath it. So: the widest and least trusted first, each later step carving out
    // what the agent may see or write.
    // 1. The host's root, read-only.
    bind(&mut a, "--ro-bind", Path::new("/"));
    // 2. Private /dev, /proc and /tmp: nothing of the host's /tmp (other users' sockets) shows.
    a.extend(["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"].map(String::from));
    // 3. The operator's home folders become empty tmpfs: their keys and sessions are not readable.
    for h in &seat.hidden {
        a.extend(["--tmpfs".to_string(), text(h)]);
    }
    // 4. What the program needs from under those folders (a pyenv shim, a CLI in ~/.local), read-only.
    for e in &seat.exposed {
        bind(&mut a, "--ro-bind", &e.path);
    }
    // 5. The policy's extra read-only binds.
    for p in &policy.read_only {
        bind(&mut a, "--ro-bind", p);
    }
    // 6. The writable area: the workspace (shared by every agent of a run-level sandbox) and the
    //    policy's writable folders. After the hidden homes, so a workspace inside one still shows.
    bind(&mut a, "--bind", &seat.workspace);
    for p in &policy.writable {
        bind(&mut a, "--bind", p);
    }
    // 7. The run records are hidden even when they lie inside the workspace: agents answer through
    //    their socket, never by writing records.
    if let Some(r) = &seat.records {
        a.extend(["--tmpfs".to_string(), text(r)]);
    }
    // 8. The agent's control folder (socket, launcher) and the awf binary the launcher execs,
    //    read-only, after the workspace and the records so that neither covers them.
    for c in &seat.control {
        bind(&mut a, "--ro-bind", c);
    }
    bind(&mut a, "--ro-bind", &seat.awf);
    // 9. Last, the agent's own writable folders inside its control folder: its state and its home.
    bind(&mut a, "--bind", &seat.state);
    bind(&mut a, "--bind", &seat.home);
    a.extend(["--chdir".to_string(), text(&seat.cwd), "--".to_string()]);
    match net {
        Some(n) => a.extend(n.bridge(&seat.awf, program)),
        None => a.extend(program.iter().cloned()),
    }
    Wrapped { argv: a, env }
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
    use crate::sandbox::seat::Exposure;
    use std::path::PathBuf;

    fn seat() -> Seat {
        let agent = PathBuf::from("/work/.awf/runs/r1/agents/a");
        Seat {
            hidden: vec!["/root".into(), "/home".into()],
            exposed: vec![Exposure { path: "/root/.pyenv".into(), needed_by: "/root/.pyenv/shims/python3".into() }],
            workspace: "/work".into(),
            records: Some("/work/.awf/runs".into()),
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
    fn the_default_policy_has_no_network_and_only_the_listed_environment() {
        let got =
            wrap(Path::new("/usr/bin/bwrap"), &Policy::default(), &seat(), None, &vars(), &words("python3 agent.py"));
        let want = words(
            "/usr/bin/bwrap --unshare-all --die-with-parent --new-session \
             --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp \
             --tmpfs /root --tmpfs /home \
             --ro-bind /root/.pyenv /root/.pyenv \
             --bind /work /work \
             --tmpfs /work/.awf/runs \
             --ro-bind /work/.awf/runs/r1/agents/a /work/.awf/runs/r1/agents/a \
             --ro-bind /opt/awf/bin/awf /opt/awf/bin/awf \
             --bind /work/.awf/runs/r1/agents/a/state /work/.awf/runs/r1/agents/a/state \
             --bind /work/.awf/runs/r1/agents/a/home /work/.awf/runs/r1/agents/a/home \
             --chdir /work/sub -- python3 agent.py",
        );
        assert_eq!(got.argv, want);
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
    }

    #[test]
    fn network_host_shares_the_net_and_extra_binds_keep_their_places() {
        let policy = Policy {
            network: Network::Host,
            writable: vec!["/data/out".into()],
            read_only: vec!["/root/.config/tool".into()],
            ..Default::default()
        };
        let mut seat = seat();
        seat.exposed.clear();
        seat.records = None;
        seat.hidden = vec!["/root".into()];
        seat.control.push("/tmp/awf-0123456789".into());
        seat.env.clear();
        let got = wrap(Path::new("/usr/bin/bwrap"), &policy, &seat, None, &[], &words("./agent.sh --fast"));
        let want = words(
            "/usr/bin/bwrap --unshare-all --share-net --die-with-parent --new-session \
             --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp \
             --tmpfs /root \
             --ro-bind /root/.config/tool /root/.config/tool \
             --bind /work /work --bind /data/out /data/out \
             --ro-bind /work/.awf/runs/r1/agents/a /work/.awf/runs/r1/agents/a \
             --ro-bind /tmp/awf-0123456789 /tmp/awf-0123456789 \
             --ro-bind /opt/awf/bin/awf /opt/awf/bin/awf \
             --bind /work/.awf/runs/r1/agents/a/state /work/.awf/runs/r1/agents/a/state \
             --bind /work/.awf/runs/r1/agents/a/home /work/.awf/runs/r1/agents/a/home \
             --chdir /work/sub -- ./agent.sh --fast",
        );
        assert_eq!(got.argv, want);
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
        seat.records = None;
        seat.hidden = vec!["/root".into()];
        seat.env = vec![("HTTP_PROXY".into(), "http://operator-proxy:1".into())];
        let got = wrap(Path::new("/usr/bin/bwrap"), &policy, &seat, Some(&net), &[], &words("claude -p hi"));
        let want = words(
            "/usr/bin/bwrap --unshare-all --die-with-parent --new-session \
             --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp \
             --tmpfs /root \
             --bind /work /work \
             --ro-bind /work/.awf/runs/r1/agents/a /work/.awf/runs/r1/agents/a \
             --ro-bind /opt/awf/bin/awf /opt/awf/bin/awf \
             --bind /work/.awf/runs/r1/agents/a/state /work/.awf/runs/r1/agents/a/state \
             --bind /work/.awf/runs/r1/agents/a/home /work/.awf/runs/r1/agents/a/home \
             --chdir /work/sub -- \
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
