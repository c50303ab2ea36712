//! The dashboard of `awf serve` in a real browser: headless Chromium (Debian's `chromium`, which
//! `.ci/setup` installs) driven over the DevTools protocol from this test signs in with the link
//! serve prints, follows a slow fake run, answers its checkpoint and stops it through the page
//! (another site's page cannot), and leaves a screenshot; and its token and Origin checks and its
//! JSON over plain HTTP. `dashboard_sign_in.rs` tries the sign-in from another port.

use crate::common;

use common::chrome::Chrome;
use common::serve::{serve, Serve};
use common::{wait_until, Env};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

/// A writer parked behind a checkpoint, one turn once it is answered, then an agent that hangs
/// until the run is stopped.
pub(crate) const WORKFLOW: &str = r#"
let w = ctx.agents.open(#{ key: "writer" });
let a = ctx.checkpoint("Ship it?", #{ type: "object", properties: #{ ship: #{ type: "boolean" } }, required: ["ship"] });
let d = w.ask("Draft the release note");
let s = ctx.agents.open(#{ key: "stuck" });
s.ask("wait")
"#;
pub(crate) const RESPONDER: &str = r#"fn respond(turn) {
    if turn.agent == "stuck" { return #{ hang: true }; }
    #{ answer: "the drafted note", delay_ms: 200, usage: #{ input_tokens: 12, output_tokens: 7 } }
}"#;

/// A web server of another origin on 127.0.0.1 (a thread, for the test's life) whose one page
/// says `another site`; its port.
fn another_site() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let port = listener.local_addr().expect("its address").port();
    std::thread::spawn(move || {
        for stream in listener.incoming().map_while(Result::ok) {
            let mut reader = BufReader::new(&stream);
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let page = "<p>another site</p>";
            let _ = write!(
                &stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                page.len()
            );
        }
    });
    port
}

/// The sign-in link serve printed on stderr.
pub(crate) fn login_url(s: &Serve) -> String {
    let mut url = String::new();
    wait_until("the dashboard link on serve's stderr", || {
        let err = s.stderr();
        let found = err.lines().find_map(|l| l.strip_prefix("awf: dashboard: ")).map(String::from);
        url = found.unwrap_or_default();
        !url.is_empty()
    });
    url
}

#[test]
#[ignore = "needs Debian's chromium (.ci/setup installs it; the README's test command runs this)"]
fn the_dashboard_follows_a_run_answers_its_checkpoint_and_stops_it_in_chromium() {
    let env = Env::new();
    env.with_responder(RESPONDER);
    env.write("wf.rhai", WORKFLOW);
    let s = serve(&env, &[]);
    let id = s.start(json!({ "script": "wf.rhai" }));
    let url = login_url(&s);
    assert!(url.contains(&s.token), "the link carries the token: {url}");

    let mut chrome = Chrome::launch();
    chrome.call("Page.navigate", json!({ "url": url }));
    // Signed in: the token has left the address bar for this tab's sessionStorage, and there is
    // no cookie.
    chrome.until(
        "the token out of the address",
        "location.pathname === '/' && location.hash === '' && location.search === ''",
    );
    assert_eq!(chrome.eval("sessionStorage.getItem('awf-serve-token')"), json!(s.token));
    assert_eq!(chrome.eval("document.cookie"), json!(""), "no cookie");
    let row = format!("document.querySelector('[data-run=\"{id}\"]')");
    chrome.until("the run listed", &format!("{row} !== null"));
    chrome.eval(&format!("{row}.querySelector('a').click(); true"));

    let agent = |key: &str| format!("(document.querySelector('#agents [data-agent=\"{key}\"]') || {{}}).dataset");
    chrome.until(
        "the writer idle, the checkpoint open",
        &format!(
            "({}||{{}}).state === 'idle' && document.querySelector('.checkpoint[data-key]') !== null",
            agent("writer")
        ),
    );
    assert_eq!(chrome.eval("document.getElementById('run-status').textContent"), json!("waiting"));
    chrome.eval(
        "document.querySelector('.checkpoint textarea').value = '{\"ship\": true}'; \
         document.querySelector('.checkpoint button.answer').click(); true",
    );
    chrome.until("the writer answered", &format!("({}||{{}}).state === 'answered'", agent("writer")));
    chrome.until("the stuck agent working", &format!("({}||{{}}).state === 'working'", agent("stuck")));
    let turns = chrome.eval("document.getElementById('turns').textContent");
    let turns = turns.as_str().unwrap_or_default();
    assert!(turns.contains("Draft the release note") && turns.contains("the drafted note"), "{turns}");
    let spend = chrome.eval("document.getElementById('spend-model').textContent");
    assert!(spend.as_str().is_some_and(|t| t.contains("fake") && t.contains("19")), "{spend}");
    chrome
        .until("live events over SSE", "document.getElementById('events').textContent.includes('checkpoint-answered')");
    // Without the token the page's own origin is refused too.
    let bare = chrome.eval("fetch('/dashboard/runs', { credentials: 'omit' }).then(r => r.status)");
    assert_eq!(bare, json!(401));

    let shot = chrome.call("Page.captureScreenshot", json!({ "format": "png" }));
    use base64::Engine;
    let data = shot["data"].as_str().expect("screenshot data");
    let png = base64::engine::general_purpose::STANDARD.decode(data).expect("base64");
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png");
    std::fs::write(&path, &png).expect("write the screenshot");
    println!("dashboard screenshot: {}", path.display());
    assert!(png.starts_with(b"\x89PNG"), "a PNG");

    // A page of another origin on this host (the same site) makes the browser post a stop:
    // refused (no token, and its Origin), and the run goes on.
    let common::serve::Addr::Tcp(port) = s.addr else { panic!("a TCP serve") };
    let other = another_site();
    chrome.call("Page.navigate", json!({ "url": format!("http://127.0.0.1:{other}/") }));
    chrome.until("the other site's page", "document.body !== null && document.body.textContent === 'another site'");
    let sent = chrome.eval(&format!(
        "fetch('http://127.0.0.1:{port}/runs/{id}/stop', {{ method: 'POST', mode: 'no-cors', credentials: 'include' }}).then(() => 'sent', e => String(e))"
    ));
    assert_eq!(sent, json!("sent"));
    assert_eq!(s.listed_status(&id), "running", "another site's stop must not reach the run");

    // Back on the dashboard (the tab keeps its token), the run opened from the address's #run=ID.
    chrome.call("Page.navigate", json!({ "url": format!("http://127.0.0.1:{port}/#run={id}") }));
    chrome.until("the run's page again", &format!("({}||{{}}).state === 'working'", agent("stuck")));
    chrome.eval("document.getElementById('stop').click(); true");
    chrome.until("the run cancelled on the page", "document.getElementById('run-status').textContent === 'cancelled'");
    let result = s.until(&id, "cancelled");
    assert_eq!(result["error"], "stopped over the API", "{result}");
}

/// One request with exactly `headers`; the status, the response head and the body.
pub(crate) fn raw(s: &Serve, method: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String, String) {
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
fn the_dashboards_json_needs_the_token_and_a_change_needs_no_origin_or_this_servers() {
    let env = Env::new();
    env.with_responder(RESPONDER);
    env.write("wf.rhai", WORKFLOW);
    let s = serve(&env, &[]);
    let host = s.host();
    let h = host.as_str();
    let id = s.start(json!({ "script": "wf.rhai" }));

    // Without the token (or with a wrong one) the data is refused; the page shell is not data.
    let wrong = "Bearer not-the-token".to_string();
    for headers in [vec![("Host", h)], vec![("Host", h), ("Authorization", wrong.as_str())]] {
        assert_eq!(raw(&s, "GET", "/dashboard/runs", &headers).0, 401);
        assert_eq!(raw(&s, "GET", &format!("/runs/{id}/view"), &headers).0, 401);
        assert_eq!(raw(&s, "GET", &format!("/runs/{id}/events"), &headers).0, 401);
    }
    let (status, head, body) = raw(&s, "GET", "/", &[("Host", h)]);
    assert_eq!(status, 200, "{head}");
    assert!(body.contains("<script src=\"/dashboard.js\">"), "{body}");
    assert!(!head.to_ascii_lowercase().contains("set-cookie"), "{head}");

    let auth = format!("Bearer {}", s.token);
    let with = [("Host", h), ("Authorization", auth.as_str())];
    let (status, head, body) = raw(&s, "GET", "/dashboard/runs", &with);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(&id), "{body}");
    assert!(!head.to_ascii_lowercase().contains("set-cookie"), "{head}");
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

    // A change with the token: refused from another site's Origin, and for a foreign Host.
    let stop = format!("/runs/{id}/stop");
    let foreign = [("Host", h), ("Authorization", auth.as_str()), ("Origin", "http://evil.example")];
    assert_eq!(raw(&s, "POST", &stop, &foreign).0, 403);
    let rebound = [("Host", "evil.example"), ("Authorization", auth.as_str())];
    assert_eq!(raw(&s, "POST", &stop, &rebound).0, 421);
    assert_eq!(s.listed_status(&id), "waiting", "nothing refused reached the run");
    // The page's own Origin passes (a browser sends it with a POST), and so does none (curl).
    let origin = format!("http://{h}");
    let own = [("Host", h), ("Authorization", auth.as_str()), ("Origin", origin.as_str())];
    let (status, _, body) = raw(&s, "POST", &stop, &own);
    assert_eq!(status, 202, "{body}");
    s.until(&id, "cancelled");
    let (status, _) = s.request("GET", "/dashboard/runs", None);
    assert_eq!(status, 200);
}

#[test]
fn a_token_from_the_environment_signs_in_but_is_never_printed() {
    let env = Env::new();
    let port = common::free_port();
    let listen = format!("127.0.0.1:{port}");
    let token = "an-operators-token-kept-out-of-logs";
    let mut cmd = common::command(env.path(), &["serve", "--listen", &listen]);
    cmd.env("AWF_SERVE_TOKEN", token);
    let s = common::serve::start(&env, cmd, common::serve::Addr::Tcp(port), |_| Some(token.to_string()));
    wait_until("the dashboard line", || s.stderr().contains("awf: dashboard: "));
    assert!(!s.stderr().contains(token), "{}", s.stderr());
    assert!(
        s.stderr().contains(&format!("http://{listen}/#token=TOKEN (with AWF_SERVE_TOKEN's value)")),
        "{}",
        s.stderr()
    );
    assert_eq!(s.json("GET", "/dashboard/runs", None).0, 200, "the token from the environment signs in");
}

#[test]
fn a_runs_view_shows_each_turn_with_its_prompt_answer_rejections_nudges_and_spend() {
    let env = Env::new();
    env.with_responder(
        r#"fn respond(turn) {
            if turn.rejection == () && turn.nudge == 0 { return #{ answer: #{ n: "one" } }; }
            if turn.nudge == 0 { return #{ silent: true }; }
            #{ answer: #{ n: 1 }, usage: #{ input_tokens: 3, output_tokens: 4 } }
        }"#,
    );
    env.write(
        "wf.rhai",
        r#"ctx.stage("count", || { ctx.agents.open(#{ key: "picky" }).ask("Count the files", #{ type: "object", properties: #{ n: #{ type: "integer" } }, required: ["n"] }); () })"#,
    );
    let s = serve(&env, &[]);
    let id = s.start(json!({ "script": "wf.rhai" }));
    s.until(&id, "succeeded");
    let (status, v) = s.json("GET", &format!("/runs/{id}/view"), None);
    assert_eq!(status, 200, "{v}");
    assert_eq!((v["status"].as_str(), v["script"].as_str()), (Some("succeeded"), Some("wf.rhai")), "{v}");
    assert!(v["duration_ms"].is_u64(), "{v}");
    assert_eq!(v["stages"], json!([{ "name": "count", "status": "succeeded" }]), "{v}");
    let agent = &v["agents"][0];
    assert_eq!((agent["key"].as_str(), agent["state"].as_str()), (Some("picky"), Some("answered")), "{agent}");
    let turn = &agent["turns"][0];
    assert!(turn["prompt"].as_str().is_some_and(|p| p.contains("Count the files")), "{turn}");
    assert_eq!(turn["answer"], json!({ "n": 1 }), "{turn}");
    assert_eq!(turn["outcome"], "answered", "{turn}");
    assert_eq!(turn["nudges"], 1, "{turn}");
    let rejections = turn["rejections"].as_array().expect("rejections");
    assert_eq!(rejections.len(), 1, "{turn}");
    assert!(rejections[0]["errors"][0].as_str().is_some_and(|e| e.contains("/n")), "{turn}");
    assert_eq!(v["spend_by_model"]["fake"]["tokens"], 7, "{v}");
    assert_eq!(v["spend_by_agent"]["picky"]["operations"], 1, "{v}");
}
