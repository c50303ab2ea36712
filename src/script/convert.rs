//! The one place `Dynamic` and JSON meet. Values that are not JSON (functions, host handles) are
//! refused with a message naming their type instead of being serialised as type names.

use rhai::{Dynamic, Map};
use serde_json::Value;

/// Why a script value is not JSON.
#[derive(Debug, thiserror::Error)]
pub enum NotJson {
    /// A function pointer or a host handle, named by its type.
    #[error("a {0} is not JSON and cannot be returned, recorded or sent to an agent")]
    Kind(String),
    /// What rhai's serializer refused.
    #[error("{0}")]
    Unserialised(Box<rhai::EvalAltResult>),
}

/// Converts a script value to JSON, refusing functions and host objects.
pub fn to_json(value: &Dynamic) -> Result<Value, NotJson> {
    if let Some(bad) = non_json(value) {
        return Err(NotJson::Kind(bad));
    }
    rhai::serde::from_dynamic::<Value>(value).map_err(NotJson::Unserialised)
}

fn non_json(value: &Dynamic) -> Option<String> {
    if value.is_map() {
        let map = value.read_lock::<Map>()?;
        return map.values().find_map(non_json);
    }
    if value.is_array() {
        let arr = value.read_lock::<rhai::Array>()?;
        return arr.iter().find_map(non_json);
    }
    if value.is_unit()
        || value.is_bool()
        || value.is_int()
        || value.is_float()
        || value.is_string()
        || value.is_char()
        || value.is_timestamp()
    {
        return None;
    }
    if value.is_blob() {
        return None;
    }
    Some(match value.type_name() {
        "Fn" => "function pointer (closure)".to_string(),
        other => format!("value of type {}", other.rsplit("::").next().unwrap_or(other)),
    })
}

/// A fingerprint of a JSON-like script value: equal values give equal fingerprints. Every turn
/// takes one of its schema: the value is written out into a buffer this thread keeps and hashed
/// once (xxh3's streaming update per key and leaf cost more than the hashing).
pub fn fingerprint(value: &Dynamic) -> u128 {
    thread_local! {
        static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    BUF.with(|buf| {
        let mut buf = buf.borrow_mut();
        buf.clear();
        feed(&mut buf, value);
        let h = xxhash_rust::xxh3::xxh3_128(&buf);
        if buf.capacity() > 1 << 20 {
            buf.shrink_to(64 * 1024);
        }
        h
    })
}

fn feed(h: &mut Vec<u8>, v: &Dynamic) {
    if let Some(map) = v.read_lock::<Map>() {
        h.push(b'{');
        for (k, v) in map.iter() {
            h.extend_from_slice(k.as_bytes());
            h.push(b':');
            feed(h, v);
        }
        h.push(b'}');
    } else if let Some(arr) = v.read_lock::<rhai::Array>() {
        h.push(b'[');
        for v in arr.iter() {
            feed(h, v);
            h.push(b',');
        }
        h.push(b']');
    } else {
        h.extend_from_slice(v.type_name().as_bytes());
        h.push(b'=');
        // The common leaves are written as they are; others through their text.
        if let Ok(s) = v.as_immutable_string_ref() {
            h.extend_from_slice(s.as_bytes());
        } else if let Ok(i) = v.as_int() {
            h.extend_from_slice(&i.to_le_bytes());
        } else if let Ok(b) = v.as_bool() {
            h.push(b as u8);
        } else {
            h.extend_from_slice(v.to_string().as_bytes());
        }
        h.push(b';');
    }
}

/// Converts JSON to a script value (objects become maps, arrays become arrays).
pub fn to_dynamic(value: &Value) -> Dynamic {
    // Conversion from serde_json::Value cannot fail: every JSON value has a Dynamic form.
    rhai::serde::to_dynamic(value).unwrap_or(Dynamic::UNIT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trip_and_refusal() {
        let v = json!({"a": [1, 2.5, "x", null, true], "b": {"c": "d"}});
        assert_eq!(to_json(&to_dynamic(&v)).expect("json"), v);
        let mut m = Map::new();
        m.insert("f".into(), Dynamic::from(rhai::FnPtr::new("x").expect("fnptr")));
        let err = to_json(&Dynamic::from_map(m)).expect_err("closure refused");
        assert!(matches!(&err, NotJson::Kind(k) if k == "function pointer (closure)"), "{err}");
    }
}
