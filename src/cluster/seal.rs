//! Every message between a cluster's owners and workers, and every entry they keep on the server,
//! is sealed with the cluster key: an HMAC-SHA256 over the exact bytes of an envelope that holds
//! what the message is (`Kind`), where it belongs (run, attempt, agent, op id), when it expires,
//! and the body. On the wire a sealed message is one header line, `awf-sealed <version> <hex
//! signature>`, then the envelope's JSON. Opening checks the version, the signature (in constant
//! time), the kind and the expiry before the body is parsed; the caller checks the place.

use super::key::ClusterKey;
use hmac::{Hmac, Mac};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// The version of sealed messages; a message of another is refused.
pub const VERSION: u32 = 2;
const MAGIC: &str = "awf-sealed";

/// What a sealed message is: a message of one kind is never accepted as another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// An agent operation, owner to worker.
    Op,
    /// A worker's reply to an operation (taken, settled).
    Reply,
    /// A worker's settled outcome kept in the bucket (`res.*`).
    Outcome,
    /// An owner's journal of an answer it accepted (`op.*`).
    Journal,
    /// A whole run queued by `awf runs submit`.
    Run,
    /// A submitted run's result kept in the bucket (`run.*`).
    RunResult,
    /// An agent's stored session (`AWF_SESSIONS`).
    Session,
    /// A worker's lease on an operation it runs (`lease.*`).
    Lease,
    /// A worker's heartbeat (`worker.*`).
    Beat,
}

/// Where a message belongs: inside the signed part, so that a message sealed for one operation
/// cannot be replayed as another's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Place {
    pub run: String,
    pub attempt: u32,
    pub agent: String,
    pub op: String,
}

impl Place {
    pub fn op(run: &str, attempt: u32, agent: &str, op: &str) -> Place {
        Place { run: run.into(), attempt, agent: agent.into(), op: op.into() }
    }

    /// The same operation, whichever attempt sent it.
    pub fn same_op(&self, other: &Place) -> bool {
        self.run == other.run && self.agent == other.agent && self.op == other.op
    }
}

/// The signed part.
#[derive(Debug, Serialize, Deserialize)]
pub struct Envelope<T> {
    pub kind: Kind,
    pub place: Place,
    /// Unix milliseconds after which the message is refused.
    pub expires_ms: u64,
    pub body: T,
}

/// Why a message was not opened. Each is logged and counted by the one that refused it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("it is not signed (a signed message starts with `{MAGIC} {VERSION}`)")]
    Unsigned,
    #[error("it is of another version ({0}; this awf speaks {VERSION})")]
    Version(String),
    #[error("its signature does not match this cluster key (another key, or altered)")]
    BadSignature,
    #[error("it expired {0} ms ago")]
    Expired(u64),
    #[error("it is a {found:?} where a {wanted:?} was expected")]
    WrongKind { found: Kind, wanted: Kind },
    #[error("it belongs to another run or operation")]
    Misplaced,
    #[error("its body does not parse: {0}")]
    Malformed(String),
}

impl Refusal {
    /// A short name for counting.
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::Unsigned => "unsigned",
            Refusal::Version(_) => "version",
            Refusal::BadSignature => "bad-signature",
            Refusal::Expired(_) => "expired",
            Refusal::WrongKind { .. } => "wrong-kind",
            Refusal::Misplaced => "misplaced",
            Refusal::Malformed(_) => "malformed",
        }
    }
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

fn mac(key: &ClusterKey, bytes: &[u8]) -> Hmac<Sha256> {
    let mut m = Hmac::<Sha256>::new_from_slice(key.bytes()).expect("HMAC takes a key of any length");
    m.update(bytes);
    m
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

/// Seals `body` as a message of `kind` for `place`, valid until `expires_ms`.
pub fn seal<T: Serialize>(key: &ClusterKey, kind: Kind, place: Place, expires_ms: u64, body: &T) -> Vec<u8> {
    let envelope = Envelope { kind, place, expires_ms, body };
    // Serializing plain data (strings, numbers, maps of them) cannot fail.
    let signed = serde_json::to_vec(&envelope).unwrap_or_default();
    let sig = mac(key, &signed).finalize().into_bytes();
    let mut out = format!("{MAGIC} {VERSION} {}\n", hex(&sig)).into_bytes();
    out.extend_from_slice(&signed);
    out
}

/// Opens a sealed message of `kind`: checks version, signature, kind and expiry, then parses the
/// body. The caller checks `place` against what it expected.
pub fn open<T: DeserializeOwned>(key: &ClusterKey, bytes: &[u8], kind: Kind) -> Result<Envelope<T>, Refusal> {
    let nl = bytes.iter().position(|b| *b == b'\n').ok_or(Refusal::Unsigned)?;
    let header = std::str::from_utf8(&bytes[..nl]).map_err(|_| Refusal::Unsigned)?;
    let mut words = header.split(' ');
    if words.next() != Some(MAGIC) {
        return Err(Refusal::Unsigned);
    }
    let version = words.next().unwrap_or_default();
    if version != VERSION.to_string() {
        return Err(Refusal::Version(version.chars().take(16).collect()));
    }
    let sig = words.next().and_then(unhex).ok_or(Refusal::BadSignature)?;
    let signed = &bytes[nl + 1..];
    mac(key, signed).verify_slice(&sig).map_err(|_| Refusal::BadSignature)?;
    let envelope: Envelope<serde_json::Value> =
        serde_json::from_slice(signed).map_err(|e| Refusal::Malformed(e.to_string()))?;
    if envelope.kind != kind {
        return Err(Refusal::WrongKind { found: envelope.kind, wanted: kind });
    }
    let now = now_ms();
    if envelope.expires_ms < now {
        return Err(Refusal::Expired(now - envelope.expires_ms));
    }
    let body = serde_json::from_value(envelope.body).map_err(|e| Refusal::Malformed(e.to_string()))?;
    Ok(Envelope { kind, place: envelope.place, expires_ms: envelope.expires_ms, body })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn key(text: &str) -> ClusterKey {
        ClusterKey::from_text(text, "test").expect("a key")
    }

    fn place() -> Place {
        Place::op("r1", 1, "a", "a#1")
    }

    #[test]
    fn a_sealed_message_opens_with_its_key_kind_and_place() {
        let k = key("0123456789abcdef0123456789abcdef");
        let sealed = seal(&k, Kind::Op, place(), now_ms() + 60_000, &json!({ "prompt": "hi" }));
        let opened: Envelope<Value> = open(&k, &sealed, Kind::Op).expect("opens");
        assert_eq!((opened.place, opened.body), (place(), json!({ "prompt": "hi" })));
    }

    #[test]
    fn every_forgery_is_refused_by_name() {
        let k = key("0123456789abcdef0123456789abcdef");
        let other = key("fedcba9876543210fedcba9876543210");
        let body = json!({ "verdict": "FORGED" });
        let good = seal(&k, Kind::Reply, place(), now_ms() + 60_000, &body);
        let refused = |bytes: &[u8], kind| open::<Value>(&k, bytes, kind).map(|_| ()).expect_err("refused");
        assert_eq!(refused(br#"{"type":"settled"}"#, Kind::Reply), Refusal::Unsigned);
        assert_eq!(
            refused(&seal(&other, Kind::Reply, place(), now_ms() + 60_000, &body), Kind::Reply),
            Refusal::BadSignature
        );
        assert_eq!(refused(&good, Kind::Outcome), Refusal::WrongKind { found: Kind::Reply, wanted: Kind::Outcome });
        assert!(matches!(refused(&seal(&k, Kind::Reply, place(), 1, &body), Kind::Reply), Refusal::Expired(_)));
        let mut altered = good.clone();
        let at = altered.len() - 3;
        altered[at] = b'X';
        assert_eq!(refused(&altered, Kind::Reply), Refusal::BadSignature);
        let old = String::from_utf8_lossy(&good).replacen("awf-sealed 2", "awf-sealed 1", 1);
        assert_eq!(refused(old.as_bytes(), Kind::Reply), Refusal::Version("1".into()));
    }
}
