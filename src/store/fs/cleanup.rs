//! The store's temporary files: how they are named, and the sweep at open
//! that removes those a crashed writer left behind.
//!
//! A write first goes to a temporary file in the target's directory, named
//! `.claude-memory.tmp.{pid}.{n}` (under the reserved prefix, so no memory
//! path can name it and listings never show it). The writer removes it on
//! failure; only a crash leaves one, and the next open removes it.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};

use rustix::fs::FileType;
use rustix::io::Errno;

use super::sys::{self, MAX_DEPTH};

const TEMP_PREFIX: &str = ".claude-memory.tmp.";

/// The name of this process's `n`th temporary file.
pub(super) fn temp_name(n: u64) -> String {
    format!("{TEMP_PREFIX}{}.{n}", std::process::id())
}

/// Removes temporary files a crashed writer left, anywhere below `dir`.
/// Runs under the store lock, so no live writer's file is touched.
pub(super) fn remove_temp_files(dir: BorrowedFd<'_>, depth: usize) -> io::Result<()> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    let mut subdirs = Vec::new();
    sys::for_each_entry(dir, |name, file_type| {
        match file_type {
            FileType::Directory => subdirs.push(name.to_owned()),
            _ if name.to_bytes().starts_with(TEMP_PREFIX.as_bytes()) => {
                match sys::unlink(dir, name) {
                    // Removed, or removed by someone else meanwhile.
                    Ok(()) | Err(Errno::NOENT) => {}
                    Err(e) => return Err(e),
                }
            }
            _ => {}
        }
        Ok(())
    })?;
    for name in subdirs {
        // A directory that cannot be opened (gone, swapped for a link,
        // unreadable) holds nothing this sweep can reach: skip it.
        if let Ok(sub) = sys::open_dir(dir, name.as_c_str()) {
            remove_temp_files(sub.as_fd(), depth + 1)?;
        }
    }
    Ok(())
}
