//! Running memory for many users: tenants, expiry, content policy, audit,
//! export and import.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use claude_memory::audit::{AuditEvent, AuditSink};
use claude_memory::policy::{Decision, SecretDetector};
use claude_memory::store::MemoryStoreExt as _;
use claude_memory::tenant::TenantError;
use claude_memory::{
    FilesystemStore, InMemoryStore, MemoryPath, MemoryStore, MemoryTool, TenantId, TenantStore,
};
use serde_json::{Value, json};

fn text(tool: &MemoryTool<impl MemoryStore>, input: Value) -> (String, bool) {
    let r = tool.dispatch(&input);
    (r.text().unwrap_or_default().to_owned(), r.is_error)
}

#[test]
fn tenant_ids_are_validated_strictly() {
    for ok in ["alice", "user-42", "team_a.prod", "a1"] {
        assert!(TenantId::parse(ok).is_ok(), "{ok}");
    }
    let long = "a".repeat(65);
    let cases: [(&str, TenantError); 13] = [
        // Lowercase only: `Alice` and `alice` must never share a directory
        // on a case-insensitive filesystem (issue 14).
        ("A1", TenantError::Uppercase),
        ("Alice", TenantError::Uppercase),
        ("", TenantError::Empty),
        ("..", TenantError::LeadingDot),
        (".", TenantError::LeadingDot),
        (".hidden", TenantError::LeadingDot),
        ("../bob", TenantError::InvalidCharacter),
        ("a/b", TenantError::InvalidCharacter),
        ("a\\b", TenantError::InvalidCharacter),
        ("a\0", TenantError::InvalidCharacter),
        ("bob ", TenantError::InvalidCharacter),
        ("élodie", TenantError::InvalidCharacter),
        (&long, TenantError::TooLong),
    ];
    for (id, err) in cases {
        assert_eq!(TenantId::parse(id), Err(err), "{id:?}");
    }
}

/// Issue 18: under Wine, `alice.` opened through `dir_in` read and deleted
/// tenant `alice`'s file (Win32 drops trailing dots), and `con`, `nul`,
/// `aux`, `com1` and `lpt1` were valid ids whose directories Windows cannot
/// open. Refused on every platform, so an id names the same directory
/// everywhere.
#[test]
fn tenant_ids_windows_aliases_or_reserves_are_refused_everywhere() {
    for id in ["alice.", "alice..", "a.b.", "bob.."] {
        assert_eq!(TenantId::parse(id), Err(TenantError::TrailingDot), "{id:?}");
    }
    // Trailing spaces: a space is no id character at all.
    for id in ["alice ", "alice. ", "alice ."] {
        assert!(TenantId::parse(id).is_err(), "{id:?}");
    }
    let mut devices = vec!["con", "prn", "aux", "nul"];
    let numbered: Vec<String> = (1..=9)
        .flat_map(|n| [format!("com{n}"), format!("lpt{n}")])
        .collect();
    devices.extend(numbered.iter().map(String::as_str));
    for device in devices {
        for id in [
            device.to_owned(),
            device.to_uppercase(),
            format!("{device}.txt"),
            format!("{device}.tar.gz"),
            format!("{}.md", device.to_uppercase()),
        ] {
            let refused = TenantId::parse(&id);
            // Upper case is refused as upper case before the name is looked at.
            assert!(
                matches!(
                    refused,
                    Err(TenantError::WindowsDeviceName | TenantError::Uppercase)
                ),
                "{id:?}: {refused:?}"
            );
            assert_eq!(
                TenantId::parse(&id.to_lowercase()),
                Err(TenantError::WindowsDeviceName),
                "{id:?}"
            );
        }
    }
    // Names that only begin like a device are ordinary ids.
    for ok in [
        "console", "com10", "lpt0x", "nul_team", "aux-1", "prn2", "con-x.md", "alice.b",
    ] {
        assert!(TenantId::parse(ok).is_ok(), "{ok}");
    }
}

#[test]
fn one_tenant_never_sees_or_touches_another() {
    let base = Arc::new(InMemoryStore::new());
    let alice = MemoryTool::new(TenantStore::new(
        Arc::clone(&base),
        TenantId::parse("alice").expect("id"),
    ));
    let bob = MemoryTool::new(TenantStore::new(
        Arc::clone(&base),
        TenantId::parse("bob").expect("id"),
    ));
    assert!(!alice.dispatch(&json!({"command": "create", "path": "/memories/prefs.md", "file_text": "alice likes tea\n"})).is_error);
    let empty = "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n0B\t/memories";
    assert_eq!(
        text(&bob, json!({"command": "view", "path": "/memories"})),
        (empty.to_owned(), false)
    );
    for p in [
        "/memories/prefs.md",
        "/memories/alice/prefs.md",
        "/memories/../alice/prefs.md",
        "/memories/%2e%2e/alice/prefs.md",
    ] {
        let (t, is_error) = text(&bob, json!({"command": "view", "path": p}));
        assert!(is_error && !t.contains("tea"), "{p}: {t}");
        assert!(
            bob.dispatch(&json!({"command": "delete", "path": p}))
                .is_error
        );
    }
    assert!(!bob.dispatch(&json!({"command": "create", "path": "/memories/prefs.md", "file_text": "bob likes coffee\n"})).is_error);
    assert_eq!(
        text(
            &alice,
            json!({"command": "view", "path": "/memories/prefs.md"})
        )
        .0,
        "Here's the content of /memories/prefs.md with line numbers:\n     1\talice likes tea"
    );
    // Errors name tenant paths, never the base's.
    let (t, _) = text(
        &alice,
        json!({"command": "create", "path": "/memories/prefs.md/x", "file_text": "x"}),
    );
    assert_eq!(
        t,
        "Error: Cannot create /memories/prefs.md/x: /memories/prefs.md is a file, not a directory"
    );
    // The store limit counts one tenant's files.
    let store = TenantStore::new(Arc::clone(&base), TenantId::parse("alice").expect("id"));
    assert_eq!(store.total_size().ok(), Some(16));
    // The base holds one directory per tenant.
    let mut names: Vec<String> = base
        .list(&MemoryPath::root())
        .expect("list")
        .into_iter()
        .map(|e| e.name)
        .collect();
    names.sort();
    assert_eq!(names, ["alice", "bob"]);
}

#[test]
fn tenant_directories_for_separate_filesystem_stores() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let id = TenantId::parse("user-7").expect("id");
    let store = FilesystemStore::open(id.dir_in(dir.path())).expect("open");
    assert!(store.root().ends_with("user-7"));
}

#[test]
fn expiry_removes_old_files_and_the_directories_they_leave_empty() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = FilesystemStore::open(dir.path()).expect("open");
    let tool = MemoryTool::new(store);
    for p in [
        "/memories/old/a.md",
        "/memories/old/deep/b.md",
        "/memories/mixed/old.md",
        "/memories/mixed/new.md",
        "/memories/new.md",
    ] {
        assert!(
            !tool
                .dispatch(&json!({"command": "create", "path": p, "file_text": "12345"}))
                .is_error
        );
    }
    let month_ago = SystemTime::now() - Duration::from_secs(30 * 86_400);
    for p in ["old/a.md", "old/deep/b.md", "mixed/old.md"] {
        let f = std::fs::File::options()
            .write(true)
            .open(dir.path().join(p))
            .expect("open");
        f.set_modified(month_ago).expect("backdate");
    }
    // A view (a read) does not count as use.
    assert!(
        !tool
            .dispatch(&json!({"command": "view", "path": "/memories/old/a.md"}))
            .is_error
    );
    // A preview reports exactly what expiry then does, and changes nothing.
    let now = SystemTime::now();
    let preview =
        claude_memory::expiry::preview(tool.store(), Duration::from_secs(7 * 86_400), now)
            .expect("preview");
    assert!(dir.path().join("old/deep/b.md").exists());
    let report = claude_memory::expiry::expire(tool.store(), Duration::from_secs(7 * 86_400), now)
        .expect("expire");
    assert_eq!(preview, report);
    let mut removed: Vec<String> = report
        .removed_files
        .iter()
        .map(|(p, _)| p.normalized())
        .collect();
    removed.sort();
    assert_eq!(
        removed,
        [
            "/memories/mixed/old.md",
            "/memories/old/a.md",
            "/memories/old/deep/b.md"
        ]
    );
    let dirs: Vec<String> = report
        .removed_dirs
        .iter()
        .map(MemoryPath::normalized)
        .collect();
    assert_eq!(dirs, ["/memories/old/deep", "/memories/old"]);
    assert_eq!(report.kept_files, 2);
    assert_eq!(report.removed_bytes(), 15);
    assert!(dir.path().join("mixed/new.md").exists() && dir.path().join("new.md").exists());
    assert!(!dir.path().join("old").exists());
}

#[test]
fn expiry_works_on_every_backend() {
    let store = InMemoryStore::new();
    let tool = MemoryTool::new(&store);
    assert!(
        !tool
            .dispatch(&json!({"command": "create", "path": "/memories/d/a.md", "file_text": "x"}))
            .is_error
    );
    let kept = claude_memory::expiry::expire(&store, Duration::from_secs(3600), SystemTime::now())
        .expect("expire");
    assert!(kept.removed_files.is_empty());
    let later = SystemTime::now() + Duration::from_secs(7200);
    let gone =
        claude_memory::expiry::expire(&store, Duration::from_secs(3600), later).expect("expire");
    assert_eq!(gone.removed_files.len(), 1);
    assert_eq!(gone.removed_dirs.len(), 1);
    assert!(store.list(&MemoryPath::root()).expect("list").is_empty());
}

#[test]
fn the_secret_detector_refuses_or_redacts_writes() {
    let store = InMemoryStore::new();
    let strict = MemoryTool::new(&store).with_policy(SecretDetector::reject());
    let (t, is_error) = text(
        &strict,
        json!({"command": "create", "path": "/memories/keys.md", "file_text": "aws: AKIAIOSFODNN7EXAMPLE\n"}),
    );
    assert!(is_error);
    assert_eq!(
        t,
        "Error: Nothing was written to /memories/keys.md: it contains what looks like a secret (AWS access key id); store a reference to it instead, never the secret itself"
    );
    assert!(
        store
            .stat(&MemoryPath::parse("/memories/keys.md").expect("path"))
            .expect("stat")
            .is_none()
    );
    assert!(!strict.dispatch(&json!({"command": "create", "path": "/memories/notes.md", "file_text": "card on file: ends 1111\n"})).is_error);
    let (_, is_error) = text(
        &strict,
        json!({"command": "str_replace", "path": "/memories/notes.md", "old_str": "ends 1111", "new_str": "4111 1111 1111 1111"}),
    );
    assert!(is_error, "an edit that adds a card number is refused");
    let (_, is_error) = text(
        &strict,
        json!({"command": "insert", "path": "/memories/notes.md", "insert_line": 0, "insert_text": "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----"}),
    );
    assert!(is_error, "an insert of a private key is refused");
    let lenient = MemoryTool::new(&store).with_policy(SecretDetector::redact());
    assert!(!lenient.dispatch(&json!({"command": "str_replace", "path": "/memories/notes.md", "old_str": "ends 1111", "new_str": "4111 1111 1111 1111"})).is_error);
    let data = store
        .read(
            &MemoryPath::parse("/memories/notes.md").expect("path"),
            u64::MAX,
        )
        .expect("read")
        .data;
    assert_eq!(
        String::from_utf8(data).expect("utf8"),
        "card on file: [REDACTED payment card number]\n"
    );
    // Any closure is a policy.
    let custom = MemoryTool::new(&store).with_policy(|path: &MemoryPath, content: &str| {
        if path.normalized().starts_with("/memories/readonly") || content.contains("forbidden") {
            Decision::Reject("this area is read-only".into())
        } else {
            Decision::Allow
        }
    });
    let (t, _) = text(
        &custom,
        json!({"command": "create", "path": "/memories/readonly/x.md", "file_text": "x"}),
    );
    assert_eq!(
        t,
        "Error: Nothing was written to /memories/readonly/x.md: this area is read-only"
    );
}

#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<String>>,
    content: bool,
}

impl AuditSink for Recorder {
    fn record(&self, e: &AuditEvent<'_>) {
        self.events.lock().expect("events").push(format!(
            "{:?} {:?} {:?} error={} bytes={} tenant={:?} text={:?}",
            e.command, e.path, e.new_path, e.is_error, e.bytes, e.tenant, e.result_text
        ));
    }

    fn include_content(&self) -> bool {
        self.content
    }
}

#[test]
fn every_call_is_audited_without_content_unless_asked() {
    let sink = Arc::new(Recorder::default());
    let tool = MemoryTool::new(InMemoryStore::new())
        .with_audit(Arc::clone(&sink))
        .with_tenant_label("alice");
    tool.dispatch(
        &json!({"command": "create", "path": "/memories/a.md", "file_text": "secret stuff\n"}),
    );
    tool.dispatch(&json!({"command": "view", "path": "/memories/a.md"}));
    tool.dispatch(
        &json!({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/b.md"}),
    );
    tool.dispatch(&json!({"command": "delete", "path": "/memories/zzz"}));
    tool.dispatch(&json!({"command": "frobnicate"}));
    let events = sink.events.lock().expect("events").clone();
    assert_eq!(
        events,
        [
            "Some(\"create\") Some(\"/memories/a.md\") None error=false bytes=13 tenant=Some(\"alice\") text=None",
            "Some(\"view\") Some(\"/memories/a.md\") None error=false bytes=75 tenant=Some(\"alice\") text=None",
            "Some(\"rename\") Some(\"/memories/a.md\") Some(\"/memories/b.md\") error=false bytes=0 tenant=Some(\"alice\") text=None",
            "Some(\"delete\") Some(\"/memories/zzz\") None error=true bytes=0 tenant=Some(\"alice\") text=None",
            "None None None error=true bytes=0 tenant=Some(\"alice\") text=None",
        ]
    );
    let verbose = Arc::new(Recorder {
        content: true,
        ..Recorder::default()
    });
    let tool = MemoryTool::new(InMemoryStore::new()).with_audit(Arc::clone(&verbose));
    tool.dispatch(&json!({"command": "delete", "path": "/memories/zzz"}));
    assert!(
        verbose.events.lock().expect("events")[0]
            .ends_with("text=Some(\"Error: The path /memories/zzz does not exist\")")
    );
}

#[test]
fn export_and_import_move_a_store_between_backends() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let fs_store = FilesystemStore::open(dir.path()).expect("open");
    let tool = MemoryTool::new(&fs_store);
    for (p, t) in [
        ("/memories/a.md", "alpha\n"),
        ("/memories/d/.hidden", "h"),
        ("/memories/d/e/f.md", "deep"),
    ] {
        assert!(
            !tool
                .dispatch(&json!({"command": "create", "path": p, "file_text": t}))
                .is_error
        );
    }
    std::fs::write(dir.path().join("d/bin.dat"), [0xff, 0x00, 0x10]).expect("binary");
    let doc = claude_memory::backup::export(&fs_store).expect("export");
    assert_eq!(
        doc,
        json!({"format": "claude-memory-export", "version": 1, "files": [
            {"path": "/memories/a.md", "text": "alpha\n"},
            {"path": "/memories/d/.hidden", "text": "h"},
            {"path": "/memories/d/bin.dat", "base64": "/wAQ"},
            {"path": "/memories/d/e/f.md", "text": "deep"},
        ]})
    );
    let mem = InMemoryStore::new();
    assert_eq!(
        claude_memory::backup::import(&mem, &doc, false).expect("import"),
        4
    );
    assert_eq!(claude_memory::backup::export(&mem).expect("export"), doc);
    assert!(
        claude_memory::backup::import(&mem, &doc, false).is_err(),
        "existing files are refused"
    );
    assert_eq!(
        claude_memory::backup::import(&mem, &doc, true).expect("overwrite"),
        4
    );
    let hostile = json!({"format": "claude-memory-export", "version": 1, "files": [
        {"path": "/memories/ok.md", "text": "fine"},
        {"path": "/memories/../escape", "text": "x"},
    ]});
    let empty = InMemoryStore::new();
    assert!(claude_memory::backup::import(&empty, &hostile, false).is_err());
    assert!(
        empty.list(&MemoryPath::root()).expect("list").is_empty(),
        "nothing is written if any path is invalid"
    );
}
