//! Parsing one call's JSON without building what the handler never reads:
//! unknown fields are skipped as they are parsed (`IgnoredAny`), and a
//! known field that is not a scalar (a type error in every command but
//! `view_range`) is skipped the same way and kept as an empty array or
//! object, which is all its error message depends on. Memory for one call
//! stays a small multiple of the text's size, whatever an unknown field
//! holds.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Fields a `tool_use` block or a tool `input` object may carry that the
/// handler reads.
const KNOWN: &[&str] = &[
    "type",
    "id",
    "command",
    "path",
    "file_text",
    "old_str",
    "new_str",
    "insert_line",
    "insert_text",
    "old_path",
    "new_path",
];

/// A parsed call, holding only what the handler reads.
pub(super) struct Slim(pub(super) Value);

impl<'de> Deserialize<'de> for Slim {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SlimVisitor).map(Slim)
    }
}

struct SlimVisitor;

/// A known field's value: scalars as they are; arrays and objects skipped,
/// standing in as empty ones (only their type matters to the handler).
struct Shallow(Value);

impl<'de> Deserialize<'de> for Shallow {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ShallowVisitor).map(Shallow)
    }
}

struct ShallowVisitor;

impl<'de> Visitor<'de> for ShallowVisitor {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Value::Array(Vec::new()))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Value::Object(Map::new()))
    }
}

impl<'de> Visitor<'de> for SlimVisitor {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    /// Not an object: the handler answers "expected a JSON object" for
    /// every such value, so none is kept.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Value::Null)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == "input" {
                // A tool_use block's input: the same rules, one level down
                // (a non-object input is an error whatever it holds).
                let Slim(inner) = map.next_value()?;
                let inner = if inner.is_object() {
                    inner
                } else {
                    Value::Null
                };
                // `Null` would read as "absent"; any non-object is refused.
                out.insert(
                    key,
                    if inner.is_null() {
                        Value::Bool(false)
                    } else {
                        inner
                    },
                );
            } else if key == "view_range" {
                // Echoed in its error message: kept whole.
                out.insert(key, map.next_value::<Value>()?);
            } else if KNOWN.contains(&key.as_str()) {
                let Shallow(value) = map.next_value()?;
                out.insert(key, value);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(Value::Object(out))
    }
}
