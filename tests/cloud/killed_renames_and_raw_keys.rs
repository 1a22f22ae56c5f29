//! Attacks on `CloudStore` around a rename another process left pending
//! (its intent record is in the bucket), against moto (S3, with and
//! without conditional copies) and Azurite: an edit of a source answered
//! success and then lost when the rename was finished, a handle already
//! open showing both trees, and an object planted as the intent record
//! that made every rename wait and then blame the file; raw keys another
//! program wrote where this store encodes names.
#![cfg(all(feature = "s3", feature = "azure"))]

use std::sync::Arc;
use std::time::{Duration, Instant};

use claude_memory::object_store::path::Path;
use claude_memory::object_store::{ObjectStoreExt, PutPayload};
use claude_memory::store::{MemoryStoreExt as _, WriteMode};
use claude_memory::{CloudStore, MemoryPath, MemoryStore, MemoryTool};
use serde_json::json;

#[path = "../cloud_support/mod.rs"]
mod cloud_support;

use cloud_support::{bucket, unique};

const BACKENDS: [&str; 3] = ["s3", "s3-plain", "azure"];
const LEASE: Duration = Duration::from_secs(2);

fn p(s: &str) -> MemoryPath {
    MemoryPath::parse(s).expect("path")
}

/// Writes `body` at `key` as another program would, on a runtime of its
/// own.
fn plant(backend: &str, key: &str, body: Vec<u8>) {
    let b = bucket(backend).expect("bucket");
    let key = Path::from(key);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(async move { b.put(&key, PutPayload::from(body)).await.expect("plant") });
}

/// A store with `/memories/src/f0.md`…`f2.md` copied to `/memories/dst/`
/// and the record of the rename between them left behind: what a process
/// killed after its copies and before its deletes leaves. The handle was
/// opened before the kill (no recovery at open).
fn after_a_killed_rename(backend: &str) -> Option<(CloudStore, String)> {
    let b = bucket(backend)?;
    let prefix = unique("pending");
    let store = CloudStore::builder(Arc::clone(&b))
        .prefix(&prefix)
        .lease(LEASE)
        .open()
        .expect("open");
    for dir in ["src", "dst"] {
        for i in 0..3 {
            store
                .write(
                    &p(&format!("/memories/{dir}/f{i}.md")),
                    b"old line\n",
                    WriteMode::Create,
                )
                .expect("write");
        }
    }
    let record =
        json!({"op": "rename", "from": "/memories/src", "to": "/memories/dst", "owner": "killed"});
    plant(
        backend,
        &format!("{prefix}/.claude-memory-intent"),
        serde_json::to_vec(&record).expect("json"),
    );
    Some((store, prefix))
}

#[test]
fn an_edit_under_a_killed_rename_is_never_answered_and_then_lost() {
    for backend in BACKENDS {
        let Some((store, prefix)) = after_a_killed_rename(backend) else {
            continue;
        };
        let tool = MemoryTool::new(store);
        let answer = tool.dispatch(
            &json!({"command": "str_replace", "path": "/memories/src/f0.md",
            "old_str": "old line", "new_str": "the edit"}),
        );
        let text = answer.text().unwrap_or_default().to_owned();
        // A fresh process finishes whatever is pending.
        let b = bucket(backend).expect("bucket");
        let fresh = CloudStore::builder(b)
            .prefix(&prefix)
            .lease(Duration::ZERO)
            .open()
            .expect("reopen");
        let kept = ["/memories/src/f0.md", "/memories/dst/f0.md"]
            .iter()
            .any(|path| {
                fresh
                    .read(&p(path), 1 << 20)
                    .is_ok_and(|c| c.data == b"the edit\n")
            });
        if text.starts_with("The memory file has been edited") {
            assert!(kept, "{backend}: answered {text:?}, and the edit is gone");
        } else {
            assert!(answer.is_error, "{backend}: {text}");
        }
        // The rename was finished: one tree, never both.
        assert!(
            fresh
                .stat(&p("/memories/dst/f1.md"))
                .expect("stat")
                .is_some()
        );
        assert!(
            fresh
                .stat(&p("/memories/src/f1.md"))
                .expect("stat")
                .is_none(),
            "{backend}"
        );
    }
}

#[test]
fn a_handle_already_open_finishes_a_killed_rename_once_its_lease_is_over() {
    for backend in BACKENDS {
        let Some((store, _)) = after_a_killed_rename(backend) else {
            continue;
        };
        std::thread::sleep(LEASE + Duration::from_millis(200));
        let names: Vec<String> = store
            .list(&p("/memories"))
            .expect("list")
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert!(names.iter().any(|n| n == "dst"), "{backend}: {names:?}");
        assert!(
            !names.iter().any(|n| n == "src"),
            "{backend}: both trees: {names:?}"
        );
    }
}

#[test]
fn an_object_planted_as_the_intent_record_is_named_by_the_next_rename() {
    for backend in BACKENDS {
        let Some(b) = bucket(backend) else { continue };
        let prefix = unique("planted-intent");
        let store = CloudStore::builder(Arc::clone(&b))
            .prefix(&prefix)
            .lease(Duration::from_secs(60))
            .open()
            .expect("open");
        let tool = MemoryTool::new(store);
        tool.dispatch(&json!({"command": "create", "path": "/memories/a.md", "file_text": "a\n"}));
        plant(
            backend,
            &format!("{prefix}/.claude-memory-intent"),
            vec![b'x'; 256 * 1024],
        );
        let t = Instant::now();
        let answer = tool.dispatch(&json!({"command": "rename", "old_path": "/memories/a.md",
            "new_path": "/memories/b.md"}));
        let text = answer.text().unwrap_or_default().to_owned();
        eprintln!("{backend}: {text:?} after {:?}", t.elapsed());
        assert!(answer.is_error, "{backend}: {text}");
        assert!(text.contains(".claude-memory-intent"), "{backend}: {text}");
        assert!(!text.contains("kept changing"), "{backend}: {text}");
        // Edits are not held up by it: it is no rename in progress.
        let edit = tool
            .dispatch(&json!({"command": "create", "path": "/memories/c.md", "file_text": "c\n"}));
        assert!(!edit.is_error, "{backend}: {:?}", edit.text());
    }
}

/// Another program (`aws s3 cp`, a console) stores `résumé.md` and
/// `notes #1.md` as raw keys, where this store encodes its own. Before:
/// listed as memories that `view` then said do not exist, and a create of
/// the same name listed two `résumé.md`. Now a name maps one way: the raw
/// keys name nothing and are not listed as paths.
#[test]
fn raw_keys_other_programs_write_never_list_as_a_second_entry_of_one_path() {
    for backend in BACKENDS {
        let Some(b) = bucket(backend) else { continue };
        let prefix = unique("raw-keys");
        let store = CloudStore::open(Arc::clone(&b), &prefix).expect("open");
        let tool = MemoryTool::new(store);
        for raw in ["résumé.md", "notes #1.md"] {
            let key = Path::parse(format!("{prefix}/d/{raw}")).expect("raw key");
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime")
                .block_on(b.put(&key, PutPayload::from_static(b"theirs\n")))
                .expect("plant");
        }
        let created = tool.dispatch(
            &json!({"command": "create", "path": "/memories/d/résumé.md",
            "file_text": "ours\n"}),
        );
        assert!(!created.is_error, "{backend}: {:?}", created.text());
        let listing = tool
            .dispatch(&json!({"command": "view", "path": "/memories/d"}))
            .text()
            .unwrap_or_default()
            .to_owned();
        let shown: Vec<&str> = listing
            .lines()
            .skip(1)
            .filter_map(|l| l.split('\t').nth(1))
            .collect();
        assert_eq!(
            shown.iter().filter(|p| p.ends_with("résumé.md")).count(),
            1,
            "{backend}: {listing}"
        );
        // Every path listed names what a view then shows.
        for path in shown.iter().filter(|p| p.ends_with(".md")) {
            let view = tool.dispatch(&json!({"command": "view", "path": path}));
            assert!(
                !view.is_error,
                "{backend}: {path} is listed but {:?}",
                view.text()
            );
        }
    }
}
