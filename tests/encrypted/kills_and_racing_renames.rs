//! The encrypted store under attack, round 4 (issue 21): a sealed
//! history killed by SIGKILL mid-write, and renames racing other writers
//! (a second handle on the same directory, standing in for a second
//! process) or interrupted part way.
#![cfg(all(feature = "encryption", unix))]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use claude_memory::history::LogSealer;
use claude_memory::history::{ChangeOp, FileLog, HistoryLog, HistoryStore, Query, RepairReport};
use claude_memory::store::crypt::{EncryptedStore, Key, Keyring};
use claude_memory::store::walk::{Flow, Order, Step, walk};
use claude_memory::store::{
    Change, DirEntry, FileContent, FileReader, MemoryStoreExt as _, Metadata, StoreResult, Updated,
    Version, WriteMode,
};
use claude_memory::{FilesystemStore, MemoryPath, MemoryStore, MemoryTool};
use serde_json::json;

#[path = "../common/mod.rs"]
mod common;
use common::sha256_hex;

const CHILD: &str = "CLAUDE_MEMORY_R4_CHILD";

fn next_random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn p(s: &str) -> MemoryPath {
    MemoryPath::parse(s).expect("path")
}

// ---------------------------------------------------------------------
// 1. A sealed history (SealedLog over FileLog, on EncryptedStore over
//    FilesystemStore: what `--key-file K --history serve` builds) killed
//    by SIGKILL at random moments.
// ---------------------------------------------------------------------

fn open_sealed(dir: &str, key: &str) -> HistoryStore<Box<dyn MemoryStore>> {
    let enc = EncryptedStore::open(
        FilesystemStore::open(dir).expect("fs"),
        Keyring::new(Key::from_file(key).expect("key")),
    )
    .expect("open the encrypted store");
    let sealer = LogSealer::new(&enc);
    let log: Arc<dyn HistoryLog> = Arc::new(sealer.wrap(FileLog::for_store(dir).expect("log")));
    let store: Box<dyn MemoryStore> = Box::new(enc);
    HistoryStore::open(store, log).expect("open the history")
}

/// The writer: changes forever, through the handler, until killed.
#[test]
fn child_writer() {
    let Ok(spec) = std::env::var(CHILD) else {
        return;
    };
    let (dir, key) = spec.split_once('|').expect("spec");
    let tool = MemoryTool::new(open_sealed(dir, key).with_label("crash-writer"));
    let mut seed = u64::from(std::process::id()) | 1;
    println!("ready");
    for n in 0u64.. {
        let f = format!("/memories/d{}/f{}.md", n % 3, next_random(&mut seed) % 5);
        let g = format!("/memories/d{}/f{}.md", n % 2, next_random(&mut seed) % 5);
        let input = match next_random(&mut seed) % 6 {
            0 => {
                json!({"command": "create", "path": f, "file_text": format!("secret file {n}\n{}\n", "plaintextplaintext".repeat((n % 50) as usize * 5))})
            }
            1 => {
                json!({"command": "str_replace", "path": f, "old_str": "secret", "new_str": "SECRET"})
            }
            2 => {
                json!({"command": "insert", "path": f, "insert_line": 0, "insert_text": format!("hidden line {n}")})
            }
            3 => json!({"command": "delete", "path": f}),
            4 => json!({"command": "rename", "old_path": f, "new_path": g}),
            _ => {
                json!({"command": "rename", "old_path": format!("/memories/d{}", n % 3), "new_path": "/memories/d9"})
            }
        };
        let id = format!("toolu_{n}");
        tool.dispatch(&json!({"type": "tool_use", "id": id, "name": "memory", "input": input}));
        if n % 7 == 0 {
            tool.dispatch(&json!({"command": "rename", "old_path": "/memories/d9", "new_path": format!("/memories/d{}", n % 3)}));
        }
    }
}

/// Live files: path → sha256 (every one must open with the key).
fn live(store: &dyn MemoryStore) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    walk(store, &MemoryPath::root(), Order::AsListed, &mut |step| {
        if let Step::File { dir, entry, .. } = step
            && let Some(path) = dir.join(&entry.name)
        {
            let data = store.read(&path, u64::MAX)?.data;
            out.insert(path.normalized(), sha256_hex(&data));
        }
        Ok(Flow::Continue)
    })
    .map_err(|e| e.to_string())?;
    Ok(out)
}

fn claimed(history: &HistoryStore<Box<dyn MemoryStore>>) -> BTreeMap<String, String> {
    let mut state = BTreeMap::new();
    for v in history.versions(&Query::default()).expect("versions") {
        match v.op {
            ChangeOp::Created | ChangeOp::Modified => {
                state.insert(v.path, v.sha256);
            }
            ChangeOp::Deleted => {
                state.remove(&v.path);
            }
            ChangeOp::Renamed => {
                if let Some(from) = &v.from {
                    state.remove(from);
                }
                state.insert(v.path, v.sha256);
            }
        }
    }
    state
}

/// Every file (and name) below `dir`, searched for what the writer wrote.
fn plaintext_hits(dir: &Path, out: &mut Vec<String>) {
    // (No needle of base64's alphabet alone: the log holds base64.)
    const NEEDLES: [&str; 6] = [
        "memories",
        "secret",
        "SECRET",
        "hidden line",
        "plaintextplaintext",
        "f1.md",
    ];
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let entry = entry.expect("entry");
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        for n in NEEDLES {
            if name.contains(n) {
                out.push(format!("name {} holds {n:?}", path.display()));
            }
        }
        if entry.file_type().expect("type").is_dir() {
            plaintext_hits(&path, out);
        } else {
            let bytes = std::fs::read(&path).expect("read");
            for n in NEEDLES {
                if bytes.windows(n.len()).any(|w| w == n.as_bytes()) {
                    out.push(format!("{} holds {n:?}", path.display()));
                }
            }
        }
    }
}

#[test]
fn sealed_history_survives_sigkill_at_random_moments() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let tmp = tempfile::tempdir().expect("dir");
    let dir = tmp.path().join("store");
    std::fs::create_dir(&dir).expect("mkdir");
    let key = tmp.path().join("key");
    Key::generate_file(&key).expect("key");
    let spec = format!("{}|{}", dir.display(), key.display());
    let mut seed = 0x9E37_79B9_7F4A_7C15_u64;
    let (mut dropped, mut versions, mut mid_move) = (0, 0, 0);
    let mut failures = Vec::new();
    let rounds: usize = std::env::var("R4_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(20);
    for round in 0..rounds {
        let exe = std::env::current_exe().expect("this test binary");
        let mut child = Command::new(exe)
            .args([
                "--exact",
                "child_writer",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(CHILD, &spec)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the writer");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        while !line.contains("ready") {
            line.clear();
            if stdout.read_line(&mut line).expect("read") == 0 {
                panic!("round {round}: the writer stopped before it was ready");
            }
        }
        std::thread::sleep(Duration::from_millis(10 + next_random(&mut seed) % 120));
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        mid_move += std::fs::read_dir(&dir)
            .expect("read_dir")
            .filter(|e| {
                e.as_ref().is_ok_and(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with("_claude-memory-move-")
                })
            })
            .count();
        let history = open_sealed(&dir.display().to_string(), &key.display().to_string());
        let report: RepairReport = history.repair_report().clone();
        let now = match live(&history) {
            Ok(now) => now,
            Err(e) => {
                failures.push(format!("round {round}: a file does not open: {e}"));
                continue;
            }
        };
        let claims = claimed(&history);
        let keys: std::collections::BTreeSet<&String> = now.keys().chain(claims.keys()).collect();
        let bad: Vec<&String> = keys
            .into_iter()
            .filter(|k| now.get(*k) != claims.get(*k))
            .collect();
        if !bad.is_empty() {
            failures.push(format!("round {round}: mismatches {bad:?} ({report})"));
        }
        if !report.recorded.is_empty() {
            failures.push(format!("round {round}: a change had no version: {report}"));
        }
        let mut hits = Vec::new();
        plaintext_hits(&dir, &mut hits);
        if !hits.is_empty() {
            failures.push(format!("round {round}: plaintext: {hits:?}"));
        }
        versions = history.versions(&Query::default()).expect("versions").len();
        dropped += report.dropped.len();
    }
    println!(
        "sealed history: {rounds} SIGKILLs, {versions} versions at the end, {dropped} unfinished \
         versions dropped, {mid_move} kills inside a rename (a move journal left), {} failures",
        failures.len()
    );
    assert!(failures.is_empty(), "{failures:#?}");
}

// ---------------------------------------------------------------------
// 2. Renames racing another handle on the same directory.
// ---------------------------------------------------------------------

type Hook = Box<dyn Fn(usize) + Send + Sync>;

/// A filesystem store that calls `hook(n)` after its n-th write of a
/// file below the root (a rename's copies; the move journal, at the
/// root, is not counted).
struct Hooked {
    inner: FilesystemStore,
    writes: AtomicUsize,
    hook: Mutex<Option<Hook>>,
}

impl Hooked {
    fn new(dir: &Path, hook: Hook) -> Self {
        Hooked {
            inner: FilesystemStore::open(dir).expect("fs"),
            writes: AtomicUsize::new(0),
            hook: Mutex::new(Some(hook)),
        }
    }
    fn after_write(&self, path: &MemoryPath) {
        if path.components().len() < 2 {
            return;
        }
        let n = self.writes.fetch_add(1, Ordering::SeqCst) + 1;
        let hook = self.hook.lock().expect("lock");
        if let Some(h) = hook.as_ref() {
            h(n);
        }
    }
}

#[deny(clippy::missing_trait_methods)]
impl MemoryStore for Hooked {
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
    fn list_tree(&self, dir: &MemoryPath) -> StoreResult<Option<claude_memory::store::Tree>> {
        self.inner.list_tree(dir)
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
        let out = self.inner.write_opts(path, data, options)?;
        self.after_write(path);
        Ok(out)
    }
    fn update_opts(
        &self,
        path: &MemoryPath,
        options: claude_memory::store::UpdateOptions<'_>,
        change: &mut Change<'_>,
    ) -> StoreResult<Updated> {
        self.inner.update_opts(path, options, change)
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
        options: claude_memory::store::RenameOptions<'_>,
    ) -> StoreResult<()> {
        self.inner.rename_opts(from, to, options)
    }
    fn exclusive(
        &self,
        path: &MemoryPath,
        f: &mut dyn FnMut(claude_memory::store::Lock) -> StoreResult<()>,
    ) -> StoreResult<()> {
        self.inner.exclusive(path, f)
    }
}

/// A racing thread started from a hook, joined after the move.
type Racer = Arc<Mutex<Option<std::thread::JoinHandle<()>>>>;

/// Runs `race` on another thread, as another process would run it while
/// the mover is part way, gives it 200 ms to get through if nothing holds
/// it back (the store's lock, held across the whole move, does), and
/// keeps its handle in `slot` to be joined once the move returns.
fn race_from_hook(slot: &Racer, race: impl FnOnce() + Send + 'static) {
    let handle = std::thread::spawn(race);
    std::thread::sleep(Duration::from_millis(200));
    *slot.lock().expect("lock") = Some(handle);
}

/// Waits for the racing thread, if the hook started one.
fn join_racer(slot: &Racer) {
    let handle = slot.lock().expect("lock").take();
    if let Some(handle) = handle {
        handle.join().expect("the racing thread");
    }
}

struct Setup {
    _tmp: tempfile::TempDir,
    dir: std::path::PathBuf,
    key: Key,
}

/// A store with `/memories/d/{a,b,c}.md`.
fn setup() -> Setup {
    let tmp = tempfile::tempdir().expect("dir");
    let dir = tmp.path().join("store");
    std::fs::create_dir(&dir).expect("mkdir");
    let key = Key::generate().expect("key");
    let store = plain_handle(&dir, &key);
    for name in ["a", "b", "c"] {
        store
            .write(
                &p(&format!("/memories/d/{name}.md")),
                format!("{name} alpha\n").as_bytes(),
                WriteMode::Create,
            )
            .expect("write");
    }
    Setup {
        _tmp: tmp,
        dir,
        key,
    }
}

fn plain_handle(dir: &Path, key: &Key) -> EncryptedStore<FilesystemStore> {
    EncryptedStore::open(
        FilesystemStore::open(dir).expect("fs"),
        Keyring::new(key.clone()),
    )
    .expect("open")
}

fn hooked_handle(dir: &Path, key: &Key, hook: Hook) -> EncryptedStore<Hooked> {
    EncryptedStore::open(Hooked::new(dir, hook), Keyring::new(key.clone())).expect("open")
}

/// Every file of the store as it opens now: path → content.
fn files(dir: &Path, key: &Key) -> BTreeMap<String, String> {
    let store = plain_handle(dir, key);
    let mut out = BTreeMap::new();
    walk(&store, &MemoryPath::root(), Order::AsListed, &mut |step| {
        if let Step::File { dir, entry, .. } = step
            && let Some(path) = dir.join(&entry.name)
        {
            let data = store.read(&path, u64::MAX)?.data;
            out.insert(
                path.normalized(),
                String::from_utf8_lossy(&data).into_owned(),
            );
        }
        Ok(Flow::Continue)
    })
    .expect("walk");
    out
}

/// An edit of a file inside the tree being moved, by another handle, after
/// the move copied the first file but before it deleted the source (each
/// of the three files is edited, so whichever was copied first is among
/// them): every edit answers success; on a store whose rename is atomic
/// it would either move with the file or fail (the file gone).
#[test]
fn an_edit_racing_a_directory_rename_is_not_lost() {
    let s = setup();
    let other = Arc::new(MemoryTool::new(plain_handle(&s.dir, &s.key)));
    let edited = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&edited);
    let racer: Racer = Arc::default();
    let slot = Arc::clone(&racer);
    let mover = hooked_handle(
        &s.dir,
        &s.key,
        Box::new(move |n| {
            if n == 1 {
                let (other, seen) = (Arc::clone(&other), Arc::clone(&seen));
                race_from_hook(&slot, move || {
                    for name in ["a", "b", "c"] {
                        let out = other.dispatch(&json!({"command": "str_replace",
                            "path": format!("/memories/d/{name}.md"), "old_str": "alpha",
                            "new_str": "EDITED"}));
                        seen.lock().expect("lock").push((name, out));
                    }
                });
            }
        }),
    );
    mover
        .rename(&p("/memories/d"), &p("/memories/e"))
        .expect("rename");
    join_racer(&racer);
    let edits = std::mem::take(&mut *edited.lock().expect("lock"));
    assert_eq!(edits.len(), 3);
    let now = files(&s.dir, &s.key);
    for (name, out) in edits {
        if !out.is_error {
            assert!(
                now.get(&format!("/memories/e/{name}.md"))
                    .is_some_and(|c| c.contains("EDITED")),
                "the edit of {name}.md answered {:?} but is lost: {now:?}",
                out.content
            );
        }
    }
}

/// A file created inside the tree being moved, by another handle, while
/// the move copies: the create answers success, then the file must be at
/// its old path or under the new one.
#[test]
fn a_create_racing_a_directory_rename_is_not_lost() {
    let s = setup();
    let other = Arc::new(MemoryTool::new(plain_handle(&s.dir, &s.key)));
    let created = Arc::new(Mutex::new(None));
    let seen = Arc::clone(&created);
    let racer: Racer = Arc::default();
    let slot = Arc::clone(&racer);
    let mover = hooked_handle(
        &s.dir,
        &s.key,
        Box::new(move |n| {
            if n == 1 {
                let (other, seen) = (Arc::clone(&other), Arc::clone(&seen));
                race_from_hook(&slot, move || {
                    let out = other.dispatch(&json!({"command": "create",
                        "path": "/memories/d/new.md", "file_text": "made meanwhile\n"}));
                    *seen.lock().expect("lock") = Some(out);
                });
            }
        }),
    );
    mover
        .rename(&p("/memories/d"), &p("/memories/e"))
        .expect("rename");
    join_racer(&racer);
    let out = created
        .lock()
        .expect("lock")
        .take()
        .expect("the create ran");
    let now = files(&s.dir, &s.key);
    if !out.is_error {
        assert!(
            now.contains_key("/memories/d/new.md") || now.contains_key("/memories/e/new.md"),
            "the create answered {:?} but the file is nowhere: {now:?}",
            out.content
        );
    }
}

/// Two renames of one directory at once (`d` to `e` and `d` to `f`): on a
/// store whose rename is atomic one wins and the other is refused; each
/// file ends at exactly one place.
#[test]
fn two_renames_of_one_directory_at_once_do_not_duplicate_it() {
    let s = setup();
    let other = Arc::new(plain_handle(&s.dir, &s.key));
    let second = Arc::new(Mutex::new(None));
    let seen = Arc::clone(&second);
    let racer: Racer = Arc::default();
    let slot = Arc::clone(&racer);
    let mover = hooked_handle(
        &s.dir,
        &s.key,
        Box::new(move |n| {
            if n == 3 {
                let (other, seen) = (Arc::clone(&other), Arc::clone(&seen));
                race_from_hook(&slot, move || {
                    let out = other.rename(&p("/memories/d"), &p("/memories/f"));
                    *seen.lock().expect("lock") = Some(out.map_err(|e| e.to_string()));
                });
            }
        }),
    );
    let first = mover.rename(&p("/memories/d"), &p("/memories/e"));
    join_racer(&racer);
    let second = second.lock().expect("lock").take().expect("second ran");
    let now = files(&s.dir, &s.key);
    for name in ["a", "b", "c"] {
        let places: Vec<&String> = now
            .keys()
            .filter(|k| k.ends_with(&format!("/{name}.md")))
            .collect();
        assert_eq!(
            places.len(),
            1,
            "{name}.md at {places:?} (first rename {first:?}, second {second:?})"
        );
    }
}

/// A rename stopped part way (the process dies after one copy; a panic
/// here, so nothing after the copy runs) while another handle, already
/// open, keeps working: it sees the half-made destination and edits a
/// file there. The next open finishes the move: the edit that answered
/// success must survive it.
#[test]
fn an_edit_of_a_half_moved_file_survives_the_move_being_finished() {
    let s = setup();
    let other = MemoryTool::new(plain_handle(&s.dir, &s.key));
    let mover = hooked_handle(
        &s.dir,
        &s.key,
        Box::new(|n| {
            if n == 1 {
                panic!("killed after the first copy");
            }
        }),
    );
    let died = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = mover.rename(&p("/memories/d"), &p("/memories/e"));
    }));
    assert!(died.is_err());
    drop(mover);
    let half = files_existing(&s.dir, &s.key);
    let copied: Vec<String> = half
        .keys()
        .filter(|k| k.starts_with("/memories/e/"))
        .cloned()
        .collect();
    assert_eq!(copied.len(), 1, "{half:?}");
    let out = other.dispatch(&json!({"command": "str_replace",
        "path": copied[0], "old_str": "alpha", "new_str": "EDITED"}));
    assert!(!out.is_error, "{:?}", out.content);
    // The next open (any process) finishes the move.
    let now = files(&s.dir, &s.key);
    assert!(
        now.get(&copied[0]).is_some_and(|c| c.contains("EDITED")),
        "the edit of {} answered success, then the finished move overwrote it: {now:?}",
        copied[0]
    );
}

/// The files as another already-open handle sees them (no recovery).
fn files_existing(dir: &Path, key: &Key) -> BTreeMap<String, String> {
    let store = EncryptedStore::open_existing(
        FilesystemStore::open(dir).expect("fs"),
        Keyring::new(key.clone()),
    )
    .expect("open");
    let mut out = BTreeMap::new();
    walk(&store, &MemoryPath::root(), Order::AsListed, &mut |step| {
        if let Step::File { dir, entry, .. } = step
            && let Some(path) = dir.join(&entry.name)
        {
            let data = store.read(&path, u64::MAX)?.data;
            out.insert(
                path.normalized(),
                String::from_utf8_lossy(&data).into_owned(),
            );
        }
        Ok(Flow::Continue)
    })
    .expect("walk");
    out
}

/// Runs a rename of `/memories/d` to `/memories/e` that dies (a panic in
/// the wrapped store, so nothing after it runs: the journal stays, as
/// after SIGKILL) right after its first copy.
fn rename_killed_after_first_copy(dir: &Path, key: &Key) {
    let mover = hooked_handle(
        dir,
        key,
        Box::new(|n| {
            if n == 1 {
                panic!("killed after the first copy");
            }
        }),
    );
    let died = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = mover.rename(&p("/memories/d"), &p("/memories/e"));
    }));
    assert!(died.is_err(), "the rename was not stopped");
}

/// The stored `/memories/d`: the only directory of the store's root
/// (the filesystem store's directory is `/memories`) before the move.
fn raw_source_dir(dir: &Path) -> std::path::PathBuf {
    let mut top: Vec<_> = std::fs::read_dir(dir)
        .expect("read_dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .collect();
    assert_eq!(top.len(), 1, "one stored /memories/d");
    top.remove(0).path()
}

/// A rename killed part way while another process (opened before the
/// kill, so it finished nothing) rotates the key: `rekey` re-seals every
/// file it sees and retires the old key, but the move journal the killed
/// process sealed under the old key stays. The store must still open with
/// the new key.
#[test]
fn a_rename_killed_during_a_rekey_leaves_a_store_that_opens_with_the_new_key() {
    let s = setup();
    let new = Key::generate().expect("key");
    let rotator = EncryptedStore::open(
        FilesystemStore::open(&s.dir).expect("fs"),
        Keyring::new(new.clone()).with(s.key.clone()),
    )
    .expect("open with both keys");
    rename_killed_after_first_copy(&s.dir, &s.key);
    let report = rotator.rekey().expect("rekey");
    drop(rotator);
    let opened = EncryptedStore::open(
        FilesystemStore::open(&s.dir).expect("fs"),
        Keyring::new(new.clone()),
    );
    let store = match opened {
        Ok(store) => store,
        Err(e) => panic!("after rekey ({report:?}) the store does not open with the new key: {e}"),
    };
    let mut names = Vec::new();
    walk(&store, &MemoryPath::root(), Order::AsListed, &mut |step| {
        if let Step::File { dir, entry, .. } = step {
            names.push(format!("{}/{}", dir.normalized(), entry.name));
        }
        Ok(Flow::Continue)
    })
    .expect("walk");
    assert_eq!(names.len(), 3, "{names:?}");
}

/// A rename killed part way, then one stored byte of a file still in the
/// source flipped (what an attacker with write access can do, and what
/// the README answers with the integrity error for that file alone): the
/// store must still open, the damaged file answering SPEC §4's integrity
/// error.
#[test]
fn a_damaged_file_in_a_half_moved_tree_does_not_stop_the_store_opening() {
    let s = setup();
    let source = raw_source_dir(&s.dir);
    rename_killed_after_first_copy(&s.dir, &s.key);
    let victim = std::fs::read_dir(&source)
        .expect("read_dir")
        .filter_map(Result::ok)
        .next()
        .expect("a source file")
        .path();
    let mut bytes = std::fs::read(&victim).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&victim, &bytes).expect("write");
    let opened = EncryptedStore::open(
        FilesystemStore::open(&s.dir).expect("fs"),
        Keyring::new(s.key.clone()),
    );
    assert!(
        opened.is_ok(),
        "one flipped bit in one file refuses the whole store: {}",
        opened.err().map(|e| e.to_string()).unwrap_or_default()
    );
}

/// A rename killed part way, then a file planted in the source directory
/// (a name the store never wrote): the README says a planted file makes
/// its directory's listing answer the integrity error and every other
/// file still opens. The store must still open.
#[test]
fn a_file_planted_in_a_half_moved_tree_does_not_stop_the_store_opening() {
    let s = setup();
    let source = raw_source_dir(&s.dir);
    rename_killed_after_first_copy(&s.dir, &s.key);
    std::fs::write(source.join("planted"), b"not sealed").expect("plant");
    let opened = EncryptedStore::open(
        FilesystemStore::open(&s.dir).expect("fs"),
        Keyring::new(s.key.clone()),
    );
    assert!(
        opened.is_ok(),
        "one planted file refuses the whole store: {}",
        opened.err().map(|e| e.to_string()).unwrap_or_default()
    );
}

/// The same with a FIFO planted (a local process): the open must neither
/// fail nor block on it.
#[test]
fn a_fifo_planted_in_a_half_moved_tree_does_not_stop_the_store_opening() {
    let s = setup();
    let source = raw_source_dir(&s.dir);
    rename_killed_after_first_copy(&s.dir, &s.key);
    let status = Command::new("mkfifo")
        .arg(source.join("planted"))
        .status()
        .expect("mkfifo");
    assert!(status.success());
    let opened = EncryptedStore::open(
        FilesystemStore::open(&s.dir).expect("fs"),
        Keyring::new(s.key.clone()),
    );
    assert!(
        opened.is_ok(),
        "one planted FIFO refuses the whole store: {}",
        opened.err().map(|e| e.to_string()).unwrap_or_default()
    );
    drop(opened);
    let now = files(&s.dir, &s.key);
    assert_eq!(
        now.keys().filter(|k| k.starts_with("/memories/e/")).count(),
        3,
        "{now:?}"
    );
}

// ---------------------------------------------------------------------
// Two `claude-memory --key-file K [--history] serve` processes at once.
// ---------------------------------------------------------------------

fn serve(dir: &Path, key: &Path, history: bool) -> std::process::Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_claude-memory-cli"));
    cmd.arg("--store").arg(dir).arg("--key-file").arg(key);
    if history {
        cmd.arg("--history");
    }
    cmd.arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn serve")
}

/// Sends each process its lines at the same moment; their answers.
fn race(dir: &Path, key: &Path, history: bool, one: &[String], two: &[String]) -> Vec<String> {
    use std::io::{Read, Write};
    let mut a = serve(dir, key, history);
    let mut b = serve(dir, key, history);
    let (mut ia, mut ib) = (a.stdin.take().expect("in"), b.stdin.take().expect("in"));
    // Both are running (and have opened the store) before either gets work.
    std::thread::sleep(Duration::from_millis(300));
    ia.write_all(one.join("\n").as_bytes()).expect("write");
    ib.write_all(two.join("\n").as_bytes()).expect("write");
    drop((ia, ib));
    let mut out = Vec::new();
    for child in [&mut a, &mut b] {
        let mut s = String::new();
        child
            .stdout
            .take()
            .expect("out")
            .read_to_string(&mut s)
            .expect("read");
        child.wait().expect("wait");
        out.extend(s.lines().map(str::to_owned));
    }
    out
}

const CLI_FILES: usize = 30;

fn cli_setup() -> (
    tempfile::TempDir,
    std::path::PathBuf,
    std::path::PathBuf,
    Key,
) {
    let tmp = tempfile::tempdir().expect("dir");
    let dir = tmp.path().join("store");
    std::fs::create_dir(&dir).expect("mkdir");
    let key_file = tmp.path().join("key");
    let key = Key::generate_file(&key_file).expect("key");
    let store = plain_handle(&dir, &key);
    for i in 0..CLI_FILES {
        store
            .write(
                &p(&format!("/memories/d/n{i}.md")),
                format!("note {i} alpha\n").as_bytes(),
                WriteMode::Create,
            )
            .expect("write");
    }
    (tmp, dir, key_file, key)
}

fn two_serve_processes_rename_one_directory(history: bool) {
    let mut broken = Vec::new();
    // A race: not every round overlaps the two moves.
    for round in 0..6 {
        let (_tmp, dir, key_file, key) = cli_setup();
        let out = race(
            &dir,
            &key_file,
            history,
            &[
                json!({"command": "rename", "old_path": "/memories/d", "new_path": "/memories/e"})
                    .to_string(),
            ],
            &[
                json!({"command": "rename", "old_path": "/memories/d", "new_path": "/memories/f"})
                    .to_string(),
            ],
        );
        let now = files(&dir, &key);
        let renamed = out
            .iter()
            .filter(|l| l.contains("Successfully renamed"))
            .count();
        println!(
            "history {history} round {round}: {renamed} of 2 renames answered success, {} files \
             for {CLI_FILES}",
            now.len()
        );
        for i in 0..CLI_FILES {
            let places: Vec<&String> = now
                .keys()
                .filter(|k| k.ends_with(&format!("/n{i}.md")))
                .collect();
            if places.len() != 1 {
                broken.push(format!(
                    "round {round}: n{i}.md at {places:?}; answers {out:?}"
                ));
                break;
            }
        }
    }
    assert!(broken.is_empty(), "{broken:#?}");
}

#[test]
fn two_serve_processes_renaming_one_directory_leave_each_file_once() {
    two_serve_processes_rename_one_directory(false);
}

#[test]
fn two_history_serve_processes_renaming_one_directory_leave_each_file_once() {
    two_serve_processes_rename_one_directory(true);
}

/// One `serve` renames the directory while the other edits every file in
/// it: each edit that answered success must be in the file afterwards,
/// wherever it is.
fn a_serve_edit_racing_a_serve_rename(history: bool) {
    let mut lost = Vec::new();
    for round in 0..3 {
        let (_tmp, dir, key_file, key) = cli_setup();
        let edits: Vec<String> = (0..CLI_FILES)
            .rev()
            .map(|i| {
                json!({"command": "str_replace", "path": format!("/memories/d/n{i}.md"),
                    "old_str": "alpha", "new_str": "EDITED"})
                .to_string()
            })
            .collect();
        let out = race(
            &dir,
            &key_file,
            history,
            &[
                json!({"command": "rename", "old_path": "/memories/d", "new_path": "/memories/e"})
                    .to_string(),
            ],
            &edits,
        );
        let ok_edits = out.iter().filter(|l| l.contains("has been edited")).count();
        let now = files(&dir, &key);
        let landed = now.values().filter(|c| c.contains("EDITED")).count();
        println!(
            "history {history} round {round}: {ok_edits} of {CLI_FILES} edits answered success, \
             {landed} in the files, {} files in all",
            now.len()
        );
        if landed != ok_edits {
            lost.push(format!(
                "round {round}: {ok_edits} edits answered success, {landed} are in the files"
            ));
        }
    }
    assert!(lost.is_empty(), "{lost:#?}");
}

#[test]
fn a_serve_edit_racing_a_serve_rename_is_not_lost() {
    a_serve_edit_racing_a_serve_rename(false);
}

#[test]
fn a_history_serve_edit_racing_a_history_serve_rename_is_not_lost() {
    a_serve_edit_racing_a_serve_rename(true);
}

/// A `--history serve` renaming a directory is killed by SIGKILL at a
/// random moment while a second `--history serve`, open since before the
/// kill, keeps working: it edits every file at the new path it can see
/// (a half-done move shows its copies) and every file at the old one.
/// After the next open each file is in one place, every edit that
/// answered success is in its file, and the history needed no repair.
#[test]
fn a_serve_rename_killed_while_another_serve_keeps_editing() {
    use std::io::{Read, Write};
    let mut seed = 0xD1B5_4A32_D192_ED03_u64;
    let (mut mid_move, mut broken) = (0, Vec::new());
    for round in 0..12 {
        let tmp = tempfile::tempdir().expect("dir");
        let dir = tmp.path().join("store");
        std::fs::create_dir(&dir).expect("mkdir");
        let key_file = tmp.path().join("key");
        Key::generate_file(&key_file).expect("key");
        {
            let history = open_sealed(&dir.display().to_string(), &key_file.display().to_string());
            for i in 0..CLI_FILES {
                history
                    .write(
                        &p(&format!("/memories/d/n{i}.md")),
                        format!("note {i} alpha\n").as_bytes(),
                        WriteMode::Create,
                    )
                    .expect("write");
            }
        }
        let mut mover = serve(&dir, &key_file, true);
        let mut other = serve(&dir, &key_file, true);
        std::thread::sleep(Duration::from_millis(300));
        let mut min = mover.stdin.take().expect("in");
        min.write_all(
            json!({"command": "rename", "old_path": "/memories/d", "new_path": "/memories/e"})
                .to_string()
                .as_bytes(),
        )
        .expect("write");
        min.write_all(b"\n").expect("write");
        std::thread::sleep(Duration::from_millis(5 + next_random(&mut seed) % 150));
        mover.kill().expect("SIGKILL");
        let _ = mover.wait();
        drop(min);
        let journal_left = std::fs::read_dir(&dir)
            .expect("read_dir")
            .filter_map(Result::ok)
            .any(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with("_claude-memory-move-")
            });
        mid_move += usize::from(journal_left);
        let lines: Vec<String> = (0..CLI_FILES)
            .flat_map(|i| {
                ["d", "e"].map(|d| {
                    json!({"command": "str_replace", "path": format!("/memories/{d}/n{i}.md"),
                        "old_str": "alpha", "new_str": format!("EDITED{d}")})
                    .to_string()
                })
            })
            .collect();
        let mut oin = other.stdin.take().expect("in");
        oin.write_all(lines.join("\n").as_bytes()).expect("write");
        drop(oin);
        let mut out = String::new();
        other
            .stdout
            .take()
            .expect("out")
            .read_to_string(&mut out)
            .expect("read");
        other.wait().expect("wait");
        let ok = out
            .lines()
            .filter(|l| l.contains("has been edited"))
            .count();
        let history = open_sealed(&dir.display().to_string(), &key_file.display().to_string());
        let report = history.repair_report().clone();
        let now = live(&history).expect("every file opens");
        let texts = files(&dir, &history_key(&key_file));
        let landed = texts.values().filter(|c| c.contains("EDITED")).count();
        println!(
            "round {round}: journal left {journal_left}, {ok} edits answered success, {landed} \
             in the files, {} files, repair recorded {}",
            now.len(),
            report.recorded.len()
        );
        if now.len() != CLI_FILES || landed != ok || !report.recorded.is_empty() {
            broken.push(format!(
                "round {round} (journal left {journal_left}): {} files for {CLI_FILES}, {ok} \
                 edits answered success, {landed} in the files; repair: {report}",
                now.len()
            ));
        }
    }
    println!("{mid_move} of 12 kills inside the move");
    assert!(broken.is_empty(), "{broken:#?}");
}

fn history_key(key_file: &Path) -> Key {
    Key::from_file(key_file).expect("key")
}

/// A rename killed part way, then a local process swaps one source file
/// for a sparse file of a terabyte (no write makes one; the README says
/// it is refused before a byte is read). The store must still open.
#[test]
fn a_huge_sparse_file_in_a_half_moved_tree_does_not_stop_the_store_opening() {
    let s = setup();
    let source = raw_source_dir(&s.dir);
    rename_killed_after_first_copy(&s.dir, &s.key);
    let victim = std::fs::read_dir(&source)
        .expect("read_dir")
        .filter_map(Result::ok)
        .next()
        .expect("a source file")
        .path();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&victim)
        .expect("open");
    f.set_len(1 << 40).expect("sparse");
    drop(f);
    let started = std::time::Instant::now();
    let opened = EncryptedStore::open(
        FilesystemStore::open(&s.dir).expect("fs"),
        Keyring::new(s.key.clone()),
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        opened.is_ok(),
        "one planted sparse file refuses the whole store: {}",
        opened.err().map(|e| e.to_string()).unwrap_or_default()
    );
}

/// A rename killed part way, then a local process replaces the half-made
/// destination directory with a symbolic link to a directory outside the
/// store (holding the same copies). Finishing the move must not write
/// through it: nothing may appear outside the store.
#[test]
fn a_symlink_planted_as_a_half_made_destination_is_not_written_through() {
    let s = setup();
    let source = raw_source_dir(&s.dir);
    rename_killed_after_first_copy(&s.dir, &s.key);
    let dest = std::fs::read_dir(&s.dir)
        .expect("read_dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .find(|p| {
            *p != source
                && !p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .expect("the half-made destination");
    let outside = s._tmp.path().join("outside");
    std::fs::rename(&dest, &outside).expect("move it out");
    std::os::unix::fs::symlink(&outside, &dest).expect("symlink");
    let before = std::fs::read_dir(&outside).expect("read_dir").count();
    let opened = EncryptedStore::open(
        FilesystemStore::open(&s.dir).expect("fs"),
        Keyring::new(s.key.clone()),
    );
    let after = std::fs::read_dir(&outside).expect("read_dir").count();
    println!(
        "symlinked destination: open {:?}, {before} files outside before, {after} after",
        opened.as_ref().map(|_| ()).map_err(ToString::to_string)
    );
    assert_eq!(before, after, "the open wrote through the planted link");
    assert!(
        opened.is_ok(),
        "a planted link refuses the whole store: {}",
        opened.err().map(|e| e.to_string()).unwrap_or_default()
    );
}

/// Another handle creates files under the destination while the move
/// copies into it (the destination did not exist when the move checked):
/// each create that answers success must keep its content; on a store
/// whose rename is atomic the rename would have been refused
/// (`AlreadyExists`) or the create would have met the moved file.
#[test]
fn a_create_at_the_destination_racing_a_rename_is_not_overwritten() {
    let s = setup();
    let other = Arc::new(MemoryTool::new(plain_handle(&s.dir, &s.key)));
    let created = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&created);
    let racer: Racer = Arc::default();
    let slot = Arc::clone(&racer);
    let mover = hooked_handle(
        &s.dir,
        &s.key,
        Box::new(move |n| {
            if n == 1 {
                let (other, seen) = (Arc::clone(&other), Arc::clone(&seen));
                race_from_hook(&slot, move || {
                    for name in ["a", "b", "c"] {
                        let out = other.dispatch(&json!({"command": "create",
                            "path": format!("/memories/e/{name}.md"),
                            "file_text": "made by the other process\n"}));
                        seen.lock().expect("lock").push((name, out));
                    }
                });
            }
        }),
    );
    let moved = mover.rename(&p("/memories/d"), &p("/memories/e"));
    join_racer(&racer);
    let creates = std::mem::take(&mut *created.lock().expect("lock"));
    let now = files(&s.dir, &s.key);
    for (name, out) in creates {
        if !out.is_error {
            assert!(
                now.get(&format!("/memories/e/{name}.md"))
                    .is_some_and(|c| c.contains("other process")),
                "the create of /memories/e/{name}.md answered {:?}, then the rename \
                 ({moved:?}) wrote over it: {now:?}",
                out.content
            );
        }
    }
}

/// A rekey started by another process while a rename (by a process
/// holding only the old key) is copying: the rekey waits for the store's
/// lock, which the move holds to its end, then re-seals everything; every
/// file is at one path, once, and opens with the new key alone.
#[test]
fn a_rekey_racing_a_live_rename_leaves_each_file_once_under_the_new_key() {
    let s = setup();
    let new = Key::generate().expect("key");
    let rotator = EncryptedStore::open(
        FilesystemStore::open(&s.dir).expect("fs"),
        Keyring::new(new.clone()).with(s.key.clone()),
    )
    .expect("open with both keys");
    let report = Arc::new(Mutex::new(None));
    let seen = Arc::clone(&report);
    let rotator = Arc::new(rotator);
    let racer: Racer = Arc::default();
    let slot = Arc::clone(&racer);
    let mover = hooked_handle(
        &s.dir,
        &s.key,
        Box::new(move |n| {
            if n == 1 {
                let (rotator, seen) = (Arc::clone(&rotator), Arc::clone(&seen));
                race_from_hook(&slot, move || {
                    *seen.lock().expect("lock") = Some(rotator.rekey().map_err(|e| e.to_string()));
                });
            }
        }),
    );
    let moved = mover.rename(&p("/memories/d"), &p("/memories/e"));
    join_racer(&racer);
    let report = report.lock().expect("lock").take().expect("rekey ran");
    drop(mover);
    let now = files(&s.dir, &new);
    println!("rename {moved:?}, rekey {report:?}, files {now:?}");
    for name in ["a", "b", "c"] {
        let places: Vec<&String> = now
            .keys()
            .filter(|k| k.ends_with(&format!("/{name}.md")))
            .collect();
        assert_eq!(places.len(), 1, "{name}.md at {places:?}: {now:?}");
    }
}
