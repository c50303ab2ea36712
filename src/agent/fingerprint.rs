//! A turn's fingerprints, journalled with its answer: the hash an op id used again must match and
//! resume matches on, and the hashes of its parts that say which changed. Written in hex without
//! `format!`, which made `turn_parts` cost 4,300 instructions a turn (1,350 now).

use super::operation::Turn;

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
    n.update(itoa::Buffer::new().format(max).as_bytes());
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

    /// The fingerprints as the `format!`-based code before this file wrote them (1ffd04b): journals
    /// already on disk hold these, and a resume must keep matching them. The second row's prompt
    /// hash is the `p:` of a magi bench journal that code wrote.
    #[test]
    fn fingerprints_are_the_ones_journals_already_hold() {
        let long = "x".repeat(10_000);
        let cases = [
            (
                ("", "", "", 0),
                "d549b1ebc4f70c3a3f4ece58ec0e5d0b",
                "p:2d06800538d394c2 s:2d06800538d394c2 n:2326bd3b2e645926",
            ),
            (
                ("Round 0: vote on proposal 0", r#"{"type":"object"}"#, "answer with wf result", 2),
                "a3fbba3e7a1a89cd5fe14f9fcfc5684b",
                "p:125b335dd28afaab s:96a4f50cd0a52287 n:0e32e2d81551f6a7",
            ),
            (
                ("ünïcödé ✓\0nul", "{}", "", u32::MAX),
                "781c195bc109bfb6d15d58b6221fa76f",
                "p:a38e0b93c36860c7 s:1349cde127705c16 n:88f0919e9a405b97",
            ),
            (
                (long.as_str(), long.as_str(), long.as_str(), 7),
                "37af766fab7735149533133f022cea0c",
                "p:cb763e2ccd065fab s:cb763e2ccd065fab n:e20b868cded391b0",
            ),
        ];
        for ((prompt, schema, nudge, max), hash, parts) in cases {
            assert_eq!(hash_of(prompt, schema, nudge, max), hash);
            assert_eq!(parts_of(prompt, schema, nudge, max), parts);
        }
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
