//! The one listing a directory view's lookup hands to its walk.
//!
//! A view of a directory asks the store to `open` the path (a GET: is it
//! a file?), then to `list` it. On a bucket the GET's miss is followed by
//! a delimited LIST to learn whether a directory is there; that LIST is
//! also the listing the walk asks for next, so it is kept in the store handle and
//! handed to the very next `list` of the same directory on the same
//! thread (within a second), instead of being sent again: a view of a directory
//! costs two requests, not three. Any other primitive on the thread drops
//! it first, so a listing is never served after a write: what a `list`
//! returns is what the bucket held during the same tool call.

use std::sync::{Mutex, PoisonError};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use object_store::path::Path;

use super::listing::Children;

/// How long a kept listing may wait for its `list`.
const FRESH: Duration = Duration::from_secs(1);

struct Kept {
    /// The thread whose tool call listed it.
    thread: ThreadId,
    key: Path,
    at: Instant,
    children: Children,
}

/// A store handle's kept listing (shared by its clones; one at a time).
#[derive(Default)]
pub(super) struct Stash(Mutex<Option<Kept>>);

impl Stash {
    /// Keeps `children`, the listing of `key` by this thread.
    pub(super) fn keep(&self, key: Path, children: Children) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(Kept {
            thread: std::thread::current().id(),
            key,
            at: Instant::now(),
            children,
        });
    }

    /// The kept listing of `key`, if this thread kept it and it is
    /// fresh; this thread's kept listing is dropped either way.
    pub(super) fn take(&self, key: &Path) -> Option<Children> {
        let kept = self.take_own()?;
        (kept.key == *key && kept.at.elapsed() < FRESH).then_some(kept.children)
    }

    /// Drops this thread's kept listing (every primitive but `list` calls
    /// this first).
    pub(super) fn clear(&self) {
        self.take_own();
    }

    fn take_own(&self) -> Option<Kept> {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.as_ref()?.thread != std::thread::current().id() {
            return None;
        }
        kept.take()
    }
}
