//! The journal's directory, opened relative to the store root's handle
//! following no link (Unix), and the files in it.

use std::fs::File;
#[cfg(not(unix))]
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::Path;
#[cfg(not(unix))]
use std::path::PathBuf;

use super::HistoryError;
use super::file_log::{JOURNAL, LOCK, log_error};

/// The journal's directory: a handle on it (Unix), so every file in it is
/// opened relative to it, following no link.
#[derive(Debug)]
pub(super) struct Dir {
    #[cfg(unix)]
    fd: std::os::fd::OwnedFd,
    #[cfg(not(unix))]
    path: PathBuf,
}

/// What opening a file of the directory found.
#[cfg(unix)]
enum Opened {
    /// The file, checked.
    File(File),
    /// Opened, but with no link left: renamed over or deleted since.
    Unlinked,
    /// Not there (a read-only open, which creates nothing).
    Missing,
}

#[cfg(unix)]
impl Dir {
    pub(super) fn open(base: &Path, sub: Option<&str>, create: bool) -> Result<Dir, HistoryError> {
        use rustix::fs::{Mode, OFlags};
        let dir_flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::RDONLY;
        let fd = match sub {
            Some(sub) => {
                if create {
                    let mut builder = std::fs::DirBuilder::new();
                    builder.recursive(true);
                    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
                    builder.create(base).map_err(log_error)?;
                }
                let root = rustix::fs::open(base, dir_flags, Mode::empty()).map_err(log_error)?;
                if create {
                    match rustix::fs::mkdirat(&root, sub, Mode::from_raw_mode(0o700)) {
                        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                        Err(e) => return Err(log_error(e)),
                    }
                }
                rustix::fs::openat(&root, sub, dir_flags, Mode::empty())
            }
            None => {
                if create {
                    let mut builder = std::fs::DirBuilder::new();
                    builder.recursive(true);
                    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
                    builder.create(base).map_err(log_error)?;
                }
                rustix::fs::open(base, dir_flags, Mode::empty())
            }
        }
        .map_err(|e| match e {
            rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR => HistoryError::Log(
                "the history directory is a link or not a directory: refused".into(),
            ),
            e => log_error(e),
        })?;
        Ok(Dir { fd })
    }

    /// The journal, opened (created 0600 unless `read_only`) without
    /// following a link and checked: a regular file with one link.
    pub(super) fn journal(&self, read_only: bool) -> Result<File, HistoryError> {
        // A journal with no link left was renamed over by another
        // process's rewrite between the open and the check: open the one
        // there now.
        for _ in 0..100 {
            match self.open_checked(JOURNAL, "journal", read_only)? {
                Opened::File(file) => return Ok(file),
                Opened::Unlinked => continue,
                Opened::Missing => return Err(log_error(rustix::io::Errno::NOENT)),
            }
        }
        Err(HistoryError::Log(
            "the history journal keeps being replaced while it is opened".into(),
        ))
    }

    /// The lock file (`journal.lock`), which every process changing the
    /// journal holds an exclusive `flock` on (a reader, a shared one). It
    /// is never renamed over or rewritten, unlike the journal, so every
    /// process locks the same file: a lock on the journal itself was lost
    /// by a rewrite, and two processes then each held "the" lock (one on
    /// the old journal, one on the new), while the first waited for the
    /// new one under the store's lock and the second for the store's lock
    /// (a deadlock). Opened under the journal's rules (no link followed, a
    /// regular file with one link, mode 0600). `None` when `read_only`
    /// and it does not exist: the history was written only by versions
    /// that locked the journal, or by none, and a reader takes no lock
    /// then (it tolerates a torn last line, and rewrites are renames).
    pub(super) fn lock(&self, read_only: bool) -> Result<Option<File>, HistoryError> {
        // No link left: the lock file was deleted between the open and
        // the check (by hand: this crate never deletes it); a new one is
        // created and opened.
        for _ in 0..100 {
            match self.open_checked(LOCK, "lock file", read_only)? {
                Opened::File(file) => return Ok(Some(file)),
                Opened::Unlinked => continue,
                Opened::Missing => return Ok(None),
            }
        }
        Err(HistoryError::Log(
            "the history lock file keeps being deleted while it is opened".into(),
        ))
    }

    /// `name` in the directory, opened (created 0600 unless `read_only`)
    /// without following a link, not blocking on a FIFO, and checked: a
    /// regular file with one link (a second link would let whoever made
    /// it read or change the file outside this directory's mode), mode
    /// 0600 (put back if it is wider).
    fn open_checked(
        &self,
        name: &str,
        what: &str,
        read_only: bool,
    ) -> Result<Opened, HistoryError> {
        use rustix::fs::{Mode, OFlags};
        let mut flags = OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        flags |= if read_only {
            OFlags::RDONLY
        } else {
            OFlags::RDWR | OFlags::APPEND | OFlags::CREATE
        };
        let fd = match rustix::fs::openat(&self.fd, name, flags, Mode::from_raw_mode(0o600)) {
            Ok(fd) => fd,
            // Only a read-only open can miss it (else it is created); the
            // caller says whether that is an error.
            Err(rustix::io::Errno::NOENT) if read_only => return Ok(Opened::Missing),
            Err(rustix::io::Errno::LOOP) => {
                return Err(HistoryError::Log(format!(
                    "the history {what} is a symbolic link: refused"
                )));
            }
            Err(e) => return Err(log_error(e)),
        };
        let stat = rustix::fs::fstat(&fd).map_err(log_error)?;
        if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::RegularFile {
            return Err(HistoryError::Log(format!(
                "the history {what} is not a regular file: refused"
            )));
        }
        if stat.st_nlink == 0 {
            return Ok(Opened::Unlinked);
        }
        if stat.st_nlink != 1 {
            return Err(HistoryError::Log(format!(
                "the history {what} has another hard link: refused"
            )));
        }
        if !read_only && stat.st_mode & 0o077 != 0 {
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o600)).map_err(log_error)?;
        }
        Ok(Opened::File(File::from(fd)))
    }

    /// The journal opened to write from its start (not appending).
    pub(super) fn overwrite(&self) -> Result<File, HistoryError> {
        use rustix::fs::{Mode, OFlags};
        let fd = rustix::fs::openat(
            &self.fd,
            JOURNAL,
            OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(log_error)?;
        Ok(File::from(fd))
    }

    /// Whether the journal in the directory is no longer `file`.
    pub(super) fn replaced(&self, file: &File) -> Result<bool, HistoryError> {
        let on_disk = rustix::fs::statat(&self.fd, JOURNAL, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
            .map_err(log_error)?;
        // Both through rustix, so the fields have one type on every Unix
        // (st_dev is an i32 on macOS, a u64 on Linux).
        let ours = rustix::fs::fstat(file).map_err(log_error)?;
        Ok(on_disk.st_ino != ours.st_ino || on_disk.st_dev != ours.st_dev)
    }

    /// Replaces the file `name` (the journal, the checkpoint) with `text`:
    /// a new file beside it (`name.tmp`, no link followed, created fresh,
    /// 0600), synced, renamed over it, the directory synced. A failure (a
    /// full disk) leaves the old file as it was.
    pub(super) fn replace_file(&self, name: &str, text: &[u8]) -> io::Result<()> {
        use rustix::fs::{Mode, OFlags};
        let tmp = format!("{name}.tmp");
        let _ = rustix::fs::unlinkat(&self.fd, &tmp, rustix::fs::AtFlags::empty());
        let fd = rustix::fs::openat(
            &self.fd,
            &tmp,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )?;
        let mut file = File::from(fd);
        let written = file.write_all(text).and_then(|()| file.sync_all());
        if let Err(e) = written {
            let _ = rustix::fs::unlinkat(&self.fd, &tmp, rustix::fs::AtFlags::empty());
            return Err(e);
        }
        drop(file);
        if let Err(e) = rustix::fs::renameat(&self.fd, &tmp, &self.fd, name) {
            // An empty directory planted at the name goes (a rename cannot
            // replace it); anything else stays, and the error is said.
            let planted = e == rustix::io::Errno::ISDIR
                && rustix::fs::unlinkat(&self.fd, name, rustix::fs::AtFlags::REMOVEDIR).is_ok();
            if !planted {
                let _ = rustix::fs::unlinkat(&self.fd, &tmp, rustix::fs::AtFlags::empty());
                return Err(e.into());
            }
            rustix::fs::renameat(&self.fd, &tmp, &self.fd, name)?;
        }
        rustix::fs::fsync(&self.fd)?;
        Ok(())
    }

    /// The file `name` (the checkpoint) whole, if it is there: opened
    /// under the journal's rules (no link, not a FIFO, one link, a
    /// regular file), and `None` too if it is over `max` bytes (not one
    /// this crate wrote).
    pub(super) fn read_file(
        &self,
        name: &str,
        max: usize,
    ) -> Result<Option<Vec<u8>>, HistoryError> {
        use std::io::Read as _;
        // A file that is not one this crate writes (a link, a FIFO, a
        // second hard link, a sparse giant) is no checkpoint: the open
        // reads the history instead, and the next checkpoint replaces it.
        let file = match self.open_checked(name, "checkpoint", true) {
            Ok(Opened::File(file)) => file,
            Ok(Opened::Unlinked | Opened::Missing) | Err(HistoryError::Log(_)) => {
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        if file.metadata().map_err(log_error)?.len() > max as u64 {
            return Ok(None);
        }
        let mut data = Vec::new();
        file.take(max as u64 + 1)
            .read_to_end(&mut data)
            .map_err(log_error)?;
        Ok((data.len() <= max).then_some(data))
    }
}

#[cfg(not(unix))]
impl Dir {
    pub(super) fn open(base: &Path, sub: Option<&str>, create: bool) -> Result<Dir, HistoryError> {
        let path = match sub {
            Some(sub) => base.join(sub),
            None => base.to_path_buf(),
        };
        if create {
            std::fs::create_dir_all(&path).map_err(log_error)?;
        }
        if std::fs::symlink_metadata(&path)
            .map_err(log_error)?
            .file_type()
            .is_symlink()
        {
            return Err(HistoryError::Log(
                "the history directory is a link: refused".into(),
            ));
        }
        Ok(Dir { path })
    }

    pub(super) fn journal(&self, read_only: bool) -> Result<File, HistoryError> {
        let path = self.path.join(JOURNAL);
        if let Ok(m) = std::fs::symlink_metadata(&path)
            && !m.file_type().is_file()
        {
            return Err(HistoryError::Log(
                "the history journal is not a regular file: refused".into(),
            ));
        }
        let mut options = OpenOptions::new();
        options.read(true);
        if !read_only {
            options.append(true).create(true);
        }
        options.open(path).map_err(log_error)
    }

    /// The lock file (see the Unix version), created unless `read_only`;
    /// `None` if a read-only open finds none.
    pub(super) fn lock(&self, read_only: bool) -> Result<Option<File>, HistoryError> {
        let path = self.path.join(LOCK);
        if let Ok(m) = std::fs::symlink_metadata(&path)
            && !m.file_type().is_file()
        {
            return Err(HistoryError::Log(
                "the history lock file is not a regular file: refused".into(),
            ));
        }
        let mut options = OpenOptions::new();
        options.read(true);
        if !read_only {
            options.write(true).create(true);
        }
        match options.open(path) {
            Ok(file) => Ok(Some(file)),
            Err(e) if read_only && e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(log_error(e)),
        }
    }

    pub(super) fn replaced(&self, _file: &File) -> Result<bool, HistoryError> {
        Ok(false)
    }

    pub(super) fn overwrite(&self) -> Result<File, HistoryError> {
        OpenOptions::new()
            .write(true)
            .open(self.path.join(JOURNAL))
            .map_err(log_error)
    }

    pub(super) fn replace_file(&self, name: &str, text: &[u8]) -> io::Result<()> {
        let tmp = self.path.join(format!("{name}.tmp"));
        let mut file = File::create(&tmp)?;
        file.write_all(text)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, self.path.join(name))
    }

    pub(super) fn read_file(
        &self,
        name: &str,
        max: usize,
    ) -> Result<Option<Vec<u8>>, HistoryError> {
        use std::io::Read as _;
        let path = self.path.join(name);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if !m.file_type().is_file() => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(log_error(e)),
            Ok(_) => {}
        }
        let file = File::open(path).map_err(log_error)?;
        let mut data = Vec::new();
        file.take(max as u64 + 1)
            .read_to_end(&mut data)
            .map_err(log_error)?;
        Ok((data.len() <= max).then_some(data))
    }
}
