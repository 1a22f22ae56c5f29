//! Encrypted memories at rest, over any store (feature `encryption`).
//!
//! [`EncryptedStore`] wraps any [`MemoryStore`](crate::MemoryStore) and
//! keeps in it only ciphertext: file contents sealed with AES-256-GCM
//! where the CPU has AES instructions and XChaCha20-Poly1305 elsewhere
//! (a fresh nonce per seal, the format and key id in the header,
//! the file's path as associated data), names encrypted with AES-SIV
//! (deterministic, the parent directory as context), and one key record
//! that refuses the wrong key at open. Everything cryptographic is
//! RustCrypto's; nothing here is hand-written cryptography.
//!
//! - [`key`]: master keys, key ids, key files, per-tenant keys, the ring.
//! - [`passphrase`]: Argon2id from a passphrase, parameters in the store.
//! - `seal`: content sealing. `names`: name encryption and the long-name
//!   limit ([`MAX_NAME_BYTES`]). `record`: the key record.
//! - `moves`: journalled `rename`. [`rekey`](EncryptedStore::rekey):
//!   rotation, resumable after a kill at any point.
//! - [`SealedLog`](crate::history::SealedLog): a history log whose
//!   versions stay encrypted.

mod cache;
pub mod key;
mod moves;
mod names;
mod outer;
pub mod passphrase;
mod read;
pub(crate) mod record;
mod rekey;
mod rotation;
pub(crate) mod seal;
pub(crate) mod store;
mod store_impl;

pub use key::{KEY_BYTES, Key, KeyId, Keyring};
pub use names::MAX_NAME_BYTES;
pub use passphrase::{KdfParams, Passphrase};
pub use read::MAX_FILE_BYTES;
pub use rekey::RekeyReport;
pub use seal::OVERHEAD;
pub use store::{EncryptedStore, is_encrypted};

use crate::store::StoreError;

/// Why an encrypted store could not be opened, or a key used.
///
/// These are for the operator (the CLI prints them); none reaches a model,
/// which only ever sees SPEC §4's answers.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CryptError {
    /// A key or passphrase file that cannot be used.
    #[error("the key file {path} cannot be used: {reason}")]
    KeyFile {
        /// The host path as given.
        path: String,
        /// Why.
        reason: String,
    },
    /// A passphrase file that cannot be used (held to a key file's rules:
    /// a regular file, no group or other access, at most
    /// [`passphrase::MAX_FILE_BYTES`]).
    #[error("the passphrase file {path} cannot be used: {reason}")]
    PassphraseFile {
        /// The host path as given.
        path: String,
        /// Why.
        reason: String,
    },
    /// `keygen` over a file that exists: a key file is never replaced
    /// (the key in it may be the only one that opens a store).
    #[error(
        "refusing to overwrite {path}: it already exists (a key file is never replaced; give a new name)"
    )]
    KeyFileExists {
        /// The host path as given.
        path: String,
    },
    /// None of the keys given is one the store was encrypted with.
    #[error(
        "wrong key: this store was encrypted with key {}, and the key given is {}",
        join(known),
        join(given)
    )]
    WrongKey {
        /// The ids of the keys given.
        given: Vec<KeyId>,
        /// The ids the store's key record lists.
        known: Vec<KeyId>,
    },
    /// No key at all.
    #[error("no key given")]
    NoKey,
    /// An empty passphrase.
    #[error("the passphrase is empty")]
    EmptyPassphrase,
    /// The operating system's random generator failed.
    #[error("no randomness: {0}")]
    Random(String),
    /// The key record (or a journal) is damaged or unreadable.
    #[error("{0}")]
    Record(&'static str),
    /// A key was given for a store that holds unencrypted files and no
    /// key record: it is not an encrypted store, and cannot become one in
    /// place.
    #[error(
        "the store holds unencrypted files and is not encrypted: open it without a key, or encrypt into an empty store (export, then import with a key)"
    )]
    NotEmpty,
    /// Encryption was asked for over a store whose directories hold
    /// encrypted stores' key records: the base of per-tenant stores,
    /// opened without naming the tenant.
    #[error(
        "this store holds other encrypted stores in its directories (a base of tenants' stores): open one tenant's store (with the CLI, --tenant is probably missing)"
    )]
    TenantBase,
    /// A read-only open of a store that has no key record yet (an
    /// encrypted store that was never written, such as a tenant with no
    /// memories): nothing can be read, and the record cannot be made.
    #[error(
        "no encrypted store here yet (no key record): nothing to read; it is made by the first write (with the CLI, check --store and --tenant)"
    )]
    Uninitialised,
    /// Another process is rotating this store to another key, or has
    /// retired the key this process writes with: writing now would seal
    /// a file under a key the store is dropping.
    #[error("the store's keys were rotated by another process (rekey): reopen it with the new key")]
    Rotated,
    /// The wrapped store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn join(ids: &[KeyId]) -> String {
    if ids.is_empty() {
        return "none".to_owned();
    }
    ids.iter()
        .map(|id| id.to_hex())
        .collect::<Vec<_>>()
        .join(" or ")
}
