//! The CLI on encrypted stores, attacked and misused (issue 21, third
//! pass): a new user's mistakes (a tenant base without `--tenant`, a
//! tenant with no memories, a missing passphrase file, `keygen` over a
//! file, the export count) and a tenant's directory copied over another's.
#![cfg(feature = "encryption")]

use std::path::Path;
use std::process::Command;

use claude_memory::store::crypt::{CryptError, EncryptedStore, Key, Keyring, Passphrase};
use claude_memory::store::{MemoryStoreExt as _, WriteMode};
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

fn cli(args: &[&std::ffi::OsStr]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_claude-memory-cli"))
        .args(args)
        .output()
        .expect("run");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A new user's mistakes on encrypted stores, through the CLI.
#[test]
fn the_cli_answers_a_new_users_mistakes_on_encrypted_stores() {
    let dir = tempfile::tempdir().expect("dir");
    let base = dir.path().join("base");
    std::fs::create_dir(&base).expect("dir");
    let key = dir.path().join("k");
    let (ok, text) = cli(&["keygen".as_ref(), "--output".as_ref(), key.as_os_str()]);
    assert!(ok, "{text}");
    // keygen over an existing file.
    let (ok, text) = cli(&["keygen".as_ref(), "--output".as_ref(), key.as_os_str()]);
    assert!(!ok);
    assert!(text.contains("refusing to overwrite"), "{text}");
    let note = dir.path().join("note.md");
    std::fs::write(&note, "a note\n").expect("write");
    let store = |tenant: Option<&str>| -> Vec<std::ffi::OsString> {
        let mut v: Vec<std::ffi::OsString> = vec!["--store".into(), base.clone().into()];
        if let Some(t) = tenant {
            v.extend(["--tenant".into(), t.into()]);
        }
        v.extend(["--key-file".into(), key.clone().into()]);
        v
    };
    let run = |mut pre: Vec<std::ffi::OsString>, rest: &[&str]| {
        pre.extend(rest.iter().map(Into::into));
        let refs: Vec<&std::ffi::OsStr> = pre.iter().map(|s| s.as_os_str()).collect();
        cli(&refs)
    };
    // One memory for alice, through the library as the CLI opens it (the
    // tenant's key derived from the key file's).
    let alice = TenantId::parse("alice").expect("tenant");
    let k = Key::from_file(&key).expect("key");
    let tool = MemoryTool::new(
        EncryptedStore::open(
            TenantStore::new(FilesystemStore::open(&base).expect("fs"), alice.clone()),
            Keyring::new(k).for_tenant(&alice),
        )
        .expect("open"),
    );
    let (err, text) = call(
        &tool,
        json!({"command": "create", "path": "/memories/one.md", "file_text": "one memory\n"}),
    );
    assert!(!err, "{text}");
    drop(tool);
    // The base without --tenant.
    let (ok, text) = run(store(None), &["view", "/memories"]);
    assert!(!ok);
    assert!(text.contains("--tenant is probably missing"), "{text}");
    // A tenant with no memories, read-only.
    let (ok, text) = run(store(Some("bob")), &["view", "/memories"]);
    assert!(!ok);
    assert!(!text.contains("lock failed"), "{text}");
    assert!(text.contains("tenant bob"), "{text}");
    // Export counts memories, not the key record.
    let out = dir.path().join("backup.json");
    let (ok, text) = run(
        store(Some("alice")),
        &["export", "--output", out.to_str().expect("utf-8")],
    );
    assert!(ok, "{text}");
    assert!(text.contains("exported 1 file "), "{text}");
    // A missing passphrase file is called one.
    let (ok, text) = cli(&[
        "--store".as_ref(),
        base.as_os_str(),
        "--passphrase-file".as_ref(),
        dir.path().join("nope").as_os_str(),
        "view".as_ref(),
        "/memories".as_ref(),
    ]);
    assert!(!ok);
    assert!(text.contains("passphrase file"), "{text}");
    assert!(!text.contains("key file"), "{text}");
    // A key given for a plaintext store with files: not "made by the
    // first write" (the first write is refused), but how to read it.
    let plain = dir.path().join("plain");
    std::fs::create_dir(&plain).expect("dir");
    std::fs::write(plain.join("note.md"), "plain\n").expect("write");
    let (ok, text) = cli(&[
        "--store".as_ref(),
        plain.as_os_str(),
        "--key-file".as_ref(),
        key.as_os_str(),
        "view".as_ref(),
        "/memories".as_ref(),
    ]);
    assert!(!ok);
    assert!(
        text.contains("is not encrypted: open it without a key"),
        "{text}"
    );
    assert!(!text.contains("first write"), "{text}");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("dir").filter_map(Result::ok) {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if src.is_dir() {
            copy_dir(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).expect("copy");
        }
    }
}

/// An attacker with write access to a tenant base replaces bob's whole
/// directory with a copy of alice's (her key record with it). Before the
/// fix the CLI used the key file itself for every tenant, so bob's view
/// showed alice's memories; now each tenant's key is derived from it
/// (HKDF with the tenant id), and bob's store refuses to open. The same
/// for a passphrase (whose salt travels with the copied record).
#[test]
fn a_tenant_directory_copied_over_another_is_refused_at_open() {
    let dir = tempfile::tempdir().expect("dir");
    let base = dir.path().join("base");
    std::fs::create_dir(&base).expect("dir");
    let key = dir.path().join("k");
    assert!(cli(&["keygen".as_ref(), "--output".as_ref(), key.as_os_str()]).0);
    for tenant in ["alice", "bob"] {
        let k = Key::from_file(&key).expect("key");
        let t = TenantId::parse(tenant).expect("tenant");
        let tool = MemoryTool::new(
            EncryptedStore::open(
                TenantStore::new(FilesystemStore::open(&base).expect("fs"), t.clone()),
                Keyring::new(k).for_tenant(&t),
            )
            .expect("open"),
        );
        let (err, text) = call(
            &tool,
            json!({"command": "create", "path": "/memories/n.md", "file_text": format!("{tenant}'s note\n")}),
        );
        assert!(!err, "{text}");
    }
    let view_bob = || {
        let out = Command::new(env!("CARGO_BIN_EXE_claude-memory-cli"))
            .arg("--store")
            .arg(&base)
            .args(["--tenant", "bob", "--key-file"])
            .arg(&key)
            .args(["view", "/memories/n.md"])
            .output()
            .expect("run");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let (ok, text) = view_bob();
    assert!(ok && text.contains("bob's note"), "{text}");
    std::fs::remove_dir_all(base.join("bob")).expect("rm");
    copy_dir(&base.join("alice"), &base.join("bob"));
    let (ok, text) = view_bob();
    assert!(!ok, "bob's view must not open alice's copy: {text}");
    assert!(!text.contains("alice's note"), "{text}");
    assert!(text.contains("wrong key"), "{text}");

    // A passphrase: the same copy, refused.
    let pbase = dir.path().join("pbase");
    let ring = Keyring::from_passphrase(Passphrase::new("correct horse")).with_kdf_costs(64, 1, 1);
    for tenant in ["alice", "bob"] {
        let t = TenantId::parse(tenant).expect("tenant");
        let store = EncryptedStore::open(
            TenantStore::new(FilesystemStore::open(&pbase).expect("fs"), t.clone()),
            ring.for_tenant(&t),
        )
        .expect("open");
        store
            .write(
                &MemoryPath::parse("/memories/n.md").expect("path"),
                tenant.as_bytes(),
                WriteMode::Create,
            )
            .expect("write");
    }
    std::fs::remove_dir_all(pbase.join("bob")).expect("rm");
    copy_dir(&pbase.join("alice"), &pbase.join("bob"));
    let bob = TenantId::parse("bob").expect("tenant");
    let err = EncryptedStore::open(
        TenantStore::new(FilesystemStore::open(&pbase).expect("fs"), bob.clone()),
        ring.for_tenant(&bob),
    )
    .expect_err("alice's copy under bob");
    assert!(matches!(err, CryptError::WrongKey { .. }), "{err:?}");
}
