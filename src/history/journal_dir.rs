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
use super::file_log::{JOURNAL, TMP, log_error};

/// The journal's directory: a handle on it (Unix), so every file in it is
/// opened relative to it, following no link.
#[derive(Debug)]
pub(super) struct Dir {
    #[cfg(unix)]
    fd: std::os::fd::OwnedFd,
    #[cfg(not(unix))]
    path: PathBuf,
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
            match self.journal_once(read_only)? {
                Some(file) => return Ok(file),
                None => continue,
            }
        }
        Err(HistoryError::Log(
            "the history journal keeps being replaced while it is opened".into(),
        ))
    }

    fn journal_once(&self, read_only: bool) -> Result<Option<File>, HistoryError> {
        use rustix::fs::{Mode, OFlags};
        let mut flags = OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        flags |= if read_only {
            OFlags::RDONLY
        } else {
            OFlags::RDWR | OFlags::APPEND | OFlags::CREATE
        };
        let fd = rustix::fs::openat(&self.fd, JOURNAL, flags, Mode::from_raw_mode(0o600)).map_err(
            |e| match e {
                rustix::io::Errno::LOOP => {
                    HistoryError::Log("the history journal is a symbolic link: refused".into())
                }
                e => log_error(e),
            },
        )?;
        let stat = rustix::fs::fstat(&fd).map_err(log_error)?;
        if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::RegularFile {
            return Err(HistoryError::Log(
                "the history journal is not a regular file: refused".into(),
            ));
        }
        if stat.st_nlink == 0 {
            return Ok(None);
        }
        if stat.st_nlink != 1 {
            return Err(HistoryError::Log(
                "the history journal has another hard link: refused".into(),
            ));
        }
        if !read_only && stat.st_mode & 0o077 != 0 {
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o600)).map_err(log_error)?;
        }
        Ok(Some(File::from(fd)))
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

    /// Replaces the journal with `text`: a new file beside it (no link
    /// followed, created fresh), synced, renamed over it, the directory
    /// synced.
    pub(super) fn replace(&self, text: &[u8]) -> io::Result<()> {
        use rustix::fs::{Mode, OFlags};
        let _ = rustix::fs::unlinkat(&self.fd, TMP, rustix::fs::AtFlags::empty());
        let fd = rustix::fs::openat(
            &self.fd,
            TMP,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )?;
        let mut file = File::from(fd);
        let written = file.write_all(text).and_then(|()| file.sync_all());
        if let Err(e) = written {
            let _ = rustix::fs::unlinkat(&self.fd, TMP, rustix::fs::AtFlags::empty());
            return Err(e);
        }
        drop(file);
        rustix::fs::renameat(&self.fd, TMP, &self.fd, JOURNAL)?;
        rustix::fs::fsync(&self.fd)?;
        Ok(())
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

    pub(super) fn replaced(&self, _file: &File) -> Result<bool, HistoryError> {
        Ok(false)
    }

    pub(super) fn overwrite(&self) -> Result<File, HistoryError> {
        OpenOptions::new()
            .write(true)
            .open(self.path.join(JOURNAL))
            .map_err(log_error)
    }

    pub(super) fn replace(&self, text: &[u8]) -> io::Result<()> {
        let tmp = self.path.join(TMP);
        let mut file = File::create(&tmp)?;
        file.write_all(text)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, self.path.join(JOURNAL))
    }
}
