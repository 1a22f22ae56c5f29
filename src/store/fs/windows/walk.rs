//! Walking a directory tree of the Windows filesystem store with every
//! directory on the way pinned, for rename's depth check.

use std::io;
use std::path::Path;

use super::host::{self, Dir, Pinned};

/// Visits every entry below the (pinned) directory `top`, depth first,
/// without recursion: each directory is pinned while its entries are
/// visited, and so are all those above it (their frames are on the stack).
/// Reparse points are visited as entries, never entered. Holds one handle
/// per level of depth (at most about 500: a memory path is at most 1,024
/// bytes).
pub(super) fn walk(
    top: &Path,
    visit: &mut dyn FnMut(&Path, &std::ffi::OsStr, &std::fs::Metadata) -> io::Result<()>,
) -> io::Result<()> {
    struct Frame {
        dir: Dir,
        subdirs: Vec<std::ffi::OsString>,
    }
    let mut scan = |dir: &Path| -> io::Result<Vec<std::ffi::OsString>> {
        let mut subdirs = Vec::new();
        host::for_each_entry(dir, |name, meta| {
            if meta.is_dir() && !host::is_reparse(meta) {
                subdirs.push(name.to_owned());
            }
            visit(dir, name, meta)
        })?;
        Ok(subdirs)
    };
    let subdirs = scan(top)?;
    let mut stack = vec![Frame {
        dir: Dir::root(top),
        subdirs,
    }];
    while let Some(frame) = stack.last_mut() {
        let Some(name) = frame.subdirs.pop() else {
            stack.pop();
            continue;
        };
        let Pinned::Dir(pin) = host::pin_dir(&frame.dir, &name)? else {
            continue; // gone, or swapped for a file or a link meanwhile
        };
        let mut dir = Dir::root(&frame.dir.path);
        dir.push(&name, pin);
        let subdirs = scan(&dir.path)?;
        stack.push(Frame { dir, subdirs });
    }
    Ok(())
}

/// The longest path below the directory at `top` (pinned by the caller),
/// in bytes (`/a/b` for `top/a/b`).
pub(super) fn deepest_below(top: &Path) -> io::Result<usize> {
    let base = top.as_os_str().len();
    let mut deepest = 0;
    walk(top, &mut |dir, name, _| {
        // A crash's temporary file is no entry: it never moves anywhere.
        if name
            .to_str()
            .is_some_and(|n| n.starts_with(super::TEMP_PREFIX))
        {
            return Ok(());
        }
        // Host path lengths count UTF-16 as WTF-8: equal to the UTF-8 of
        // names a memory path can hold.
        let len = dir.as_os_str().len() - base + 1 + name.len();
        deepest = deepest.max(len);
        Ok(())
    })?;
    Ok(deepest)
}
