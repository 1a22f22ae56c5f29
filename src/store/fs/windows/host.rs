//! The Windows calls the store is built from, all through the standard
//! library (and `winapi-util` for a file's link count), without `unsafe`.
//!
//! Windows has no `openat` in its Win32 API, so the store does what cap-std
//! does there: every directory it works in is *pinned*, opened by its host
//! path without `FILE_SHARE_DELETE`, together with every directory above it
//! up to the root. While a directory is open that way nobody can rename or
//! delete it, or put a junction or symbolic link in its place, so the host
//! path of a pinned directory keeps naming that directory, and one more
//! component can be appended to it safely. Each directory is pinned only
//! after its parent is, and is opened with `FILE_FLAG_OPEN_REPARSE_POINT`
//! (the entry itself, never what a reparse point leads to), then checked: a
//! reparse point of any kind (symbolic link, junction, mount point, …) is
//! refused, as a symbolic link is on Unix.

use std::ffi::OsStr;
use std::fs::{self, File, Metadata, OpenOptions};
use std::io;
use std::os::windows::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::path::MemoryPath;
use crate::store::{Op, StoreError};

const FILE_SHARE_READ: u32 = 0x1;
const FILE_SHARE_WRITE: u32 = 0x2;
const FILE_FLAG_BACKUP_SEMANTICS: u32 = 0x0200_0000;
const FILE_FLAG_OPEN_REPARSE_POINT: u32 = 0x0020_0000;
const FILE_ATTRIBUTE_DIRECTORY: u32 = 0x10;
const FILE_ATTRIBUTE_REPARSE_POINT: u32 = 0x400;

const ERROR_FILE_NOT_FOUND: i32 = 2;
const ERROR_PATH_NOT_FOUND: i32 = 3;
const ERROR_ACCESS_DENIED: i32 = 5;
const ERROR_SHARING_VIOLATION: i32 = 32;
const ERROR_FILE_EXISTS: i32 = 80;
const ERROR_DIR_NOT_EMPTY: i32 = 145;
const ERROR_ALREADY_EXISTS: i32 = 183;

/// What is at a name inside a pinned directory, not following links.
pub(super) enum Entry {
    Absent,
    File(Metadata),
    Dir,
    /// A reparse point: symbolic link, junction, mount point or other.
    Reparse {
        dir: bool,
    },
}

/// A directory beneath the root, pinned with every directory above it (the
/// root itself stays pinned for the store's life). Its `path` names it for
/// as long as this value lives.
pub(super) struct Dir {
    pub(super) path: PathBuf,
    pins: Vec<File>,
}

impl Dir {
    /// The root, pinned by the store.
    pub(super) fn root(path: &Path) -> Self {
        Dir {
            path: path.to_path_buf(),
            pins: Vec::new(),
        }
    }

    /// The host path of `name` inside this directory.
    pub(super) fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        self.path.join(name)
    }

    /// Adds a pinned child (from [`pin_dir`]) below this directory.
    pub(super) fn push(&mut self, name: impl AsRef<Path>, pin: File) {
        self.path.push(name);
        self.pins.push(pin);
    }
}

/// A reparse point?
pub(super) fn is_reparse(meta: &Metadata) -> bool {
    meta.file_attributes() & FILE_ATTRIBUTE_REPARSE_POINT != 0
}

/// Opens `path` for pinning: the entry itself (not a link's target), for
/// reading, shared with readers and writers but not with renames or
/// deletes. Works on files too; the caller checks what it got.
pub(super) fn open_pin(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT)
        .open(path)
}

/// What pinning `name` found.
pub(super) enum Pinned {
    Dir(File),
    Missing,
    /// A file (or other non-directory) is there.
    NotDir,
    Reparse,
}

/// Pins the directory `name` in `dir` (itself pinned), retrying briefly
/// while someone else holds it open for a rename or delete.
pub(super) fn pin_dir(dir: &Dir, name: impl AsRef<Path>) -> io::Result<Pinned> {
    let path = dir.join(name);
    let file = match retry(|| open_pin(&path)) {
        Ok(file) => file,
        Err(e) if is_not_found(&e) => return Ok(Pinned::Missing),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    Ok(if is_reparse(&meta) {
        Pinned::Reparse
    } else if meta.is_dir() {
        Pinned::Dir(file)
    } else {
        Pinned::NotDir
    })
}

/// What is at `name` in `dir`, without following a reparse point.
pub(super) fn entry_at(dir: &Dir, name: impl AsRef<Path>) -> io::Result<Entry> {
    match fs::symlink_metadata(dir.join(name)) {
        Ok(meta) if is_reparse(&meta) => Ok(Entry::Reparse {
            dir: meta.file_attributes() & FILE_ATTRIBUTE_DIRECTORY != 0,
        }),
        Ok(meta) if meta.is_dir() => Ok(Entry::Dir),
        Ok(meta) => Ok(Entry::File(meta)),
        Err(e) if is_not_found(&e) => Ok(Entry::Absent),
        Err(e) => Err(e),
    }
}

/// Opens the file `name` in `dir` for reading: the entry itself, never a
/// link's target. Shared with renames and deletes, as on Unix a reader
/// does not stop a writer.
pub(super) fn open_for_read(dir: &Dir, name: &str) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT)
        .open(dir.join(name))
}

/// The number of names a file has.
pub(super) fn links(file: &File) -> io::Result<u64> {
    Ok(winapi_util::file::information(file)?.number_of_links())
}

/// Creates the new file `name` in `dir` for writing (`CREATE_NEW`: fails
/// if anything, a link included, is already at the name).
pub(super) fn create_new(dir: &Dir, name: &str) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
        .open(dir.join(name))
}

/// Opens (creating) the lock file `name` in the root, refusing anything
/// but a regular file there.
pub(super) fn open_lock_file(root: &Path, name: &str) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
        .open(root.join(name))?;
    let meta = file.metadata()?;
    if is_reparse(&meta) || !meta.is_file() {
        return Err(io::Error::other(
            "the store's lock file is not a regular file",
        ));
    }
    Ok(file)
}

/// Pins the root by its host path. Returns the handle and a verbatim
/// (`\\?\`) path to it with every link on the way resolved, checked to
/// name the very directory that was opened.
pub(super) fn open_root(root: &Path) -> io::Result<(File, PathBuf)> {
    let pin = OpenOptions::new()
        .read(true)
        .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS)
        .open(root)?;
    if !pin.metadata()?.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            "the store's root is not a directory",
        ));
    }
    let path = fs::canonicalize(root)?;
    let again = open_pin(&path)?;
    if identity(&again)? != identity(&pin)? {
        return Err(io::Error::other(
            "the store's root changed while it was opened",
        ));
    }
    Ok((pin, path))
}

/// Volume and file index: which file a handle is.
pub(super) fn identity(file: &File) -> io::Result<(u64, u64)> {
    let info = winapi_util::file::information(file)?;
    Ok((info.volume_serial_number(), info.file_index()))
}

/// Gives another name to the file `from`; fails if `to` exists (Win32
/// `CreateHardLinkW` never replaces).
pub(super) fn hard_link(from: &Path, to: &Path) -> io::Result<()> {
    fs::hard_link(from, to)
}

/// Renames `from` to `to` (the entry itself, a link included), replacing a
/// file at `to`; retried while a reader has a directory on the way pinned.
pub(super) fn rename(from: &Path, to: &Path) -> io::Result<()> {
    retry(|| fs::rename(from, to))
}

/// Removes the file (or file link) at `path`.
pub(super) fn remove_file(path: &Path) -> io::Result<()> {
    retry(|| fs::remove_file(path))
}

/// Removes the empty directory (or directory link or junction, never its
/// target) at `path`.
pub(super) fn remove_dir(path: &Path) -> io::Result<()> {
    retry(|| fs::remove_dir(path))
}

/// Removes the directory at `path` and everything in it. The standard
/// library does this with handle-relative `NtCreateFile` calls and never
/// follows a reparse point (the fix for CVE-2022-21658), so a junction
/// swapped in mid-way is removed, not entered.
pub(super) fn remove_tree(path: &Path) -> io::Result<()> {
    retry(|| match fs::remove_dir_all(path) {
        Err(e) if is_not_found(&e) => Ok(()),
        other => other,
    })
}

/// Lists the pinned directory at `path`: each entry's name and metadata
/// (from the directory listing itself, no further call).
pub(super) fn for_each_entry(
    path: &Path,
    mut f: impl FnMut(&OsStr, &Metadata) -> io::Result<()>,
) -> io::Result<()> {
    for entry in fs::read_dir(path)? {
        let entry = entry?;
        let meta = match entry.metadata() {
            Ok(meta) => meta,
            Err(e) if is_not_found(&e) => continue,
            Err(e) => return Err(e),
        };
        f(&entry.file_name(), &meta)?;
    }
    Ok(())
}

pub(super) fn is_not_found(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(ERROR_FILE_NOT_FOUND | ERROR_PATH_NOT_FOUND)
    ) || e.kind() == io::ErrorKind::NotFound
}

pub(super) fn is_exists(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(ERROR_FILE_EXISTS | ERROR_ALREADY_EXISTS)
    ) || e.kind() == io::ErrorKind::AlreadyExists
}

pub(super) fn is_not_empty(e: &io::Error) -> bool {
    e.raw_os_error() == Some(ERROR_DIR_NOT_EMPTY) || e.kind() == io::ErrorKind::DirectoryNotEmpty
}

/// Runs `f` again, a few times with short pauses, while it fails because
/// someone else (often another command's pin, or a virus scanner) has the
/// entry open: Windows refuses to rename or delete what is open without
/// `FILE_SHARE_DELETE`.
fn retry<T>(mut f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    let mut pause = Duration::from_millis(1);
    for _ in 0..10 {
        match f() {
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(ERROR_SHARING_VIOLATION | ERROR_ACCESS_DENIED)
                ) =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            other => return other,
        }
    }
    f()
}

/// An I/O error from a call made for `op` on `path`.
pub(super) fn io_error(op: Op, path: &MemoryPath, e: io::Error) -> StoreError {
    StoreError::io(op, path, e)
}
