//! Whole-subtree jobs on the host filesystem (remove a tree, measure the
//! deepest path below a directory) with no
//! recursion and at most two directory handles open at once, whatever the
//! depth: the walk keeps the names still to visit on a heap stack and
//! climbs back with `..`, checking by device and inode that `..` is the
//! directory it came from (a tree moved by an outsider mid-walk ends the
//! walk with an error instead of leading it elsewhere).

use std::ffi::CString;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{self as rfs, FileType};
use rustix::io::Errno;

use super::sys;

/// One directory on the walk's path: its identity, its name in its parent
/// and the children still to visit.
struct Frame {
    id: (u64, u64),
    name: CString,
    /// Bytes of the path from the walk's top to this directory
    /// (`/a/b` for `top/a/b`).
    len: usize,
    subdirs: Vec<CString>,
}

/// What the walk tells its visitor.
pub(super) enum Visit<'a> {
    /// A non-directory entry `name` in `dir`, whose path below the top is
    /// `len` bytes long (counting a `/` before each name).
    Entry {
        dir: BorrowedFd<'a>,
        name: &'a CString,
        len: usize,
    },
    /// A directory's children are all visited; `dir` is its parent and
    /// `name` its name there (post-order: remove it now if wanted).
    Leave {
        parent: BorrowedFd<'a>,
        name: &'a CString,
    },
}

fn identity(fd: BorrowedFd<'_>) -> Result<(u64, u64), Errno> {
    let stat = rfs::fstat(fd)?;
    #[allow(clippy::useless_conversion, clippy::unnecessary_cast)]
    Ok((stat.st_dev as u64, stat.st_ino as u64))
}

/// Lists `dir`: its subdirectories (returned) and, through `visit`, every
/// other entry.
fn scan(
    dir: BorrowedFd<'_>,
    len: usize,
    visit: &mut dyn FnMut(Visit<'_>) -> Result<(), Errno>,
) -> Result<Vec<CString>, Errno> {
    let mut subdirs = Vec::new();
    let mut others = Vec::new();
    sys::for_each_entry(dir, |name, file_type| {
        if file_type == FileType::Directory {
            subdirs.push(name.to_owned());
        } else {
            others.push(name.to_owned());
        }
        Ok(())
    })?;
    for name in &others {
        visit(Visit::Entry {
            dir,
            name,
            len: len + 1 + name.as_bytes().len(),
        })?;
    }
    Ok(subdirs)
}

/// Walks every entry below `top` (an open directory), depth first, with at
/// most two directory handles open at a time. A subdirectory gone
/// meanwhile is skipped, one swapped for a link or a file is visited as an
/// entry, and any other failure to open one is an error.
///
/// Directories are reported as [`Visit::Leave`] after their contents, with
/// their parent's handle, and also measured: `deepest` gets every
/// directory's path length below the top.
pub(super) fn walk(
    top: OwnedFd,
    deepest: &mut usize,
    visit: &mut dyn FnMut(Visit<'_>) -> Result<(), Errno>,
) -> Result<(), Errno> {
    let mut cur = top;
    let top_subdirs = scan(cur.as_fd(), 0, visit)?;
    let mut stack = vec![Frame {
        id: identity(cur.as_fd())?,
        name: CString::default(),
        len: 0,
        subdirs: top_subdirs,
    }];
    loop {
        let Some(frame) = stack.last_mut() else {
            return Ok(());
        };
        if let Some(name) = frame.subdirs.pop() {
            let len = frame.len + 1 + name.as_bytes().len();
            *deepest = (*deepest).max(len);
            let child = match sys::open_dir(&cur, name.as_c_str()) {
                Ok(fd) => fd,
                // Gone meanwhile: nothing below it to visit.
                Err(Errno::NOENT) => continue,
                // No longer a directory (swapped for a link or a file):
                // the visitor sees it as an entry.
                Err(Errno::LOOP) | Err(Errno::NOTDIR) => {
                    visit(Visit::Entry {
                        dir: cur.as_fd(),
                        name: &name,
                        len,
                    })?;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let subdirs = scan(child.as_fd(), len, visit)?;
            stack.push(Frame {
                id: identity(child.as_fd())?,
                name,
                len,
                subdirs,
            });
            cur = child;
            continue;
        }
        // Every child of the top frame is done.
        let Some(done) = stack.pop() else {
            return Ok(());
        };
        let Some(parent_frame) = stack.last() else {
            return Ok(());
        };
        let parent = sys::open_dir(&cur, c"..")?;
        if identity(parent.as_fd())? != parent_frame.id {
            // Moved by someone else while walked: stop rather than act on
            // a directory this walk did not come from.
            return Err(Errno::STALE);
        }
        cur = parent;
        visit(Visit::Leave {
            parent: cur.as_fd(),
            name: &done.name,
        })?;
    }
}

/// Removes the directory `name` in `parent` and everything below it,
/// through handles only (at most three open at once): a directory swapped
/// for a link mid-way is unlinked, never followed.
pub(super) fn remove_tree(parent: BorrowedFd<'_>, name: &str) -> Result<(), Errno> {
    let top = match sys::open_dir(parent, name) {
        Ok(fd) => fd,
        // No longer a directory (swapped for a link or a file): remove
        // the entry itself, without following it.
        Err(Errno::LOOP) | Err(Errno::NOTDIR) => return sys::unlink(parent, name),
        // Already gone: nothing left to remove.
        Err(Errno::NOENT) => return Ok(()),
        Err(e) => return Err(e),
    };
    let mut deepest = 0;
    walk(top, &mut deepest, &mut |step| {
        let result = match step {
            Visit::Entry { dir, name, .. } => sys::unlink(dir, name.as_c_str()),
            Visit::Leave { parent, name } => sys::remove_dir(parent, name.as_c_str()),
        };
        match result {
            // Removed, or removed by someone else meanwhile.
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(e),
        }
    })?;
    match sys::remove_dir(parent, name) {
        // Removed, or removed by someone else meanwhile.
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The longest path below the directory `name` in `parent`, in bytes
/// (`/a/b` for `name/a/b`); 0 for a non-directory.
pub(super) fn deepest_below(parent: BorrowedFd<'_>, name: &str) -> Result<usize, Errno> {
    let top = match sys::open_dir(parent, name) {
        Ok(fd) => fd,
        Err(Errno::LOOP) | Err(Errno::NOTDIR) => return Ok(0),
        Err(e) => return Err(e),
    };
    let mut dirs = 0;
    let mut others = 0;
    walk(top, &mut dirs, &mut |step| {
        if let Visit::Entry { len, name, .. } = step
            && !name.to_str().is_ok_and(super::cleanup::is_temp)
        {
            others = others.max(len);
        }
        Ok(())
    })?;
    Ok(dirs.max(others))
}
