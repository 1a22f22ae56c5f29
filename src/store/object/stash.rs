//! The one listing a directory view's lookup hands to its walk.
//!
//! A view of a directory asks the store to `open` the path (a GET: is it
//! a file?), then to `list` it. On a bucket the GET's miss is followed by
//! a delimited LIST to learn whether a directory is there; that LIST is
//! also the listing the walk asks for next, so it is kept here and handed
//! to the very next `list` of the same directory on the same thread
//! (within a second), instead of being sent again: a view of a directory
//! costs two requests, not three. Any other primitive on the thread drops
//! it first, so a listing is never served after a write: what a `list`
//! returns is what the bucket held during the same tool call.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use object_store::path::Path;

use super::listing::Children;

/// How long a kept listing may wait for its `list`.
const FRESH: Duration = Duration::from_secs(1);

struct Kept {
    /// Which store (its I/O thread's identity) listed it.
    store: u64,
    key: Path,
    at: Instant,
    children: Children,
}

thread_local! {
    static KEPT: RefCell<Option<Kept>> = const { RefCell::new(None) };
}

/// Keeps `children`, the listing of `key` by store `store`.
pub(super) fn keep(store: u64, key: Path, children: Children) {
    KEPT.with(|k| {
        *k.borrow_mut() = Some(Kept {
            store,
            key,
            at: Instant::now(),
            children,
        });
    });
}

/// The kept listing of `key` by `store`, if it is the one kept and
/// fresh; whatever was kept is dropped either way.
pub(super) fn take(store: u64, key: &Path) -> Option<Children> {
    let kept = KEPT.with(|k| k.borrow_mut().take())?;
    (kept.store == store && kept.key == *key && kept.at.elapsed() < FRESH).then_some(kept.children)
}

/// Drops any kept listing (every primitive but `list` calls this first).
pub(super) fn clear() {
    KEPT.with(|k| {
        k.borrow_mut().take();
    });
}
