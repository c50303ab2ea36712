//! `awf serve` safe by default (issue 10): tried as another local user or a web page would, each
//! attack is refused: no or a wrong token, a foreign Host or Origin, scripts outside the script
//! folder, errors that would show another file's lines, a socket or token file others could open.

use crate::common;

use common::serve::{serve, start, Addr};
use common::{file_mode, free_port, Env};
use serde_json::{json, Value};
use std::process::Command;

const WF: &str = "fn run(args) { 42 }\n";

#[test]
fn requests_without_the_right_token_get_401_and_no_detail() {
    let env = Env::new();
    env.write("wf.rhai", WF);
    let s = serve(&env, &[]);
    assert_eq!(s.token.len(), 64, "a generated token of 64 hex digits: {:?}", s.token);
    let host = s.host();
    let wrong = format!("Bearer {}x", s.token);
    let basic = format!("Basic {}", s.token);
    for auth in [None, Some("Bearer nope"), Some(wrong.as_str()), Some(basic.as_str()), Some("Bearer")] {
        let mut headers = vec![("Host", host.as_str())];
        headers.extend(auth.map(|a| ("Authorization", a)));
        for (method, path, body) in [("GET", "/runs", None), ("POST", "/runs", Some(json!({ "script": "wf.rhai" })))] {
            let (status, text) = s.send(method, path, &headers, body.as_ref());
            assert_eq!(status, 401, "{method} {path} with {auth:?}: {text}");
            assert!(text.trim().is_empty(), "a 401 says nothing more: {text}");
        }
    }
    // Unknown paths are behind the token too.
    let (status, _) = s.send("GET", "/nothing", &[("Host", &host)], None);
    assert_eq!(status, 401);
    assert!(env.run_dirs().is_empty(), "no run started without the token");

    let id = s.start(json!({ "script": "wf.rhai" }));
    assert_eq!(s.until(&id, "succeeded")["value"], 42);
}

#[test]
fn a_foreign_host_gets_421_before_the_token_is_looked_at() {
    let env = Env::new();
    env.write("wf.rhai", WF);
    let s = serve(&env, &[]);
    let Addr::Tcp(port) = s.addr else { unreachable!("a TCP server") };
    let auth = format!("Bearer {}", s.token);
    for host in [format!("attacker.example:{port}"), format!("localhost:{}", port + 1), "localhost".into()] {
        let (status, text) = s.send("GET", "/runs", &[("Host", &host), ("Authorization", &auth)], None);
        assert_eq!(status, 421, "Host {host}: {text}");
        let (status, _) = s.send("GET", "/runs", &[("Host", &host)], None);
        assert_eq!(status, 421, "Host {host} is checked first, without a token too");
    }
    let (status, _) = s.send("GET", "/runs", &[("Authorization", &auth)], None);
    assert_eq!(status, 421, "no Host at all");
    for host in [format!("127.0.0.1:{port}"), format!("LOCALHOST:{port}")] {
        let (status, text) = s.send("GET", "/runs", &[("Host", &host), ("Authorization", &auth)], None);
        assert_eq!(status, 200, "Host {host}: {text}");
    }
}

#[test]
fn a_foreign_origin_gets_403_before_the_token_is_looked_at() {
    let env = Env::new();
    env.write("wf.rhai", WF);
    let s = serve(&env, &[]);
    let Addr::Tcp(port) = s.addr else { unreachable!("a TCP server") };
    let host = s.host();
    let auth = format!("Bearer {}", s.token);
    let body = json!({ "script": "wf.rhai" });
    for origin in [format!("http://attacker.example:{port}"), "null".into(), format!("https://localhost:{port}")] {
        let (status, text) =
            s.send("POST", "/runs", &[("Host", &host), ("Origin", &origin), ("Authorization", &auth)], Some(&body));
        assert_eq!(status, 403, "Origin {origin}: {text}");
        let (status, _) = s.send("POST", "/runs", &[("Host", &host), ("Origin", &origin)], Some(&body));
        assert_eq!(status, 403, "Origin {origin} is checked before the token");
    }
    assert!(env.run_dirs().is_empty(), "no run started from a foreign origin");
    for origin in [format!("http://localhost:{port}"), format!("http://127.0.0.1:{port}")] {
        let (status, text) =
            s.send("GET", "/runs", &[("Host", &host), ("Origin", &origin), ("Authorization", &auth)], None);
        assert_eq!(status, 200, "the server's own origin {origin}: {text}");
    }
}

/// POSTs `script` and returns the 400's body, which must hold no secret line.
fn refused(s: &common::serve::Serve, script: &str, needle: &str) -> String {
    let (status, text) = s.request("POST", "/runs", Some(&json!({ "script": script })));
    assert_eq!(status, 400, "{script}: {text}");
    assert!(!text.contains("SECRET"), "{script}: the body shows a file's text: {text}");
    assert!(text.contains(needle), "{script}: {needle:?} not in {text}");
    text
}

#[test]
fn scripts_outside_the_folder_are_refused_without_their_text() {
    let outside = Env::new();
    let secret = outside.write("x.rhai", "let = SECRET-OUTSIDE-LINE;\n");
    let env = Env::new();
    env.write("notes.txt", "SECRET-INSIDE-LINE\n");
    env.write("wf.rhai", WF);
    std::os::unix::fs::symlink(&secret, env.path().join("link.rhai")).expect("symlink out");
    std::os::unix::fs::symlink(env.path().join("notes.txt"), env.path().join("alias.rhai")).expect("symlink in");
    let s = serve(&env, &[]);
    let rel_outside = format!("../{}/x.rhai", outside.path().file_name().and_then(|n| n.to_str()).expect("a name"));
    refused(&s, secret.to_str().expect("utf-8"), "absolute paths");
    refused(&s, "/etc/passwd", "absolute paths");
    refused(&s, &rel_outside, "`..`");
    refused(&s, "sub/../wf.rhai", "`..`");
    refused(&s, "notes.txt", "only .rhai files");
    refused(&s, "link.rhai", "outside the server's script folder");
    refused(&s, "alias.rhai", "not a .rhai script");
    refused(&s, "", "empty");
    assert!(env.run_dirs().is_empty());
}

#[test]
fn errors_show_lines_of_the_script_folder_only() {
    let env = Env::new();
    // The user's strategies folder is outside the script folder: its lines stay private (the
    // errors are made to stop before the secret, since a message may quote the token it stops at).
    env.write(".xdg-config/awf/strategies/helper.rhai", "fn help() { let = \"SECRET-HELPER-LINE\"; }\n");
    env.write(
        ".xdg-config/awf/strategies/broken.rhai",
        "export const META = #{ kind: \"strategy\", = \"SECRET-META-LINE\" };\n",
    );
    let scripts = env.path().join("work");
    env.write("work/uses.rhai", "import \"helper\" as h;\nfn run(args) { h::help() }\n");
    env.write("work/bad.rhai", "fn run(args) {\n  let x = = 1; // INSIDE-LINE\n}\n");
    env.write("work/sub/other.rhai", WF);
    let s = serve(&env, &["--scripts", scripts.to_str().expect("utf-8")]);

    let text = refused(&s, "uses.rhai", "helper.rhai:1:");
    assert!(!text.contains("let ="), "no line of the import: {text}");
    // A file inside the folder shows its offending line.
    let (status, text) = s.request("POST", "/runs", Some(&json!({ "script": "bad.rhai" })));
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("INSIDE-LINE"), "{text}");
    // Scripts are named relative to --scripts.
    s.until(&s.start(json!({ "script": "sub/other.rhai" })), "succeeded");

    let (status, catalog) = s.json("GET", "/strategies", None);
    assert_eq!(status, 200);
    let broken = catalog["strategies"].as_array().expect("a list").iter().find(|x| x["name"] == "broken");
    let broken = broken.expect("the broken strategy is listed");
    assert!(broken["error"].as_str().is_some_and(|e| e.contains("broken.rhai:1:")), "{broken}");
    assert!(!catalog.to_string().contains("SECRET"), "{catalog}");
    let (status, text) = s.request("POST", "/runs", Some(&json!({ "strategy": "broken", "task": "x" })));
    assert_eq!(status, 400, "{text}");
    assert!(!text.contains("SECRET"), "{text}");

    // The operator's own terminal still shows every line.
    env.awf(&["script", "run", "work/uses.rhai"]).expect_code(2).stderr_has("SECRET-HELPER-LINE");
}

#[test]
fn the_token_file_is_private_under_umask_000_and_awf_serve_token_is_honoured() {
    let env = Env::new();
    let s = under_umask_000(&env, &[], None);
    let file = env.path().join(".awf/serve.token");
    assert_eq!(file_mode(&file), 0o600);
    assert_eq!(file_mode(&env.path().join(".awf")), 0o700);
    assert_eq!(s.token.len(), 64);
    assert!(s.stderr().contains(&format!("the token is in {}", file.display())), "{}", s.stderr());
    assert_eq!(s.json("GET", "/runs", None).0, 200);
    drop(s);

    let s = under_umask_000(&env, &["--token-file", "keys/serve.tok"], None);
    assert_eq!(file_mode(&env.path().join("keys/serve.tok")), 0o600);
    assert_eq!(file_mode(&env.path().join("keys")), 0o700);
    assert_eq!(s.json("GET", "/runs", None).0, 200);
    drop(s);

    let env = Env::new();
    let s = under_umask_000(&env, &[], Some("a-token-of-the-operators-choice"));
    assert_eq!(s.token, "a-token-of-the-operators-choice");
    assert_eq!(s.json("GET", "/runs", None).0, 200);
    assert!(!env.path().join(".awf/serve.token").exists(), "no token file when AWF_SERVE_TOKEN gives it");
    assert!(s.stderr().contains("AWF_SERVE_TOKEN"), "{}", s.stderr());

    let child = common::command(env.path(), &["serve", "--listen", "127.0.0.1:0"])
        .env("AWF_SERVE_TOKEN", "short")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn awf serve");
    common::wait_with_timeout(child).expect_code(2).stderr_has("AWF_SERVE_TOKEN is too short");
}

/// `awf serve EXTRA` started by `sh` under umask 000; on TCP unless EXTRA names `--socket`.
fn under_umask_000(env: &Env, extra: &[&str], token: Option<&str>) -> common::serve::Serve {
    let socket = extra.iter().position(|a| *a == "--socket").map(|i| env.path().join(extra[i + 1]));
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut args: Vec<&str> = vec!["-c", "umask 000; exec \"$0\" \"$@\"", common::bin(), "serve"];
    if socket.is_none() {
        args.extend(["--listen", &listen]);
    }
    args.extend_from_slice(extra);
    let mut cmd = Command::new("sh");
    cmd.args(&args)
        .current_dir(env.path())
        .env("XDG_CONFIG_HOME", env.path().join(".xdg-config"))
        .env("NO_COLOR", "1")
        .env_remove("AWF_RUNTIME")
        .env_remove("AWF_SERVE_TOKEN")
        .stdin(std::process::Stdio::null());
    if let Some(token) = token {
        cmd.env("AWF_SERVE_TOKEN", token);
    }
    let file = match extra.iter().position(|a| *a == "--token-file") {
        Some(i) => env.path().join(extra[i + 1]),
        None => env.path().join(".awf/serve.token"),
    };
    let given = token.map(String::from);
    let addr = match socket {
        Some(path) => Addr::Unix(path),
        None => Addr::Tcp(port),
    };
    start(env, cmd, addr, move |_| given.clone().or_else(|| std::fs::read_to_string(&file).ok()))
}

/// Makes `rel` (under `env`) a folder others may read and enter.
fn open_folder(env: &Env, rel: &str) -> std::path::PathBuf {
    let dir = env.path().join(rel);
    std::fs::create_dir_all(&dir).expect("create a folder");
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod 755");
    dir
}

#[test]
fn the_socket_is_private_under_umask_000_and_needs_no_token() {
    // The default place: .awf/ was readable by others, and is made private.
    let env = Env::new();
    env.write("wf.rhai", WF);
    let awf_dir = open_folder(&env, ".awf");
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "umask 000; exec \"$0\" serve", common::bin()])
        .current_dir(env.path())
        .env("XDG_CONFIG_HOME", env.path().join(".xdg-config"))
        .env_remove("AWF_RUNTIME")
        .stdin(std::process::Stdio::null());
    let sock = awf_dir.join("serve.sock");
    let s = start(&env, cmd, Addr::Unix(sock.clone()), |_| None);
    assert_eq!(file_mode(&sock), 0o600);
    assert_eq!(file_mode(&awf_dir), 0o700);
    let id = s.start(json!({ "script": "wf.rhai" }));
    assert_eq!(s.until(&id, "succeeded")["value"], 42);

    // Something that is not a socket is never removed to make room.
    env.write("precious.txt", "keep me");
    env.awf(&["serve", "--socket", "precious.txt"]).expect_code(2).stderr_has("is not a socket");
    assert_eq!(std::fs::read_to_string(env.path().join("precious.txt")).expect("still there"), "keep me");
    drop(s);

    // A chosen place in a folder others may enter: the socket itself is 0600, and the private
    // folder it was bound in is gone.
    let env = Env::new();
    let socks = open_folder(&env, "socks");
    let s = under_umask_000(&env, &["--socket", "socks/serve.sock"], None);
    assert_eq!(file_mode(&socks.join("serve.sock")), 0o600);
    let names: Vec<String> = std::fs::read_dir(&socks)
        .expect("read the folder")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["serve.sock".to_string()]);
    let (status, v): (u16, Value) = s.json("GET", "/runs", None);
    assert_eq!(status, 200, "{v}");
}

#[test]
fn a_broken_config_file_shows_no_line_to_a_client() {
    let env = Env::new();
    env.write("wf.rhai", WF);
    env.write(".xdg-config/awf/config.toml", "api_key = = \"SECRET-CONFIG-LINE\"\n");
    let s = serve(&env, &[]);
    let text = refused(&s, "wf.rhai", "config.toml: TOML parse error at line 1");
    assert!(!text.contains("api_key"), "{text}");
    // The operator's terminal shows it whole.
    env.awf(&["script", "run", "wf.rhai"]).stderr_has("SECRET-CONFIG-LINE");
}

#[test]
fn bad_serve_options_are_refused() {
    let env = Env::new();
    env.write("file.txt", "x");
    let cases: [(&[&str], Option<&str>, &str); 4] = [
        (&["--scripts", "missing"], None, "--scripts"),
        (&["--scripts", "file.txt"], None, "not a folder"),
        (&["--listen", "127.0.0.1:0"], Some("has a space in it"), "printable ASCII without spaces"),
        (&["--token-file", "t"], None, "--listen"),
    ];
    for (args, token, needle) in cases {
        let mut cmd = common::command(env.path(), &[&["serve"], args].concat());
        cmd.env_remove("AWF_SERVE_TOKEN").stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
        if let Some(token) = token {
            cmd.env("AWF_SERVE_TOKEN", token);
        }
        common::wait_with_timeout(cmd.spawn().expect("spawn awf serve")).expect_code(2).stderr_has(needle);
    }
}

#[test]
fn ctrl_c_removes_the_token_file() {
    let env = Env::new();
    let s = serve(&env, &[]);
    let file = env.path().join(".awf/serve.token");
    assert!(file.is_file());
    common::signal(s.child.id(), "-INT");
    common::wait_until("the token file removed", || !file.exists());
}
