//! Issue 18, edge 1: a `MemoryStore` written from scratch passed every
//! conformance case while its `rename` moved a directory deeper, making a
//! path over 1,024 bytes the model can never name again. The suite now
//! checks it, and the handler refuses such a move above the trait, so no
//! backend can get it wrong.

use claude_memory::path::MemoryPath;
use claude_memory::store::{
    DirEntry, EntryKind, FileContent, Flow, MemoryStoreExt as _, Metadata, Order, Step,
    StoreResult, Version, WriteMode, walk,
};
use claude_memory::{InMemoryStore, MemoryStore, MemoryTool, StoreError};
use serde_json::json;

/// A store of one's own: an in-memory store whose `rename` copies the tree
/// and deletes the source, checking nothing but what `write` checks.
#[derive(Default)]
struct NaiveStore {
    inner: InMemoryStore,
}

impl MemoryStore for NaiveStore {
    fn stat(&self, path: &MemoryPath) -> StoreResult<Option<Metadata>> {
        self.inner.stat(path)
    }
    fn read(&self, path: &MemoryPath, limit: u64) -> StoreResult<FileContent> {
        self.inner.read(path, limit)
    }
    fn list(&self, dir: &MemoryPath) -> StoreResult<Vec<DirEntry>> {
        self.inner.list(dir)
    }
    fn write_opts(
        &self,
        path: &MemoryPath,
        data: &[u8],
        options: claude_memory::store::WriteOptions<'_>,
    ) -> StoreResult<Version> {
        self.inner.write_opts(path, data, options)
    }
    fn delete_opts(
        &self,
        path: &MemoryPath,
        options: claude_memory::store::DeleteOptions<'_>,
    ) -> StoreResult<bool> {
        self.inner.delete_opts(path, options)
    }
    fn rename_opts(
        &self,
        from: &MemoryPath,
        to: &MemoryPath,
        _: claude_memory::store::RenameOptions<'_>,
    ) -> StoreResult<()> {
        let Some(meta) = self.inner.stat(from)? else {
            return Err(StoreError::NotFound { path: from.clone() });
        };
        if self.inner.stat(to)?.is_some() {
            return Err(StoreError::AlreadyExists { path: to.clone() });
        }
        if meta.kind == EntryKind::File {
            let data = self.inner.read(from, u64::MAX)?.data;
            self.inner.write(to, &data, WriteMode::Create)?;
            return self.inner.delete(from);
        }
        let mut files = Vec::new();
        walk(&self.inner, from, Order::AsListed, &mut |step| {
            if let Step::File { dir, entry, .. } = step
                && let Some(file) = dir.join(&entry.name)
            {
                files.push(file);
            }
            Ok(Flow::Continue)
        })?;
        for file in files {
            let mut target = to.clone();
            for part in &file.components()[from.components().len()..] {
                target = target.join(part).unwrap_or_else(|| unreachable!());
            }
            let data = self.inner.read(&file, u64::MAX)?.data;
            self.inner.write(&target, &data, WriteMode::Create)?;
        }
        self.inner.delete(from)
    }
}

fn deep_path() -> String {
    let dirs = ["a", "b", "c", "e"].map(|c| c.repeat(200)).join("/");
    format!("/memories/d/{dirs}/{}.md", "x".repeat(205))
}

#[test]
fn the_conformance_suite_catches_a_rename_past_the_limit() {
    let naive = NaiveStore::default();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        claude_memory::conformance::store_rename_refuses_paths_past_the_limit(&naive)
    }));
    assert!(caught.is_err(), "the naive store passed the case");
    // The built-in stores pass it (run on each in tests/stores/conformance.rs).
    claude_memory::conformance::store_rename_refuses_paths_past_the_limit(&InMemoryStore::new());
}

#[test]
fn the_handler_refuses_a_rename_past_the_limit_on_any_store() {
    let tool = MemoryTool::new(NaiveStore::default());
    let deep = deep_path();
    assert_eq!(deep.len(), 1024);
    let created = tool.dispatch(&json!({"command": "create", "path": deep, "file_text": "deep"}));
    assert!(!created.is_error, "{created:?}");
    for to in ["/memories/dd", "/memories/n/d"] {
        let result =
            tool.dispatch(&json!({"command": "rename", "old_path": "/memories/d", "new_path": to}));
        assert!(result.is_error, "{to}: {result:?}");
        assert_eq!(
            result.text(),
            Some(format!("Error: Cannot move /memories/d to {to}: the path of an entry below it would be longer than 1024 bytes").as_str())
        );
        assert!(
            tool.store()
                .stat(&MemoryPath::parse(to).expect("path"))
                .expect("stat")
                .is_none()
        );
    }
    let view = tool.dispatch(&json!({"command": "view", "path": deep}));
    assert_eq!(
        view.text().map(|t| t.ends_with("deep")),
        Some(true),
        "{view:?}"
    );
    // Renames that keep every path within the limit still work.
    let same = tool.dispatch(
        &json!({"command": "rename", "old_path": "/memories/d", "new_path": "/memories/f"}),
    );
    assert!(!same.is_error, "{same:?}");
    let file =
        tool.dispatch(&json!({"command": "create", "path": "/memories/g.md", "file_text": "g"}));
    assert!(!file.is_error);
    let deeper_file = tool.dispatch(&json!({"command": "rename", "old_path": "/memories/g.md", "new_path": "/memories/h/i/g.md"}));
    assert!(!deeper_file.is_error, "{deeper_file:?}");
}

/// `StoreError::check_depth` is public: a store of one's own makes the same
/// check under its own lock, as the built-in stores do.
#[test]
fn check_depth_is_public_for_stores_of_ones_own() {
    let from = MemoryPath::parse("/memories/d").expect("path");
    let longer = MemoryPath::parse("/memories/dd").expect("path");
    let below = 1024 - "/memories/d".len();
    assert!(StoreError::check_depth(&from, &from, below).is_ok());
    assert!(matches!(
        StoreError::check_depth(&from, &longer, below),
        Err(StoreError::PathTooLong { limit: 1024, .. })
    ));
}
