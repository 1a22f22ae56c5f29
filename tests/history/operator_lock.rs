//! Operator commands (redact, prune) on a history other processes write
//! (issue 19): each runs under the log's cross-process writer lock, so a
//! version another process appends between the command's look at the log
//! and its changes is neither lost nor missed, and the compaction after
//! runs once the lock is let go (PostgreSQL's writer lock is a
//! transaction, and `VACUUM FULL` waited behind it until its lock
//! timeout when it ran inside).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use claude_memory::history::{
    Filter, HistoryError, HistoryLog, HistoryStore, MemoryLog, Order, Query, Retention, Revision,
};
use claude_memory::store::{MemoryStoreExt as _, WriteMode};
use claude_memory::{InMemoryStore, MemoryPath};

static SERIAL: Mutex<()> = Mutex::new(());

fn p(text: &str) -> MemoryPath {
    MemoryPath::parse(text).expect("path")
}

/// A log that notes, for each call that changes or compacts it, whether
/// the writer lock (`exclusive`) was held.
#[derive(Default)]
struct Watched {
    inner: MemoryLog,
    locked: AtomicBool,
    changes_outside: AtomicUsize,
    changes_inside: AtomicUsize,
    compactions_inside: AtomicUsize,
    compactions_outside: AtomicUsize,
}

impl Watched {
    fn change(&self) {
        if self.locked.load(Ordering::SeqCst) {
            self.changes_inside.fetch_add(1, Ordering::SeqCst);
        } else {
            self.changes_outside.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[deny(clippy::missing_trait_methods)]
impl HistoryLog for Watched {
    fn append(&self, versions: &mut [Revision]) -> Result<(), HistoryError> {
        self.inner.append(versions)
    }
    fn get(&self, id: u64) -> Result<Option<Revision>, HistoryError> {
        self.inner.get(id)
    }
    fn find(
        &self,
        filter: &Filter,
        order: Order,
        limit: usize,
    ) -> Result<Vec<Revision>, HistoryError> {
        self.inner.find(filter, order, limit)
    }
    fn drop_versions(&self, ids: &[u64]) -> Result<(), HistoryError> {
        self.change();
        self.inner.drop_versions(ids)
    }
    fn redact(&self, id: u64) -> Result<bool, HistoryError> {
        self.change();
        self.inner.redact(id)
    }
    fn replace_content(
        &self,
        id: u64,
        content: Vec<u8>,
        redacted: bool,
    ) -> Result<bool, HistoryError> {
        self.change();
        self.inner.replace_content(id, content, redacted)
    }
    fn compact(&self) -> Result<(), HistoryError> {
        if self.locked.load(Ordering::SeqCst) {
            self.compactions_inside.fetch_add(1, Ordering::SeqCst);
        } else {
            self.compactions_outside.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.compact()
    }
    fn exclusive(&self, change: &mut dyn FnMut(u64)) -> Result<(), HistoryError> {
        let outer = self.locked.swap(true, Ordering::SeqCst);
        let out = self.inner.exclusive(change);
        self.locked.store(outer, Ordering::SeqCst);
        out
    }
    fn mark_redacted(&self, id: u64) -> Result<bool, HistoryError> {
        self.change();
        self.inner.mark_redacted(id)
    }
    fn locks_writers(&self) -> bool {
        self.inner.locks_writers()
    }
    fn checkpoint(&self) -> Result<Option<Vec<u8>>, HistoryError> {
        self.inner.checkpoint()
    }
    fn save_checkpoint(&self, data: &[u8]) -> Result<(), HistoryError> {
        self.inner.save_checkpoint(data)
    }
}

/// Attack: an operator's redact or prune looked at the log, then changed
/// it, without the writer lock every other process takes, so another
/// process's version could land in between (before: every change of the
/// log by `redact`, `redact --text` and `prune` ran outside it).
#[test]
fn redact_and_prune_change_the_log_only_under_the_writer_lock() {
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let log = Arc::new(Watched::default());
    let h = HistoryStore::open(InMemoryStore::new(), Arc::clone(&log)).expect("history");
    for i in 0..5 {
        let text = format!("token=sk-ant-LOCKED-1\nedit {i}\n");
        h.write(&p("/memories/a.md"), text.as_bytes(), WriteMode::Overwrite)
            .expect("write");
    }
    h.write(&p("/memories/b.md"), b"b\n", WriteMode::Create)
        .expect("write");
    let first = h.versions(&Query::default()).expect("records")[0].id;
    assert!(!h.redact(first).expect("redact").is_empty());
    let (ids, _) = h.redact_text(b"sk-ant-LOCKED-1").expect("redact text");
    assert!(!ids.is_empty());
    let removed = h
        .prune(&Retention {
            max_age: None,
            keep_per_file: Some(1),
        })
        .expect("prune");
    assert!(!removed.is_empty());
    assert_eq!(log.changes_outside.load(Ordering::SeqCst), 0);
    assert!(log.changes_inside.load(Ordering::SeqCst) >= 3);
    assert_eq!(log.compactions_inside.load(Ordering::SeqCst), 0);
    assert_eq!(log.compactions_outside.load(Ordering::SeqCst), 3);
}

/// The model writes a secret in 200 versions (one edit each), then the
/// operator redacts the text: one rewrite of the journal, not one per
/// version. Measured in bytes this process writes (`/proc/self/io`).
/// Before: 200 rewrites of the whole journal (about 100 times its size).
#[cfg(target_os = "linux")]
#[test]
fn redacting_a_text_in_200_versions_rewrites_the_journal_once() {
    use claude_memory::FilesystemStore;
    use claude_memory::history::FileLog;
    fn holds(raw: &[u8], needle: &[u8]) -> bool {
        raw.windows(needle.len()).any(|w| w == needle)
    }
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    fn written() -> u64 {
        let io = std::fs::read_to_string("/proc/self/io").expect("io");
        io.lines()
            .find_map(|l| l.strip_prefix("wchar: "))
            .and_then(|n| n.trim().parse().ok())
            .expect("wchar")
    }
    let dir = tempfile::tempdir().expect("dir");
    let store = FilesystemStore::open(dir.path()).expect("store");
    let h = HistoryStore::open(store, FileLog::for_store(dir.path()).expect("log")).expect("h");
    let filler = "x".repeat(20_000);
    for i in 0..200 {
        let text = format!("secret=sk-ant-MANY-VERSIONS\nedit {i}\n{filler}\n");
        h.write(&p("/memories/a.md"), text.as_bytes(), WriteMode::Overwrite)
            .expect("w");
    }
    let journal = dir.path().join(".claude-memory-history/journal.jsonl");
    let size = std::fs::metadata(&journal).expect("journal").len();
    let before = written();
    let (ids, still) = h.redact_text(b"sk-ant-MANY-VERSIONS").expect("redact");
    let cost = written() - before;
    assert_eq!(ids.len(), 200);
    assert_eq!(still, vec!["/memories/a.md".to_owned()]);
    assert!(
        cost < 3 * size,
        "redact wrote {cost} bytes for a journal of {size}"
    );
    assert!(!holds(
        &std::fs::read(&journal).expect("j"),
        b"sk-ant-MANY-VERSIONS"
    ));
}
