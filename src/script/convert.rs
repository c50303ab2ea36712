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

/// A script value made only of maps, arrays, strings, characters, numbers, booleans and `()`,
/// written as the JSON text `to_json` would give, without a `serde_json::Value` copy of it (a
/// 10,000-item value's copy was a run's peak memory); `None` for any other value (timestamps,
/// blobs, host values), which goes through `to_json`.
pub fn to_json_text(value: &Dynamic) -> Option<Box<serde_json::value::RawValue>> {
    if !plain(value) {
        return None;
    }
    // rhai's own serialiser writes a plain value as `from_dynamic::<Value>` reads it: maps in
    // their (sorted) key order, a non-finite float as `null` (the test below holds them equal).
    serde_json::value::to_raw_value(value).ok()
}

fn plain(v: &Dynamic) -> bool {
    if let Some(map) = v.read_lock::<Map>() {
        return map.values().all(plain);
    }
    if let Some(arr) = v.read_lock::<rhai::Array>() {
        return arr.iter().all(plain);
    }
    v.is_unit() || v.is_bool() || v.is_int() || v.is_float() || v.is_string() || v.is_char()
}

/// Whether `value` is of the JSON Schema type `ty` as its JSON would be (`false` when unsure:
/// the caller then validates the JSON itself).
pub fn has_json_type(value: &Dynamic, ty: &str) -> bool {
    let finite = || value.as_float().is_ok_and(f64::is_finite);
    match ty {
        "object" => value.read_lock::<Map>().is_some(),
        "array" => value.read_lock::<rhai::Array>().is_some(),
        "string" => value.is_string() || value.is_char(),
        "boolean" => value.is_bool(),
        "null" => value.is_unit(),
        "number" => value.is_int() || finite(),
        "integer" => value.is_int() || (finite() && value.as_float().is_ok_and(|f| f.fract() == 0.0)),
        _ => false,
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

    #[test]
    fn the_json_text_is_what_to_json_writes() {
        let v = json!({"z": [1, -2.5, 1e300, "x\n\"q\u{1}", null, true, {"b": 1, "a": [{}]}], "a": {}, "é": 0.1});
        let mut d = to_dynamic(&v);
        d.write_lock::<Map>().expect("a map").insert("c".into(), Dynamic::from('c'));
        d.write_lock::<Map>().expect("a map").insert("n".into(), Dynamic::from(f64::NAN));
        let text = to_json_text(&d).expect("plain");
        assert_eq!(text.get(), serde_json::to_string(&to_json(&d).expect("json")).expect("text"));
        let shared = Dynamic::from_array(vec![Dynamic::from(1_i64)]).into_shared();
        assert_eq!(to_json_text(&shared).expect("plain").get(), "[1]");
        assert!(to_json_text(&Dynamic::from_blob(vec![1, 2])).is_none(), "a blob goes through to_json");
        let closure = Dynamic::from(rhai::FnPtr::new("x").expect("fnptr"));
        assert!(to_json_text(&Dynamic::from_array(vec![closure])).is_none());
    }

    #[test]
    fn json_types_are_told_as_json_tells_them() {
        let cases: [(Dynamic, &[&str]); 7] = [
            (Dynamic::from_map(Map::new()), &["object"]),
            (Dynamic::from_array(vec![]), &["array"]),
            (Dynamic::from("s"), &["string"]),
            (Dynamic::from(true), &["boolean"]),
            (Dynamic::UNIT, &["null"]),
            (Dynamic::from(3_i64), &["integer", "number"]),
            (Dynamic::from(2.0_f64), &["integer", "number"]),
        ];
        for (v, types) in cases {
            for ty in ["object", "array", "string", "boolean", "null", "integer", "number", "other"] {
                assert_eq!(has_json_type(&v, ty), types.contains(&ty), "{v:?} as {ty}");
            }
        }
        assert!(has_json_type(&Dynamic::from(2.5_f64), "number") && !has_json_type(&Dynamic::from(2.5_f64), "integer"));
        assert!(!has_json_type(&Dynamic::from(f64::NAN), "number"), "NaN is null in JSON");
    }
}
