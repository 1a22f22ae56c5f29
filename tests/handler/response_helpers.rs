//! Response helpers, typed blocks and the async handler.

use claude_memory::api::{self, ContentBlock, ToolResultContent};
use claude_memory::store::MemoryStoreExt as _;
use claude_memory::{
    InMemoryStore, MemoryTool, ToolResultBlock, ToolUseBlock, tool_definition,
    tool_definition_with_cache_control,
};
use serde_json::{Value, json};

fn response() -> Value {
    json!({
        "id": "msg_01", "type": "message", "role": "assistant",
        "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_a", "name": "memory", "input": {"command": "create", "path": "/memories/a.md", "file_text": "one\n"}},
            {"type": "tool_use", "id": "toolu_w", "name": "get_weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "toolu_b", "name": "memory", "input": {"command": "str_replace", "path": "/memories/a.md", "old_str": "one", "new_str": "two"}},
            {"type": "tool_use", "id": "toolu_c", "name": "memory", "input": {"command": "view", "path": "/memories/a.md"}},
        ],
        "stop_reason": "tool_use",
    })
}

#[test]
fn memory_calls_run_in_order_and_other_tools_are_left_alone() {
    let tool = MemoryTool::new(InMemoryStore::new());
    let r = response();
    let other: Vec<&str> = api::other_tool_uses(&r)
        .filter_map(|b| b["id"].as_str())
        .collect();
    assert_eq!(other, ["toolu_w"]);
    assert_eq!(
        tool.run_tool_uses(&r),
        vec![
            json!({"type": "tool_result", "tool_use_id": "toolu_a", "content": "File created successfully at: /memories/a.md"}),
            json!({"type": "tool_result", "tool_use_id": "toolu_b", "content": "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\ttwo"}),
            json!({"type": "tool_result", "tool_use_id": "toolu_c", "content": "Here's the content of /memories/a.md with line numbers:\n     1\ttwo"}),
        ]
    );
    // The content array alone works too; the calls run again (and the
    // create now fails, in order, with its own id).
    let again = tool.reply(&r["content"]);
    assert_eq!(again["role"], "user");
    assert_eq!(
        again["content"][0],
        json!({"type": "tool_result", "tool_use_id": "toolu_a", "content": "Error: File /memories/a.md already exists", "is_error": true})
    );
    // Every tool_use gets its tool_result, in order: the other tool's call
    // is answered with an error result instead of being dropped (a dropped
    // call makes the API refuse the next request).
    assert_eq!(again["content"].as_array().map(Vec::len), Some(4));
    assert_eq!(
        again["content"][1],
        json!({"type": "tool_result", "tool_use_id": "toolu_w", "content": "Error: The tool \"get_weather\" is not available here. Do not call it again; go on without it.", "is_error": true})
    );
    let ids: Vec<&str> = again["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["tool_use_id"].as_str())
        .collect();
    assert_eq!(ids, ["toolu_a", "toolu_w", "toolu_b", "toolu_c"]);
}

#[test]
fn responses_without_memory_calls_give_no_results() {
    let tool = MemoryTool::new(InMemoryStore::new());
    for r in [
        json!({"content": [{"type": "text", "text": "hi"}]}),
        json!([]),
        json!("nonsense"),
        json!({"content": 5}),
    ] {
        assert!(tool.run_tool_uses(&r).is_empty(), "{r}");
    }
}

#[test]
fn tool_definitions() {
    assert_eq!(
        tool_definition(),
        json!({"type": "memory_20250818", "name": "memory"})
    );
    assert_eq!(
        tool_definition_with_cache_control(json!({"type": "ephemeral"})),
        json!({"type": "memory_20250818", "name": "memory", "cache_control": {"type": "ephemeral"}})
    );
}

#[test]
fn typed_blocks_round_trip_the_api_json_exactly() {
    let blocks = [
        json!({"type": "tool_result", "tool_use_id": "toolu_1", "content": "text"}),
        json!({"type": "tool_result", "tool_use_id": "toolu_1", "content": "bad", "is_error": true}),
        json!({"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok", "is_error": false}),
        json!({"type": "tool_result", "tool_use_id": "toolu_1"}),
        json!({"type": "tool_result", "tool_use_id": "toolu_1", "content": [
            {"type": "text", "text": "a"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        ], "cache_control": {"type": "ephemeral"}}),
    ];
    for b in blocks {
        let typed: ToolResultBlock = serde_json::from_value(b.clone()).expect("parse");
        assert_eq!(serde_json::to_value(&typed).expect("serialize"), b);
    }
    let use_block = json!({"type": "tool_use", "id": "toolu_9", "name": "memory", "input": {"command": "view", "path": "/memories"}, "caller": {"type": "direct"}});
    let typed: ToolUseBlock = serde_json::from_value(use_block.clone()).expect("parse");
    assert_eq!(serde_json::to_value(&typed).expect("serialize"), use_block);
    assert!(serde_json::from_value::<ToolUseBlock>(json!({"type": "text", "text": "x"})).is_err());
}

#[test]
fn typed_calls_give_typed_results() {
    let tool = MemoryTool::new(InMemoryStore::new());
    let call: ToolUseBlock = serde_json::from_value(json!({"type": "tool_use", "id": "toolu_t", "name": "memory", "input": {"command": "delete", "path": "/memories/x"}})).expect("parse");
    let result = tool.run_block(&call);
    assert_eq!(result.tool_use_id, "toolu_t");
    assert_eq!(result.is_error, Some(true));
    assert_eq!(
        result.content,
        Some(ToolResultContent::Text(
            "Error: The path /memories/x does not exist".into()
        ))
    );
    let png = tool.store().write(
        &claude_memory::MemoryPath::parse("/memories/p.png").expect("path"),
        b"\x89PNG\r\n\x1a\n",
        claude_memory::store::WriteMode::Create,
    );
    assert!(png.is_ok());
    let call = ToolUseBlock {
        id: "toolu_p".into(),
        name: "memory".into(),
        input: json!({"command": "view", "path": "/memories/p.png"}),
        extra: Default::default(),
    };
    let result = tool.run_block(&call);
    assert_eq!(result.is_error, None);
    match result.content {
        Some(ToolResultContent::Blocks(blocks)) => {
            assert!(matches!(&blocks[..], [ContentBlock::Image { .. }]))
        }
        other => panic!("expected an image block, got {other:?}"),
    }
}

#[cfg(feature = "tokio")]
mod on_tokio {
    use std::future::Future;

    use claude_memory::{AsyncMemoryTool, InMemoryStore, MemoryTool};
    use serde_json::json;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_async_handler_answers_like_the_sync_one() {
        let tool = AsyncMemoryTool::new(MemoryTool::new(InMemoryStore::new()));
        let created = tool
            .dispatch(&json!({"type": "tool_use", "id": "toolu_1", "name": "memory", "input": {"command": "create", "path": "/memories/a.md", "file_text": "x\n"}}))
            .await;
        assert_eq!(
            created.to_json(),
            json!({"type": "tool_result", "tool_use_id": "toolu_1", "content": "File created successfully at: /memories/a.md"})
        );
        // Many concurrent calls from tasks: none blocks the runtime.
        let tasks: Vec<_> = (0..20)
            .map(|i| {
                let tool = tool.clone();
                tokio::spawn(async move {
                    tool.dispatch(&json!({"command": "insert", "path": "/memories/a.md", "insert_line": 0, "insert_text": format!("line {i}")})).await
                })
            })
            .collect();
        for t in tasks {
            assert!(!t.await.expect("task").is_error);
        }
        let reply = tool
            .reply(&json!({"content": [{"type": "tool_use", "id": "toolu_2", "name": "memory", "input": {"command": "view", "path": "/memories/a.md", "view_range": [21, 21]}}]}))
            .await;
        assert_eq!(
            reply["content"][0]["content"],
            "Here's the content of /memories/a.md with line numbers:\n    21\tx"
        );
    }

    #[test]
    fn outside_a_runtime_it_runs_inline() {
        let tool = AsyncMemoryTool::new(MemoryTool::new(InMemoryStore::new()));
        let input = json!({"command": "view", "path": "/memories"});
        let mut fut = std::pin::pin!(tool.dispatch(&input));
        // No Tokio runtime here: the first poll runs the call and is ready.
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match fut.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(result) => assert!(!result.is_error),
            std::task::Poll::Pending => panic!("pending outside a runtime"),
        }
    }
}
