//! Writing a backup file atomically: a temporary file in the same
//! directory, fsynced, renamed over the target, and the directory fsynced,
//! so a crash or a full disk leaves the old file or the new one, never a
//! half-written one. On Unix the file is created with mode 0600: a backup
//! holds everything the model remembered.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::format::Backup;

impl Backup {
    /// Writes [`to_json`](Self::to_json) to `path` atomically (mode 0600
    /// on Unix), replacing any file there.
    pub fn write_to_file(&self, path: impl AsRef<Path>) -> io::Result<()> {
        write_atomically(path.as_ref(), self.to_json().as_bytes())
    }
}

fn write_atomically(path: &Path, data: &[u8]) -> io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file name"))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let (temp, file) = create_temp(&dir, name)?;
    let result = (|| {
        let mut file = file;
        file.write_all(data)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&temp, path)?;
        // The rename is durable once the directory is.
        #[cfg(unix)]
        File::open(&dir)?.sync_all()?;
        Ok(())
    })();
    if result.is_err() {
        // Best effort: the write's own error is the one to report.
        let _ = fs::remove_file(&temp);
    }
    result
}

/// Creates a new, private temporary file beside the target.
fn create_temp(dir: &Path, name: &std::ffi::OsStr) -> io::Result<(PathBuf, File)> {
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
