//! The managed Memory Stores profile: the handler refuses what would not
//! fit (as the model, which controls every path and text), and
//! `profile::check` (the CLI's `check`) lists what a store already holds
//! that would not fit, files planted by a local process included.

use claude_memory::profile::{self, MAX_FILE_SIZE, MAX_FILES, Misfit};
use claude_memory::{Config, InMemoryStore, MemoryStore, MemoryTool};
use serde_json::{Value, json};

fn managed() -> MemoryTool<InMemoryStore> {
    MemoryTool::with_config(InMemoryStore::new(), Config::managed_memory_stores())
}

fn call(tool: &MemoryTool<impl MemoryStore>, input: Value) -> (bool, String) {
    let r = tool.dispatch(&input);
    (r.is_error, r.text().unwrap_or_default().to_owned())
}

fn deep(segments: usize) -> String {
    // `segments` components below /memories, the last one the file.
    format!("/memories/{}f.md", "d/".repeat(segments - 1))
}

#[test]
fn the_preset_is_the_services_limits() {
    let c = Config::managed_memory_stores();
    assert_eq!(c.max_path_segments, Some(20));
    assert_eq!(c.max_file_size, 102_400);
    assert_eq!(c.max_files, Some(2_000));
    assert_eq!(c.view_output_limit, Config::default().view_output_limit);
    assert_eq!(Config::default().max_path_segments, None);
    assert_eq!(Config::default().max_files, None);
}

#[test]
fn a_create_deeper_than_20_segments_is_refused_and_20_is_not() {
    let tool = managed();
    let ok = call(
        &tool,
        json!({"command": "create", "path": deep(20), "file_text": "x"}),
    );
    assert_eq!(
        ok,
        (false, format!("File created successfully at: {}", deep(20)))
    );
    let refused = call(
        &tool,
        json!({"command": "create", "path": deep(21), "file_text": "x"}),
    );
    assert_eq!(
        refused,
        (
            true,
            format!(
                "Error: Cannot create {}: it would be 21 levels deep below /memories, over the limit of 20",
                deep(21)
            )
        )
    );
    // Nothing was written (no stray directories either).
    assert!(profile::check(tool.store()).expect("check").is_empty());
    // Without the profile the same create works.
    let plain = MemoryTool::new(InMemoryStore::new());
    assert!(
        !call(
            &plain,
            json!({"command": "create", "path": deep(21), "file_text": "x"})
        )
        .0
    );
}

#[test]
fn a_rename_that_would_take_an_entry_below_it_past_20_segments_is_refused() {
    let tool = managed();
    // A tree 5 deep below /memories/t (6 segments in all).
    let path = "/memories/t/a/b/c/d/f.md";
    assert!(
        !call(
            &tool,
            json!({"command": "create", "path": path, "file_text": "x"})
        )
        .0
    );
    // f.md is 5 segments below /memories/t; moved to a `t` 16 segments
    // deep it would be 16 + 5 = 21.
    let into = format!("/memories/{}t", "n/".repeat(15));
    let (is_error, text) = call(
        &tool,
        json!({"command": "rename", "old_path": "/memories/t", "new_path": into}),
    );
    assert!(is_error);
    assert_eq!(
        text,
        format!(
            "Error: Cannot move /memories/t to {into}: an entry would be 21 levels deep below /memories, over the limit of 20"
        )
    );
    assert!(
        !call(&tool, json!({"command": "view", "path": path})).0,
        "unchanged"
    );
    // 15 deep is fine: 20 segments.
    let into = format!("/memories/{}t", "n/".repeat(14));
    assert!(
        !call(
            &tool,
            json!({"command": "rename", "old_path": "/memories/t", "new_path": into})
        )
        .0
    );
}

#[test]
fn a_memory_over_100_kb_is_refused_on_create_and_on_edit() {
    let tool = managed();
    let big = "x".repeat(MAX_FILE_SIZE as usize + 1);
    assert!(
        call(
            &tool,
            json!({"command": "create", "path": "/memories/big.md", "file_text": big})
        )
        .0
    );
    let fits = "x".repeat(MAX_FILE_SIZE as usize);
    assert!(
        !call(
            &tool,
            json!({"command": "create", "path": "/memories/f.md", "file_text": fits})
        )
        .0
    );
    assert!(call(&tool, json!({"command": "insert", "path": "/memories/f.md", "insert_line": 0, "insert_text": "y"})).0);
}

#[test]
fn the_2001st_memory_is_refused_but_replacing_or_deleting_still_works() {
    let store = InMemoryStore::new();
    let tool = MemoryTool::with_config(store, Config::managed_memory_stores());
    for i in 0..MAX_FILES {
        let path = format!("/memories/d{}/m{i}.md", i % 7);
        assert!(
            !call(
                &tool,
                json!({"command": "create", "path": path, "file_text": "x"})
            )
            .0,
            "{i}"
        );
    }
    let (is_error, text) = call(
        &tool,
        json!({"command": "create", "path": "/memories/one-more.md", "file_text": "x"}),
    );
    assert!(is_error);
    assert_eq!(
        text,
        "Error: Cannot create /memories/one-more.md: the memory store is at its limit of 2000 files. Delete or merge memories first"
    );
    // An edit adds no file; a delete makes room.
    assert!(!call(&tool, json!({"command": "str_replace", "path": "/memories/d0/m0.md", "old_str": "x", "new_str": "y"})).0);
    assert!(
        !call(
            &tool,
            json!({"command": "delete", "path": "/memories/d0/m0.md"})
        )
        .0
    );
    assert!(
        !call(
            &tool,
            json!({"command": "create", "path": "/memories/one-more.md", "file_text": "x"})
        )
        .0
    );
}

#[cfg(unix)]
#[test]
fn check_lists_what_a_local_process_planted_that_would_not_fit() {
    use std::fs;
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = claude_memory::FilesystemStore::open(dir.path()).expect("open");
    let root = dir.path();
    fs::write(root.join("ok.md"), "fine\n").expect("write");
    fs::write(root.join("blob.bin"), [0xff, 0xfe, 0x00]).expect("write");
    fs::write(root.join("big.md"), vec![b'a'; MAX_FILE_SIZE as usize + 1]).expect("write");
    let deep_dir = (0..21).fold(root.to_path_buf(), |p, i| p.join(format!("d{i}")));
    fs::create_dir_all(&deep_dir).expect("mkdir");
    fs::write(deep_dir.join("deep.md"), "x").expect("write");
    let misfits = profile::check(&store).expect("check");
    let deep_path = format!(
        "/memories/{}/deep.md",
        (0..21)
            .map(|i| format!("d{i}"))
            .collect::<Vec<_>>()
            .join("/")
    );
    assert_eq!(
        misfits,
        vec![
            Misfit::TooLarge {
                path: "/memories/big.md".into(),
                size: MAX_FILE_SIZE + 1
            },
            Misfit::NotText {
                path: "/memories/blob.bin".into()
            },
            Misfit::TooDeep {
                path: deep_path,
                segments: 22
            },
        ]
    );
}

#[test]
fn check_counts_the_files_of_a_store_filled_without_the_profile() {
    let tool = MemoryTool::new(InMemoryStore::new());
    for i in 0..=MAX_FILES {
        assert!(
            !call(
                &tool,
                json!({"command": "create", "path": format!("/memories/m{i}.md"), "file_text": "x"})
            )
            .0
        );
    }
    assert_eq!(
        profile::check(tool.store()).expect("check"),
        vec![Misfit::TooManyFiles {
            files: MAX_FILES + 1
        }]
    );
}

#[test]
fn the_file_count_sees_files_in_every_directory() {
    let config = Config::default().with_max_files(3);
    let tool = MemoryTool::with_config(InMemoryStore::new(), config);
    for path in ["/memories/a/1.md", "/memories/b/c/2.md", "/memories/3.md"] {
        assert!(
            !call(
                &tool,
                json!({"command": "create", "path": path, "file_text": "x"})
            )
            .0
        );
    }
    let (is_error, text) = call(
        &tool,
        json!({"command": "create", "path": "/memories/d/4.md", "file_text": "x"}),
    );
    assert!(is_error, "{text}");
    // The refused create left no directory behind.
    let (_, listing) = call(&tool, json!({"command": "view", "path": "/memories"}));
    assert!(!listing.contains("/memories/d"), "{listing}");
    assert!(
        !call(
            &tool,
            json!({"command": "delete", "path": "/memories/b/c/2.md"})
        )
        .0
    );
    assert!(
        !call(
            &tool,
            json!({"command": "create", "path": "/memories/d/4.md", "file_text": "x"})
        )
        .0
    );
}

/// A store that refuses creates past `cap` files itself, and counts the
/// listings and looks the handler asks of it.
struct CapsItsFiles {
    inner: InMemoryStore,
    cap: u64,
    looks: std::sync::atomic::AtomicUsize,
}

impl CapsItsFiles {
    fn new(cap: u64) -> Self {
        CapsItsFiles {
            inner: InMemoryStore::new(),
            cap,
            looks: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    fn look(&self) {
        self.looks
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

mod caps_its_files {
    use claude_memory::store::{
        DeleteOptions, DirEntry, FileContent, Metadata, RenameOptions, StoreError, StoreResult,
        Version, WriteMode, WriteOptions,
    };
    use claude_memory::{MemoryPath, MemoryStore};

    impl MemoryStore for super::CapsItsFiles {
        fn max_files(&self) -> Option<u64> {
            Some(self.cap)
        }
        fn stat(&self, path: &MemoryPath) -> StoreResult<Option<Metadata>> {
            self.look();
            self.inner.stat(path)
        }
        fn read(&self, path: &MemoryPath, limit: u64) -> StoreResult<FileContent> {
            self.inner.read(path, limit)
        }
        fn list(&self, dir: &MemoryPath) -> StoreResult<Vec<DirEntry>> {
            self.look();
            self.inner.list(dir)
        }
        fn write_opts(
            &self,
            path: &MemoryPath,
            data: &[u8],
            options: WriteOptions<'_>,
        ) -> StoreResult<Version> {
            let files = self.inner.list(&MemoryPath::root())?.len() as u64;
            if options.mode == WriteMode::Create && files >= self.cap {
                return Err(StoreError::TooManyFiles {
                    path: path.clone(),
                    limit: self.cap,
                });
            }
            self.inner.write_opts(path, data, options)
        }
        fn delete_opts(&self, path: &MemoryPath, options: DeleteOptions<'_>) -> StoreResult<bool> {
            self.inner.delete_opts(path, options)
        }
        fn rename_opts(
            &self,
            from: &MemoryPath,
            to: &MemoryPath,
            options: RenameOptions<'_>,
        ) -> StoreResult<()> {
            self.inner.rename_opts(from, to, options)
        }
    }
}

/// Under a file limit no lower than the store's own cap, the handler
/// leaves the count to the store (no look at the store before a create),
/// and the store's refusal reads as SPEC's file limit.
#[test]
fn a_store_that_caps_its_own_files_is_not_counted_before_a_create() {
    let tool = MemoryTool::with_config(CapsItsFiles::new(2), Config::default().with_max_files(2));
    for name in ["a", "b"] {
        let (err, text) = call(
            &tool,
            json!({"command": "create", "path": format!("/memories/{name}.md"), "file_text": "x"}),
        );
        assert!(!err, "{text}");
    }
    assert_eq!(
        tool.store()
            .looks
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    let (err, text) = call(
        &tool,
        json!({"command": "create", "path": "/memories/c.md", "file_text": "x"}),
    );
    assert!(err);
    assert_eq!(
        text,
        "Error: Cannot create /memories/c.md: the memory store is at its limit of 2 files. Delete or merge memories first"
    );
}

/// A limit lower than the store's own cap is the handler's to count.
#[test]
fn a_lower_limit_than_the_stores_cap_is_still_counted() {
    let tool = MemoryTool::with_config(CapsItsFiles::new(10), Config::default().with_max_files(1));
    let (err, text) = call(
        &tool,
        json!({"command": "create", "path": "/memories/a.md", "file_text": "x"}),
    );
    assert!(!err, "{text}");
    let (err, text) = call(
        &tool,
        json!({"command": "create", "path": "/memories/b.md", "file_text": "x"}),
    );
    assert!(err);
    assert_eq!(
        text,
        "Error: Cannot create /memories/b.md: the memory store is at its limit of 1 files. Delete or merge memories first"
    );
    assert!(
        tool.store()
            .looks
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0
    );
}
