//! Parsing one call's JSON without building what the handler never reads:
//! unknown fields are skipped as they are parsed (`IgnoredAny`), and a
//! known field that is not a scalar (a type error in every command but
//! `view_range`) is skipped the same way and kept as an empty array or
//! object, which is all its error message depends on. Memory for one call
//! stays a small multiple of the text's size, whatever an unknown field
//! holds.

use std::fmt;

use serde::de::{
    self, Deserialize, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor,
};
use serde_json::{Map, Value};

use crate::command::{VIEW_RANGE_CUT, VIEW_RANGE_ECHO_BYTES};

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
                // Echoed in its error message as compact JSON: written as
                // that text while it is parsed, keeping at most
                // `VIEW_RANGE_ECHO_BYTES`. A short one is parsed back to
                // the value (so it is exactly what a whole parse gives); a
                // longer one (not two integers, surely) keeps only its cut
                // echo.
                let mut echo = Echo::default();
                map.next_value_seed(&mut echo)?;
                if echo.cut {
                    out.insert(key, Value::Bool(false));
                    out.insert(VIEW_RANGE_CUT.to_owned(), Value::String(echo.text));
                } else {
                    let value = serde_json::from_str(&echo.text).map_err(de::Error::custom)?;
                    out.remove(VIEW_RANGE_CUT);
                    out.insert(key, value);
                }
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

/// A value's compact JSON text, written while it is parsed and cut after
/// [`VIEW_RANGE_ECHO_BYTES`] (at a character boundary): the rest is parsed
/// and dropped, so a huge value costs no memory.
#[derive(Default)]
struct Echo {
    text: String,
    cut: bool,
}

impl Echo {
    fn push(&mut self, s: &str) {
        if self.cut {
            return;
        }
        let room = VIEW_RANGE_ECHO_BYTES - self.text.len();
        if s.len() <= room {
            self.text.push_str(s);
            return;
        }
        let mut end = room;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.text.push_str(&s[..end]);
        self.cut = true;
    }

    fn push_string(&mut self, v: &str) {
        if self.cut {
            return;
        }
        // Escaping at most grows a character sixfold: a prefix this long
        // fills what room is left.
        let mut end = v.len().min(VIEW_RANGE_ECHO_BYTES + 1);
        while !v.is_char_boundary(end) {
            end -= 1;
        }
        let escaped = serde_json::to_string(&v[..end]).unwrap_or_default();
        if end < v.len() {
            // Without its closing quote: the string goes on.
            self.push(&escaped[..escaped.len() - 1]);
            self.cut = true;
        } else {
            self.push(&escaped);
        }
    }
}

impl<'de> DeserializeSeed<'de> for &mut Echo {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for &mut Echo {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        self.push(if v { "true" } else { "false" });
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.push(&v.to_string());
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.push(&v.to_string());
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        match serde_json::Number::from_f64(v) {
            Some(n) => self.push(&n.to_string()),
            None => self.push("null"),
        }
        Ok(())
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.push_string(v);
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.push("null");
        Ok(())
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.push("null");
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.push("[");
        let mut first = true;
        loop {
            if !first {
                // Only written once the next element is known to exist.
                let at = self.text.len();
                let was_cut = self.cut;
                self.push(",");
                if seq.next_element_seed(&mut *self)?.is_none() {
                    if !was_cut {
                        self.text.truncate(at);
                        self.cut = was_cut;
                    }
                    break;
                }
            } else if seq.next_element_seed(&mut *self)?.is_none() {
                break;
            }
            first = false;
        }
        self.push("]");
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.push("{");
        let mut first = true;
        loop {
            let at = self.text.len();
            let was_cut = self.cut;
            if !first {
                self.push(",");
            }
            if map.next_key_seed(&mut *self)?.is_none() {
                if !was_cut {
                    self.text.truncate(at);
                    self.cut = was_cut;
                }
                break;
            }
            self.push(":");
            map.next_value_seed(&mut *self)?;
            first = false;
        }
        self.push("}");
        Ok(())
    }
}
