//! Memory calls of one turn never run concurrently: a store that records
//! how many of its calls are in flight at once (each call holding on for a
//! moment, so overlapping calls would be seen) stays at one, through the
//! async runner on a multi-thread runtime and through `AsyncMemoryTool::reply`,
//! and eight edits of one file in one turn all land, in order.
#![cfg(feature = "tokio")]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use claude_memory::path::MemoryPath;
use claude_memory::runner::{AsyncRunner, Request, StopReason, Stopped};
use claude_memory::store::{
    Change, DirEntry, FileContent, FileReader, Metadata, StoreResult, Updated, Version,
};
use claude_memory::{AsyncMemoryTool, InMemoryStore, MemoryStore, MemoryTool};
use serde_json::{Value, json};

#[derive(Debug, Default)]
struct Watched {
    inner: InMemoryStore,
    in_flight: AtomicUsize,
    most: AtomicUsize,
}

impl Watched {
    fn watch<T>(&self, f: impl FnOnce() -> T) -> T {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(2));
        let out = f();
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        out
    }
}

#[deny(clippy::missing_trait_methods)]
impl MemoryStore for Watched {
    fn stat(&self, path: &MemoryPath) -> StoreResult<Option<Metadata>> {
        self.watch(|| self.inner.stat(path))
    }
    fn read(&self, path: &MemoryPath, limit: u64) -> StoreResult<FileContent> {
        self.watch(|| self.inner.read(path, limit))
    }
    fn open(&self, path: &MemoryPath) -> StoreResult<FileReader<'_>> {
        self.watch(|| self.inner.open(path))
    }
    fn list(&self, dir: &MemoryPath) -> StoreResult<Vec<DirEntry>> {
        self.watch(|| self.inner.list(dir))
    }
    fn list_tree(&self, dir: &MemoryPath) -> StoreResult<Option<claude_memory::store::Tree>> {
        self.watch(|| self.inner.list_tree(dir))
    }
    fn max_files(&self) -> Option<u64> {
        self.inner.max_files()
    }
    fn write_opts(
        &self,
        path: &MemoryPath,
        data: &[u8],
        options: claude_memory::store::WriteOptions<'_>,
    ) -> StoreResult<Version> {
        self.watch(|| self.inner.write_opts(path, data, options))
    }
    fn update_opts(
        &self,
        path: &MemoryPath,
        options: claude_memory::store::UpdateOptions<'_>,
        change: &mut Change<'_>,
    ) -> StoreResult<Updated> {
        self.watch(|| self.inner.update_opts(path, options, change))
    }
    fn delete_opts(
        &self,
        path: &MemoryPath,
        options: claude_memory::store::DeleteOptions<'_>,
    ) -> StoreResult<bool> {
        self.watch(|| self.inner.delete_opts(path, options))
    }
    fn rename_opts(
        &self,
        from: &MemoryPath,
        to: &MemoryPath,
        options: claude_memory::store::RenameOptions<'_>,
    ) -> StoreResult<()> {
        self.watch(|| self.inner.rename_opts(from, to, options))
    }
    fn exclusive(
        &self,
        path: &MemoryPath,
        f: &mut dyn FnMut(claude_memory::store::Lock) -> StoreResult<()>,
    ) -> StoreResult<()> {
        self.inner.exclusive(path, f)
    }
}

/// One turn: create a file, then eight inserts at line 0, then a view.
fn turn() -> Value {
    let mut calls = vec![json!({"type": "tool_use", "id": "c", "name": "memory",
        "input": {"command": "create", "path": "/memories/log.md", "file_text": "end\n"}})];
    for i in 0..8 {
        calls.push(
            json!({"type": "tool_use", "id": format!("i{i}"), "name": "memory",
            "input": {"command": "insert", "path": "/memories/log.md", "insert_line": 0,
                      "insert_text": format!("{i}")}}),
        );
    }
    calls.push(json!({"type": "tool_use", "id": "v", "name": "memory",
        "input": {"command": "view", "path": "/memories/log.md"}}));
    json!({"stop_reason": "tool_use", "content": calls})
}

const VIEW: &str = "Here's the content of /memories/log.md with line numbers:\n     1\t7\n     2\t6\n     3\t5\n     4\t4\n     5\t3\n     6\t2\n     7\t1\n     8\t0\n     9\tend";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_async_runner_runs_one_turns_memory_calls_one_after_another() {
    let store = Arc::new(Watched::default());
    let tool = AsyncMemoryTool::new(MemoryTool::new(Arc::clone(&store)));
    let runner = AsyncRunner::new(tool, json!({"model": "m", "max_tokens": 8}));
    let mut responses = vec![turn(), json!({"stop_reason": "end_turn", "content": []})].into_iter();
    let run = runner
        .run(
            vec![json!({"role": "user", "content": "go"})],
            |_: Request| {
                let next = responses.next();
                async move { next.ok_or("more requests than recorded") }
            },
        )
        .await
        .expect("run");
    assert_eq!(run.stopped, Stopped::Model(StopReason::EndTurn));
    let results = run.messages[2]["content"].as_array().expect("results");
    assert_eq!(results.len(), 10);
    assert!(
        results.iter().all(|r| r.get("is_error").is_none()),
        "{results:?}"
    );
    assert_eq!(results[9]["content"], VIEW);
    assert_eq!(store.most.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn async_reply_runs_them_one_after_another_too() {
    let store = Arc::new(Watched::default());
    let tool = AsyncMemoryTool::new(MemoryTool::new(Arc::clone(&store)));
    let reply = tool.reply(&turn()).await;
    assert_eq!(reply["content"][9]["content"], VIEW);
    assert_eq!(store.most.load(Ordering::SeqCst), 1);
}
