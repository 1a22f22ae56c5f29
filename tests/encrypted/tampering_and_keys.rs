//! The encrypted store under attack (issue 21): after the whole suite no
//! raw byte holds a name or content it wrote; tampering with the stored
//! bytes gives exactly SPEC §4's integrity answer and changes nothing;
//! the wrong key, a missing key file and a key file others can read are
//! refused at open.
#![cfg(feature = "encryption")]

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Mutex;

use claude_memory::history::SealedLog;
use claude_memory::store::crypt::{CryptError, EncryptedStore, Key, Keyring};
use claude_memory::store::{
    Change, DirEntry, FileContent, FileReader, MemoryStoreExt as _, Metadata, StoreResult, Updated,
    Version, WriteMode,
};
use claude_memory::{FilesystemStore, MemoryPath, MemoryStore, MemoryTool};
use serde_json::json;

#[cfg(all(feature = "s3", feature = "azure"))]
#[path = "../cloud_support/mod.rs"]
mod cloud_support;

/// Notes every name and content written through it (above the
/// encryption), so the raw bytes below can be searched for them.
struct Recorder<S> {
    inner: S,
    seen: Mutex<BTreeSet<Vec<u8>>>,
}

impl<S> Recorder<S> {
    fn note_path(&self, path: &MemoryPath) {
        let mut seen = self.seen.lock().expect("lock");
        for c in path.components() {
            seen.insert(c.as_bytes().to_vec());
        }
    }
    fn note_data(&self, data: &[u8]) {
        let mut seen = self.seen.lock().expect("lock");
        for line in data.split(|&b| b == b'\n') {
            seen.insert(line.to_vec());
        }
        seen.insert(data.to_vec());
    }
}

#[deny(clippy::missing_trait_methods)]
impl<S: MemoryStore> MemoryStore for Recorder<S> {
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
        self.note_path(path);
        self.note_data(data);
        self.inner.write_opts(path, data, options)
    }
    fn update_opts(
        &self,
        path: &MemoryPath,
        options: claude_memory::store::UpdateOptions<'_>,
        change: &mut Change<'_>,
    ) -> StoreResult<Updated> {
        let out = self.inner.update_opts(path, options, change)?;
        if let Updated::Written(data) = &out {
            self.note_data(data);
        }
        Ok(out)
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
        self.note_path(to);
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

/// Every byte of every file below `dir`, each file's name included.
fn raw_bytes(dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let entry = entry.expect("entry");
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        out.push((format!("name {}", path.display()), name.into_bytes()));
        if entry.file_type().expect("type").is_dir() {
            raw_bytes(&path, out);
        } else {
            out.push((
                path.display().to_string(),
                std::fs::read(&path).expect("read"),
            ));
        }
    }
}

/// Needles worth searching for: long enough that random ciphertext (or
/// the key record's fixed words) cannot hold them by chance.
fn needles(seen: &BTreeSet<Vec<u8>>) -> Vec<Vec<u8>> {
    seen.iter()
        .filter(|n| n.len() >= 6 && !n.iter().all(|b| b.is_ascii_hexdigit()))
        .cloned()
        .collect()
}

fn assert_no_plaintext(dir: &Path, seen: &BTreeSet<Vec<u8>>, what: &str) -> usize {
    let mut files = Vec::new();
    raw_bytes(dir, &mut files);
    assert_none_in(&files, seen, what)
}

/// Searches every `(where, bytes)` for every needle of `seen`; how many
/// needles were searched.
fn assert_none_in(files: &[(String, Vec<u8>)], seen: &BTreeSet<Vec<u8>>, what: &str) -> usize {
    let needles = needles(seen);
    for (file, bytes) in files {
        for needle in &needles {
            assert!(
                !bytes.windows(needle.len()).any(|w| w == needle.as_slice()),
                "{what}: {file} holds plaintext {:?}",
                String::from_utf8_lossy(needle)
            );
        }
    }
    needles.len()
}

/// The whole conformance suite on encrypted filesystem stores with a
/// sealed history log, then every raw byte (names too) searched.
#[test]
fn after_the_suite_no_raw_byte_holds_plaintext_on_the_filesystem() {
    let searched = std::cell::Cell::new(0usize);
    claude_memory::conformance::run_all(|run| {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = EncryptedStore::open(FilesystemStore::open(dir.path()).expect("open"), ring())
            .expect("open");
        let log = SealedLog::new(
            claude_memory::history::FileLog::for_store(dir.path()).expect("log"),
            &store,
        );
        let history = claude_memory::history::HistoryStore::open(store, log).expect("history");
        let recorder = Recorder {
            inner: history,
            seen: Mutex::new(BTreeSet::new()),
        };
        run(&recorder);
        let seen = recorder.seen.lock().expect("lock").clone();
        if !needles(&seen).is_empty() {
            searched.set(searched.get() + assert_no_plaintext(dir.path(), &seen, "filesystem"));
        }
    });
    assert!(searched.get() > 80, "searched {} needles", searched.get());
}

/// The whole conformance suite on encrypted cloud stores (moto's S3 and
/// Azurite) with a sealed history in the same bucket, then every object
/// below the store's prefix read raw: its key and its bytes.
#[cfg(all(feature = "s3", feature = "azure"))]
#[test]
fn after_the_suite_no_object_holds_plaintext_in_the_bucket() {
    use claude_memory::object_store::{ObjectStore, ObjectStoreExt};
    use futures_util::StreamExt;

    for backend in ["s3", "azure"] {
        if cloud_support::bucket(backend).is_none() {
            continue;
        }
        let searched = std::cell::Cell::new(0usize);
        claude_memory::conformance::run_all(|run| {
            let prefix = cloud_support::unique("enc-raw");
            // A client of its own for each store, as an application with
            // one store per prefix would have.
            let client = cloud_support::bucket(backend).expect("bucket");
            let base = claude_memory::CloudStore::open(client, &prefix).expect("cloud store");
            let log = claude_memory::history::CloudLog::for_store(&base);
            let store = EncryptedStore::open(base, ring()).expect("open");
            let log = SealedLog::new(log, &store);
            let history = claude_memory::history::HistoryStore::open(store, log).expect("history");
            let recorder = Recorder {
                inner: history,
                seen: Mutex::new(BTreeSet::new()),
            };
            run(&recorder);
            let seen = recorder.seen.lock().expect("lock").clone();
            drop(recorder);
            if needles(&seen).is_empty() {
                return;
            }
            // A client of its own, on this short-lived runtime.
            let raw = cloud_support::bucket(backend).expect("bucket");
            let objects = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime")
                .block_on(async {
                    let root = claude_memory::object_store::path::Path::from(prefix.as_str());
                    let mut out = Vec::new();
                    let mut listing = raw.list(Some(&root));
                    while let Some(meta) = listing.next().await {
                        let meta = meta.expect("list");
                        let body = raw
                            .get(&meta.location)
                            .await
                            .expect("get")
                            .bytes()
                            .await
                            .expect("body");
                        out.push((
                            format!("key {}", meta.location),
                            meta.location.to_string().into_bytes(),
                        ));
                        out.push((meta.location.to_string(), body.to_vec()));
                    }
                    out
                });
            assert!(
                !objects.is_empty(),
                "{backend}: nothing stored below {prefix}"
            );
            searched.set(searched.get() + assert_none_in(&objects, &seen, backend));
        });
        assert!(
            searched.get() > 80,
            "{backend}: searched {} needles",
            searched.get()
        );
    }
}

#[cfg(feature = "sqlite")]
#[test]
fn after_the_suite_no_raw_byte_holds_plaintext_in_sqlite() {
    let searched = std::cell::Cell::new(0usize);
    claude_memory::conformance::run_all(|run| {
        let dir = tempfile::tempdir().expect("temporary directory");
        let db = dir.path().join("m.db");
        let store =
            EncryptedStore::open(claude_memory::SqliteStore::open(&db).expect("db"), ring())
                .expect("open");
        let recorder = Recorder {
            inner: store,
            seen: Mutex::new(BTreeSet::new()),
        };
        run(&recorder);
        let seen = recorder.seen.lock().expect("lock").clone();
        drop(recorder);
        if !needles(&seen).is_empty() {
            searched.set(searched.get() + assert_no_plaintext(dir.path(), &seen, "sqlite"));
        }
    });
    assert!(searched.get() > 80, "searched {} needles", searched.get());
}

fn ring() -> Keyring {
    Keyring::new(Key::generate().expect("key"))
}

fn call(tool: &MemoryTool<impl MemoryStore>, input: serde_json::Value) -> (bool, String) {
    let out =
        tool.dispatch(&json!({"type": "tool_use", "id": "t", "name": "memory", "input": input}));
    let v = serde_json::to_value(&out).expect("json");
    (
        out.is_error,
        v["content"].as_str().unwrap_or_default().to_owned(),
    )
}

/// A store with two notes; the host files of each (by their stored name).
fn two_notes(
    dir: &Path,
) -> (
    MemoryTool<EncryptedStore<FilesystemStore>>,
    std::path::PathBuf,
    std::path::PathBuf,
) {
    let key = Key::generate().expect("key");
    let open = || {
        EncryptedStore::open(
            FilesystemStore::open(dir).expect("fs"),
            Keyring::new(key.clone()),
        )
        .expect("open")
    };
    let tool = MemoryTool::new(open());
    let stored = |before: &BTreeSet<String>| -> std::path::PathBuf {
        let now: BTreeSet<String> = std::fs::read_dir(dir)
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        let new: Vec<_> = now.difference(before).cloned().collect();
        assert_eq!(new.len(), 1, "{new:?}");
        dir.join(&new[0])
    };
    let names = |_: ()| -> BTreeSet<String> {
        std::fs::read_dir(dir)
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect()
    };
    let before = names(());
    assert!(!call(&tool, json!({"command": "create", "path": "/memories/a.md", "file_text": "alpha one\nalpha two\n"})).0);
    let a = stored(&before);
    let before = names(());
    assert!(
        !call(
            &tool,
            json!({"command": "create", "path": "/memories/b.md", "file_text": "bravo\n"})
        )
        .0
    );
    let b = stored(&before);
    (tool, a, b)
}

const A_BAD: &str =
    "Error: Could not read /memories/a.md: its stored content failed the integrity check";

/// `view` and `str_replace` of a.md both answer exactly SPEC §4's
/// integrity error, and neither changes a stored byte.
fn assert_integrity(tool: &MemoryTool<EncryptedStore<FilesystemStore>>, a: &Path, b: &Path) {
    let before = (std::fs::read(a).ok(), std::fs::read(b).ok());
    assert_eq!(
        call(tool, json!({"command": "view", "path": "/memories/a.md"})),
        (true, A_BAD.to_owned())
    );
    assert_eq!(
        call(
            tool,
            json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "alpha one", "new_str": "x"})
        ),
        (true, A_BAD.to_owned())
    );
    assert_eq!(
        call(
            tool,
            json!({"command": "insert", "path": "/memories/a.md", "insert_line": 0, "insert_text": "x"})
        ),
        (true, A_BAD.to_owned())
    );
    assert_eq!(
        (std::fs::read(a).ok(), std::fs::read(b).ok()),
        before,
        "nothing changed"
    );
}

#[test]
fn a_flipped_byte_is_the_integrity_answer() {
    let dir = tempfile::tempdir().expect("dir");
    let (tool, a, b) = two_notes(dir.path());
    for at in [0usize, 5, 30, 60] {
        let mut bytes = std::fs::read(&a).expect("read");
        let at = at.min(bytes.len() - 1);
        bytes[at] ^= 0x01;
        std::fs::write(&a, &bytes).expect("write");
        assert_integrity(&tool, &a, &b);
        bytes[at] ^= 0x01;
        std::fs::write(&a, &bytes).expect("write");
    }
    assert!(
        !call(&tool, json!({"command": "view", "path": "/memories/a.md"})).0,
        "restored bytes read again"
    );
}

#[test]
fn a_truncated_file_is_the_integrity_answer() {
    let dir = tempfile::tempdir().expect("dir");
    let (tool, a, b) = two_notes(dir.path());
    let bytes = std::fs::read(&a).expect("read");
    for len in [0, 10, 48, bytes.len() - 1] {
        std::fs::write(&a, &bytes[..len]).expect("write");
        assert_integrity(&tool, &a, &b);
    }
}

#[test]
fn swapped_names_are_the_integrity_answer() {
    let dir = tempfile::tempdir().expect("dir");
    let (tool, a, b) = two_notes(dir.path());
    let tmp = dir.path().join("swap");
    std::fs::rename(&a, &tmp).expect("mv");
    std::fs::rename(&b, &a).expect("mv");
    std::fs::rename(&tmp, &b).expect("mv");
    assert_integrity(&tool, &a, &b);
    let b_bad =
        "Error: Could not read /memories/b.md: its stored content failed the integrity check";
    assert_eq!(
        call(&tool, json!({"command": "view", "path": "/memories/b.md"})),
        (true, b_bad.to_owned())
    );
}

#[test]
fn an_old_version_copied_back_from_another_path_is_the_integrity_answer() {
    let dir = tempfile::tempdir().expect("dir");
    let (tool, a, b) = two_notes(dir.path());
    // b's first version, kept by the attacker; b is then edited.
    let old_b = std::fs::read(&b).expect("read");
    assert!(!call(&tool, json!({"command": "str_replace", "path": "/memories/b.md", "old_str": "bravo", "new_str": "charlie"})).0);
    // Copied back over a.md: sealed for another path.
    std::fs::write(&a, &old_b).expect("write");
    assert_integrity(&tool, &a, &b);
    // A file moved into a directory of its own name is refused too.
    let (_, text) = call(&tool, json!({"command": "view", "path": "/memories/b.md"}));
    assert!(text.contains("charlie"), "{text}");
}

#[test]
fn the_wrong_key_is_refused_at_open() {
    let dir = tempfile::tempdir().expect("dir");
    let (_tool, _, _) = two_notes(dir.path());
    let other = Key::generate().expect("key");
    let err = EncryptedStore::open(
        FilesystemStore::open(dir.path()).expect("fs"),
        Keyring::new(other.clone()),
    )
    .expect_err("wrong key");
    assert!(matches!(err, CryptError::WrongKey { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.starts_with("wrong key: this store was encrypted with key "),
        "{text}"
    );
    assert!(
        text.ends_with(&format!("and the key given is {}", other.id())),
        "{text}"
    );
}

#[test]
fn an_unencrypted_store_is_not_silently_mixed() {
    let dir = tempfile::tempdir().expect("dir");
    let plain = FilesystemStore::open(dir.path()).expect("fs");
    plain
        .write(
            &MemoryPath::parse("/memories/p.md").expect("p"),
            b"plain",
            WriteMode::Create,
        )
        .expect("write");
    let err = EncryptedStore::open(plain, ring()).expect_err("not empty");
    assert!(matches!(err, CryptError::NotEmpty), "{err:?}");
}

#[cfg(unix)]
#[test]
fn key_files_missing_or_open_to_others_are_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("k");
    let missing = Key::from_file(&file).expect_err("missing");
    assert_eq!(
        missing.to_string(),
        format!(
            "the key file {} cannot be used: it does not exist",
            file.display()
        )
    );
    let key = Key::generate_file(&file).expect("keygen");
    assert_eq!(
        std::fs::metadata(&file).expect("meta").permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(Key::from_file(&file).expect("read").id(), key.id());
    assert!(
        Key::generate_file(&file).is_err(),
        "keygen never overwrites a key"
    );
    for mode in [0o640, 0o604, 0o660, 0o666] {
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).expect("chmod");
        let err = Key::from_file(&file).expect_err("open mode");
        assert!(
            err.to_string().contains(&format!("its mode is {mode:04o}")),
            "{err}"
        );
    }
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    std::fs::write(&file, [1u8; 31]).expect("short");
    assert!(
        Key::from_file(&file)
            .expect_err("short")
            .to_string()
            .contains("exactly 32 bytes")
    );
}

#[test]
fn tenant_keys_open_nothing_of_each_other() {
    let master = Key::generate().expect("key");
    let base = std::sync::Arc::new(claude_memory::InMemoryStore::new());
    let alice = claude_memory::TenantId::parse("alice").expect("id");
    let bob = claude_memory::TenantId::parse("bob").expect("id");
    let a = EncryptedStore::open(
        claude_memory::TenantStore::new(base.clone(), alice.clone()),
        Keyring::new(master.clone()).for_tenant(&alice),
    )
    .expect("alice");
    a.write(
        &MemoryPath::parse("/memories/x.md").expect("p"),
        b"alice's",
        WriteMode::Create,
    )
    .expect("write");
    assert_ne!(master.for_tenant(&alice).id(), master.for_tenant(&bob).id());
    // Bob's key on Alice's store: refused at open.
    let err = EncryptedStore::open(
        claude_memory::TenantStore::new(base.clone(), alice.clone()),
        Keyring::new(master.for_tenant(&bob)),
    )
    .expect_err("bob's key");
    assert!(matches!(err, CryptError::WrongKey { .. }), "{err:?}");
}

#[test]
fn a_passphrase_opens_the_store_again_and_a_wrong_one_is_refused() {
    use claude_memory::store::crypt::Passphrase;
    let base = std::sync::Arc::new(claude_memory::InMemoryStore::new());
    let s = EncryptedStore::open(
        base.clone(),
        Keyring::from_passphrase(Passphrase::new("correct horse")).with_kdf_costs(1024, 1, 1),
    )
    .expect("open");
    s.write(
        &MemoryPath::parse("/memories/x.md").expect("p"),
        b"hi",
        WriteMode::Create,
    )
    .expect("write");
    let again = EncryptedStore::open(
        base.clone(),
        Keyring::from_passphrase(Passphrase::new("correct horse")),
    )
    .expect("again");
    assert_eq!(
        again
            .read(&MemoryPath::parse("/memories/x.md").expect("p"), 10)
            .expect("read")
            .data,
        b"hi"
    );
    let err = EncryptedStore::open(
        base,
        Keyring::from_passphrase(Passphrase::new("wrong horse")),
    )
    .expect_err("wrong");
    assert!(matches!(err, CryptError::WrongKey { .. }), "{err:?}");
}
