//! The shared conformance suite, run against both built-in backends.

use std::collections::BTreeMap;

/// The tests `conformance_tests!` generated, as this binary's test harness
/// lists them, are exactly `CASES` in every module that uses the macro, so
/// `run_all` and `examples/custom_store.rs` run what `cargo test` runs.
#[test]
fn generated_tests_are_exactly_the_listed_cases() {
    let exe = std::env::current_exe().expect("this test binary");
    let out = std::process::Command::new(exe)
        .args(["--list", "--format", "terse"])
        .output()
        .expect("list this binary's tests");
    assert!(out.status.success(), "--list failed: {out:?}");
    let listing = String::from_utf8(out.stdout).expect("UTF-8 listing");
    let mut modules: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for test in listing.lines().filter_map(|l| l.strip_suffix(": test")) {
        if let Some((module, name)) = test.rsplit_once("::") {
            modules.entry(module).or_default().push(name);
        }
    }
    let mut cases: Vec<&str> = claude_memory::conformance::CASES
        .iter()
        .map(|(name, _)| *name)
        .collect();
    cases.sort_unstable();
    assert!(modules.contains_key("in_memory"), "listing: {listing}");
    for (module, mut tests) in modules {
        tests.sort_unstable();
        assert_eq!(tests, cases, "module {module}");
    }
}

mod in_memory {
    claude_memory::conformance_tests!(|run| run(&claude_memory::InMemoryStore::new()));
}

mod filesystem {
    claude_memory::conformance_tests!(|run| {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = claude_memory::FilesystemStore::open(dir.path()).expect("open store");
        run(&store);
    });
}

mod filesystem_not_durable {
    claude_memory::conformance_tests!(|run| {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = claude_memory::FilesystemStore::builder(dir.path())
            .durable(false)
            .open()
            .expect("open store");
        run(&store);
    });
}

mod filesystem_without_openat2 {
    claude_memory::conformance_tests!(|run| {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = claude_memory::FilesystemStore::builder(dir.path())
            .use_openat2(false)
            .open()
            .expect("open store");
        run(&store);
    });
}

/// A tenant's store over a base shared with another tenant, whose files
/// must never show through.
mod tenant_over_in_memory {
    use std::sync::Arc;

    use claude_memory::store::{MemoryStoreExt as _, WriteMode};
    use claude_memory::{InMemoryStore, MemoryPath, TenantId, TenantStore};

    claude_memory::conformance_tests!(|run| {
        let base = Arc::new(InMemoryStore::new());
        let other = TenantStore::new(Arc::clone(&base), TenantId::parse("bob").expect("id"));
        let p = MemoryPath::parse("/memories/bob-secret.md").expect("path");
        other
            .write(&p, b"bob's", WriteMode::Create)
            .expect("bob's file");
        run(&TenantStore::new(
            base,
            TenantId::parse("alice").expect("id"),
        ));
    });
}

mod tenant_over_filesystem {
    use claude_memory::{FilesystemStore, TenantId, TenantStore};

    claude_memory::conformance_tests!(|run| {
        let dir = tempfile::tempdir().expect("temporary directory");
        let base = FilesystemStore::builder(dir.path())
            .durable(false)
            .open()
            .expect("open");
        std::fs::create_dir_all(dir.path().join("bob")).expect("bob");
        std::fs::write(dir.path().join("bob/secret.md"), "bob's").expect("bob's file");
        run(&TenantStore::new(
            base,
            TenantId::parse("alice").expect("id"),
        ));
    });
}

#[cfg(feature = "sqlite")]
mod sqlite_in_memory {
    claude_memory::conformance_tests!(|run| run(
        &claude_memory::SqliteStore::open_in_memory().expect("sqlite")
    ));
}

#[cfg(feature = "sqlite")]
mod sqlite_file_with_other_tenant {
    use claude_memory::store::{MemoryStoreExt as _, WriteMode};
    use claude_memory::{MemoryPath, SqliteStore, TenantId};

    claude_memory::conformance_tests!(|run| {
        let dir = tempfile::tempdir().expect("temporary directory");
        let db = SqliteStore::open(dir.path().join("memory.db")).expect("sqlite");
        let bob = db.for_tenant(&TenantId::parse("bob").expect("id"));
        let p = MemoryPath::parse("/memories/bob/secret.md").expect("path");
        bob.write(&p, b"bob's", WriteMode::Create)
            .expect("bob's file");
        run(&db.for_tenant(&TenantId::parse("alice").expect("id")));
    });
}

/// PostgreSQL: each case on a fresh tenant of the test database. Skipped
/// (with a printed reason) without CLAUDE_MEMORY_TEST_POSTGRES_URL, unless
/// CLAUDE_MEMORY_REQUIRE_POSTGRES is set, as in CI.
#[cfg(feature = "postgres")]
mod postgres {
    use std::sync::atomic::{AtomicU64, Ordering};

    use claude_memory::{PostgresStore, TenantId};

    static N: AtomicU64 = AtomicU64::new(0);

    pub fn fresh() -> Option<PostgresStore> {
        let Ok(url) = std::env::var("CLAUDE_MEMORY_TEST_POSTGRES_URL") else {
            assert!(
                std::env::var_os("CLAUDE_MEMORY_REQUIRE_POSTGRES").is_none(),
                "CLAUDE_MEMORY_REQUIRE_POSTGRES is set but CLAUDE_MEMORY_TEST_POSTGRES_URL is not"
            );
            eprintln!("skipped: set CLAUDE_MEMORY_TEST_POSTGRES_URL to run the PostgreSQL tests");
            return None;
        };
        let store = PostgresStore::connect(&url, 4).expect("connect to the test database");
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let id = format!(
            "t{}-{}-{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        Some(store.for_tenant(&TenantId::parse(&id).expect("tenant id")))
    }

    claude_memory::conformance_tests!(|run| {
        if let Some(store) = fresh() {
            run(&store);
        }
    });
}

/// The whole suite through a `HistoryStore`: with history on, the model
/// sees exactly the same answers.
mod history_over_in_memory {
    claude_memory::conformance_tests!(|run| run(&claude_memory::history::HistoryStore::open(
        claude_memory::InMemoryStore::new(),
        claude_memory::history::MemoryLog::new()
    )
    .expect("history")));
}

mod history_over_filesystem {
    use claude_memory::FilesystemStore;
    use claude_memory::history::{FileLog, HistoryStore};

    claude_memory::conformance_tests!(|run| {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = FilesystemStore::open(dir.path()).expect("open store");
        let log = FileLog::for_store(dir.path()).expect("log");
        run(&HistoryStore::open(store, log).expect("history"));
    });
}

#[cfg(feature = "sqlite")]
mod history_over_sqlite {
    use claude_memory::SqliteStore;
    use claude_memory::history::{HistoryStore, SqliteLog};

    claude_memory::conformance_tests!(|run| {
        let dir = tempfile::tempdir().expect("temporary directory");
        let db = dir.path().join("memory.db");
        let store = SqliteStore::open(&db).expect("sqlite");
        let log = SqliteLog::for_store(&store, "").expect("log");
        run(&HistoryStore::open(store, log).expect("history"));
    });
}
