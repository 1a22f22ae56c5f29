//! `CloudStore` over object_store's own in-memory backend (no server):
//! the whole conformance suite, and the refusal of a backend without
//! conditional updates (object_store's `LocalFileSystem`). The same suite
//! runs against real S3 (moto) and Azure (Azurite) servers in
//! tests/cloud/servers.rs.
#![cfg(feature = "cloud")]

use std::sync::Arc;

use claude_memory::object_store::local::LocalFileSystem;
use claude_memory::object_store::memory::InMemory;
use claude_memory::{CloudError, CloudStore};

fn fresh() -> CloudStore {
    CloudStore::open(Arc::new(InMemory::new()), "prefix/of/store").expect("open")
}

claude_memory::conformance_tests!(|run| run(&fresh()));

#[test]
fn a_backend_without_conditional_updates_is_refused_at_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let local = LocalFileSystem::new_with_prefix(dir.path()).expect("local");
    match CloudStore::open(Arc::new(local), "") {
        Err(CloudError::NoConditionalWrites(why)) => {
            println!("refused: {why}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

mod history {
    use claude_memory::history::HistoryLog;
    use std::sync::Arc;
    claude_memory::history_conformance_tests!(|run| {
        let store = super::fresh();
        let log = || -> Arc<dyn HistoryLog> {
            Arc::new(claude_memory::history::CloudLog::for_store(&store))
        };
        run(&store, &log);
    });
}
