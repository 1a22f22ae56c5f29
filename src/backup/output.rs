//! Where a backup is written, by path. What is at the path (symbolic links
//! followed) decides:
//!
//! - nothing: a new file is made, atomically;
//! - a regular file: it is replaced atomically (a temporary file beside
//!   it, fsynced, renamed over it, the directory fsynced), so a crash or a
//!   full disk leaves the old file or the new one, never a half-written
//!   one; through a link, the file it points to is replaced and the link
//!   stays;
//! - a FIFO, a character device or a terminal (`/dev/stdout`,
//!   `/dev/null`): the backup is written into it, as a stream;
//! - anything else (a directory, a socket, a block device, a link to
//!   nothing): refused, before anything is written.
//!
//! Only a regular file or nothing is ever renamed over. On Unix a new file
//! has mode 0600: a backup holds everything the model remembered.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use super::format::Backup;

impl Backup {
    /// Writes [`to_json`](Self::to_json) to `path` as an [`OutputFile`]
    /// does: a regular file is replaced atomically (mode 0600 on Unix), a
    /// FIFO or character device written into, anything else refused.
    pub fn write_to_file(&self, path: impl AsRef<Path>) -> io::Result<()> {
        let mut out = OutputFile::create(path.as_ref())?;
        self.write_json(&mut out)?;
        out.finish()
    }
}

/// A backup being written to a path (see the module's rules): write it,
/// then [`finish`](Self::finish). Dropped unfinished, nothing is replaced
/// and the temporary file is removed.
#[derive(Debug)]
pub struct OutputFile {
    /// The path renamed over (for a regular file reached through a link,
    /// the file it points to), or the stream's path.
    path: PathBuf,
    /// `None` only once finished.
    sink: Option<BufWriter<File>>,
    /// The temporary file, when the path is replaced.
    temp: Option<PathBuf>,
}

/// What an existing path is, symbolic links followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// Nothing: a new file is made.
    Absent,
    /// A regular file: replaced.
    Regular,
    /// A FIFO or a character device (a terminal included): written into.
    /// Only Unix tells these apart from other special files.
    #[cfg_attr(not(unix), allow(dead_code))]
    Stream,
}

/// `meta`'s target (links followed), or why it cannot take a backup.
fn classify(meta: &fs::Metadata) -> Result<Target, &'static str> {
    let kind = meta.file_type();
    if kind.is_file() {
        return Ok(Target::Regular);
    }
    if kind.is_dir() {
        return Err("it is a directory: name a file to write the backup to");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() || kind.is_char_device() {
            return Ok(Target::Stream);
        }
        if kind.is_block_device() {
            return Err(
                "it is a block device: a backup goes to a regular file, a FIFO, a character device or a terminal",
            );
        }
        if kind.is_socket() {
            return Err(
                "it is a socket: a backup goes to a regular file, a FIFO, a character device or a terminal (`-` is stdout)",
            );
        }
    }
    Err(
        "it is not a regular file: a backup goes to a regular file, a FIFO, a character device or a terminal",
    )
}

fn refused(reason: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, reason)
}

/// What is at `path`, and the path a replacement renames over: a regular
/// file reached through a symbolic link is replaced where it is, so the
/// link stays a link.
fn look(path: &Path) -> io::Result<(Target, PathBuf)> {
    match fs::metadata(path) {
        Ok(meta) => {
            let target = classify(&meta).map_err(refused)?;
            let link = fs::symlink_metadata(path)?.file_type().is_symlink();
            let at = if target == Target::Regular && link {
                fs::canonicalize(path)?
            } else {
                path.to_path_buf()
            };
            Ok((target, at))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => match fs::symlink_metadata(path) {
            Ok(_) => Err(refused(
                "it is a symbolic link to nothing: name the file itself, or remove the link",
            )),
            Err(_) => Ok((Target::Absent, path.to_path_buf())),
        },
        Err(e) => Err(e),
    }
}

impl OutputFile {
    /// Opens `path` for a backup by the module's rules: a temporary file
    /// beside a regular file (or where nothing is), the FIFO or device
    /// itself (this waits for a FIFO's reader), or an
    /// [`InvalidInput`](io::ErrorKind::InvalidInput) error saying why not.
    pub fn create(path: impl AsRef<Path>) -> io::Result<OutputFile> {
        let path = path.as_ref();
        let (target, at) = look(path)?;
        let (file, temp) = match target {
            Target::Stream => {
                // Neither created nor truncated; what was opened must be
                // what was looked at.
                let file = OpenOptions::new().write(true).open(&at)?;
                if classify(&file.metadata()?) != Ok(Target::Stream) {
                    return Err(refused("it was replaced while being opened"));
                }
                (file, None)
            }
            Target::Absent | Target::Regular => {
                let (temp, file) = create_temp(&at)?;
                (file, Some(temp))
            }
        };
        Ok(OutputFile {
            path: at,
            sink: Some(BufWriter::new(file)),
            temp,
        })
    }

    /// Ends the backup: a stream is flushed; a temporary file is flushed,
    /// fsynced and renamed over the path, once the path is checked again
    /// to still be a regular file or nothing.
    pub fn finish(mut self) -> io::Result<()> {
        let Some(sink) = self.sink.take() else {
            return Ok(());
        };
        let file = sink.into_inner().map_err(io::IntoInnerError::into_error)?;
        let Some(temp) = &self.temp else {
            return Ok(());
        };
        file.sync_all()?;
        drop(file);
        match look(&self.path)?.0 {
            Target::Absent | Target::Regular => {}
            Target::Stream => {
                return Err(refused(
                    "it became a FIFO or a device while the backup was written",
                ));
            }
        }
        fs::rename(temp, &self.path)?;
        self.temp = None;
        // The rename is durable once the directory is.
        #[cfg(unix)]
        File::open(parent(&self.path))?.sync_all()?;
        Ok(())
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.sink {
            Some(sink) => sink.write(buf),
            None => Err(io::Error::other("the backup is finished")),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.sink {
            Some(sink) => sink.flush(),
            None => Ok(()),
        }
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        drop(self.sink.take());
        if let Some(temp) = self.temp.take() {
            // Best effort: the failure that left it is the one reported.
            let _ = fs::remove_file(temp);
        }
    }
}

/// The directory holding `path` (`.` for a bare name).
fn parent(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Creates a new, private temporary file beside `path`.
fn create_temp(path: &Path) -> io::Result<(PathBuf, File)> {
    let name = path
        .file_name()
        .ok_or_else(|| refused("it names no file"))?;
    let dir = parent(path);
    let mut attempt = 0u32;
    loop {
        let mut temp_name = std::ffi::OsString::from(".");
        temp_name.push(name);
        temp_name.push(format!(".tmp.{}.{attempt}", std::process::id()));
        let temp = dir.join(temp_name);
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        match options.open(&temp) {
            Ok(file) => return Ok((temp, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 100 => attempt += 1,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::{Target, classify};

    /// Devices are written into, never replaced: checked on the system's
    /// own (only their metadata is read).
    #[test]
    fn character_devices_and_fifos_are_streams_directories_are_refused() {
        for device in ["/dev/null", "/dev/zero"] {
            let meta = std::fs::metadata(device).expect("stat");
            assert_eq!(classify(&meta), Ok(Target::Stream), "{device}");
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo");
        assert!(made.success());
        let meta = std::fs::metadata(&fifo).expect("stat");
        assert_eq!(classify(&meta), Ok(Target::Stream));
        let meta = std::fs::metadata(dir.path()).expect("stat");
        assert!(classify(&meta).is_err_and(|why| why.contains("directory")));
        let socket = dir.path().join("socket");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind");
        let meta = std::fs::metadata(&socket).expect("stat");
        assert!(classify(&meta).is_err_and(|why| why.contains("socket")));
        let file = dir.path().join("file");
        std::fs::write(&file, "x").expect("write");
        let meta = std::fs::metadata(&file).expect("stat");
        assert_eq!(classify(&meta), Ok(Target::Regular));
        // A block device, where the system has one.
        use std::os::unix::fs::FileTypeExt;
        let block = std::fs::read_dir("/dev")
            .expect("/dev")
            .filter_map(Result::ok)
            .find(|e| e.file_type().is_ok_and(|t| t.is_block_device()));
        if let Some(block) = block {
            let meta = std::fs::metadata(block.path()).expect("stat");
            assert!(classify(&meta).is_err_and(|why| why.contains("block device")));
        }
    }
}
