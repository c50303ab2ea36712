//! What a connection to an agent's socket may cost: a stranger is refused unread, connections past
//! the cap are closed at once, a slow frame is cut off, and a command waiting for its answer
//! (`ask`) holds no reading place and is not cut off.

use super::*;
use crate::control::messenger::{Held, MessageError, Messenger};
use crate::run::{BoxFuture, Event};
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::AsyncBufReadExt;

/// A messenger whose asks wait until `release` says true.
struct Waiter {
    release: tokio::sync::watch::Receiver<bool>,
}

impl Messenger for Waiter {
    fn send(&self, _: &str, _: &str) -> Result<u64, MessageError> {
        Ok(1)
    }
    fn ask(
        &self,
        _: &str,
        _: &str,
        _: Option<crate::run::deadline::Deadline>,
    ) -> BoxFuture<'static, Result<String, MessageError>> {
        let mut release = self.release.clone();
        Box::pin(async move {
            let _ = release.wait_for(|r| *r).await;
            Ok("the reply".into())
        })
    }
    fn reply(&self, _: u64, _: &str) -> Result<(), MessageError> {
        Ok(())
    }
    fn inbox(&self, _: bool) -> Vec<Held> {
        Vec::new()
    }
}

/// An agent's socket state with `refused` counting its `control-refused` events.
fn state(refused: &Arc<AtomicUsize>, messenger: Option<Arc<dyn Messenger>>, frame_time: Duration) -> Arc<State> {
    let count = refused.clone();
    let events: EventSink = Arc::new(move |e: &Event<'_>| {
        if matches!(e, Event::ControlRefused { .. }) {
            count.fetch_add(1, Ordering::SeqCst);
        }
    });
    let mut state = State::new(Control::new("victim", events, messenger));
    state.frame_time = frame_time;
    Arc::new(state)
}

fn frame(cmd: Command) -> Vec<u8> {
    request_line(cmd).into_bytes()
}

/// The response line on `client`, within 5 s.
async fn response(client: &mut BufReader<UnixStream>) -> Response {
    let mut line = String::new();
    tokio::time::timeout(Duration::from_secs(5), client.read_line(&mut line))
        .await
        .expect("an answer within 5 s")
        .expect("read the answer");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("not a response ({e}): {line:?}"))
}

#[tokio::test]
async fn a_stranger_is_refused_before_its_frame_is_read() {
    let refused = Arc::new(AtomicUsize::new(0));
    let state = state(&refused, None, FRAME_TIME);
    let (server, mut client) = UnixStream::pair().expect("a socket pair");
    // The whole frame is there before the socket looks: reading it first would take it.
    client.write_all(&frame(Command::Inbox { json: false, all: false })).await.expect("send");
    serve(server, state).await;
    let mut client = BufReader::new(client);
    let r = response(&mut client).await;
    assert_eq!(r.exit, exit::REFUSED, "{r:?}");
    assert!(r.text.contains("is not a process of agent victim's running turn"), "{r:?}");
    assert_eq!(refused.load(Ordering::SeqCst), 1, "the refusal is recorded");
    // A socket closed with bytes it never read resets its peer; one that read them all ends it.
    let mut rest = Vec::new();
    let after = client.read_to_end(&mut rest).await;
    assert_eq!(after.map_err(|e| e.kind()), Err(std::io::ErrorKind::ConnectionReset), "the frame was left unread");
}

#[tokio::test]
async fn a_slow_frame_is_cut_off_and_an_ask_waits_past_it_holding_no_reading_place() {
    let refused = Arc::new(AtomicUsize::new(0));
    let (release, rx) = tokio::sync::watch::channel(false);
    let frame_time = Duration::from_millis(300);
    let state = state(&refused, Some(Arc::new(Waiter { release: rx })), frame_time);
    let me = std::process::id() as i32;
    let _admitted = state.turns.spawning().admit(me);
    let connect = |state: &Arc<State>| {
        let (server, client) = UnixStream::pair().expect("a socket pair");
        tokio::spawn(serve(server, state.clone()));
        client
    };

    // More asks than reading places, each waiting for its reply.
    let mut asks = Vec::new();
    for _ in 0..MAX_READING + 1 {
        let mut c = connect(&state);
        c.write_all(&frame(Command::Ask { to: "peer".into(), text: "?".into() })).await.expect("send");
        asks.push(BufReader::new(c));
    }
    // A slow sender, whose frame never ends, is cut off.
    let mut slow = connect(&state);
    slow.write_all(b"{\"v\":1,").await.expect("send a part");
    let r = response(&mut BufReader::new(slow)).await;
    assert_eq!(r.exit, exit::ERROR, "{r:?}");
    assert!(r.text.contains("no whole frame within 300 ms"), "{r:?}");
    // Frames are still read while the asks wait: they hold no reading place.
    let mut quick = connect(&state);
    quick.write_all(&frame(Command::Inbox { json: false, all: false })).await.expect("send");
    assert_eq!(response(&mut BufReader::new(quick)).await.exit, exit::OK);
    // The asks outlived the frame time (the slow frame was cut off after their frames were read),
    // and are answered once their replies come.
    release.send(true).expect("release the asks");
    for mut a in asks {
        let r = response(&mut a).await;
        assert_eq!((r.exit, r.text.as_str()), (exit::OK, "the reply"), "{r:?}");
    }
    assert_eq!(refused.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn connections_past_the_cap_are_closed_at_once() {
    let dir = tempfile::tempdir().expect("a folder");
    let path = dir.path().join("wf.sock");
    let listener = UnixListener::bind(&path).expect("bind");
    let refused = Arc::new(AtomicUsize::new(0));
    let state = state(&refused, None, FRAME_TIME);
    let me = std::process::id() as i32;
    let _admitted = state.turns.spawning().admit(me);
    let server = tokio::spawn(accept(listener, state.clone()));
    // Admitted connections that send nothing hold their places for the frame time.
    let extra = 8;
    let mut clients = Vec::new();
    for _ in 0..MAX_CONNECTIONS + extra {
        clients.push(UnixStream::connect(&path).await.expect("connect"));
    }
    let looks = clients.into_iter().map(|mut c| async move {
        let mut byte = [0u8; 1];
        match tokio::time::timeout(Duration::from_secs(1), c.read(&mut byte)).await {
            Ok(Ok(0)) => true,
            Ok(Err(e)) => e.kind() == std::io::ErrorKind::ConnectionReset,
            _ => false,
        }
    });
    let closed = futures_util::future::join_all(looks).await;
    assert_eq!(closed.iter().filter(|c| **c).count(), extra, "{closed:?}");
    assert!(closed[..MAX_CONNECTIONS].iter().all(|c| !c), "the first ones were kept: {closed:?}");
    server.abort();
}
