//! The store's temporary files: how they are named, and the sweep at open
//! that removes those a crashed writer left behind.
//!
//! A write first goes to a temporary file in the target's directory, named
//! `.claude-memory.tmp.{pid}.{n}` (under the reserved prefix, so no memory
//! path can name it and listings never show it). The writer removes it on
//! failure; only a crash leaves one, and the next open removes it.

use std::io;
use std::os::fd::BorrowedFd;

use rustix::io::Errno;

use super::sys;
use super::tree::{self, Visit};

const TEMP_PREFIX: &str = ".claude-memory.tmp.";

/// The name of this process's `n`th temporary file.
pub(super) fn temp_name(n: u64) -> String {
    format!("{TEMP_PREFIX}{}.{n}", std::process::id())
}

/// Removes temporary files a crashed writer left, anywhere below `dir`.
/// Runs under the store lock, so no live writer's file is touched. No
/// recursion, and at most a few directory handles open at once, however
/// deep the tree (see [`tree::walk`]).
pub(super) fn remove_temp_files(dir: BorrowedFd<'_>) -> io::Result<()> {
    let top = sys::dup_dir(dir)?;
    let mut deepest = 0;
    tree::walk(top, true, &mut deepest, &mut |step| {
        if let Visit::Entry { dir, name, .. } = step
            && name.to_bytes().starts_with(TEMP_PREFIX.as_bytes())
        {
            match sys::unlink(dir, name.as_c_str()) {
                // Removed, or removed by someone else meanwhile.
                Ok(()) | Err(Errno::NOENT) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    })?;
    Ok(())
}
