//! A passphrase, turned into a key by Argon2id (memory-hard, RFC 9106),
//! with a salt and cost parameters stored with the store so the same
//! passphrase gives the same key on every machine.

use std::fmt;

use argon2::{Algorithm, Argon2, Params, Version};
use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use super::CryptError;
use super::key::{KEY_BYTES, Key};

/// A passphrase, wiped from memory on drop; its `Debug` shows nothing.
#[derive(Clone)]
pub struct Passphrase(Zeroizing<String>);

impl fmt::Debug for Passphrase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Passphrase(..)")
    }
}

/// The largest passphrase file read (its first line is the passphrase).
pub const MAX_FILE_BYTES: u64 = 4096;

impl Passphrase {
    /// Wraps a passphrase. An empty one is refused when the store opens.
    pub fn new(text: impl Into<String>) -> Passphrase {
        Passphrase(Zeroizing::new(text.into()))
    }

    /// Reads a passphrase file: its first line, without the line ending
    /// (so `echo secret > file` works).
    ///
    /// Held to a key file's rules: a regular file (not a FIFO or a device,
    /// which could block or never end) of at most [`MAX_FILE_BYTES`], with
    /// no group or other access.
    pub fn from_file(path: impl AsRef<std::path::Path>) -> Result<Passphrase, CryptError> {
        use std::io::Read;
        let path = path.as_ref();
        let fail = |reason: String| CryptError::PassphraseFile {
            path: path.display().to_string(),
            reason,
        };
        let meta = super::key::secret_file(path).map_err(fail)?;
        if !meta.is_file() || meta.len() > MAX_FILE_BYTES {
            return Err(fail(format!(
                "a passphrase file is a regular file of at most {MAX_FILE_BYTES} bytes"
            )));
        }
        let mut bytes = Zeroizing::new(Vec::new());
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
            .map_err(|e| fail(format!("it cannot be read ({e})")))?;
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(fail(format!(
                "a passphrase file is a regular file of at most {MAX_FILE_BYTES} bytes"
            )));
        }
        let text =
            std::str::from_utf8(&bytes).map_err(|_| fail("it is not UTF-8 text".to_owned()))?;
        let line = text.lines().next().unwrap_or("");
        Ok(Passphrase::new(line))
    }

    /// The key this passphrase gives with `params`.
    pub(crate) fn derive(&self, params: &KdfParams) -> Result<Key, CryptError> {
        if self.0.is_empty() {
            return Err(CryptError::EmptyPassphrase);
        }
        let salt = super::record::hex_decode(&params.salt).ok_or(CryptError::Record(
            "the key record's Argon2id salt is not hex",
        ))?;
        let argon = Params::new(
            params.m_cost_kib,
            params.t_cost,
            params.p_cost,
            Some(KEY_BYTES),
        )
        .map_err(|_| CryptError::Record("the key record's Argon2id parameters are invalid"))?;
        let mut out = Zeroizing::new([0u8; KEY_BYTES]);
        Argon2::new(Algorithm::Argon2id, Version::V0x13, argon)
            .hash_password_into(self.0.as_bytes(), &salt, &mut out[..])
            .map_err(|_| CryptError::Record("Argon2id refused the passphrase or salt"))?;
        Ok(Key::from_bytes(*out))
    }
}

/// Argon2id's salt and costs, kept in the store's key record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KdfParams {
    /// Always `argon2id`.
    pub algorithm: String,
    /// 16 random bytes, hex.
    pub salt: String,
    /// Memory, in KiB.
    pub m_cost_kib: u32,
    /// Passes.
    pub t_cost: u32,
    /// Lanes.
    pub p_cost: u32,
}

impl KdfParams {
    /// Fresh parameters: a random salt, 64 MiB, 3 passes, 1 lane (OWASP's
    /// second Argon2id recommendation; about a quarter second on a laptop).
    pub fn generate() -> Result<KdfParams, CryptError> {
        Self::generate_with(64 * 1024, 3, 1)
    }

    /// Fresh parameters with the given costs (tests use small ones).
    pub fn generate_with(
        m_cost_kib: u32,
        t_cost: u32,
        p_cost: u32,
    ) -> Result<KdfParams, CryptError> {
        let mut salt = [0u8; 16];
        getrandom::getrandom(&mut salt).map_err(|e| CryptError::Random(e.to_string()))?;
        Ok(KdfParams {
            algorithm: "argon2id".to_owned(),
            salt: super::record::hex_encode(&salt),
            m_cost_kib,
            t_cost,
            p_cost,
        })
    }
}
