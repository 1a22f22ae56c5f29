//! Typed blocks round-trip byte for byte: checked on the serialized text,
//! never on `serde_json::Value` (which merges duplicate keys and would hide
//! a doubled `"type"`).

use claude_memory::{InMemoryStore, MemoryTool, ToolResultBlock, ToolUseBlock};
use proptest::prelude::*;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value, json};

/// Parses JSON text and fails on a key that appears twice in any object.
struct NoDuplicateKeys;

impl<'de> Deserialize<'de> for NoDuplicateKeys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = NoDuplicateKeys;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(NoDuplicateKeys)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(NoDuplicateKeys)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(NoDuplicateKeys)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(NoDuplicateKeys)
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(NoDuplicateKeys)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(NoDuplicateKeys)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<NoDuplicateKeys>()?.is_some() {}
                Ok(NoDuplicateKeys)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut seen = std::collections::BTreeSet::new();
                while let Some(key) = map.next_key::<String>()? {
                    if !seen.insert(key.clone()) {
                        return Err(de::Error::custom(format!("duplicate key `{key}`")));
                    }
                    map.next_value::<NoDuplicateKeys>()?;
                }
                Ok(NoDuplicateKeys)
            }
        }
        d.deserialize_any(V)
    }
}

fn assert_no_duplicate_keys(text: &str) {
    if let Err(e) = serde_json::from_str::<NoDuplicateKeys>(text) {
        panic!("{e} in {text}");
    }
}

#[test]
fn the_checker_catches_a_doubled_key() {
    assert!(serde_json::from_str::<NoDuplicateKeys>(r#"{"type":1,"a":{"b":1,"b":2}}"#).is_err());
    assert!(serde_json::from_str::<NoDuplicateKeys>(r#"{"type":1,"a":[{"b":1}]}"#).is_ok());
}

#[test]
fn a_tool_use_block_round_trips_byte_for_byte() {
    // Known fields in declared order, then unknown ones in key order: the
    // order serde_json writes them in.
    let text = r#"{"type":"tool_use","id":"toolu_01","name":"memory","input":{"command":"view","path":"/memories"},"cache_control":{"type":"ephemeral"}}"#;
    let block: ToolUseBlock = serde_json::from_str(text).expect("parse");
    assert!(!block.extra.contains_key("type"));
    assert_eq!(block.extra.len(), 1);
    let again = serde_json::to_string(&block).expect("serialize");
    assert_eq!(again, text);
    assert_no_duplicate_keys(&again);
}

#[test]
fn a_tool_result_block_round_trips_byte_for_byte() {
    let text = r#"{"type":"tool_result","tool_use_id":"toolu_01","content":[{"type":"text","text":"hi","citations":null}],"is_error":true,"cache_control":{"type":"ephemeral"}}"#;
    let block: ToolResultBlock = serde_json::from_str(text).expect("parse");
    let again = serde_json::to_string(&block).expect("serialize");
    assert_eq!(again, text);
    assert_no_duplicate_keys(&again);
}

#[test]
fn a_type_key_put_in_extra_by_hand_is_written_once() {
    let mut extra = Map::new();
    extra.insert("type".into(), json!("something_else"));
    let block = ToolUseBlock {
        id: "t".into(),
        name: "memory".into(),
        input: json!({}),
        extra,
    };
    let text = serde_json::to_string(&block).expect("serialize");
    assert_eq!(
        text,
        r#"{"type":"tool_use","id":"t","name":"memory","input":{}}"#
    );
}

#[test]
fn a_block_of_another_type_is_refused() {
    let e = serde_json::from_str::<ToolUseBlock>(
        r#"{"type":"tool_result","id":"t","name":"memory","input":{}}"#,
    )
    .expect_err("a tool_result is not a tool_use");
    assert!(
        e.to_string()
            .contains("expected a block of type `tool_use`"),
        "{e}"
    );
    let e = serde_json::from_str::<ToolResultBlock>(r#"{"tool_use_id":"t"}"#).expect_err("no type");
    assert!(e.to_string().contains("missing field `type`"), "{e}");
}

#[test]
fn answered_blocks_have_no_duplicate_keys() {
    let tool = MemoryTool::new(InMemoryStore::new());
    let block: ToolUseBlock = serde_json::from_value(json!({
        "type": "tool_use", "id": "toolu_9", "name": "memory",
        "input": {"command": "view", "path": "/memories"}, "extra_field": [1, 2]
    }))
    .expect("parse");
    let text = serde_json::to_string(&tool.run_block(&block)).expect("serialize");
    assert_no_duplicate_keys(&text);
    assert!(text.starts_with(r#"{"type":"tool_result","tool_use_id":"toolu_9","content":"#));
}

fn unknown_fields() -> impl Strategy<Value = Map<String, Value>> {
    let value = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-z ]{0,8}".prop_map(Value::from),
        prop::collection::vec(any::<i32>(), 0..3).prop_map(|v| json!(v)),
    ];
    // Names include the tag and the known fields' names' neighbours.
    let key = prop_oneof![
        Just("type".to_owned()),
        Just("cache_control".to_owned()),
        "[a-z_]{1,10}",
    ];
    prop::collection::btree_map(key, value, 0..5).prop_map(|m| m.into_iter().collect())
}

proptest! {
    #[test]
    fn random_tool_use_blocks_round_trip(
        id in "[a-zA-Z0-9_]{0,12}",
        name in "[a-z]{0,8}",
        extra in unknown_fields(),
    ) {
        let mut object = Map::new();
        object.insert("type".into(), json!("tool_use"));
        object.insert("id".into(), json!(id));
        object.insert("name".into(), json!(name));
        object.insert("input".into(), json!({"command": "view", "path": "/memories"}));
        for (k, v) in extra {
            if !["type", "id", "name", "input"].contains(&k.as_str()) {
                object.insert(k, v);
            }
        }
        let text = serde_json::to_string(&Value::Object(object)).expect("text");
        let block: ToolUseBlock = serde_json::from_str(&text).expect("parse");
        let once = serde_json::to_string(&block).expect("serialize");
        assert_no_duplicate_keys(&once);
        let back: ToolUseBlock = serde_json::from_str(&once).expect("parse again");
        prop_assert_eq!(&back, &block);
        prop_assert_eq!(serde_json::to_string(&back).expect("serialize"), once);
    }

    #[test]
    fn random_tool_result_blocks_round_trip(
        id in "[a-zA-Z0-9_]{0,12}",
        text_content in "[ -~]{0,20}",
        is_error in any::<bool>(),
        extra in unknown_fields(),
    ) {
        let mut object = Map::new();
        object.insert("type".into(), json!("tool_result"));
        object.insert("tool_use_id".into(), json!(id));
        object.insert("content".into(), json!(text_content));
        if is_error {
            object.insert("is_error".into(), json!(true));
        }
        for (k, v) in extra {
            if !["type", "tool_use_id", "content", "is_error"].contains(&k.as_str()) {
                object.insert(k, v);
            }
        }
        let text = serde_json::to_string(&Value::Object(object)).expect("text");
        let block: ToolResultBlock = serde_json::from_str(&text).expect("parse");
        let once = serde_json::to_string(&block).expect("serialize");
        assert_no_duplicate_keys(&once);
        let back: ToolResultBlock = serde_json::from_str(&once).expect("parse again");
        prop_assert_eq!(&back, &block);
        prop_assert_eq!(serde_json::to_string(&back).expect("serialize"), once);
    }
}
