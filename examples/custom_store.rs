//! Your own backend: implement `MemoryStore`'s primitives and prove it with
//! the same conformance suite the built-in stores pass.
//!
//! The backend here is an audit wrapper: it logs every mutation (never the
//! content) and counts operations, around any other store. A database or
//! encrypted backend is built the same way.
//!
//! ```text
//! cargo run --example custom_store
//! ```
//!
//! In your own crate's tests, one line gives each conformance case its own
//! `#[test]`:
//!
//! ```ignore
//! claude_memory::conformance_tests!(|run| run(&AuditStore::new(InMemoryStore::new())));
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};

use claude_memory::store::{
    Change, DirEntry, FileContent, FileReader, Metadata, Quota, StoreResult, Tree, Updated,
    Version, WriteMode,
};
use claude_memory::{InMemoryStore, MemoryPath, MemoryStore, MemoryTool, conformance};
use serde_json::json;

/// Logs mutations and counts calls around another store.
struct AuditStore<S> {
    inner: S,
    reads: AtomicUsize,
    writes: AtomicUsize,
    quiet: bool,
}

impl<S: MemoryStore> AuditStore<S> {
    fn new(inner: S) -> Self {
        AuditStore {
            inner,
            reads: AtomicUsize::new(0),
            writes: AtomicUsize::new(0),
            quiet: false,
        }
    }

    fn log(&self, what: std::fmt::Arguments<'_>) {
        self.writes.fetch_add(1, Ordering::Relaxed);
        if !self.quiet {
            eprintln!("audit: {what}");
        }
    }
}

// A wrapper forwards every method, defaulted ones too: otherwise the trait's
// generic default runs instead of the inner store's own (for a
// FilesystemStore, `update` would become a compare-and-swap loop instead
// of its locked read-modify-write). The lint makes a new trait method a
// compile error here until it is forwarded.
#[deny(clippy::missing_trait_methods)]
impl<S: MemoryStore> MemoryStore for AuditStore<S> {
    fn stat(&self, path: &MemoryPath) -> StoreResult<Option<Metadata>> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.inner.stat(path)
    }

    fn read(&self, path: &MemoryPath, limit: u64) -> StoreResult<FileContent> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.inner.read(path, limit)
    }

    fn open(&self, path: &MemoryPath) -> StoreResult<FileReader<'_>> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.inner.open(path)
    }

    fn write(&self, path: &MemoryPath, data: &[u8], mode: WriteMode) -> StoreResult<Version> {
        let result = self.inner.write(path, data, mode);
        self.log(format_args!(
            "write {} ({} bytes, {mode:?}): {}",
            path.normalized(),
            data.len(),
            outcome(&result)
        ));
        result
    }

    fn list(&self, dir: &MemoryPath) -> StoreResult<Vec<DirEntry>> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.inner.list(dir)
    }

    fn list_tree(&self, dir: &MemoryPath) -> StoreResult<Option<Tree>> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.inner.list_tree(dir)
    }

    fn delete(&self, path: &MemoryPath) -> StoreResult<()> {
        let result = self.inner.delete(path);
        self.log(format_args!(
            "delete {}: {}",
            path.normalized(),
            outcome(&result)
        ));
        result
    }

    fn rename(&self, from: &MemoryPath, to: &MemoryPath) -> StoreResult<()> {
        let result = self.inner.rename(from, to);
        self.log(format_args!(
            "rename {} -> {}: {}",
            from.normalized(),
            to.normalized(),
            outcome(&result)
        ));
        result
    }

    fn update(
        &self,
        path: &MemoryPath,
        limit: u64,
        change: &mut Change<'_>,
    ) -> StoreResult<Updated> {
        let result = self.inner.update(path, limit, change);
        let what = match &result {
            Ok(Updated::Written(data)) => format!("ok ({} bytes)", data.len()),
            Ok(Updated::Aborted) => "aborted".to_owned(),
            Err(e) => format!("refused ({e})"),
        };
        self.log(format_args!("update {}: {what}", path.normalized()));
        result
    }

    fn remove_empty_dir(&self, path: &MemoryPath) -> StoreResult<bool> {
        let result = self.inner.remove_empty_dir(path);
        self.log(format_args!(
            "remove_empty_dir {}: {}",
            path.normalized(),
            outcome(&result)
        ));
        result
    }

    fn total_size(&self) -> StoreResult<u64> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.inner.total_size()
    }

    fn write_within(
        &self,
        path: &MemoryPath,
        data: &[u8],
        mode: WriteMode,
        quota: Quota<'_>,
    ) -> StoreResult<Version> {
        let result = self.inner.write_within(path, data, mode, quota);
        self.log(format_args!(
            "write {} ({} bytes, {mode:?}, at most {} bytes below {}): {}",
            path.normalized(),
            data.len(),
            quota.max_bytes,
            quota.scope.normalized(),
            outcome(&result)
        ));
        result
    }

    fn update_within(
        &self,
        path: &MemoryPath,
        limit: u64,
        quota: Quota<'_>,
        change: &mut Change<'_>,
    ) -> StoreResult<Updated> {
        let result = self.inner.update_within(path, limit, quota, change);
        let what = match &result {
            Ok(Updated::Written(data)) => format!("ok ({} bytes)", data.len()),
            Ok(Updated::Aborted) => "aborted".to_owned(),
            Err(e) => format!("refused ({e})"),
        };
        self.log(format_args!(
            "update {} (at most {} bytes below {}): {what}",
            path.normalized(),
            quota.max_bytes,
            quota.scope.normalized()
        ));
        result
    }

    fn delete_file_if(
        &self,
        path: &MemoryPath,
        still: &mut dyn FnMut(&Metadata) -> bool,
    ) -> StoreResult<bool> {
        let result = self.inner.delete_file_if(path, still);
        self.log(format_args!(
            "delete_file_if {}: {}",
            path.normalized(),
            outcome(&result)
        ));
        result
    }

    /// The inner store's lock: the wrapper adds none, and a rename by a
    /// wrapper above it (the encrypted store) needs the real one.
    fn exclusive(
        &self,
        path: &MemoryPath,
        f: &mut dyn FnMut() -> StoreResult<()>,
    ) -> StoreResult<()> {
        self.inner.exclusive(path, f)
    }

    fn locks_writers(&self) -> bool {
        self.inner.locks_writers()
    }
}

fn outcome<T>(result: &StoreResult<T>) -> String {
    match result {
        Ok(_) => "ok".to_owned(),
        Err(e) => format!("refused ({e})"),
    }
}

fn main() {
    // 1. Prove the backend: every conformance case, each on a fresh store.
    let mut cases = 0;
    for (name, case) in conformance::CASES {
        conformance::run_case(*case, |run| {
            let mut store = AuditStore::new(InMemoryStore::new());
            store.quiet = true;
            run(&store);
        });
        cases += 1;
        println!("conformance: {name} ... ok");
    }
    println!("conformance: all {cases} cases passed on AuditStore<InMemoryStore>\n");

    // 2. Use it.
    let tool = MemoryTool::new(AuditStore::new(InMemoryStore::new()));
    for input in [
        json!({"command": "create", "path": "/memories/prefs.md", "file_text": "- dark mode\n"}),
        json!({"command": "str_replace", "path": "/memories/prefs.md", "old_str": "dark", "new_str": "light"}),
        json!({"command": "rename", "old_path": "/memories/prefs.md", "new_path": "/memories/user/prefs.md"}),
        json!({"command": "view", "path": "/memories/user/prefs.md"}),
    ] {
        let result = tool.dispatch(&input);
        println!("{input}\n  -> {}", result.text().unwrap_or("(image)"));
    }
    let store = tool.store();
    println!(
        "\n{} read operations, {} mutations",
        store.reads.load(Ordering::Relaxed),
        store.writes.load(Ordering::Relaxed)
    );
}
