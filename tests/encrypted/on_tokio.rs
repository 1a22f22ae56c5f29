//! The encrypted store's public types created, used and dropped inside a
//! Tokio runtime (both flavours), in `spawn_blocking`, and on a plain
//! thread (issue 21, GUIDE): a key file, a passphrase (Argon2id), a
//! keyring, the store over the filesystem, in-memory and (when a server is
//! given) PostgreSQL stores, a sealed history log, and a rekey.
#![cfg(all(feature = "encryption", feature = "tokio"))]

use std::sync::Arc;

use claude_memory::history::SealedLog;
use claude_memory::history::{HistoryLog, HistoryStore, MemoryLog};
use claude_memory::store::crypt::{EncryptedStore, Key, Keyring, Passphrase};
use claude_memory::{AsyncMemoryTool, FilesystemStore, InMemoryStore, MemoryStore, MemoryTool};
use serde_json::json;

/// Create, view, rename and view again, through the async tool.
async fn round_trip<S: MemoryStore + 'static>(tool: AsyncMemoryTool<S>) {
    let created = tool
        .dispatch(&json!({"command": "create", "path": "/memories/t.md", "file_text": "secret\n"}))
        .await;
    assert!(!created.is_error, "{created:?}");
    let renamed = tool
        .dispatch(&json!({"command": "rename", "old_path": "/memories/t.md", "new_path": "/memories/d/u.md"}))
        .await;
    assert!(!renamed.is_error, "{renamed:?}");
    let view = tool
        .dispatch(&json!({"command": "view", "path": "/memories/d/u.md"}))
        .await;
    assert_eq!(
        view.text(),
        Some("Here's the content of /memories/d/u.md with line numbers:\n     1\tsecret")
    );
    drop(tool);
}

/// Everything synchronous: opening (key record, passphrase KDF, recovery
/// of moves) blocks, so on a runtime it is called where blocking is
/// allowed or briefly inline, as an agent would.
fn open_all(dir: &std::path::Path) -> Vec<Box<dyn MemoryStore>> {
    let key_path = dir.join("key");
    let key = Key::generate_file(&key_path).expect("key file");
    assert_eq!(Key::from_file(&key_path).expect("read").id(), key.id());
    let fs = FilesystemStore::open(dir.join("fs")).expect("fs");
    let over_fs = EncryptedStore::open(fs, Keyring::new(key.clone())).expect("open fs");
    let ring = Keyring::from_passphrase(Passphrase::new("correct horse")).with_kdf_costs(64, 1, 1);
    let over_mem = EncryptedStore::open(InMemoryStore::new(), ring).expect("open mem");
    // Mutable only when the PostgreSQL store is added below.
    #[cfg_attr(not(feature = "postgres"), allow(unused_mut))]
    let mut stores: Vec<Box<dyn MemoryStore>> = vec![Box::new(over_fs), Box::new(over_mem)];
    #[cfg(feature = "postgres")]
    if let Ok(url) = std::env::var("CLAUDE_MEMORY_TEST_POSTGRES_URL") {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let id = format!(
            "enctokio{}-{}-{nanos}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let pg = claude_memory::PostgresStore::connect(&url, 2)
            .expect("connect")
            .for_tenant(&claude_memory::TenantId::parse(&id).expect("id"));
        stores.push(Box::new(
            EncryptedStore::open(pg, Keyring::new(key)).expect("open pg"),
        ));
    }
    stores
}

/// A history store over an encrypted store, its log sealed, then a rekey
/// to a new primary key, all in the calling context.
fn history_and_rekey() {
    let key = Key::generate().expect("key");
    let base = Arc::new(InMemoryStore::new());
    let store = EncryptedStore::open(Arc::clone(&base), Keyring::new(key.clone())).expect("open");
    let log: Arc<dyn HistoryLog> = Arc::new(SealedLog::new(MemoryLog::new(), &store));
    let history = HistoryStore::open(store.clone(), log).expect("history");
    let tool = MemoryTool::new(history);
    let r =
        tool.dispatch(&json!({"command": "create", "path": "/memories/h.md", "file_text": "v1\n"}));
    assert!(!r.is_error, "{r:?}");
    drop(tool);
    let rotated = EncryptedStore::open(
        base,
        Keyring::new(Key::generate().expect("new key")).with(key),
    )
    .expect("open with both");
    rotated.rekey().expect("rekey");
    let p = claude_memory::MemoryPath::parse("/memories/h.md").expect("path");
    assert_eq!(rotated.read(&p, 1 << 20).expect("read").data, b"v1\n");
}

async fn everything() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().to_owned();
    // In spawn_blocking, as an agent opens a store from async code.
    let stores = tokio::task::spawn_blocking(move || open_all(&path))
        .await
        .expect("spawn_blocking");
    for store in stores {
        round_trip(AsyncMemoryTool::new(MemoryTool::new(store))).await;
    }
    // And inline on the runtime thread (the calls are short).
    let inline = tempfile::tempdir().expect("dir");
    for store in open_all(inline.path()) {
        round_trip(AsyncMemoryTool::new(MemoryTool::new(store))).await;
    }
    history_and_rekey();
    tokio::task::spawn_blocking(history_and_rekey)
        .await
        .expect("spawn_blocking");
}

#[tokio::test(flavor = "current_thread")]
async fn on_a_current_thread_runtime() {
    everything().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_multi_thread_runtime() {
    everything().await;
}

#[test]
fn on_a_plain_thread() {
    std::thread::spawn(|| {
        let dir = tempfile::tempdir().expect("dir");
        for store in open_all(dir.path()) {
            let tool = MemoryTool::new(store);
            let r = tool.dispatch(
                &json!({"command": "create", "path": "/memories/a.md", "file_text": "x\n"}),
            );
            assert!(!r.is_error, "{r:?}");
        }
        history_and_rekey();
    })
    .join()
    .expect("thread");
}
