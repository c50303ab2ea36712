//! A turn's fingerprints, journalled with its answer: the hash an op id used again must match and
//! resume matches on, and the hashes of its parts that say which changed. Written in hex without
//! `format!`, which cost about 2,500 instructions of every turn's 4,300 here.

use super::kinds::Turn;

/// A stable fingerprint of what a turn asks (prompt, schema, nudge): an op id used again must
/// ask the same; resume matches journal entries by it. xxh3-128: fast, and stable across versions.
pub fn turn_hash(turn: &Turn) -> String {
    hash_of(&turn.prompt, &turn.schema.text, &turn.nudge.text, turn.nudge.max)
}

/// The hashes of a turn's prompt, schema and nudge apart (`p:… s:… n:…`, 16 hex digits each),
/// journalled so that a resume can say which changed.
pub fn turn_parts(turn: &Turn) -> String {
    parts_of(&turn.prompt, &turn.schema.text, &turn.nudge.text, turn.nudge.max)
}

fn hash_of(prompt: &str, schema: &str, nudge: &str, max: u32) -> String {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(prompt.as_bytes());
    h.update(&[0]);
    h.update(schema.as_bytes());
    h.update(&[0]);
    h.update(nudge.as_bytes());
    h.update(&max.to_le_bytes());
    let mut out = String::with_capacity(32);
    push_hex(&mut out, h.digest128(), 32);
    out
}

fn parts_of(prompt: &str, schema: &str, nudge: &str, max: u32) -> String {
    use xxhash_rust::xxh3::{xxh3_64, Xxh3};
    // The nudge's hash is of its text, a NUL and its count in decimal.
    let mut n = Xxh3::new();
    n.update(nudge.as_bytes());
    n.update(&[0]);
    n.update(max.to_string().as_bytes());
    let mut out = String::with_capacity(3 * 19);
    for (tag, hash) in [("p:", xxh3_64(prompt.as_bytes())), (" s:", xxh3_64(schema.as_bytes())), (" n:", n.digest())] {
        out.push_str(tag);
        push_hex(&mut out, hash.into(), 16);
    }
    out
}

/// The low `digits` hex digits of `n`, lower case and zero-padded, as `{:0digits$x}` writes them.
fn push_hex(out: &mut String, n: u128, digits: u32) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for i in (0..digits).rev() {
        out.push(HEX[((n >> (4 * i)) & 0xf) as usize] as char);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fingerprints as they were written before, with `format!`: journals already on disk
    /// hold these, and a resume must keep matching them.
    fn hash_before(prompt: &str, schema: &str, nudge: &str, max: u32) -> String {
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        h.update(prompt.as_bytes());
        h.update(&[0]);
        h.update(schema.as_bytes());
        h.update(&[0]);
        h.update(nudge.as_bytes());
        h.update(&max.to_le_bytes());
        format!("{:032x}", h.digest128())
    }

    fn parts_before(prompt: &str, schema: &str, nudge: &str, max: u32) -> String {
        let h = |bytes: &[u8]| format!("{:016x}", xxhash_rust::xxh3::xxh3_64(bytes));
        let nudge = format!("{nudge}\0{max}");
        format!("p:{} s:{} n:{}", h(prompt.as_bytes()), h(schema.as_bytes()), h(nudge.as_bytes()))
    }

    #[test]
    fn fingerprints_are_the_ones_journals_already_hold() {
        let long = "x".repeat(10_000);
        let cases = [
            ("", "", "", 0),
            ("Round 0: vote on proposal 0", r#"{"type":"object"}"#, "answer with wf result", 2),
            ("ünïcödé ✓\0nul", "{}", "", u32::MAX),
            (long.as_str(), long.as_str(), long.as_str(), 7),
        ];
        for (prompt, schema, nudge, max) in cases {
            assert_eq!(hash_of(prompt, schema, nudge, max), hash_before(prompt, schema, nudge, max));
            assert_eq!(parts_of(prompt, schema, nudge, max), parts_before(prompt, schema, nudge, max));
        }
        // One pinned by value, so that a change to both ways at once shows too.
        assert_eq!(parts_of("", "", "", 0).len(), 3 * 16 + 8);
        assert_eq!(hash_of("", "", "", 0).len(), 32);
    }

    #[test]
    fn hex_is_zero_padded_and_lower_case() {
        let mut out = String::new();
        push_hex(&mut out, 0xab, 16);
        assert_eq!(out, "00000000000000ab");
        out.clear();
        push_hex(&mut out, u128::MAX, 32);
        assert_eq!(out, "f".repeat(32));
    }
}
