//! The encrypted store attacked (issue 21, third pass), each test the
//! attack as written: a rename whose source delete fails after deleting
//! (a directory sync that fails, a tree half removed), a planted sparse
//! file of many GiB under a real name, a second process writing while
//! another rekeys, passphrase files that are loose, FIFOs or missing, and
//! the CLI's answers to a new user's mistakes on encrypted stores.
#![cfg(feature = "encryption")]

use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};

use claude_memory::store::crypt::{CryptError, EncryptedStore, Key, Keyring};
use claude_memory::store::{
    Change, DirEntry, EntryKind, FileContent, FileReader, MemoryStoreExt as _, Metadata, Op,
    StoreError, StoreResult, Updated, Version,
};
use claude_memory::{FilesystemStore, MemoryPath, MemoryStore, MemoryTool, TenantId, TenantStore};
use serde_json::json;

fn call(tool: &MemoryTool<impl MemoryStore>, input: serde_json::Value) -> (bool, String) {
    let out =
        tool.dispatch(&json!({"type": "tool_use", "id": "t", "name": "memory", "input": input}));
    let v = serde_json::to_value(&out).expect("json");
    (
        out.is_error,
        v["content"].as_str().unwrap_or_default().to_owned(),
    )
}

fn open(dir: &Path, key: &Key) -> Result<EncryptedStore<FilesystemStore>, CryptError> {
    EncryptedStore::open(
        FilesystemStore::open(dir).expect("fs"),
        Keyring::new(key.clone()),
    )
}

/// How [`BadDelete`]'s deletes fail.
const DELETE_OK: u8 = 0;
/// The delete is done whole, then an error is reported (an unlink or a
/// tree removal whose directory `fsync` failed).
const DELETE_THEN_FAIL: u8 = 1;
/// Only the first file below a directory goes, then an error (a tree
/// removal stopped half way by an I/O error).
const DELETE_PART: u8 = 2;

/// The filesystem store, with deletes that fail in the ways a disk's do.
struct BadDelete<S> {
    inner: S,
    mode: AtomicU8,
}

impl<S: MemoryStore> BadDelete<S> {
    fn eio(path: &MemoryPath) -> StoreError {
        StoreError::Io {
            op: Op::Delete,
            path: path.clone(),
            source: std::io::Error::from_raw_os_error(5),
        }
    }
    fn first_file_below(&self, dir: &MemoryPath) -> Option<MemoryPath> {
        for e in self.inner.list(dir).ok()? {
            let p = dir.join(&e.name)?;
            match e.kind {
                EntryKind::File => return Some(p),
                EntryKind::Directory => {
                    if let Some(f) = self.first_file_below(&p) {
                        return Some(f);
                    }
                }
            }
        }
        None
    }
}

#[deny(clippy::missing_trait_methods)]
impl<S: MemoryStore> MemoryStore for BadDelete<S> {
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
        self.inner.write_opts(path, data, options)
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
        let claude_memory::store::DeleteIf::Exists = options.condition else {
            return self.inner.delete_opts(path, options);
        };
        // The wrapper's own files (journals) are left alone.
        let own = path
            .name()
            .is_some_and(|n| n.starts_with("_claude-memory-"));
        // One failure only (the source's delete): the rest of the move,
        // and any undo, see a working disk.
        let mode = if own {
            DELETE_OK
        } else {
            self.mode.swap(DELETE_OK, Ordering::SeqCst)
        };
        match mode {
            DELETE_THEN_FAIL => {
                self.inner.delete(path)?;
                Err(Self::eio(path))
            }
            DELETE_PART => {
                if let Some(f) = self.first_file_below(path) {
                    self.inner.delete(&f)?;
                }
                Err(Self::eio(path))
            }
            _ => self.inner.delete(path).map(|()| true),
        }
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

fn three_notes(tool: &MemoryTool<impl MemoryStore>) {
    for n in ["a", "b", "c"] {
        let (err, text) = call(
            tool,
            json!({"command": "create", "path": format!("/memories/src/{n}.md"), "file_text": format!("note {n}\n")}),
        );
        assert!(!err, "{text}");
    }
}

fn views(tool: &MemoryTool<impl MemoryStore>, base: &str) -> Vec<(bool, String)> {
    ["a", "b", "c"]
        .iter()
        .map(|n| {
            call(
                tool,
                json!({"command": "view", "path": format!("{base}/{n}.md")}),
            )
        })
        .collect()
}

fn bad_delete(
    dir: &Path,
    key: &Key,
    mode: u8,
) -> MemoryTool<EncryptedStore<BadDelete<FilesystemStore>>> {
    let inner = BadDelete {
        inner: FilesystemStore::open(dir).expect("fs"),
        mode: AtomicU8::new(DELETE_OK),
    };
    let store = EncryptedStore::open(inner, Keyring::new(key.clone())).expect("open");
    store.inner().mode.store(mode, Ordering::SeqCst);
    MemoryTool::new(store)
}

/// The source's delete removes it, then reports an error (its directory
/// sync failed). Before the fix the rename then "undid" itself by deleting
/// the destination: every note was gone from both places.
#[test]
fn a_rename_whose_source_delete_fails_after_deleting_loses_nothing() {
    let dir = tempfile::tempdir().expect("dir");
    let key = Key::generate().expect("key");
    three_notes(&MemoryTool::new(open(dir.path(), &key).expect("open")));
    let tool = bad_delete(dir.path(), &key, DELETE_THEN_FAIL);
    let (err, text) = call(
        &tool,
        json!({"command": "rename", "old_path": "/memories/src", "new_path": "/memories/dst"}),
    );
    assert!(!err, "the source is gone, so the move is done: {text}");
    drop(tool);
    let tool = MemoryTool::new(open(dir.path(), &key).expect("open"));
    for (n, (err, text)) in views(&tool, "/memories/dst").into_iter().enumerate() {
        assert!(!err, "{n}: {text}");
        assert!(text.contains("note "), "{n}: {text}");
    }
    assert!(call(&tool, json!({"command": "view", "path": "/memories/src"})).0);
}

/// The source's delete stops half way (one note removed, then EIO).
/// Before the fix the destination was deleted too, and the removed note
/// existed nowhere. Now the rename answers an error, the journal stays,
/// and the next open finishes the move: every note at the destination.
#[test]
fn a_rename_whose_source_delete_stops_half_way_is_finished_not_undone() {
    let dir = tempfile::tempdir().expect("dir");
    let key = Key::generate().expect("key");
    three_notes(&MemoryTool::new(open(dir.path(), &key).expect("open")));
    let tool = bad_delete(dir.path(), &key, DELETE_PART);
    let (err, text) = call(
        &tool,
        json!({"command": "rename", "old_path": "/memories/src", "new_path": "/memories/dst"}),
    );
    assert!(err, "the delete failed: {text}");
    drop(tool);
    // A reader (read-only, as `view` opens it) is not refused for the
    // half-done move, and leaves it to the next writer.
    let reader = EncryptedStore::open_existing(
        FilesystemStore::builder(dir.path())
            .read_only(true)
            .open()
            .expect("fs"),
        Keyring::new(key.clone()),
    )
    .expect("a reader opens");
    assert!(
        reader
            .stat(&MemoryPath::parse("/memories/src").expect("path"))
            .expect("stat")
            .is_some(),
        "the reader moved nothing"
    );
    drop(reader);
    let tool = MemoryTool::new(open(dir.path(), &key).expect("open finishes the move"));
    for (n, (err, text)) in views(&tool, "/memories/dst").into_iter().enumerate() {
        assert!(!err, "{n}: {text}");
        assert!(text.contains("note "), "{n}: {text}");
    }
    assert!(call(&tool, json!({"command": "view", "path": "/memories/src"})).0);
}

/// The host file of the only note in a subdirectory (the only file below
/// a subdirectory of `dir`; the root holds the store's own files).
fn host_file_below(dir: &Path) -> std::path::PathBuf {
    let mut stack: Vec<_> = std::fs::read_dir(dir)
        .expect("dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("dir").filter_map(Result::ok) {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                return p;
            }
        }
    }
    panic!("no note in {}", dir.display());
}

/// An attacker extends a note's stored file to 16 GiB (sparse: no disk
/// used). Before the fix a view, a rename and a rekey each read it whole
/// into memory (a read limit of `u64::MAX`), which exhausts the machine;
/// now each is refused before a byte is read, as an error answer.
#[test]
fn a_planted_sparse_file_of_many_gib_is_refused_without_being_read() {
    let dir = tempfile::tempdir().expect("dir");
    let key = Key::generate().expect("key");
    let tool = MemoryTool::new(open(dir.path(), &key).expect("open"));
    let (err, text) = call(
        &tool,
        json!({"command": "create", "path": "/memories/d/big.md", "file_text": "small\n"}),
    );
    assert!(!err, "{text}");
    let host = host_file_below(dir.path());
    std::fs::OpenOptions::new()
        .write(true)
        .open(&host)
        .expect("open")
        .set_len(16 << 30)
        .expect("sparse");
    let (err, text) = call(
        &tool,
        json!({"command": "view", "path": "/memories/d/big.md"}),
    );
    assert!(err, "{text}");
    let (err, text) = call(
        &tool,
        json!({"command": "rename", "old_path": "/memories/d", "new_path": "/memories/e"}),
    );
    assert!(err, "{text}");
    assert!(!call(&tool, json!({"command": "view", "path": "/memories/d"})).0);
    let store = open(dir.path(), &key).expect("open");
    assert!(store.rekey().is_err());
}

/// Two processes on one store: the second opened it with the old key and
/// keeps writing while the first rekeys to a new one. Before the fix its
/// writes after the rotation were sealed under the retired key, which the
/// store then no longer opened (an integrity error for the new key's
/// holder). Now each such write is refused with the reason, and every
/// file opens with the new key alone.
#[test]
fn a_second_writer_with_the_old_key_cannot_write_behind_a_rekey() {
    let dir = tempfile::tempdir().expect("dir");
    let old = Key::generate().expect("key");
    let new = Key::generate().expect("key");
    let writer = MemoryTool::new(open(dir.path(), &old).expect("open"));
    three_notes(&writer);
    let rotating = EncryptedStore::open(
        FilesystemStore::open(dir.path()).expect("fs"),
        Keyring::new(new.clone()).with(old.clone()),
    )
    .expect("open");
    rotating.rekey().expect("rekey");
    let (err, text) = call(
        &writer,
        json!({"command": "create", "path": "/memories/late.md", "file_text": "written late\n"}),
    );
    assert!(err, "a write under the retired key: {text}");
    let (err, text) = call(
        &writer,
        json!({"command": "str_replace", "path": "/memories/src/a.md", "old_str": "note", "new_str": "NOTE"}),
    );
    assert!(err, "an edit under the retired key: {text}");
    let tool = MemoryTool::new(open(dir.path(), &new).expect("new key"));
    for (n, (err, text)) in views(&tool, "/memories/src").into_iter().enumerate() {
        assert!(!err, "{n}: {text}");
    }
    let (err, text) = call(&tool, json!({"command": "view", "path": "/memories"}));
    assert!(!err, "{text}");
    assert!(!text.contains("late.md"), "{text}");
}

/// A passphrase file that group or others can read is refused, as a key
/// file is (before: used); a FIFO is refused without blocking (before: the
/// open hung reading it); a missing one is called a passphrase file.
/// Unix only: the mode rule is a Unix permission check (Windows files
/// have ACLs, which the key-file rules do not read).
#[cfg(unix)]
#[test]
fn passphrase_files_are_held_to_key_file_rules() {
    use claude_memory::store::crypt::Passphrase;
    use std::os::unix::fs::PermissionsExt;
    use std::process::Command;
    let dir = tempfile::tempdir().expect("dir");
    let loose = dir.path().join("loose");
    std::fs::write(&loose, "correct horse\n").expect("write");
    std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let err = Passphrase::from_file(&loose).expect_err("loose");
    assert!(err.to_string().contains("0644"), "{err}");
    assert!(err.to_string().contains("passphrase file"), "{err}");
    let fifo = dir.path().join("fifo");
    let status = Command::new("mkfifo")
        .arg("-m")
        .arg("600")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(status.success());
    let (tx, rx) = std::sync::mpsc::channel();
    let f = fifo.clone();
    std::thread::spawn(move || {
        let _ = tx.send(
            Passphrase::from_file(&f)
                .map(|_| ())
                .map_err(|e| e.to_string()),
        );
    });
    let got = rx
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("reading a FIFO must not block");
    let err = got.expect_err("a FIFO is no passphrase file");
    assert!(err.contains("regular file"), "{err}");
    let huge = dir.path().join("huge");
    std::fs::write(&huge, vec![b'a'; 10_000]).expect("write");
    std::fs::set_permissions(&huge, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    assert!(Passphrase::from_file(&huge).is_err());
    let err = Passphrase::from_file(dir.path().join("missing")).expect_err("missing");
    assert!(err.to_string().starts_with("the passphrase file "), "{err}");
    let good = dir.path().join("good");
    std::fs::write(&good, "correct horse\n").expect("write");
    std::fs::set_permissions(&good, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    assert!(Passphrase::from_file(&good).is_ok());
}

/// A tenant base (`/memories/<tenant>/` stores, each encrypted) opened
/// encrypted as a whole: the error says it is a tenant base, not that it
/// holds unencrypted files.
#[test]
fn a_tenant_base_opened_whole_says_so() {
    let dir = tempfile::tempdir().expect("dir");
    let key = Key::generate().expect("key");
    let alice = TenantId::parse("alice").expect("tenant");
    let store = EncryptedStore::open(
        TenantStore::new(
            FilesystemStore::open(dir.path()).expect("fs"),
            alice.clone(),
        ),
        Keyring::new(key.clone()).for_tenant(&alice),
    )
    .expect("tenant store");
    three_notes(&MemoryTool::new(store));
    let err = open(dir.path(), &key).expect_err("a base");
    assert!(matches!(err, CryptError::TenantBase), "{err:?}");
    assert!(err.to_string().contains("--tenant"), "{err}");
}

/// Every spelling of a path the model may use names the same file: the
/// seal is bound to the normalised path, which the view's fast path takes
/// from the raw spelling when it already is normalised, and computes
/// otherwise.
#[test]
fn every_spelling_of_a_path_opens_the_same_sealed_file() {
    let dir = tempfile::tempdir().expect("dir");
    let key = Key::generate().expect("key");
    let tool = MemoryTool::new(open(dir.path(), &key).expect("open"));
    let (err, text) = call(
        &tool,
        json!({"command": "create", "path": "/memories/x/n.md", "file_text": "spelled\n"}),
    );
    assert!(!err, "{text}");
    let mut tried = 0;
    for spelling in [
        "/memories/x/n.md",
        "/memories//x/n.md",
        "/memories/x/./n.md",
        "/memories/./x//n.md",
    ] {
        if MemoryPath::parse(spelling).is_err() {
            continue;
        }
        tried += 1;
        let (err, text) = call(&tool, json!({"command": "view", "path": spelling}));
        assert!(!err, "{spelling}: {text}");
        assert!(text.contains("spelled"), "{spelling}: {text}");
    }
    assert!(tried >= 2, "only {tried} spellings parse");
}
