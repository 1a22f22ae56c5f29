//! Your own backend: implement `MemoryStore`'s primitives and prove it with
//! the same conformance suite the built-in stores pass.
//!
//! The backend here is an audit wrapper: it logs every mutation (never the
//! content) and counts them, around any other store. Run it with
//! `cargo run --example custom_store`. In your own crate's tests, one line
//! gives each conformance case its own `#[test]`:
//!
//! ```ignore
//! claude_memory::conformance_tests!(|run| run(&AuditStore::new(InMemoryStore::new(), true)));
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};

use claude_memory::store::{
    Change, DeleteOptions, DirEntry, FileContent, FileReader, Lock, Metadata, RenameOptions,
    StoreResult, Tree, UpdateOptions, Updated, Version, WriteOptions,
};
use claude_memory::{InMemoryStore, MemoryPath, MemoryStore, MemoryTool, conformance};
use serde_json::json;

/// Logs and counts the mutations of another store.
struct AuditStore<S> {
    inner: S,
    quiet: bool,
    writes: AtomicUsize,
}

impl<S: MemoryStore> AuditStore<S> {
    fn new(inner: S, quiet: bool) -> Self {
        let writes = AtomicUsize::new(0);
        AuditStore {
            inner,
            quiet,
            writes,
        }
    }

    fn log<T>(&self, what: String, result: StoreResult<T>) -> StoreResult<T> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        if !self.quiet {
            match &result {
                Ok(_) => eprintln!("audit: {what}: ok"),
                Err(e) => eprintln!("audit: {what}: refused ({e})"),
            }
        }
        result
    }
}

// A wrapper forwards every method, provided ones too, or the trait's
// defaults replace the inner store's own (a FilesystemStore's locked
// `update_opts` and `exclusive`). The lint makes a new trait method a
// compile error here until it is forwarded.
#[deny(clippy::missing_trait_methods)]
impl<S: MemoryStore> MemoryStore for AuditStore<S> {
    fn stat(&self, path: &MemoryPath) -> StoreResult<Option<Metadata>> {
        self.inner.stat(path)
    }

    fn read(&self, path: &MemoryPath, limit: u64) -> StoreResult<FileContent> {
        self.inner.read(path, limit)
    }

    fn open(&self, path: &MemoryPath) -> StoreResult<FileReader<'_>> {
        self.inner.open(path)
    }

    fn list(&self, dir: &MemoryPath) -> StoreResult<Vec<DirEntry>> {
        self.inner.list(dir)
    }

    fn list_tree(&self, dir: &MemoryPath) -> StoreResult<Option<Tree>> {
        self.inner.list_tree(dir)
    }

    fn max_files(&self) -> Option<u64> {
        self.inner.max_files()
    }

    fn write_opts(
        &self,
        path: &MemoryPath,
        data: &[u8],
        options: WriteOptions<'_>,
    ) -> StoreResult<Version> {
        let what = format!("write {path} ({} bytes, {:?})", data.len(), options.mode);
        self.log(what, self.inner.write_opts(path, data, options))
    }

    fn update_opts(
        &self,
        path: &MemoryPath,
        options: UpdateOptions<'_>,
        change: &mut Change<'_>,
    ) -> StoreResult<Updated> {
        self.log(
            format!("update {path}"),
            self.inner.update_opts(path, options, change),
        )
    }

    fn delete_opts(&self, path: &MemoryPath, options: DeleteOptions<'_>) -> StoreResult<bool> {
        let what = format!("delete {path} ({:?})", options.condition);
        self.log(what, self.inner.delete_opts(path, options))
    }

    fn rename_opts(
        &self,
        from: &MemoryPath,
        to: &MemoryPath,
        options: RenameOptions<'_>,
    ) -> StoreResult<()> {
        let what = format!("rename {from} -> {to}");
        self.log(what, self.inner.rename_opts(from, to, options))
    }

    /// The inner store's lock: the wrapper adds none, and a rename by a
    /// wrapper above it (the encrypted store) needs the real one.
    fn exclusive(
        &self,
        path: &MemoryPath,
        f: &mut dyn FnMut(Lock) -> StoreResult<()>,
    ) -> StoreResult<()> {
        self.inner.exclusive(path, f)
    }
}

fn main() {
    // 1. Prove the backend: every conformance case, each on a fresh store.
    for (_, case) in conformance::CASES {
        conformance::run_case(*case, |run| {
            run(&AuditStore::new(InMemoryStore::new(), true))
        });
    }
    println!("conformance: every case passed on AuditStore<InMemoryStore>\n");

    // 2. Use it.
    let tool = MemoryTool::new(AuditStore::new(InMemoryStore::new(), false));
    for input in [
        json!({"command": "create", "path": "/memories/prefs.md", "file_text": "- dark mode\n"}),
        json!({"command": "str_replace", "path": "/memories/prefs.md", "old_str": "dark", "new_str": "light"}),
        json!({"command": "rename", "old_path": "/memories/prefs.md", "new_path": "/memories/user/prefs.md"}),
        json!({"command": "view", "path": "/memories/user/prefs.md"}),
    ] {
        let result = tool.dispatch(&input);
        println!("{input}\n  -> {}", result.text().unwrap_or("(image)"));
    }
    println!(
        "\n{} mutations",
        tool.store().writes.load(Ordering::Relaxed)
    );
}
