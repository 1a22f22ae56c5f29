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
