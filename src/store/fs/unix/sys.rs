//! Thin wrappers over the raw `*at` system calls the filesystem store is
//! built from, and the mapping of their `errno` values to [`StoreError`].
//!
//! Every call here takes a directory handle and one path component, never a
//! host path, and never follows a symbolic link. Each wrapper fixes the
//! flags its call always needs, and each `errno` a wrapper looks at is
//! handled for a reason stated beside it; any other `errno` is passed up
//! unchanged, to become [`StoreError::Io`] with a fixed [`Op`] word (see
//! [`io_error`]).

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use rustix::path::Arg;

use crate::path::MemoryPath;
use crate::store::{Op, StoreError, StoreResult};

/// What is at a name inside a directory, not following links.
pub(super) enum Entry {
    Absent,
    File(rfs::Stat),
    Dir,
    Symlink,
    Other,
}

/// An `errno` from a call made for `op` on `path`, as a [`StoreError`].
pub(super) fn io_error(op: Op, path: &MemoryPath, e: Errno) -> StoreError {
    StoreError::io(op, path, io::Error::from(e))
}

/// Flags for opening a directory beneath another without following links.
fn dir_flags() -> OFlags {
    OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// Opens the store's root directory by its host path: the one call that
/// takes a host path, made once, in `open`.
pub(super) fn open_root(root: &Path) -> io::Result<OwnedFd> {
    Ok(rfs::open(
        root,
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Opens (creating, mode 0600) the lock file `name` in `root`.
///
/// `NOFOLLOW`: a link planted at the lock's name must not lead the store to
/// open (or create) a file elsewhere. `NONBLOCK`: if a FIFO was planted
/// there, opening it must not hang; the caller then refuses anything but a
/// regular file.
pub(super) fn open_lock_file(root: BorrowedFd<'_>, name: &str) -> io::Result<OwnedFd> {
    Ok(rfs::openat(
        root,
        name,
        OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::RUSR | Mode::WUSR,
    )?)
}

/// The file type of an open handle.
pub(super) fn file_type(fd: BorrowedFd<'_>) -> io::Result<FileType> {
    Ok(FileType::from_raw_mode(rfs::fstat(fd)?.st_mode))
}

/// Opens the directory `name` in `dir`; a symbolic link there fails with
/// `ELOOP` (or `ENOTDIR`) instead of being followed.
pub(super) fn open_dir(dir: impl AsFd, name: impl Arg) -> Result<OwnedFd, Errno> {
    rfs::openat(dir, name, dir_flags(), Mode::empty())
}

/// Opens the directory `path` beneath `root` in one `openat2` call that the
/// kernel keeps beneath `root` and refuses to take through any link.
#[cfg(target_os = "linux")]
pub(super) fn open_dir_beneath(root: BorrowedFd<'_>, path: &str) -> Result<OwnedFd, Errno> {
    use rustix::fs::ResolveFlags;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    rfs::openat2(root, path, dir_flags(), Mode::empty(), resolve)
}

/// Opens the file at `path` beneath `root` for reading in one `openat2`
/// call (the flags of [`open_for_read`], no link followed anywhere): a
/// view's fast path, which needs no handle on the file's directory. Any
/// failure is only a hint: callers redo the open step by step for the
/// exact error.
#[cfg(target_os = "linux")]
pub(super) fn open_file_beneath(root: BorrowedFd<'_>, path: &str) -> Result<OwnedFd, Errno> {
    use rustix::fs::ResolveFlags;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK;
    rfs::openat2(root, path, flags, Mode::empty(), resolve)
}

/// A new handle on the same directory, for removing what a write created.
pub(super) fn dup_dir(dir: impl AsFd) -> Result<OwnedFd, Errno> {
    open_dir(dir, ".")
}

/// Creates the directory `name` (mode 0700) in `dir`.
pub(super) fn make_dir(dir: impl AsFd, name: &str) -> Result<(), Errno> {
    rfs::mkdirat(dir, name, Mode::RWXU)
}

/// Opens the regular file `name` in `dir` for reading, for `path`.
///
/// The caller checks the type of what was opened; this maps only the
/// failures that already say what is at the name.
pub(super) fn open_for_read(dir: impl AsFd, name: &str, path: &MemoryPath) -> StoreResult<OwnedFd> {
    // NONBLOCK: opening a FIFO someone planted must not hang.
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK;
    match rfs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => Ok(fd),
        // Nothing at the name, or a non-directory where a directory was
        // expected on the way: to the model, the file does not exist.
        Err(Errno::NOENT) | Err(Errno::NOTDIR) => Err(StoreError::NotFound { path: path.clone() }),
        // A socket (`ENXIO`), or a device without a driver (`ENXIO`,
        // `ENODEV`): no memory entry, so missing, as `stat` and `list` say.
        Err(Errno::NXIO) | Err(Errno::NODEV) => Err(StoreError::NotFound { path: path.clone() }),
        // `O_NOFOLLOW` met a symbolic link at the last component.
        Err(Errno::LOOP) => Err(StoreError::Symlink { path: path.clone() }),
        Err(e) => Err(io_error(Op::Open, path, e)),
    }
}

/// Creates the new file `name` (mode 0600) in `dir` for writing.
///
/// `EXCL | NOFOLLOW`: the name must not exist, so neither a leftover file
/// nor a planted link at it is ever written through.
pub(super) fn create_new(dir: impl AsFd, name: &str) -> Result<OwnedFd, Errno> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    rfs::openat(dir, name, flags, Mode::RUSR | Mode::WUSR)
}

/// Removes the non-directory `name` in `dir`.
pub(super) fn unlink(dir: impl AsFd, name: impl Arg) -> Result<(), Errno> {
    rfs::unlinkat(dir, name, AtFlags::empty())
}

/// Removes the empty directory `name` in `dir`.
pub(super) fn remove_dir(dir: impl AsFd, name: impl Arg) -> Result<(), Errno> {
    rfs::unlinkat(dir, name, AtFlags::REMOVEDIR)
}

/// Moves `from` in `dir` to `to` in the same directory, replacing whatever
/// is at `to` atomically.
pub(super) fn rename_replace(dir: impl AsFd + Copy, from: &str, to: &str) -> Result<(), Errno> {
    rfs::renameat(dir, from, dir, to)
}

/// Flushes a directory's entries to stable storage, for `path`. On macOS
/// `fsync` leaves them in the drive's cache: `F_FULLFSYNC` flushes that too
/// (as `File::sync_all` does for files there).
pub(super) fn sync_dir(path: &MemoryPath, dir: impl AsFd) -> StoreResult<()> {
    #[cfg(target_vendor = "apple")]
    let synced = rfs::fcntl_fullfsync(dir);
    #[cfg(not(target_vendor = "apple"))]
    let synced = rfs::fsync(dir);
    synced.map_err(|e| io_error(Op::Sync, path, e))
}

/// What is at `name` in `dir`, without following a link.
pub(super) fn entry_at(dir: BorrowedFd<'_>, name: &str) -> Result<Entry, Errno> {
    match rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => Ok(match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => Entry::File(stat),
            FileType::Directory => Entry::Dir,
            FileType::Symlink => Entry::Symlink,
            _ => Entry::Other,
        }),
        // Nothing there, or the "directory" it would be in is not one:
        // either way there is no entry at this name.
        Err(Errno::NOENT) | Err(Errno::NOTDIR) => Ok(Entry::Absent),
        Err(e) => Err(e),
    }
}

/// A file's modification time from its `stat`.
pub(super) fn modified(stat: &rfs::Stat) -> Option<SystemTime> {
    let secs = u64::try_from(stat.st_mtime).ok()?;
    let nanos = u32::try_from(stat.st_mtime_nsec).ok()?;
    UNIX_EPOCH.checked_add(Duration::new(secs, nanos))
}

/// Renames without ever replacing the destination: `renameat2` with
/// `RENAME_NOREPLACE` (Linux) or `renameatx_np` with `RENAME_EXCL` (macOS),
/// or (where the filesystem lacks it) `linkat` and `unlinkat` for files;
/// directories then rely on the store lock.
pub(super) fn rename_no_replace(
    from_dir: BorrowedFd<'_>,
    from: &str,
    to_dir: BorrowedFd<'_>,
    to: &str,
    path: &MemoryPath,
) -> StoreResult<()> {
    #[cfg(any(target_os = "linux", target_vendor = "apple"))]
    match rfs::renameat_with(from_dir, from, to_dir, to, rfs::RenameFlags::NOREPLACE) {
        Ok(()) => return Ok(()),
        // The destination exists: the whole point of `NOREPLACE`.
        Err(Errno::EXIST) => return Err(StoreError::AlreadyExists { path: path.clone() }),
        // The filesystem (`EINVAL`) or kernel (`ENOSYS`) does not support
        // `RENAME_NOREPLACE`, or a macOS volume lacks `RENAME_EXCL`
        // (`ENOTSUP`): fall back below.
        Err(Errno::INVAL) | Err(Errno::NOSYS) | Err(Errno::NOTSUP) => {}
        Err(e) => return Err(io_error(Op::Rename, path, e)),
    }
    let is_dir = matches!(entry_at(from_dir, from), Ok(Entry::Dir));
    if is_dir {
        return match entry_at(to_dir, to) {
            Ok(Entry::Absent) => {
                rfs::renameat(from_dir, from, to_dir, to).map_err(|e| io_error(Op::Rename, path, e))
            }
            Ok(_) => Err(StoreError::AlreadyExists { path: path.clone() }),
            Err(e) => Err(io_error(Op::Rename, path, e)),
        };
    }
    match rfs::linkat(from_dir, from, to_dir, to, AtFlags::empty()) {
        Ok(()) => unlink(from_dir, from).map_err(|e| io_error(Op::Rename, path, e)),
        // `linkat` never replaces: the destination exists.
        Err(Errno::EXIST) => Err(StoreError::AlreadyExists { path: path.clone() }),
        Err(e) => Err(io_error(Op::Rename, path, e)),
    }
}

/// Calls `f` with each entry of `dir` but `.` and `..`.
pub(super) fn for_each_entry(
    dir: BorrowedFd<'_>,
    mut f: impl FnMut(&CStr, FileType) -> Result<(), Errno>,
) -> Result<(), Errno> {
    let mut entries = rfs::Dir::read_from(dir)?;
    while let Some(entry) = entries.read() {
        let entry = entry?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let mut file_type = entry.file_type();
        // Some filesystems leave `d_type` empty: ask for the type instead.
        if file_type == FileType::Unknown {
            file_type = match rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stat) => FileType::from_raw_mode(stat.st_mode),
                // Removed since it was read: it is no longer an entry.
                Err(Errno::NOENT) => continue,
                Err(e) => return Err(e),
            };
        }
        f(name, file_type)?;
    }
    Ok(())
}
