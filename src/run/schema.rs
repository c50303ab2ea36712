//! JSON Schema checks: compiled validators cached by schema text, errors as JSON pointers, and the
//! schema-valid value the `fake` harness answers with by default.

use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A compiled schema. Cheap to clone.
#[derive(Clone)]
pub struct Schema {
    pub value: Arc<Value>,
    pub text: Arc<str>,
    validator: Arc<jsonschema::Validator>,
}

/// One validation failure: where in the instance, and what is wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    pub pointer: String,
    pub message: String,
}

/// Why a script's schema value gave no schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// The value is not JSON (a function, a custom type): what the conversion said.
    #[error("{0}")]
    NotJson(String),
    /// JSON, but not a JSON Schema.
    #[error(transparent)]
    Invalid(#[from] Invalid),
}

/// JSON that is not a JSON Schema. The validator's own errors borrow the schema, so their text
/// is kept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    #[error("a schema must be an object or a boolean, got {0}")]
    NotASchema(String),
    /// Against the meta-schema, at a JSON pointer into the schema (`/` for its root).
    #[error("not a valid JSON Schema: at {at}: {message}")]
    Meta { at: String, message: String },
    #[error("not a valid JSON Schema: {0}")]
    Unbuilt(String),
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = if self.pointer.is_empty() { "/" } else { &self.pointer };
        write!(f, "at {at}: {}", self.message)
    }
}

impl Schema {
    /// Every violation of `instance`, in document order.
    pub fn violations(&self, instance: &Value) -> Vec<Violation> {
        self.validator
            .iter_errors(instance)
            .map(|e| Violation { pointer: e.instance_path().to_string(), message: e.to_string() })
            .collect()
    }

    pub fn is_valid(&self, instance: &Value) -> bool {
        self.validator.is_valid(instance)
    }
}

/// Compiles schemas once per distinct text; a run reuses the same few schemas thousands of times.
#[derive(Default)]
pub struct SchemaCache {
    compiled: Mutex<HashMap<String, Schema>>,
    /// The same schemas by a fingerprint of the caller's own representation, so that a schema
    /// passed again need not be converted to JSON again to be found.
    by_fingerprint: Mutex<HashMap<u128, Schema>>,
}

impl SchemaCache {
    /// Compiles `value`, refusing anything that is not a valid JSON Schema.
    pub fn compile(&self, value: &Value) -> Result<Schema, Invalid> {
        let text = value.to_string();
        if let Some(s) = self.lock().get(&text) {
            return Ok(s.clone());
        }
        if !value.is_object() && !value.is_boolean() {
            return Err(Invalid::NotASchema(text));
        }
        jsonschema::meta::validate(value).map_err(|e| {
            let at = e.instance_path().to_string();
            Invalid::Meta { at: if at.is_empty() { "/".into() } else { at }, message: e.to_string() }
        })?;
        let validator = jsonschema::validator_for(value).map_err(|e| Invalid::Unbuilt(e.to_string()))?;
        let schema =
            Schema { value: Arc::new(value.clone()), text: text.clone().into(), validator: Arc::new(validator) };
        self.lock().insert(text, schema.clone());
        Ok(schema)
    }

    /// Looks a schema up by `fingerprint`, converting and compiling it (`make`) on a miss.
    pub fn by_fingerprint<E: std::fmt::Display>(
        &self,
        fingerprint: u128,
        make: impl FnOnce() -> Result<Value, E>,
    ) -> Result<Schema, SchemaError> {
        if let Some(s) = self.by_fingerprint.lock().unwrap_or_else(|p| p.into_inner()).get(&fingerprint) {
            return Ok(s.clone());
        }
        let value = make().map_err(|e| SchemaError::NotJson(e.to_string()))?;
        let schema = self.compile(&value)?;
        self.by_fingerprint.lock().unwrap_or_else(|p| p.into_inner()).insert(fingerprint, schema.clone());
        Ok(schema)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Schema>> {
        // A panic while holding this lock leaves a map that is still consistent.
        self.compiled.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Builds a value that satisfies the common shapes of `schema`: first enum member, `text` for
/// strings, the minimum for numbers, required properties filled. Exotic schemas may still reject it.
pub fn example_value(schema: &Value, text: &str) -> Value {
    let Some(obj) = schema.as_object() else {
        return Value::String(text.into());
    };
    if let Some(c) = obj.get("const") {
        return c.clone();
    }
    if let Some(first) = obj.get("enum").and_then(|e| e.as_array()).and_then(|a| a.first()) {
        return first.clone();
    }
    if let Some(v) = obj.get("default") {
        return v.clone();
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(first) = obj.get(key).and_then(|e| e.as_array()).and_then(|a| a.first()) {
            return example_value(first, text);
        }
    }
    if let Some(all) = obj.get("allOf").and_then(|e| e.as_array()) {
        let mut merged = Map::new();
        for part in all.iter().filter_map(|p| p.as_object()) {
            merged.extend(part.clone());
        }
        return example_value(&Value::Object(merged), text);
    }
    let ty = match obj.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts.iter().filter_map(|t| t.as_str()).find(|t| *t != "null").unwrap_or("null"),
        _ if obj.contains_key("properties") => "object",
        _ if obj.contains_key("items") => "array",
        _ => "string",
    };
    match ty {
        "object" => object_example(obj, text),
        "array" => {
            let min = obj.get("minItems").and_then(Value::as_u64).unwrap_or(1).max(1);
            let max = obj.get("maxItems").and_then(Value::as_u64).unwrap_or(u64::MAX);
            let item = obj.get("items").cloned().unwrap_or(json!({}));
            let n = min.min(max);
            Value::Array((0..n).map(|_| example_value(&item, text)).collect())
        }
        "integer" => json!(number_bound(obj).ceil() as i64),
        "number" => json!(number_bound(obj)),
        "boolean" => json!(false),
        "null" => Value::Null,
        _ => string_example(obj, text),
    }
}

fn object_example(obj: &Map<String, Value>, text: &str) -> Value {
    let props = obj.get("properties").and_then(Value::as_object);
    let required: Vec<&str> = obj
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut out = Map::new();
    if let Some(props) = props {
        for (name, sub) in props {
            out.insert(name.clone(), example_value(sub, text));
        }
    }
    for name in required {
        out.entry(name.to_string()).or_insert_with(|| Value::String(text.into()));
    }
    Value::Object(out)
}

fn number_bound(obj: &Map<String, Value>) -> f64 {
    if let Some(m) = obj.get("minimum").and_then(Value::as_f64) {
        return m;
    }
    if let Some(m) = obj.get("exclusiveMinimum").and_then(Value::as_f64) {
        return m + 1.0;
    }
    match obj.get("maximum").and_then(Value::as_f64) {
        Some(m) if m < 0.0 => m,
        _ => 0.0,
    }
}

fn string_example(obj: &Map<String, Value>, text: &str) -> Value {
    let mut s: String = text.to_string();
    if let Some(max) = obj.get("maxLength").and_then(Value::as_u64) {
        s = s.chars().take(max as usize).collect();
    }
    if let Some(min) = obj.get("minLength").and_then(Value::as_u64) {
        while (s.chars().count() as u64) < min {
            s.push('.');
        }
    }
    Value::String(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_schema_is_refused_with_where() {
        let cache = SchemaCache::default();
        let err = cache.compile(&json!({"type": "strin"})).err().expect("must fail");
        assert!(matches!(&err, Invalid::Meta { at, .. } if at == "/type"), "{err:?}");
        assert!(err.to_string().starts_with("not a valid JSON Schema: at /type: "), "{err}");
        assert_eq!(cache.compile(&json!(1)).err(), Some(Invalid::NotASchema("1".into())));
        assert!(cache.compile(&json!({"type": "string"})).is_ok());
    }

    #[test]
    fn violations_carry_pointers() {
        let cache = SchemaCache::default();
        let s = cache
            .compile(&json!({"type":"object","properties":{"n":{"type":"integer"}},"required":["n","m"]}))
            .expect("schema");
        let v = s.violations(&json!({"n": "x"}));
        assert_eq!(v.len(), 2, "{v:?}");
        assert!(v.iter().any(|v| v.pointer == "/n"), "{v:?}");
    }

    #[test]
    fn example_values_validate() {
        let cache = SchemaCache::default();
        for schema in [
            json!({"type":"string"}),
            json!({"type":"object","properties":{"severity":{"enum":["low","high"]},"score":{"type":"integer","minimum":3},"tags":{"type":"array","items":{"type":"string"},"minItems":2}},"required":["severity","why"]}),
            json!({"type":"number","exclusiveMinimum":0.5}),
            json!({"type":["null","boolean"]}),
            json!({"type":"string","minLength":40,"maxLength":50}),
        ] {
            let s = cache.compile(&schema).expect("schema");
            let v = example_value(&schema, "agent: do the thing");
            assert!(s.is_valid(&v), "{schema} -> {v}");
        }
    }
}
