//! Conditional writes and the update loop (SPEC §6, §7).
//!
//! - `create` is `PutMode::Create` (`If-None-Match: *`): of two creators,
//!   one wins and the other gets "already exists".
//! - An edit reads the object, changes it and writes it back with
//!   `PutMode::Update`, conditional on the ETag it read (and on GCS the
//!   generation: object_store's `UpdateVersion` carries both). A
//!   precondition failure means another writer got there first: the loop
//!   backs off and recomputes the edit on the fresh content, so no update
//!   is ever lost.
//! - A [`Version`] is a hash of the ETag and version the service gave, so
//!   `write(…, WriteMode::Update(v))` from outside the loop compares it
//!   with a HEAD and writes conditional on that ETag: a change between the
//!   HEAD and the PUT fails the PUT.

use object_store::{ObjectMeta, PutResult, UpdateVersion};
use sha2::{Digest, Sha256};

use crate::store::Version;

/// The store-level version of an object's ETag and version.
pub(super) fn version_of(e_tag: Option<&str>, version: Option<&str>) -> Version {
    let mut hash = Sha256::new();
    hash.update(e_tag.unwrap_or("").as_bytes());
    hash.update([0]);
    hash.update(version.unwrap_or("").as_bytes());
    let digest = hash.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    Version::new(u128::from_be_bytes(bytes))
}

/// The version of what a HEAD or GET saw.
pub(super) fn meta_version(meta: &ObjectMeta) -> Version {
    version_of(meta.e_tag.as_deref(), meta.version.as_deref())
}

/// The version of what a PUT wrote.
pub(super) fn put_version(put: &PutResult) -> Version {
    version_of(put.e_tag.as_deref(), put.version.as_deref())
}

/// The condition for writing over exactly what `meta` describes.
pub(super) fn condition(meta: &ObjectMeta) -> UpdateVersion {
    UpdateVersion {
        e_tag: meta.e_tag.clone(),
        version: meta.version.clone(),
    }
}

/// The pause between tries of a contended edit: from 5 ms doubling to
/// 200 ms, so contending writers on several machines spread out (a round
/// trip to a bucket is 10-50 ms, far above a local store's).
pub(super) const BACKOFF: crate::store::retry::Backoff = crate::store::retry::Backoff {
    first: std::time::Duration::from_millis(5),
    cap: std::time::Duration::from_millis(200),
};

/// Sleeps before retry `attempt` of a contended edit (see [`BACKOFF`]).
pub(super) fn backoff(attempt: u32) {
    BACKOFF.pause(attempt);
}

/// How many times an edit is recomputed after a conflict: many, since
/// several machines may edit one file (4 writers x 300 edits in the test).
pub(super) const ATTEMPTS: u32 = 64;
