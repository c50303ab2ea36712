//! The dashboard of `awf serve`: its sign-in link, cookie and Origin checks and its JSON, over
//! plain HTTP.

use crate::common;

use common::serve::{serve, wait_until, Serve};
use common::Env;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;

/// A writer parked behind a checkpoint, one turn once it is answered, then an agent that hangs
/// until the run is stopped.
const WORKFLOW: &str = r#"
let w = ctx.agents.open(#{ key: "writer" });
let a = ctx.checkpoint("Ship it?", #{ type: "object", properties: #{ ship: #{ type: "boolean" } }, required: ["ship"] });
let d = w.ask("Draft the release note");
let s = ctx.agents.open(#{ key: "stuck" });
s.ask("wait")
"#;
const RESPONDER: &str = r#"fn respond(turn) {
    if turn.agent == "stuck" { return #{ hang: true }; }
    #{ answer: "the drafted note", delay_ms: 200, usage: #{ input_tokens: 12, output_tokens: 7 } }
}"#;

/// One request with exactly `headers`; the status, the response head and the body.
fn raw(s: &Serve, method: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String, String) {
    let common::serve::Addr::Tcp(port) = s.addr else { panic!("a TCP serve") };
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to awf serve");
    stream.set_read_timeout(Some(common::TIMEOUT)).expect("a read timeout");
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: 0\r\n");
    for (name, value) in headers {
        req.push_str(&format!("{name}: {value}\r\n"));
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes()).expect("send");
    let mut text = String::new();
    stream.read_to_string(&mut text).expect("read the response");
    let (head, body) = text.split_once("\r\n\r\n").expect("a response head");
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).expect("a status code");
    (status, head.to_string(), body.to_string())
}

#[test]
fn the_sign_in_link_sets_a_strict_cookie_and_changes_need_this_servers_origin() {
    let env = Env::new();
    env.with_responder(RESPONDER);
    env.write("wf.rhai", WORKFLOW);
    let s = serve(&env, &[]);
    let host = s.host();
    let h = host.as_str();
    let id = s.start(json!({ "script": "wf.rhai" }));

    // A wrong token: 401 and nothing more.
    let (status, _, body) = raw(&s, "GET", "/login?token=not-the-token", &[("Host", h)]);
    assert_eq!((status, body.as_str()), (401, ""));
    let (status, _, body) = raw(&s, "GET", "/login", &[("Host", h)]);
    assert_eq!((status, body.as_str()), (401, ""));
    // Without the cookie or the token the page itself is refused.
    assert_eq!(raw(&s, "GET", "/", &[("Host", h)]).0, 401);
    assert_eq!(raw(&s, "GET", "/dashboard/runs", &[("Host", h), ("Cookie", "awf_session_1=x")]).0, 401);

    let (status, head, _) = raw(&s, "GET", &format!("/login?token={}", s.token), &[("Host", h)]);
    assert_eq!(status, 303, "{head}");
    assert!(head.lines().any(|l| l.eq_ignore_ascii_case("location: /")), "{head}");
    let set = head.lines().find(|l| l.to_ascii_lowercase().starts_with("set-cookie:")).expect("a cookie");
    assert!(set.contains("HttpOnly") && set.contains("SameSite=Strict") && set.contains("Path=/"), "{set}");
    assert!(!set.contains(&s.token), "the cookie is not the token: {set}");
    let cookie = set.split_once(':').map(|(_, v)| v).unwrap_or_default().split(';').next().unwrap_or_default().trim();
    let cookie = cookie.to_string();
    let with = [("Host", h), ("Cookie", cookie.as_str())];

    let (status, head, body) = raw(&s, "GET", "/", &with);
    assert_eq!(status, 200, "{head}");
    assert!(body.contains("<script src=\"/dashboard.js\">"), "{body}");
    assert!(head.to_ascii_lowercase().contains("x-frame-options: deny"), "{head}");
    let (status, _, body) = raw(&s, "GET", "/dashboard/runs", &with);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(&id), "{body}");
    s.until(&id, "waiting");
    let (status, _, body) = raw(&s, "GET", &format!("/runs/{id}/view"), &with);
    assert_eq!(status, 200, "{body}");
    let view: Value = serde_json::from_str(&body).expect("the view is JSON");
    assert_eq!(view["checkpoints"][0]["question"], "Ship it?", "{view}");
    assert_eq!(view["agents"][0]["key"], "writer", "{view}");
    assert_eq!(view["agents"][0]["state"], "idle", "{view}");
    let (status, _, body) = raw(&s, "GET", "/runs/no-such-run/view", &with);
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("no run no-such-run in"), "{body}");

    // A change signed in by the cookie: refused without an Origin, or with another site's; the
    // Host is checked as before.
    let stop = format!("/runs/{id}/stop");
    let (status, _, body) = raw(&s, "POST", &stop, &with);
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("Origin"), "{body}");
    let foreign = [("Host", h), ("Cookie", cookie.as_str()), ("Origin", "http://evil.example")];
    assert_eq!(raw(&s, "POST", &stop, &foreign).0, 403);
    let rebound = [("Host", "evil.example"), ("Cookie", cookie.as_str())];
    assert_eq!(raw(&s, "GET", "/", &rebound).0, 421);
    assert_eq!(s.listed_status(&id), "waiting", "nothing refused reached the run");
    let origin = format!("http://{h}");
    let own = [("Host", h), ("Cookie", cookie.as_str()), ("Origin", origin.as_str())];
    let (status, _, body) = raw(&s, "POST", &stop, &own);
    assert_eq!(status, 202, "{body}");
    s.until(&id, "cancelled");
    // A bearer client still needs no Origin (curl).
    let (status, _) = s.request("GET", "/dashboard/runs", None);
    assert_eq!(status, 200);
}

#[test]
fn a_token_from_the_environment_signs_in_but_is_never_printed() {
    let env = Env::new();
    let port = common::serve::free_port();
    let listen = format!("127.0.0.1:{port}");
    let token = "an-operators-token-kept-out-of-logs";
    let mut cmd = common::command(env.path(), &["serve", "--listen", &listen]);
    cmd.env("AWF_SERVE_TOKEN", token);
    let s = common::serve::start(&env, cmd, common::serve::Addr::Tcp(port), |_| Some(token.to_string()));
    wait_until("the dashboard line", || s.stderr().contains("awf: dashboard: "));
    assert!(!s.stderr().contains(token), "{}", s.stderr());
    assert!(
        s.stderr().contains(&format!("http://{listen}/login?token=TOKEN (with AWF_SERVE_TOKEN's value)")),
        "{}",
        s.stderr()
    );
    let host = s.host();
    let (status, head, _) = raw(&s, "GET", &format!("/login?token={token}"), &[("Host", host.as_str())]);
    assert_eq!(status, 303, "{head}");
}
