//! The one MCP tool, `memory`: its input schema (SPEC §1's fields, `command`
//! an enum), its description and annotations, and the server instructions.
//!
//! The API injects a memory protocol into the system prompt whenever its own
//! memory tool is in a request (seed 000, "プロンプトのガイダンス"). An MCP
//! client injects nothing of the kind, so the description and the server
//! instructions carry the same three rules: view the memory directory
//! first, record progress as you go, assume interruption.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

use crate::command::COMMANDS;

/// The tool's name, the same as the API's memory tool.
pub const TOOL_NAME: &str = "memory";

/// What the tool description tells the model: the API memory tool's own
/// description and the protocol the API injects for it.
pub const DESCRIPTION: &str = "\
Your memory directory, /memories, which persists across conversations, sessions and clients. \
IMPORTANT: ALWAYS VIEW YOUR MEMORY DIRECTORY BEFORE DOING ANYTHING ELSE: use the `view` command \
on /memories to check for earlier progress. As you make progress on a task, record status, \
progress and thoughts in your memory. ASSUME INTERRUPTION: your context window might be reset at \
any moment, so you risk losing any progress that is not recorded in your memory directory. \
Keep the directory up to date, coherent and organized: rename or delete files that are no longer \
relevant, and do not create new files unless necessary. \
Commands: `view` (a directory listing, or a file with line numbers; optional `view_range` \
[start, end], end -1 for the last line) only reads; `create` (path, file_text), `str_replace` \
(path, old_str that must appear exactly once, new_str), `insert` (path, insert_line: 0 for the \
top, insert_text), `delete` (path) and `rename` (old_path, new_path) change the memory \
directory. Every path starts with /memories.";

/// The server instructions sent at initialization (clients may put them
/// in the system prompt): the API's injected memory protocol.
pub const INSTRUCTIONS: &str = "\
IMPORTANT: ALWAYS VIEW YOUR MEMORY DIRECTORY BEFORE DOING ANYTHING ELSE.
MEMORY PROTOCOL:
1. Use the `view` command of your `memory` tool to check for earlier progress.
2. ... (work on the task) ...
   - As you make progress, record status / progress / thoughts etc in your memory.
ASSUME INTERRUPTION: Your context window might be reset at any moment, so you risk losing any progress that is not recorded in your memory directory.";

/// The input schema: every field of SPEC §1, `command` an enum of the six
/// names. Only `command` is required here: which other fields a command
/// needs is checked by the handler, whose answer is the SPEC §4 string a
/// model can act on (a client that validates against a `oneOf`, a
/// `minimum` or an item count would instead refuse the call before the
/// model sees SPEC's answer).
pub fn input_schema() -> JsonObject {
    let schema = json!({
        "type": "object",
        "properties": {
            "command": {
                "type": "string",
                "enum": COMMANDS,
                "description": "view reads; create, str_replace, insert, delete and rename change the memory directory"
            },
            "path": {
                "type": "string",
                "description": "The file or directory, starting with /memories (view, create, str_replace, insert, delete)"
            },
            "view_range": {
                "type": "array",
                "items": {"type": "integer"},
                "description": "view of a file only: [start, end], 1-based and inclusive; end -1 means the last line"
            },
            "file_text": {"type": "string", "description": "create: the whole content of the new file"},
            "old_str": {"type": "string", "description": "str_replace: the text to replace; it must appear exactly once"},
            "new_str": {"type": "string", "description": "str_replace: the replacement (absent: delete old_str)"},
            "insert_line": {"type": "integer", "description": "insert: the line after which to insert (0 for the top)"},
            "insert_text": {"type": "string", "description": "insert: the text to insert"},
            "old_path": {"type": "string", "description": "rename: the file or directory to move"},
            "new_path": {"type": "string", "description": "rename: where to move it"}
        },
        "required": ["command"]
    });
    match schema {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

/// The annotations: the tool writes (`create`, `str_replace`, `insert`,
/// `rename`) and can destroy (`delete`), is not idempotent (a second
/// `create` fails, a second `insert` adds again), and touches only the
/// memory store. MCP annotates a whole tool, not one command, so the
/// per-command split is in the description and the `command` schema.
pub fn annotations() -> ToolAnnotations {
    ToolAnnotations::with_title("Memory")
        .read_only(false)
        .destructive(true)
        .idempotent(false)
        .open_world(false)
}

/// The whole tool, as `tools/list` sends it.
pub fn tool() -> Tool {
    Tool::new(TOOL_NAME, DESCRIPTION, Arc::new(input_schema()))
        .with_title("Memory")
        .with_annotations(annotations())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_has_every_field_and_the_command_enum() {
        let schema = Value::Object(input_schema());
        let fields = [
            "command",
            "path",
            "view_range",
            "file_text",
            "old_str",
            "new_str",
            "insert_line",
            "insert_text",
            "old_path",
            "new_path",
        ];
        for field in fields {
            assert!(schema["properties"][field].is_object(), "{field}");
        }
        assert_eq!(
            schema["properties"]["command"]["enum"],
            json!([
                "view",
                "create",
                "str_replace",
                "insert",
                "delete",
                "rename"
            ])
        );
    }

    #[test]
    fn the_description_carries_the_injected_protocol() {
        for rule in [
            "ALWAYS VIEW YOUR MEMORY DIRECTORY BEFORE DOING ANYTHING ELSE",
            "record status",
            "ASSUME INTERRUPTION",
        ] {
            assert!(DESCRIPTION.contains(rule), "{rule}");
        }
        assert!(INSTRUCTIONS.contains("ASSUME INTERRUPTION"));
    }
}
