//! Encrypted memories at rest, over any store (feature `encryption`).
//!
//! [`EncryptedStore`] wraps any [`MemoryStore`](crate::MemoryStore) and
//! keeps in it only ciphertext: file contents sealed with
//! XChaCha20-Poly1305 (a fresh nonce per seal, the key id in the header,
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
//! - [`SealedLog`]: a history log whose versions stay encrypted.

mod cache;
pub mod key;
mod log;
mod moves;
mod names;
pub mod passphrase;
mod record;
mod rekey;
mod seal;
mod store;

pub use key::{KEY_BYTES, Key, KeyId, Keyring};
pub use log::{LogSealer, SealedLog};
pub use names::MAX_NAME_BYTES;
pub use passphrase::{KdfParams, Passphrase};
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
    /// Encryption was asked for over a store that already holds
    /// (unencrypted) files.
    #[error(
        "the store already holds unencrypted files: encrypt into an empty store (export, then import with a key)"
    )]
    NotEmpty,
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
