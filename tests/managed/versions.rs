//! The service's own versions on a managed store (`ManagedStore::versions`,
//! `version`, `revert_to`, `redact_version`) and the CLI's history
//! commands over them, against the emulator of the memory stores API.
#![cfg(feature = "managed")]

use std::process::Command;

use claude_memory::history::{ChangeOp, HistoryError, Query, VersionId, Versions as _};
use claude_memory::store::{MemoryStoreExt as _, WriteMode};
use claude_memory::{MemoryPath, MemoryStore, MemoryTool};
use serde_json::json;

#[path = "../managed_support/mod.rs"]
mod managed_support;

use managed_support::{fresh, memories_with_ids, overwrite};

const BIN: &str = env!("CARGO_BIN_EXE_claude-memory-cli");

fn path(p: &str) -> MemoryPath {
    MemoryPath::parse(p).expect("path")
}

fn text(store: &impl MemoryStore, p: &str) -> Option<String> {
    store
        .read(&path(p), u64::MAX)
        .ok()
        .map(|f| String::from_utf8_lossy(&f.data).into_owned())
}

#[test]
fn every_change_is_a_version_oldest_first_following_renames() {
    let Some((store, _)) = fresh() else { return };
    let tool = MemoryTool::new(store.clone());
    for input in [
        json!({"command": "create", "path": "/memories/a.md", "file_text": "one\n"}),
        json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "one", "new_str": "two"}),
        json!({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/b.md"}),
        json!({"command": "create", "path": "/memories/other.md", "file_text": "x\n"}),
    ] {
        assert!(!tool.dispatch(&input).is_error, "{input}");
    }
    let all = store.history(&Query::default()).expect("versions");
    let ops: Vec<_> = all.iter().map(|v| v.op).collect();
    assert_eq!(
        ops,
        [
            ChangeOp::Created,
            ChangeOp::Modified,
            ChangeOp::Renamed,
            ChangeOp::Created
        ],
        "a change of path shows as a rename"
    );
    assert_eq!(all[2].from.as_deref(), Some("/memories/a.md"));
    let mine = store
        .history(&Query {
            path: Some(path("/memories/b.md")),
            ..Query::default()
        })
        .expect("versions");
    assert_eq!(mine.len(), 3, "the rename kept the memory's id");
    assert_eq!(mine[0].path.as_deref(), Some("/memories/a.md"));
    assert_eq!(mine[2].path.as_deref(), Some("/memories/b.md"));
    assert!(mine.iter().all(|v| v.file == mine[0].file));
    assert!(
        mine[0]
            .actor
            .as_deref()
            .is_some_and(|a| a.starts_with("api_actor:"))
    );
    let first = store.show(&mine[0].id).expect("version");
    assert_eq!(first.content.as_deref(), Some(&b"one\n"[..]));
}

#[test]
fn revert_puts_back_a_version_or_what_a_delete_removed_as_a_new_version() {
    let Some((store, id)) = fresh() else { return };
    store
        .write(&path("/memories/n.md"), b"v1\n", WriteMode::Create)
        .expect("create");
    let mem = &memories_with_ids(&id)[0].1;
    overwrite(&id, mem, "v2 by another client\n");
    let versions = store.history(&Query::default()).expect("versions");
    assert_eq!(
        store.revert_to(&versions[0].id).expect("revert").as_deref(),
        Some("/memories/n.md")
    );
    assert_eq!(text(&store, "/memories/n.md").as_deref(), Some("v1\n"));
    assert_eq!(
        store.revert_to(&versions[0].id).expect("again"),
        None,
        "already so"
    );

    store.delete(&path("/memories/n.md")).expect("delete");
    let deleted = store
        .history(&Query::default())
        .expect("versions")
        .into_iter()
        .rfind(|v| v.op == ChangeOp::Deleted)
        .expect("the delete's version");
    assert_eq!(
        store.revert_to(&deleted.id).expect("undelete").as_deref(),
        Some("/memories/n.md")
    );
    assert_eq!(text(&store, "/memories/n.md").as_deref(), Some("v1\n"));
    assert_eq!(
        store.history(&Query::default()).expect("versions").len(),
        5,
        "create, the other client's edit, revert, delete, undelete: each a version"
    );
}

#[test]
fn a_redacted_version_keeps_its_record_and_cannot_be_reverted_to() {
    let Some((store, _)) = fresh() else { return };
    let p = path("/memories/secret.md");
    store
        .write(&p, b"password=hunter2\n", WriteMode::Create)
        .expect("create");
    store
        .write(&p, b"nothing here\n", WriteMode::Overwrite)
        .expect("edit");
    let versions = store.history(&Query::default()).expect("versions");
    let current = &versions[1];
    assert!(
        matches!(
            store.redact_version(&current.id),
            Err(HistoryError::Log(why)) if why.contains("current version")
        ),
        "the service keeps the live memory's current version"
    );
    let gone = store.redact_version(&versions[0].id).expect("redact");
    assert_eq!(gone, [versions[0].id.clone()]);
    let again = store.show(&versions[0].id).expect("the record stays");
    assert!(again.redacted && again.content.is_none() && again.path.is_none());
    assert!(matches!(
        store.revert_to(&versions[0].id),
        Err(HistoryError::Redacted(_))
    ));
    assert!(matches!(
        store.show(&VersionId::Service("memver_nope".into())),
        Err(HistoryError::NoSuchVersion(_))
    ));
}

fn cli(id: &str, args: &[&str]) -> (i32, String, String) {
    let (url, key) = managed_support::endpoint().expect("emulator");
    let out = Command::new(BIN)
        .args(["--store", &format!("managed:{id}")])
        .args(args)
        .env("ANTHROPIC_API_KEY", key)
        .env("ANTHROPIC_BASE_URL", url)
        .output()
        .expect("run the CLI");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Three versions of one memory: `/memories/a.md` created ("one"),
/// edited ("two"), then moved to `to`.
fn written_edited_moved(store: &claude_memory::ManagedStore, to: &str) {
    let p = path("/memories/a.md");
    store
        .write(&p, b"one\n", WriteMode::Create)
        .expect("create");
    store
        .write(&p, b"two\n", WriteMode::Overwrite)
        .expect("edit");
    store.rename(&p, &path(to)).expect("rename");
}

#[test]
fn cli_history_show_diff_revert_redact_on_the_services_versions() {
    let Some((store, id)) = fresh() else { return };
    written_edited_moved(&store, "/memories/b.md");
    let (code, listing, _) = cli(&id, &["history", "/memories/b.md"]);
    assert_eq!(code, 0);
    assert!(
        listing.contains("/memories/a.md -> /memories/b.md"),
        "{listing}"
    );
    assert!(listing.trim_end().ends_with("3 versions"), "{listing}");
    let first = listing
        .lines()
        .next()
        .and_then(|l| l.split('\t').next())
        .expect("an id");

    let (_, shown, _) = cli(&id, &["show", first]);
    assert!(shown.contains("--- content ---\none"), "{shown}");
    let (_, diff, _) = cli(&id, &["diff", first]);
    assert!(
        diff.contains("-one") && diff.contains("+two") && diff.contains("(now)"),
        "{diff}"
    );
    let (code, said, _) = cli(&id, &["revert", first]);
    assert_eq!(code, 0, "{said}");
    assert_eq!(text(&store, "/memories/b.md").as_deref(), Some("one\n"));
    let (code, said, _) = cli(&id, &["redact", first]);
    assert_eq!(code, 0, "{said}");
    let (_, shown, _) = cli(&id, &["show", first]);
    assert!(
        shown.contains("[redacted]") && !shown.contains("one\n"),
        "{shown}"
    );
    let (code, _, err) = cli(&id, &["diff", first]);
    assert_eq!(code, 1, "a redacted version is not an empty one: {err}");
    assert!(err.contains("was redacted"), "{err}");
    let (code, _, err) = cli(&id, &["--history", "history"]);
    assert_eq!(code, 2, "{err}");

    for (args, says) in [
        (vec!["show", "v3"], "memver_"),
        (vec!["restore", "--at", "1h"], "a managed memory store"),
        (
            vec!["history", "prune", "--keep", "1"],
            "a managed memory store",
        ),
        (vec!["redact", "--text", "x"], "a managed memory store"),
    ] {
        let (code, _, err) = cli(&id, &args);
        assert_eq!(code, 2, "{args:?}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let (code, _, err) = cli(&id, &["show", "memver_nope"]);
    assert_eq!((code, err.contains("no such version")), (1, true), "{err}");
}

/// A managed store's versions into a `--history` directory, and back into
/// another managed store: one version for one version, each way.
#[test]
fn history_copy_moves_versions_one_for_one_both_ways() {
    let Some((store, id)) = fresh() else { return };
    written_edited_moved(&store, "/memories/d/b.md");
    store
        .write(&path("/memories/c.md"), b"c\n", WriteMode::Create)
        .expect("create");
    store.delete(&path("/memories/c.md")).expect("delete");
    // A sync's marker is the sync's own: never copied.
    managed_support::put(
        &id,
        "/.anthropic-memory-store",
        "version 1\nmemstore_elsewhere",
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let local = dir.path().join("copy");
    let local = local.to_str().expect("utf-8");
    let (code, said, err) = cli(&id, &["history", "copy", "--to", local]);
    assert_eq!(code, 0, "{said}{err}");
    assert!(said.contains("copied 5 changes"), "{said}");
    let (url, key) = managed_support::endpoint().expect("emulator");
    let local_cli = |args: &[&str]| {
        let out = Command::new(BIN)
            .args(["--store", local])
            .args(args)
            .env("ANTHROPIC_API_KEY", &key)
            .env("ANTHROPIC_BASE_URL", &url)
            .output()
            .expect("run");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let listing = local_cli(&["history"]);
    let ops: Vec<&str> = listing
        .lines()
        .filter_map(|l| l.split('\t').nth(2))
        .collect();
    assert_eq!(
        ops,
        ["created", "modified", "renamed", "created", "deleted"],
        "{listing}"
    );
    assert!(listing.contains("copied from memver_"), "{listing}");
    assert!(
        !std::path::Path::new(local)
            .join(".anthropic-memory-store")
            .exists()
    );
    let Some((back, back_id)) = fresh() else {
        return;
    };
    let said = local_cli(&["history", "copy", "--to", &format!("managed:{back_id}")]);
    assert!(said.contains("copied 5 changes"), "{said}");
    let ops: Vec<ChangeOp> = back
        .history(&Query::default())
        .expect("versions")
        .iter()
        .map(|v| v.op)
        .collect();
    use ChangeOp::*;
    assert_eq!(ops, [Created, Modified, Renamed, Created, Deleted]);
    assert_eq!(text(&back, "/memories/d/b.md").as_deref(), Some("two\n"));
    // Never into a store that holds anything.
    let said = local_cli(&["history", "copy", "--to", &format!("managed:{back_id}")]);
    assert!(!said.contains("copied"), "{said}");
}

/// The one versions API on the service's versions: everything one actor
/// did is undone (here the key's own: the files it made go, a rename is
/// followed to the file's path now).
#[test]
fn revert_changes_undoes_an_actors_changes_on_the_service() {
    let Some((store, id)) = fresh() else { return };
    written_edited_moved(&store, "/memories/b.md");
    store
        .write(&path("/memories/c.md"), b"c\n", WriteMode::Create)
        .expect("create");
    let actor = store.history(&Query::default()).expect("versions")[0]
        .actor
        .clone()
        .expect("an actor");
    let by = Query {
        actor: Some(actor),
        ..Query::default()
    };
    let report = store.revert_changes(&by, "revert").expect("revert");
    let mut reverted = report.reverted.clone();
    reverted.sort();
    assert_eq!(
        reverted,
        [
            ("/memories/b.md".to_owned(), "deleted"),
            ("/memories/c.md".to_owned(), "deleted"),
        ]
    );
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    assert!(managed_support::memories(&id).is_empty());
    // Paging by the service's ids.
    let all = store.history(&Query::default()).expect("versions");
    let before = store
        .history(&Query {
            before: Some(all[3].id.clone()),
            limit: Some(2),
            ..Query::default()
        })
        .expect("page");
    assert_eq!(before, all[1..3].to_vec());
}
