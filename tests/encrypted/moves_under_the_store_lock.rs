//! Round 5 of attacks (issues 21 and 23): the encrypted store's renames
//! under the filesystem store's lock, the moves a killed process leaves
//! and what finishing them leaves behind, a local process planting the
//! move journal or the lock file, and the content seal's format byte.
#![cfg(all(feature = "encryption", unix))]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use claude_memory::store::crypt::{EncryptedStore, Key, Keyring};
use claude_memory::store::walk::{Flow, Order, Step, walk};
use claude_memory::store::{
    Change, DirEntry, FileContent, FileReader, MemoryStoreExt as _, Metadata, StoreResult, Updated,
    Version, WriteMode,
};
use claude_memory::{FilesystemStore, MemoryPath, MemoryStore, MemoryTool};
use serde_json::json;

fn p(s: &str) -> MemoryPath {
    MemoryPath::parse(s).expect("path")
}

type Hook = Box<dyn Fn(usize) + Send + Sync>;

/// A filesystem store that calls `hook(n)` after its n-th write of a
/// file below the root (a rename's copies; the journal is not counted).
struct Hooked {
    inner: FilesystemStore,
    writes: AtomicUsize,
    hook: Mutex<Option<Hook>>,
    /// Writes of these paths fail as on a full disk.
    refuse: fn(&MemoryPath) -> bool,
}

fn refuse_none(_: &MemoryPath) -> bool {
    false
}

/// A journal name other than the fixed one (where a left journal is set
/// aside).
fn an_aside_journal(path: &MemoryPath) -> bool {
    path.components().len() == 1
        && path.components()[0].starts_with("_claude-memory-move-")
        && path.components()[0] != "_claude-memory-move-0"
}

fn full_disk(path: &MemoryPath) -> claude_memory::StoreError {
    claude_memory::StoreError::io(
        claude_memory::store::Op::Write,
        path,
        std::io::Error::from_raw_os_error(28),
    )
}

impl Hooked {
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
    fn write_opts(
        &self,
        path: &MemoryPath,
        data: &[u8],
        options: claude_memory::store::WriteOptions<'_>,
    ) -> StoreResult<Version> {
        if options.quota.is_none() && (self.refuse)(path) {
            return Err(full_disk(path));
        }
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

struct Setup {
    _tmp: tempfile::TempDir,
    dir: std::path::PathBuf,
    key: Key,
}

/// A store with `/memories/d/{a,b,c}.md` and `/memories/x.md`.
fn setup() -> Setup {
    let tmp = tempfile::tempdir().expect("dir");
    let dir = tmp.path().join("store");
    std::fs::create_dir(&dir).expect("mkdir");
    let key = Key::generate().expect("key");
    let store = handle(&dir, &key);
    for name in ["d/a", "d/b", "d/c", "x"] {
        store
            .write(
                &p(&format!("/memories/{name}.md")),
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

fn handle(dir: &Path, key: &Key) -> EncryptedStore<FilesystemStore> {
    EncryptedStore::open(
        FilesystemStore::open(dir).expect("fs"),
        Keyring::new(key.clone()),
    )
    .expect("open")
}

/// The stored `/memories/d` (the only directory of the root).
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

/// A rename of `/memories/d` to `/memories/e` that dies right after its
/// first copy (a panic in the wrapped store: the journal stays, as after
/// SIGKILL).
fn rename_killed_after_first_copy(dir: &Path, key: &Key) {
    let hooked = Hooked {
        inner: FilesystemStore::open(dir).expect("fs"),
        writes: AtomicUsize::new(0),
        hook: Mutex::new(Some(Box::new(|n| {
            if n == 1 {
                panic!("killed after the first copy");
            }
        }))),
        refuse: refuse_none,
    };
    let mover = EncryptedStore::open(hooked, Keyring::new(key.clone())).expect("open");
    let died = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = mover.rename(&p("/memories/d"), &p("/memories/e"));
    }));
    assert!(died.is_err(), "the rename was not stopped");
}

/// Flips the last byte of one stored file of the source directory, so
/// finishing the move must leave it (and the journal) behind.
fn damage_one_source_file(source: &Path) {
    let victim = std::fs::read_dir(source)
        .expect("read_dir")
        .filter_map(Result::ok)
        .next()
        .expect("a source file")
        .path();
    let mut bytes = std::fs::read(&victim).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&victim, &bytes).expect("write");
}

/// Every file the store shows now, path to content (unreadable ones as
/// `<error>`).
fn files(store: &dyn MemoryStore) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    walk(store, &MemoryPath::root(), Order::AsListed, &mut |step| {
        if let Step::File { dir, entry, .. } = step
            && let Some(path) = dir.join(&entry.name)
        {
            let shown = match store.read(&path, u64::MAX) {
                Ok(f) => String::from_utf8_lossy(&f.data).into_owned(),
                Err(_) => "<error>".to_owned(),
            };
            out.insert(path.normalized(), shown);
        }
        Ok(Flow::Continue)
    })
    .expect("walk");
    out
}

/// A store where a killed rename was finished but left a damaged file
/// (and so its journal), opened: the tool over it.
fn store_with_a_left_move() -> (
    Setup,
    std::path::PathBuf,
    MemoryTool<EncryptedStore<FilesystemStore>>,
) {
    let s = setup();
    let source = raw_source_dir(&s.dir);
    rename_killed_after_first_copy(&s.dir, &s.key);
    damage_one_source_file(&source);
    let tool = MemoryTool::new(handle(&s.dir, &s.key));
    (s, source, tool)
}

// ---------------------------------------------------------------------
// 1. What finishing a killed move leaves behind.
// ---------------------------------------------------------------------

/// The model, on a store where finishing a killed move left a damaged
/// file at the source (so `/memories/d` is still there), creates a file
/// in `/memories/d` and then makes an unrelated write. The created file
/// must stay where its create said it is: a write must not take up the
/// left journal again and move a file made after it.
#[test]
fn a_file_created_in_a_left_source_is_not_moved_by_the_next_write() {
    let (_s, _source, tool) = store_with_a_left_move();
    let out = tool.dispatch(&json!({"command": "create",
        "path": "/memories/d/new.md", "file_text": "made after the move\n"}));
    assert!(!out.is_error, "{:?}", out.content);
    let out = tool.dispatch(&json!({"command": "create",
        "path": "/memories/y.md", "file_text": "unrelated\n"}));
    assert!(!out.is_error, "{:?}", out.content);
    let now = files(tool.store());
    assert_eq!(
        now.get("/memories/d/new.md").map(String::as_str),
        Some("made after the move\n"),
        "the created file moved without a command: {now:?}"
    );
    assert!(!now.contains_key("/memories/e/new.md"), "{now:?}");
}

/// The same, across a reopen: the next open takes the left journal up
/// again (so that it finishes once the damage is gone), but moves only
/// what was left, not the file the model created in the left source
/// since.
#[test]
fn a_file_created_in_a_left_source_is_not_moved_by_the_next_open() {
    let (s, _source, tool) = store_with_a_left_move();
    let out = tool.dispatch(&json!({"command": "create",
        "path": "/memories/d/new.md", "file_text": "made after the move\n"}));
    assert!(!out.is_error, "{:?}", out.content);
    drop(tool);
    let store = handle(&s.dir, &s.key);
    let now = files(&store);
    assert_eq!(
        now.get("/memories/d/new.md").map(String::as_str),
        Some("made after the move\n"),
        "the created file moved without a command: {now:?}"
    );
}

/// A full disk where finishing would set a left journal aside: the
/// store still opens, and a delete (what frees room) still works.
#[test]
fn a_full_disk_when_setting_a_left_journal_aside_refuses_no_delete() {
    let s = setup();
    let source = raw_source_dir(&s.dir);
    rename_killed_after_first_copy(&s.dir, &s.key);
    damage_one_source_file(&source);
    let hooked = Hooked {
        inner: FilesystemStore::open(&s.dir).expect("fs"),
        writes: AtomicUsize::new(0),
        hook: Mutex::new(None),
        refuse: an_aside_journal,
    };
    let tool = MemoryTool::new(
        EncryptedStore::open(hooked, Keyring::new(s.key.clone()))
            .expect("the store opens on a full disk"),
    );
    let out = tool.dispatch(&json!({"command": "delete", "path": "/memories/x.md"}));
    assert!(!out.is_error, "{:?}", out.content);
}

/// A killed move of a tree of 80 files at deep paths (about 1,000 bytes
/// each), then every source file damaged: the list of what finishing
/// left is longer than a journal may be, and the store must still open
/// (again and again) and finish the move once the damage is gone.
#[test]
fn many_deep_entries_left_by_a_finish_do_not_stop_the_store_opening() {
    let tmp = tempfile::tempdir().expect("dir");
    let dir = tmp.path().join("store");
    std::fs::create_dir(&dir).expect("mkdir");
    let key = Key::generate().expect("key");
    let deep = vec!["c".repeat(120); 7].join("/");
    {
        let store = handle(&dir, &key);
        for n in 0..80 {
            store
                .write(
                    &p(&format!("/memories/d/{deep}/{}{n:03}.md", "f".repeat(100))),
                    b"deep file\n",
                    WriteMode::Create,
                )
                .expect("write");
        }
    }
    let source = raw_source_dir(&dir);
    rename_killed_after_first_copy(&dir, &key);
    let mut damaged = 0;
    let mut stack = vec![source.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)
            .expect("read_dir")
            .filter_map(Result::ok)
        {
            if e.file_type().expect("type").is_dir() {
                stack.push(e.path());
            } else {
                let mut bytes = std::fs::read(e.path()).expect("read");
                let last = bytes.len() - 1;
                bytes[last] ^= 1;
                std::fs::write(e.path(), &bytes).expect("write");
                damaged += 1;
            }
        }
    }
    assert_eq!(damaged, 80);
    for round in 0..2 {
        let opened = EncryptedStore::open(
            FilesystemStore::open(&dir).expect("fs"),
            Keyring::new(key.clone()),
        );
        assert!(
            opened.is_ok(),
            "open {round}: {}",
            opened.err().map(|e| e.to_string()).unwrap_or_default()
        );
    }
    std::fs::remove_dir_all(&source).expect("rm");
    let store = handle(&dir, &key);
    let now = files(&store);
    assert!(now.keys().all(|k| k.starts_with("/memories/e/")), "{now:?}");
}

/// On the same store, every later rename (of anything) must still work:
/// the journal left behind must not take the name a new move journals
/// under.
#[test]
fn renames_still_work_after_finishing_left_a_move() {
    let (_s, _source, tool) = store_with_a_left_move();
    let out = tool.dispatch(&json!({"command": "rename",
        "old_path": "/memories/x.md", "new_path": "/memories/z.md"}));
    assert!(
        !out.is_error,
        "a rename of an unrelated file after a left move: {:?}",
        out.content
    );
    let now = files(tool.store());
    assert!(now.contains_key("/memories/z.md"), "{now:?}");
    assert!(!now.contains_key("/memories/x.md"), "{now:?}");
}

/// The left move is still finished by a later open once the damaged
/// file is removed (what the README tells the operator to do), and the
/// files the move did carry are at the destination only.
#[test]
fn a_left_move_is_finished_by_an_open_once_the_damage_is_removed() {
    let (s, source, tool) = store_with_a_left_move();
    let out = tool.dispatch(&json!({"command": "create",
        "path": "/memories/y.md", "file_text": "unrelated\n"}));
    assert!(!out.is_error, "{:?}", out.content);
    drop(tool);
    // The operator removes the damaged file (the only one left in d).
    for f in std::fs::read_dir(&source).expect("read_dir") {
        std::fs::remove_file(f.expect("entry").path()).expect("rm");
    }
    let store = handle(&s.dir, &s.key);
    let now = files(&store);
    // Two or three at the destination (three when the damaged source
    // file had been copied before the kill), none at the source.
    assert!(
        now.keys().filter(|k| k.starts_with("/memories/e/")).count() >= 2,
        "{now:?}"
    );
    assert!(
        !now.keys().any(|k| k.starts_with("/memories/d/")),
        "{now:?}"
    );
    assert!(
        !std::fs::read_dir(&s.dir)
            .expect("read_dir")
            .filter_map(Result::ok)
            .any(|e| e
                .file_name()
                .to_string_lossy()
                .starts_with("_claude-memory-move-")),
        "a journal stayed after its move was finished"
    );
}

// ---------------------------------------------------------------------
// 2. A local process planting the journal or the lock file.
// ---------------------------------------------------------------------

/// Runs `f` on a thread; it must return within 20 s.
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("{what} blocked"))
}

/// A FIFO planted as the fixed move journal while a handle is open: the
/// next write (which stats the journal and reads it) and the next open
/// must neither block nor change anything; the files stay as they were.
#[test]
fn a_fifo_planted_as_the_move_journal_blocks_nothing() {
    let s = setup();
    let tool = MemoryTool::new(handle(&s.dir, &s.key));
    let status = Command::new("mkfifo")
        .arg(s.dir.join("_claude-memory-move-0"))
        .status()
        .expect("mkfifo");
    assert!(status.success());
    let out = within("a write with a FIFO journal", move || {
        tool.dispatch(&json!({"command": "create",
            "path": "/memories/new.md", "file_text": "n\n"}))
    });
    let (dir, key) = (s.dir.clone(), s.key.clone());
    let opened = within("an open with a FIFO journal", move || {
        EncryptedStore::open(FilesystemStore::open(&dir).expect("fs"), Keyring::new(key))
            .map(|_| ())
            .map_err(|e| e.to_string())
    });
    println!("write with a FIFO journal: {out:?}; open: {opened:?}");
    std::fs::remove_file(s.dir.join("_claude-memory-move-0")).expect("rm");
    let store = handle(&s.dir, &s.key);
    let now = files(&store);
    for name in ["d/a", "d/b", "d/c", "x"] {
        assert_eq!(
            now.get(&format!("/memories/{name}.md")).map(String::as_str),
            Some(format!("{name} alpha\n").as_str()),
            "{now:?}"
        );
    }
    // Either the write was refused and left nothing, or it is whole.
    match now.get("/memories/new.md") {
        None => assert!(out.is_error, "{out:?}"),
        Some(c) => assert!(!out.is_error && c == "n\n", "{out:?} {c:?}"),
    }
}

/// A symbolic link planted as the lock file (to a file outside the
/// store): the store must not follow it (no lock taken on, and nothing
/// written to, the target).
#[test]
fn a_symlinked_lock_file_is_not_followed() {
    let s = setup();
    let outside = s._tmp.path().join("outside");
    std::fs::write(&outside, b"keep").expect("write");
    let lock = s.dir.join(".claude-memory.lock");
    std::fs::remove_file(&lock).expect("rm lock");
    std::os::unix::fs::symlink(&outside, &lock).expect("symlink");
    let opened = FilesystemStore::open(&s.dir);
    if let Ok(store) = opened {
        let _ = store.write(&p("/memories/q.md"), b"q", WriteMode::Create);
    }
    assert_eq!(std::fs::read(&outside).expect("read"), b"keep");
    assert!(
        std::fs::symlink_metadata(&lock)
            .expect("lock")
            .file_type()
            .is_symlink(),
        "the link was replaced, not refused"
    );
}

/// The lock file deleted by a local process: a handle opened before (it
/// holds the old file) and one opened after (it makes a new one) must
/// still exclude each other. Without a check after each `flock`, the two
/// would lock different files for as long as they live.
///
/// Not covered (the README's safety model): while a handle *holds* the
/// old file, a handle opened after the deletion locks the new one, as any
/// writer that bypasses the lock could write.
#[test]
fn a_deleted_lock_file_does_not_split_the_handles_for_good() {
    let s = setup();
    let before = Arc::new(FilesystemStore::open(&s.dir).expect("fs"));
    std::fs::remove_file(s.dir.join(".claude-memory.lock")).expect("rm lock");
    let after = Arc::new(FilesystemStore::open(&s.dir).expect("fs"));
    for (holder, other) in [(&after, &before), (&before, &after)] {
        let (held_tx, held_rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let h = {
            let holder = Arc::clone(holder);
            std::thread::spawn(move || {
                holder
                    .exclusive(&MemoryPath::root(), &mut |_| {
                        let _ = held_tx.send(());
                        let _ = go_rx.recv_timeout(Duration::from_secs(5));
                        Ok(())
                    })
                    .expect("exclusive");
            })
        };
        held_rx.recv().expect("held");
        let (done_tx, done_rx) = mpsc::channel();
        let other = Arc::clone(other);
        let w = std::thread::spawn(move || {
            let r = other.write(&p("/memories/q.md"), b"q", WriteMode::Overwrite);
            let _ = done_tx.send(());
            r.map(|_| ()).map_err(|e| e.to_string())
        });
        let got_in = done_rx.recv_timeout(Duration::from_millis(500)).is_ok();
        let _ = go_tx.send(());
        h.join().expect("holder");
        assert_eq!(w.join().expect("writer"), Ok(()));
        assert!(
            !got_in,
            "a handle wrote while another held the lock, after the lock file was deleted"
        );
    }
}

// ---------------------------------------------------------------------
// 3. The seal's format byte.
// ---------------------------------------------------------------------

/// Every stored content file with its format byte changed (1 to 2, 2 to
/// 1, or to an unknown 3): each view answers SPEC §4's integrity error
/// exactly, and never any of the bytes.
#[test]
fn a_changed_format_byte_answers_the_integrity_error() {
    let s = setup();
    let source = raw_source_dir(&s.dir);
    let mut victims: Vec<_> = std::fs::read_dir(&source)
        .expect("read_dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    victims.sort();
    for (victim, to) in victims.iter().zip([1u8, 2, 3]) {
        let mut bytes = std::fs::read(victim).expect("read");
        bytes[0] = if bytes[0] == to { to ^ 3 } else { to };
        std::fs::write(victim, &bytes).expect("write");
    }
    let tool = MemoryTool::new(handle(&s.dir, &s.key));
    for name in ["a", "b", "c"] {
        let path = format!("/memories/d/{name}.md");
        let out = tool.dispatch(&json!({"command": "view", "path": path}));
        assert!(out.is_error, "{out:?}");
        assert_eq!(
            out.text().unwrap_or_default(),
            format!("Error: Could not read {path}: its stored content failed the integrity check"),
        );
    }
}

// ---------------------------------------------------------------------
// 4. SIGKILL at random points of directory renames.
// ---------------------------------------------------------------------

const MOVER: &str = "CLAUDE_MEMORY_R5_MOVER";

/// The mover: renames `/memories/d` to `/memories/e` and back, forever,
/// until killed.
#[test]
fn child_mover() {
    let Ok(spec) = std::env::var(MOVER) else {
        return;
    };
    let (dir, key) = spec.split_once('|').expect("spec");
    let tool = MemoryTool::new(handle(Path::new(dir), &Key::from_file(key).expect("key")));
    println!("ready");
    loop {
        for (a, b) in [("d", "e"), ("e", "d")] {
            tool.dispatch(&json!({"command": "rename",
                "old_path": format!("/memories/{a}"), "new_path": format!("/memories/{b}")}));
        }
    }
}

/// A directory of 20 files renamed back and forth by a process killed by
/// SIGKILL at random moments, 15 times: after each kill the next open
/// finishes the move, and every file is then in exactly one of the two
/// directories, all in the same one, with its content; no journal stays.
#[test]
fn directory_renames_killed_at_random_moments_leave_each_file_once() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    if std::env::var_os(MOVER).is_some() {
        return;
    }
    let tmp = tempfile::tempdir().expect("dir");
    let dir = tmp.path().join("store");
    std::fs::create_dir(&dir).expect("mkdir");
    let key_file = tmp.path().join("key");
    Key::generate_file(&key_file).expect("key");
    let key = Key::from_file(&key_file).expect("key");
    {
        let store = handle(&dir, &key);
        for n in 0..20 {
            store
                .write(
                    &p(&format!("/memories/d/s{}/f{n}.md", n % 4)),
                    format!("file {n}\n").as_bytes(),
                    WriteMode::Create,
                )
                .expect("write");
        }
    }
    let spec = format!("{}|{}", dir.display(), key_file.display());
    let mut seed = 0x2545_F491_4F6C_DD1D_u64;
    let mut mid_move = 0;
    for round in 0..15 {
        let exe = std::env::current_exe().expect("this test binary");
        let mut child = Command::new(exe)
            .args([
                "--exact",
                "child_mover",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(MOVER, &spec)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the mover");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        while !line.contains("ready") {
            line.clear();
            if stdout.read_line(&mut line).expect("read") == 0 {
                panic!("round {round}: the mover stopped before it was ready");
            }
        }
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_millis(5 + seed % 200));
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        mid_move += usize::from(dir.join("_claude-memory-move-0").exists());
        let store = handle(&dir, &key);
        let now = files(&store);
        let tops: std::collections::BTreeSet<&str> =
            now.keys().filter_map(|k| k.split('/').nth(2)).collect();
        assert_eq!(tops.len(), 1, "round {round}: {now:?}");
        assert_eq!(now.len(), 20, "round {round}: {now:?}");
        for n in 0..20 {
            let top = tops.iter().next().copied().unwrap_or_default();
            assert_eq!(
                now.get(&format!("/memories/{top}/s{}/f{n}.md", n % 4))
                    .map(String::as_str),
                Some(format!("file {n}\n").as_str()),
                "round {round}: {now:?}"
            );
        }
        assert!(
            !std::fs::read_dir(&dir)
                .expect("read_dir")
                .filter_map(Result::ok)
                .any(|e| e
                    .file_name()
                    .to_string_lossy()
                    .starts_with("_claude-memory-move-")),
            "round {round}: a journal stayed"
        );
    }
    println!("15 SIGKILLs, {mid_move} inside a move");
}

// ---------------------------------------------------------------------
// 5. A rekey racing another handle's renames.
// ---------------------------------------------------------------------

/// One handle (the old key only) renames a directory back and forth
/// while another (new key first, old second) rotates the key: once the
/// rotation is done, the store opens with the new key alone, every file
/// is there once with its content, and no journal is left that the new
/// key cannot open.
#[test]
fn a_rekey_racing_directory_renames_leaves_every_file_once_under_the_new_key() {
    let s = setup();
    let new = Key::generate().expect("key");
    let mover = handle(&s.dir, &s.key);
    let rotator = EncryptedStore::open(
        FilesystemStore::open(&s.dir).expect("fs"),
        Keyring::new(new.clone()).with(s.key.clone()),
    )
    .expect("open with both keys");
    let report = std::thread::scope(|scope| {
        scope.spawn(|| {
            for _ in 0..40 {
                for (a, b) in [("d", "e"), ("e", "d")] {
                    let _ =
                        mover.rename(&p(&format!("/memories/{a}")), &p(&format!("/memories/{b}")));
                }
            }
        });
        std::thread::sleep(Duration::from_millis(20));
        rotator.rekey().map_err(|e| e.to_string())
    });
    drop((mover, rotator));
    let report = report.expect("rekey");
    let store = match EncryptedStore::open(
        FilesystemStore::open(&s.dir).expect("fs"),
        Keyring::new(new.clone()),
    ) {
        Ok(store) => store,
        Err(e) => panic!("after rekey ({report:?}) the store does not open with the new key: {e}"),
    };
    let now = files(&store);
    assert_eq!(now.len(), 4, "{now:?}");
    for name in ["a", "b", "c"] {
        let at: Vec<_> = now
            .iter()
            .filter(|(k, _)| k.ends_with(&format!("/{name}.md")))
            .collect();
        assert_eq!(at.len(), 1, "{name}: {now:?}");
        assert_eq!(at[0].1, &format!("d/{name} alpha\n"), "{now:?}");
    }
}
