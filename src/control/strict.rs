//! An answer's JSON read strictly: an object that gives one key twice, at any depth, is an error.
//! serde_json keeps the last of two equal keys without a word, while a reader of the text (a
//! person, the log-probability walk of a decision, another parser) may take the first: an
//! answer whose meaning depends on who reads it is refused, not guessed at. Keys are compared as
//! the JSON decodes them, so `"choice"` and `"\u0063hoice"` are the same key.

use serde::de::{Deserialize, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::collections::HashSet;
use std::fmt;

/// The longest key a duplicate-key error quotes (a model's key can be any length).
const KEY_SHOWN: usize = 40;

/// `text` as one JSON value, refusing a key given twice in any of its objects (the error says
/// which key and where).
pub fn parse(text: &str) -> Result<Value, serde_json::Error> {
    serde_json::from_str::<UniqueKeys>(text)?;
    serde_json::from_str(text)
}

/// As [`parse`], for bytes.
pub fn parse_slice(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    serde_json::from_slice::<UniqueKeys>(bytes)?;
    serde_json::from_slice(bytes)
}

/// A JSON value walked only to check that no object repeats a key.
struct UniqueKeys;

impl<'de> Deserialize<'de> for UniqueKeys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Walk)
    }
}

struct Walk;

impl<'de> Visitor<'de> for Walk {
    type Value = UniqueKeys;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_i64<E>(self, _: i64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_u64<E>(self, _: u64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_f64<E>(self, _: f64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_str<E>(self, _: &str) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_unit<E>(self) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<UniqueKeys, A::Error> {
        while seq.next_element::<UniqueKeys>()?.is_some() {}
        Ok(UniqueKeys)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<UniqueKeys, A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if seen.contains(&key) {
                return Err(A::Error::custom(format!("the key `{}` is given twice", shown(&key))));
            }
            map.next_value::<UniqueKeys>()?;
            seen.insert(key);
        }
        Ok(UniqueKeys)
    }
}

/// A key as an error quotes it: control characters escaped, cut at `KEY_SHOWN` characters.
fn shown(key: &str) -> String {
    let mut out: String = key.chars().take(KEY_SHOWN).flat_map(char::escape_debug).collect();
    if key.chars().count() > KEY_SHOWN {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_key_given_twice_anywhere_is_refused_and_named() {
        let cases: &[(&str, &str)] = &[
            (
                r#"{"choice":"no","confidence":0.99,"choice":"yes"}"#,
                "the key `choice` is given twice at line 1 column 41",
            ),
            (r#"{"choice":"no","\u0063hoice":"yes"}"#, "the key `choice` is given twice"),
            (r#"{"a":{"b":1,"b":2}}"#, "the key `b` is given twice"),
            (r#"[1,{"x":[{"k":1,"k":1}]}]"#, "the key `k` is given twice"),
            ("{\"a\\n\":1,\"a\\n\":2}", "the key `a\\n` is given twice"),
            (r#"{"":1,"":2}"#, "the key `` is given twice"),
        ];
        for (text, said) in cases {
            let e = parse(text).expect_err(text).to_string();
            assert!(e.starts_with(said), "{text}: {e}");
            assert!(parse_slice(text.as_bytes()).is_err(), "{text}");
        }
        let long = format!("{{\"{k}\":1,\"{k}\":2}}", k = "x".repeat(100));
        assert!(parse(&long).expect_err("twice").to_string().contains(&format!("`{}…`", "x".repeat(40))));
    }

    #[test]
    fn what_serde_json_reads_is_read_the_same() {
        for text in [
            r#"{"choice":"yes","confidence":0.9,"reason":"a \"choice\": b"}"#,
            r#"{"a":{"k":1},"b":{"k":1},"c":[{"k":1},{"k":2}]}"#,
            r#"[1, -2, 3.5, 18446744073709551615, true, null, "s", {}, []]"#,
            r#"{"Choice":1,"choice":2}"#,
        ] {
            assert_eq!(parse(text).expect(text), serde_json::from_str::<Value>(text).expect(text));
        }
        assert_eq!(parse(" {\"a\": 1} ").expect("spaces"), json!({ "a": 1 }));
        // What serde_json refuses stays refused, in its words.
        for text in ["{\"a\":1} {\"a\":2}", "{\"a\":1e999}", "{\"a\":", "NaN"] {
            assert!(parse(text).is_err(), "{text}");
        }
    }
}
