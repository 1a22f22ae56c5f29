//! Issue 30, item 4: `export --output PATH` renamed a temporary file over
//! PATH whatever it was; run as root with `/dev/null`, it replaced the
//! system's `/dev/null` with a regular file. Now only a regular file (or
//! nothing) is replaced; a FIFO, a character device or a terminal is
//! written into; anything else is refused. Each attack here runs on a
//! FIFO, socket, directory or device node made in a temporary directory,
//! so that even a broken build cannot replace a system file.
#![cfg(all(unix, feature = "cli"))]

use std::fs;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use claude_memory::backup::Backup;

const BIN: &str = env!("CARGO_BIN_EXE_claude-memory-cli");

/// A temporary directory holding a store (`mem`, one file).
fn setup() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("mem");
    fs::create_dir(&root).expect("mkdir");
    fs::write(root.join("a.md"), "alpha\n").expect("write");
    (dir, root)
}

fn export(root: &Path, output: &Path) -> Output {
    Command::new(BIN)
        .arg("--root")
        .arg(root)
        .arg("export")
        .arg("--output")
        .arg(output)
        .env_remove("CLAUDE_MEMORY_STORE")
        .env_remove("CLAUDE_MEMORY_DIR")
        .stdin(Stdio::null())
        .output()
        .expect("run the CLI")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(made.success(), "mkfifo {}", path.display());
}

/// Reads the FIFO at `path` to its end on a thread.
fn reader(path: &Path) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Ok(mut f) = fs::File::open(&path) {
            let _ = f.read_to_string(&mut text);
        }
        let _ = tx.send(text);
    });
    rx
}

fn assert_backup_of_a(text: &str) {
    let backup = Backup::from_json(text).expect("a backup");
    assert_eq!(backup.files.len(), 1);
    assert_eq!(backup.files[0].path, "/memories/a.md");
    assert_eq!(backup.files[0].text.as_deref(), Some("alpha\n"));
}

/// The names in `dir`: no temporary file may be left behind.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn export_into_a_fifo_streams_into_it_and_the_fifo_stays() {
    let (dir, root) = setup();
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let read = reader(&fifo);
    let o = export(&root, &fifo);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        fs::symlink_metadata(&fifo)
            .expect("stat")
            .file_type()
            .is_fifo(),
        "the FIFO was replaced"
    );
    let text = read
        .recv_timeout(Duration::from_secs(60))
        .expect("the reader got the backup");
    assert_backup_of_a(&text);
    assert_eq!(
        stderr(&o),
        format!(
            "exported 1 file and 0 empty directories to {}\n",
            fifo.display()
        )
    );
}

#[test]
fn export_through_a_link_to_a_fifo_streams_into_it_and_both_stay() {
    let (dir, root) = setup();
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let link = dir.path().join("link");
    symlink(&fifo, &link).expect("symlink");
    let read = reader(&fifo);
    let o = export(&root, &link);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        fs::symlink_metadata(&link)
            .expect("stat")
            .file_type()
            .is_symlink()
    );
    assert!(
        fs::symlink_metadata(&fifo)
            .expect("stat")
            .file_type()
            .is_fifo()
    );
    assert_backup_of_a(&read.recv_timeout(Duration::from_secs(60)).expect("read"));
}

/// A character device: a node of the null device made in the temporary
/// directory (the system's own `/dev/null` is never named), written into
/// and kept, directly and through a link. Needs CAP_MKNOD (root).
#[test]
fn export_into_a_character_device_writes_into_it_and_the_device_stays() {
    let (dir, root) = setup();
    let node = dir.path().join("null");
    let made = Command::new("mknod")
        .arg(&node)
        .args(["c", "1", "3"])
        .stderr(Stdio::null())
        .status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("mknod is not allowed here (needs root): skipped");
        return;
    }
    let link = dir.path().join("null-link");
    symlink(&node, &link).expect("symlink");
    let rdev = fs::metadata("/dev/null").expect("stat").rdev();
    for target in [&node, &link] {
        let o = export(&root, target);
        assert!(o.status.success(), "{}: {}", target.display(), stderr(&o));
        let meta = fs::metadata(&node).expect("stat");
        assert!(meta.file_type().is_char_device(), "the device was replaced");
        assert_eq!(meta.rdev(), rdev);
    }
    assert!(
        fs::symlink_metadata(&link)
            .expect("stat")
            .file_type()
            .is_symlink()
    );
    assert_eq!(names(dir.path()), ["mem", "null", "null-link"]);
}

/// `/dev/stdout` is a link to `/proc/self/fd/1`: named by its `/proc`
/// path (where no file can be made, so a broken build fails instead of
/// replacing anything), the process's stdout, a pipe, gets the backup.
#[test]
fn export_into_stdout_by_its_proc_path_streams_into_the_pipe() {
    let (_dir, root) = setup();
    let o = export(&root, Path::new("/proc/self/fd/1"));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_backup_of_a(&String::from_utf8_lossy(&o.stdout));
}

#[test]
fn export_to_a_directory_is_refused_with_a_clear_error() {
    let (dir, root) = setup();
    let out = dir.path().join("out");
    fs::create_dir(&out).expect("mkdir");
    let o = export(&root, &out);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        format!(
            "claude-memory: cannot write {}: it is a directory: name a file to write the backup to\n",
            out.display()
        )
    );
    assert!(out.is_dir() && names(&out).is_empty());
    assert_eq!(names(dir.path()), ["mem", "out"]);
}

#[test]
fn export_to_a_socket_or_a_link_to_nothing_is_refused_and_they_stay() {
    let (dir, root) = setup();
    let socket = dir.path().join("socket");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind");
    let o = export(&root, &socket);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains(": it is a socket:"), "{}", stderr(&o));
    assert!(
        fs::symlink_metadata(&socket)
            .expect("stat")
            .file_type()
            .is_socket()
    );

    let dangling = dir.path().join("dangling");
    symlink(dir.path().join("nothing"), &dangling).expect("symlink");
    let o = export(&root, &dangling);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("it is a symbolic link to nothing"),
        "{}",
        stderr(&o)
    );
    assert!(
        fs::symlink_metadata(&dangling)
            .expect("stat")
            .file_type()
            .is_symlink()
    );
    assert_eq!(names(dir.path()), ["dangling", "mem", "socket"]);
}

/// A link to a regular file: the file is replaced (atomically, mode
/// 0600), and the link stays a link.
#[test]
fn export_through_a_link_to_a_file_replaces_the_file_and_the_link_stays() {
    let (dir, root) = setup();
    let real = dir.path().join("real.json");
    fs::write(&real, "old").expect("write");
    let link = dir.path().join("link.json");
    symlink("real.json", &link).expect("symlink");
    let o = export(&root, &link);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        fs::symlink_metadata(&link)
            .expect("stat")
            .file_type()
            .is_symlink()
    );
    assert_backup_of_a(&fs::read_to_string(&real).expect("read"));
    let mode = fs::metadata(&real).expect("stat").permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(names(dir.path()), ["link.json", "mem", "real.json"]);
}

/// A name a local process chose, with a newline, a terminal escape and a
/// right-to-left override: the refusal prints it escaped, so it can
/// neither forge a line nor drive the terminal.
#[test]
fn export_prints_an_unspellable_name_escaped() {
    let (dir, root) = setup();
    fs::write(root.join("evil\nforged\u{1b}[2J\u{202e}gpj.md"), "x\n").expect("plant");
    let out = export(&root, &dir.path().join("backup.json"));
    assert!(!out.status.success());
    let said = stderr(&out);
    assert!(
        said.contains("evil\\nforged\\x1b[2J\\u{202e}gpj.md"),
        "{said}"
    );
    assert!(
        !said.contains('\u{1b}') && !said.contains('\u{202e}') && !said.contains("\nforged"),
        "{said:?}"
    );
}
