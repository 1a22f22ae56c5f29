//! The shared conformance suite, run against both built-in backends.

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

    use claude_memory::store::WriteMode;
    use claude_memory::{InMemoryStore, MemoryPath, MemoryStore, TenantId, TenantStore};

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
