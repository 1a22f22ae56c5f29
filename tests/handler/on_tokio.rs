//! Every public type created, used and dropped inside a Tokio runtime, on
//! both runtime flavours: most agent code runs there, and a type that
//! blocks, spawns its own runtime or panics on drop there is unusable.
#![cfg(feature = "tokio")]

use std::sync::Arc;

use claude_memory::policy::SecretDetector;
use claude_memory::{
    AsyncMemoryTool, Config, FilesystemStore, InMemoryStore, MemoryStore, MemoryTool, TenantId,
    TenantStore,
};
use serde_json::json;

/// Creates a file, views it and renames it through `tool`, on the runtime.
async fn round_trip<S: MemoryStore + 'static>(tool: AsyncMemoryTool<S>) {
    let created = tool
        .dispatch(&json!({"command": "create", "path": "/memories/t.md", "file_text": "x\n"}))
        .await;
    assert!(!created.is_error, "{created:?}");
    let view = tool
        .dispatch(&json!({"command": "view", "path": "/memories/t.md"}))
        .await;
    assert_eq!(
        view.text(),
        Some("Here's the content of /memories/t.md with line numbers:\n     1\tx")
    );
    let reply = tool
        .reply(
            &json!({"content": [{"type": "tool_use", "id": "toolu_1", "name": "memory",
            "input": {"command": "rename", "old_path": "/memories/t.md",
                      "new_path": "/memories/u.md"}}]}),
        )
        .await;
    assert_eq!(
        reply["content"][0]["content"],
        "Successfully renamed /memories/t.md to /memories/u.md"
    );
    drop(tool); // dropped on the runtime, inside async code
}

async fn every_store() {
    let dir = tempfile::tempdir().expect("temporary directory");
    round_trip(AsyncMemoryTool::new(MemoryTool::new(InMemoryStore::new()))).await;
    let fs = FilesystemStore::open(dir.path().join("fs")).expect("open");
    round_trip(AsyncMemoryTool::new(
        MemoryTool::with_config(fs, Config::default().with_max_store_size(1 << 20))
            .with_policy(SecretDetector::reject()),
    ))
    .await;
    let base = Arc::new(InMemoryStore::new());
    let tenant = TenantStore::new(Arc::clone(&base), TenantId::parse("alice").expect("id"));
    round_trip(AsyncMemoryTool::new(MemoryTool::new(tenant))).await;
    #[cfg(feature = "sqlite")]
    {
        let db = claude_memory::SqliteStore::open(dir.path().join("m.db")).expect("sqlite");
        round_trip(AsyncMemoryTool::new(MemoryTool::new(db))).await;
    }
    // Synchronous use inside async code works too (each call is short).
    let sync_tool = MemoryTool::new(InMemoryStore::new());
    let r = sync_tool.dispatch(&json!({"command": "view", "path": "/memories"}));
    assert!(!r.is_error);
    drop(sync_tool);
}

#[tokio::test(flavor = "current_thread")]
async fn on_a_current_thread_runtime() {
    every_store().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_multi_thread_runtime() {
    every_store().await;
}
