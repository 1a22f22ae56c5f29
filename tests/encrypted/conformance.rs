//! The encrypted store (issue 21): the whole conformance suite and the
//! history cases over the in-memory, filesystem, SQLite and PostgreSQL
//! stores, and over the cloud store on moto and Azurite; no plaintext in
//! any raw byte afterwards; tampering; keys.
#![cfg(feature = "encryption")]

use std::sync::Arc;

use claude_memory::history::SealedLog;
use claude_memory::history::{FileLog, HistoryLog, MemoryLog};
use claude_memory::store::crypt::{EncryptedStore, Key, Keyring};
use claude_memory::{FilesystemStore, InMemoryStore};

fn ring() -> Keyring {
    Keyring::new(Key::generate().expect("key"))
}

mod over_in_memory {
    use super::*;
    claude_memory::conformance_tests!(|run| run(&EncryptedStore::open(
        InMemoryStore::new(),
        ring()
    )
    .expect("open")));
}

mod over_filesystem {
    use super::*;
    claude_memory::conformance_tests!(|run| {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = FilesystemStore::open(dir.path()).expect("open store");
        run(&EncryptedStore::open(store, ring()).expect("open"));
    });
}

#[cfg(feature = "sqlite")]
mod over_sqlite {
    use super::*;
    claude_memory::conformance_tests!(|run| {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = claude_memory::SqliteStore::open(dir.path().join("m.db")).expect("sqlite");
        run(&EncryptedStore::open(store, ring()).expect("open"));
    });
}

#[cfg(feature = "postgres")]
mod over_postgres {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    static N: AtomicU64 = AtomicU64::new(0);

    pub fn fresh() -> Option<claude_memory::PostgresStore> {
        fresh_with_id().map(|(store, _)| store)
    }

    /// A fresh tenant's store, and the tenant id (a history log's scope).
    pub fn fresh_with_id() -> Option<(claude_memory::PostgresStore, String)> {
        let Ok(url) = std::env::var("CLAUDE_MEMORY_TEST_POSTGRES_URL") else {
            assert!(
                std::env::var_os("CLAUDE_MEMORY_REQUIRE_POSTGRES").is_none(),
                "CLAUDE_MEMORY_REQUIRE_POSTGRES is set but CLAUDE_MEMORY_TEST_POSTGRES_URL is not"
            );
            eprintln!("skipped: set CLAUDE_MEMORY_TEST_POSTGRES_URL to run the PostgreSQL tests");
            return None;
        };
        let store = claude_memory::PostgresStore::connect(&url, 4).expect("connect");
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let id = format!(
            "enc{}-{}-{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let tenant = store.for_tenant(&claude_memory::TenantId::parse(&id).expect("tenant id"));
        Some((tenant, id))
    }

    claude_memory::conformance_tests!(|run| {
        if let Some(store) = fresh() {
            run(&EncryptedStore::open(store, ring()).expect("open"));
        }
    });
}

/// The history cases: `HistoryStore` over the encrypted store, its log
/// sealed with the store's keys.
mod history_over_in_memory {
    use super::*;
    claude_memory::history_conformance_tests!(|run| {
        let store = EncryptedStore::open(InMemoryStore::new(), ring()).expect("open");
        let log: Arc<dyn HistoryLog> = Arc::new(SealedLog::new(MemoryLog::new(), &store));
        run(&store, &|| Arc::clone(&log));
    });
}

mod history_over_filesystem {
    use super::*;
    claude_memory::history_conformance_tests!(|run| {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = EncryptedStore::open(FilesystemStore::open(dir.path()).expect("open"), ring())
            .expect("open");
        let path = dir.path().to_owned();
        let sealer = claude_memory::history::LogSealer::new(&store);
        run(&store, &move || {
            Arc::new(sealer.wrap(FileLog::for_store(&path).expect("log"))) as Arc<dyn HistoryLog>
        });
    });
}

/// The history cases over the encrypted PostgreSQL store, its log (a
/// `PostgresLog` in the same database) sealed with the store's keys.
#[cfg(feature = "postgres")]
mod history_over_postgres {
    use super::*;
    use claude_memory::history::PostgresLog;

    claude_memory::history_conformance_tests!(|run| {
        let Some((base, scope)) = super::over_postgres::fresh_with_id() else {
            return;
        };
        let Ok(url) = std::env::var("CLAUDE_MEMORY_TEST_POSTGRES_URL") else {
            return;
        };
        let store = EncryptedStore::open(base, ring()).expect("open");
        let log: Arc<dyn HistoryLog> = Arc::new(SealedLog::new(
            PostgresLog::connect(&url, &scope).expect("log"),
            &store,
        ));
        run(&store, &|| Arc::clone(&log));
    });
}

/// The history cases over the encrypted SQLite store, its log in the
/// store's own database (`SqliteLog::for_store`), sealed.
#[cfg(feature = "sqlite")]
mod history_over_sqlite {
    use super::*;
    use claude_memory::history::SqliteLog;

    claude_memory::history_conformance_tests!(|run| {
        let dir = tempfile::tempdir().expect("temporary directory");
        let base = claude_memory::SqliteStore::open(dir.path().join("m.db")).expect("sqlite");
        let inner = SqliteLog::for_store(&base, "").expect("log");
        let store = EncryptedStore::open(base, ring()).expect("open");
        let log: Arc<dyn HistoryLog> = Arc::new(SealedLog::new(inner, &store));
        run(&store, &|| Arc::clone(&log));
    });
}

#[cfg(all(feature = "s3", feature = "azure"))]
#[path = "../cloud_support/mod.rs"]
mod cloud_support;

/// The encrypted store over the cloud store, on moto's S3 and on Azurite
/// (started by `.ci/cloud.sh`; skipped with a printed line without them):
/// the whole conformance suite, and the history cases with the sealed
/// log in the same bucket (`CloudLog`).
#[cfg(all(feature = "s3", feature = "azure"))]
mod over_cloud {
    use super::*;

    fn encrypted(backend: &str) -> Option<EncryptedStore<claude_memory::CloudStore>> {
        let base = crate::cloud_support::fresh(backend)?;
        Some(EncryptedStore::open(base, ring()).expect("open"))
    }

    macro_rules! on {
        ($name:ident, $history:ident, $backend:literal) => {
            mod $name {
                claude_memory::conformance_tests!(|run| {
                    if let Some(store) = super::encrypted($backend) {
                        run(&store);
                    }
                });
            }
            mod $history {
                use super::*;
                claude_memory::history_conformance_tests!(one_request_per_version, |run| {
                    if let Some(base) = crate::cloud_support::fresh($backend) {
                        let inner = claude_memory::history::CloudLog::for_store(&base);
                        let store = EncryptedStore::open(base, ring()).expect("open");
                        let log: Arc<dyn HistoryLog> = Arc::new(SealedLog::new(inner, &store));
                        run(&store, &|| Arc::clone(&log));
                    }
                });
            }
        };
    }

    on!(s3, history_s3, "s3");
    on!(azure, history_azure, "azure");
}
