//! `MemoryToolDefinition`: every optional field of the GA memory tool,
//! serialized exactly (checked byte for byte).

use claude_memory::{AllowedCaller, MemoryToolDefinition, tool_definition};
use serde_json::json;

fn bytes(definition: &MemoryToolDefinition) -> String {
    serde_json::to_string(definition).expect("serialize")
}

#[test]
fn the_bare_definition_is_type_and_name_only() {
    let bare = MemoryToolDefinition::new();
    assert_eq!(
        bytes(&bare),
        r#"{"type":"memory_20250818","name":"memory"}"#
    );
    assert_eq!(bare.to_json(), tool_definition());
}

#[test]
fn every_optional_field_is_written_exactly_in_a_fixed_order() {
    let full = MemoryToolDefinition::new()
        .strict(true)
        .input_example(json!({"command": "view", "path": "/memories"}))
        .input_example(json!({"command": "create", "path": "/memories/n.md", "file_text": "x\n"}))
        .defer_loading(false)
        .cache_control(json!({"type": "ephemeral", "ttl": "1h"}))
        .allowed_callers([
            AllowedCaller::Direct,
            AllowedCaller::CodeExecution20250825,
            AllowedCaller::Other("code_execution_20260120".into()),
        ]);
    assert_eq!(
        bytes(&full),
        concat!(
            r#"{"type":"memory_20250818","name":"memory","#,
            r#""allowed_callers":["direct","code_execution_20250825","code_execution_20260120"],"#,
            r#""cache_control":{"ttl":"1h","type":"ephemeral"},"#,
            r#""defer_loading":false,"#,
            r#""input_examples":[{"command":"view","path":"/memories"},{"command":"create","file_text":"x\n","path":"/memories/n.md"}],"#,
            r#""strict":true}"#
        )
    );
    // `false` is written (it was asked for), unset fields are not.
    assert_eq!(
        bytes(&MemoryToolDefinition::new().strict(false)),
        r#"{"type":"memory_20250818","name":"memory","strict":false}"#
    );
    assert_eq!(
        bytes(&MemoryToolDefinition::new().allowed_callers([])),
        r#"{"type":"memory_20250818","name":"memory","allowed_callers":[]}"#
    );
}

#[test]
fn the_cache_control_helper_matches_the_builder() {
    let cc = json!({"type": "ephemeral"});
    assert_eq!(
        claude_memory::tool_definition_with_cache_control(cc.clone()),
        MemoryToolDefinition::new().cache_control(cc).to_json()
    );
}
