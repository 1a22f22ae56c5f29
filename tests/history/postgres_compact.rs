//! A prune or redact on PostgreSQL compacts the shared history table. CI
//! saw `history prune` fail with "gave up after waiting 10s for another
//! session's write lock" while other sessions used the table: the rewrite
//! (`VACUUM FULL`) waited for the exclusive lock with the pool's whole
//! lock timeout, and its failure failed the prune. Here another session
//! holds the table (an open transaction that read it) for longer than
//! that: the prune must succeed, and the pruned version must be gone.
#![cfg(feature = "postgres")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use claude_memory::history::{HistoryLog, HistoryStore, PostgresLog, Query, Retention};
use claude_memory::store::{MemoryStoreExt as _, WriteMode};
use claude_memory::{MemoryPath, MemoryStore, PostgresStore, TenantId};

fn url() -> Option<String> {
    let url = std::env::var("CLAUDE_MEMORY_TEST_POSTGRES_URL").ok();
    if url.is_none() {
        assert!(
            std::env::var_os("CLAUDE_MEMORY_REQUIRE_POSTGRES").is_none(),
            "CLAUDE_MEMORY_REQUIRE_POSTGRES is set but CLAUDE_MEMORY_TEST_POSTGRES_URL is not"
        );
        eprintln!("skipped: set CLAUDE_MEMORY_TEST_POSTGRES_URL to run the PostgreSQL tests");
    }
    url
}

#[test]
fn a_prune_while_another_session_holds_the_history_table_succeeds() {
    let Some(url) = url() else { return };
    let id = format!("compact{}", std::process::id());
    let store = PostgresStore::connect(&url, 2)
        .expect("connect")
        .for_tenant(&TenantId::parse(&id).expect("tenant id"));
    let log: Arc<dyn HistoryLog> = Arc::new(PostgresLog::connect(&url, &id).expect("log"));
    let history = HistoryStore::open(&store, Arc::clone(&log)).expect("history");
    let path = MemoryPath::parse("/memories/secret.md").expect("path");
    history
        .write(&path, b"token=hunter2\n", WriteMode::Create)
        .expect("create");
    history
        .write(&path, b"token=[gone]\n", WriteMode::Overwrite)
        .expect("overwrite");

    // Another session: a transaction that read the history table and
    // stays open for 12 s, holding its share lock (past the pool's 10 s
    // lock timeout).
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let holder = {
        let url = url.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                    .await
                    .expect("raw connect");
                tokio::spawn(conn);
                client
                    .batch_execute("BEGIN; SELECT count(*) FROM claude_memory_history")
                    .await
                    .expect("hold the table");
                held_tx.send(()).expect("signal");
                tokio::time::sleep(Duration::from_secs(12)).await;
                client.batch_execute("COMMIT").await.expect("commit");
            });
        })
    };
    held_rx.recv().expect("the table is held");

    let started = Instant::now();
    let removed = history
        .prune(&Retention {
            max_age: None,
            keep_per_file: Some(1),
        })
        .expect("the prune succeeds while the table is held");
    let took = started.elapsed();
    assert_eq!(removed.len(), 1, "{removed:?}");
    assert!(
        took < Duration::from_secs(10),
        "the prune waited {took:?}: it stalled behind the other session"
    );
    let left = history.versions(&Query::default()).expect("versions");
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(
        store.read(&path, 100).expect("live file").data,
        b"token=[gone]\n"
    );
    holder.join().expect("holder");
}
