//! `claude-memory rekey` killed by SIGKILL at random points, 20 rounds:
//! after every kill each file reads back with the keys given, and a run
//! to the end retires the old key (issue 21).
#![cfg(all(feature = "cli", unix))]

use std::hash::{BuildHasher, RandomState};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use claude_memory::store::MemoryStoreExt as _;
use claude_memory::store::crypt::{CryptError, EncryptedStore, Key, Keyring};
use claude_memory::{FilesystemStore, MemoryPath, MemoryStore};

const FILES: usize = 120;

fn path(i: usize) -> MemoryPath {
    MemoryPath::parse(&format!("/memories/d{}/note_{i}.md", i % 7)).expect("path")
}

fn content(i: usize) -> Vec<u8> {
    format!("note {i}: {}\n", "x".repeat(i * 13 % 700)).into_bytes()
}

fn open(dir: &Path, ring: Keyring) -> Result<EncryptedStore<FilesystemStore>, CryptError> {
    EncryptedStore::open(FilesystemStore::open(dir).expect("fs"), ring)
}

fn check_all(dir: &Path, ring: Keyring, round: usize) {
    let store = open(dir, ring).unwrap_or_else(|e| panic!("round {round}: open: {e}"));
    for i in 0..FILES {
        let got = store
            .read(&path(i), u64::MAX)
            .unwrap_or_else(|e| panic!("round {round}: {}: {e}", path(i)));
        assert_eq!(got.data, content(i), "round {round}: {}", path(i));
    }
    assert_eq!(store.list(&MemoryPath::root()).expect("list").len(), 7);
}

#[test]
fn rekey_killed_at_random_points_leaves_every_file_readable() {
    let dir = tempfile::tempdir().expect("dir");
    let store_dir = dir.path().join("store");
    std::fs::create_dir(&store_dir).expect("mkdir");
    let k1 = dir.path().join("k1");
    let k2 = dir.path().join("k2");
    let key1 = Key::generate_file(&k1).expect("k1");
    let key2 = Key::generate_file(&k2).expect("k2");
    {
        let store = open(&store_dir, Keyring::new(key1.clone())).expect("open");
        for i in 0..FILES {
            store
                .write(
                    &path(i),
                    &content(i),
                    claude_memory::store::WriteMode::Create,
                )
                .expect("write");
        }
    }
    let bin = env!("CARGO_BIN_EXE_claude-memory-cli");
    let random = RandomState::new();
    let mut killed = 0;
    for round in 0..20 {
        // Alternate the direction, so every round has work to do.
        let (new, old, new_key, old_key) = if round % 2 == 0 {
            (&k2, &k1, &key2, &key1)
        } else {
            (&k1, &k2, &key1, &key2)
        };
        let mut child = Command::new(bin)
            .arg("--store")
            .arg(&store_dir)
            .arg("--key-file")
            .arg(new)
            .arg("--key-file")
            .arg(old)
            .arg("rekey")
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn");
        let wait = random.hash_one(round) % 250;
        std::thread::sleep(Duration::from_millis(wait));
        if child.try_wait().expect("try_wait").is_none() {
            killed += 1;
        }
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        check_all(
            &store_dir,
            Keyring::new(new_key.clone()).with(old_key.clone()),
            round,
        );
        // Resume to the end, so the next round starts from one key.
        let status = Command::new(bin)
            .arg("--store")
            .arg(&store_dir)
            .arg("--key-file")
            .arg(new)
            .arg("--key-file")
            .arg(old)
            .arg("rekey")
            .stderr(std::process::Stdio::null())
            .status()
            .expect("resume");
        assert!(status.success(), "round {round}: resume");
        check_all(&store_dir, Keyring::new(new_key.clone()), round);
        let err = open(&store_dir, Keyring::new(old_key.clone())).expect_err("old key retired");
        assert!(
            matches!(err, CryptError::WrongKey { .. }),
            "round {round}: {err:?}"
        );
    }
    println!("rekey: {killed} of 20 rounds killed part way");
    assert!(killed >= 5, "too few kills landed mid-rotation: {killed}");
}
