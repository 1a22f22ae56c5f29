//! The call context (the `tool_use` id, a note) reaches the history as a
//! value passed through the store's options, on every path a call takes:
//! a block, an already-parsed command, the async handler's blocking pool,
//! a tenant wrapped over the history, and never onto the next call.

use std::sync::Arc;

use claude_memory::history::{HistoryStore, MemoryLog, Query};
use claude_memory::store::{Context, MemoryStoreExt as _, WriteMode, WriteOptions};
use claude_memory::{
    AsyncMemoryTool, Command, InMemoryStore, MemoryPath, MemoryStore, MemoryTool, TenantId,
    TenantStore,
};
use serde_json::json;

type History = HistoryStore<InMemoryStore>;

fn history() -> History {
    HistoryStore::open(InMemoryStore::new(), MemoryLog::new()).expect("history")
}

/// Every version's call, oldest first.
fn calls(history: &History) -> Vec<Option<String>> {
    let versions = history.versions(&Query::default()).expect("records");
    versions.into_iter().map(|v| v.call).collect()
}

fn block(id: &str, input: serde_json::Value) -> serde_json::Value {
    json!({"type": "tool_use", "id": id, "name": "memory", "input": input})
}

#[test]
fn each_block_records_its_own_id_and_a_bare_call_none() {
    let tool = MemoryTool::new(history());
    let create = json!({"command": "create", "path": "/memories/a.md", "file_text": "one\n"});
    assert!(!tool.dispatch(&block("toolu_1", create)).is_error);
    let edit = json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "one", "new_str": "two"});
    assert!(!tool.dispatch(&edit).is_error);
    let insert = json!({"command": "insert", "path": "/memories/a.md", "insert_line": 1, "insert_text": "x"});
    assert!(!tool.dispatch(&block("toolu_3", insert)).is_error);
    let rename =
        json!({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/b.md"});
    assert!(!tool.dispatch(&block("toolu_4", rename)).is_error);
    let delete = json!({"command": "delete", "path": "/memories/b.md"});
    assert!(!tool.dispatch(&block("toolu_5", delete)).is_error);
    let id = |s: &str| Some(s.to_owned());
    assert_eq!(
        calls(tool.store()),
        [
            id("toolu_1"),
            None,
            id("toolu_3"),
            id("toolu_4"),
            id("toolu_5")
        ]
    );
}

#[test]
fn an_already_parsed_command_records_the_call_it_is_given() {
    let tool = MemoryTool::new(history());
    let command = Command::Create {
        path: "/memories/a.md".into(),
        file_text: "one\n".into(),
    };
    assert!(!tool.execute_call(&command, Some("toolu_parsed")).is_error);
    assert_eq!(calls(tool.store()), [Some("toolu_parsed".to_owned())]);
}

#[test]
fn a_tenant_over_a_history_passes_the_call_down() {
    let history = Arc::new(history());
    let alice = TenantStore::new(Arc::clone(&history), TenantId::parse("alice").expect("id"));
    let tool = MemoryTool::new(alice);
    let create = json!({"command": "create", "path": "/memories/a.md", "file_text": "one\n"});
    assert!(!tool.dispatch(&block("toolu_alice", create)).is_error);
    assert_eq!(calls(&history), [Some("toolu_alice".to_owned())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_async_handler_records_the_id_from_its_blocking_pool() {
    let tool = AsyncMemoryTool::new(MemoryTool::new(history()));
    let mut handles = Vec::new();
    for n in 0..8 {
        let tool = tool.clone();
        handles.push(tokio::spawn(async move {
            let input =
                json!({"command": "create", "path": format!("/memories/{n}.md"), "file_text": "x"});
            tool.dispatch(&block(&format!("toolu_{n}"), input)).await
        }));
    }
    for h in handles {
        assert!(!h.await.expect("join").is_error);
    }
    let versions = tool
        .tool()
        .store()
        .versions(&Query::default())
        .expect("records");
    assert_eq!(versions.len(), 8);
    for v in versions {
        let n = v
            .path
            .trim_start_matches("/memories/")
            .trim_end_matches(".md");
        assert_eq!(
            v.call.as_deref(),
            Some(format!("toolu_{n}").as_str()),
            "{v:?}"
        );
    }
}

#[test]
fn a_direct_write_carries_its_context_and_a_revert_its_note() {
    let history = history();
    let path = MemoryPath::parse("/memories/a.md").expect("path");
    let options = WriteOptions {
        context: Context {
            call: Some("job-7"),
            note: Some("nightly import"),
        },
        ..WriteMode::Create.into()
    };
    history.write_opts(&path, b"one\n", options).expect("write");
    history
        .write(&path, b"two\n", WriteMode::Overwrite)
        .expect("write");
    let reverted = history.revert(1).expect("revert").expect("a new version");
    let versions = history.versions(&Query::default()).expect("records");
    let seen: Vec<_> = versions
        .iter()
        .map(|v| (v.id, v.call.as_deref(), v.note.as_deref()))
        .collect();
    assert_eq!(
        seen,
        [
            (1, Some("job-7"), Some("nightly import")),
            (2, None, None),
            (reverted, None, Some("revert to v1")),
        ]
    );
}

/// A history below the encrypted store (`EncryptedStore<HistoryStore<_>>`)
/// still gets each call's id: the encrypted store passes the context of a
/// write, an edit (capped or not) and a delete down with the sealed bytes.
#[test]
fn a_history_below_the_encrypted_store_gets_the_call() {
    use claude_memory::store::crypt::{EncryptedStore, Key, Keyring};
    let history = Arc::new(history());
    let ring = Keyring::new(Key::generate().expect("key"));
    let encrypted = EncryptedStore::open(Arc::clone(&history), ring).expect("encrypted");
    let config = claude_memory::Config::default().with_max_store_size(1 << 20);
    let capped = MemoryTool::with_config(&encrypted, config);
    let tool = MemoryTool::new(&encrypted);
    let create = json!({"command": "create", "path": "/memories/a.md", "file_text": "one\n"});
    assert!(!tool.dispatch(&block("toolu_c", create)).is_error);
    let edit = json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "one", "new_str": "two"});
    assert!(!tool.dispatch(&block("toolu_e", edit)).is_error);
    let edit = json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "two", "new_str": "six"});
    assert!(!capped.dispatch(&block("toolu_capped", edit)).is_error);
    let delete = json!({"command": "delete", "path": "/memories/a.md"});
    assert!(!tool.dispatch(&block("toolu_d", delete)).is_error);
    // The encrypted store's own key record is written with no call.
    let ours: Vec<_> = history
        .versions(&Query::default())
        .expect("records")
        .into_iter()
        .filter_map(|v| v.call)
        .collect();
    assert_eq!(ours, ["toolu_c", "toolu_e", "toolu_capped", "toolu_d"]);
}
