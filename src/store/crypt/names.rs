//! Name encryption: each path component is encrypted deterministically
//! with AES-SIV (RFC 5297, the `aes-siv` crate), with the parent
//! directory's plaintext path as associated data, then written in
//! lowercase unpadded base32 (RFC 4648), so one lookup stays one store
//! operation, equal names in different directories look unrelated, and
//! the stored names survive case-insensitive filesystems.
//!
//! Before encryption a name is padded to a multiple of 16 bytes (PKCS#7),
//! as gocryptfs pads, so a stored name shows its length only to within
//! 16 bytes.
//!
//! **Long names.** A name of `n` bytes is stored in
//! `ceil((16 + pad16(n)) × 8 / 5)` characters. Instead of gocryptfs's
//! hashed long names (a second file per long name, which would make every
//! create and rename of one a two-file operation that can be torn), an
//! encrypted store lowers the component limit to [`MAX_NAME_BYTES`] (127
//! bytes: the longest whose stored form fits every store's 255-byte
//! limit), and refuses a longer name with a reason saying so.

use aes_siv::KeyInit;
use aes_siv::siv::Aes256Siv;
use std::sync::Mutex;
use zeroize::Zeroizing;

use crate::path::MemoryPath;

/// The longest name (one component, in bytes) an encrypted store holds.
pub const MAX_NAME_BYTES: usize = 127;

/// Why a longer name is refused (shown to the model).
pub(crate) const TOO_LONG: &str = "a name in an encrypted store is at most 127 bytes (its encrypted form must fit the 255-byte name limit)";

/// The deterministic name cipher of one store.
pub(crate) struct NameCipher {
    key: Zeroizing<[u8; 64]>,
    siv: Mutex<Aes256Siv>,
    /// What this key already encrypted or decrypted (pure functions of
    /// their inputs, so remembering them changes no answer).
    pub(crate) memo: super::cache::NameMemo,
}

impl NameCipher {
    /// The name cipher for the store's 64-byte name key.
    pub(crate) fn new(key: Zeroizing<[u8; 64]>) -> NameCipher {
        let siv = Aes256Siv::new((&*key).into());
        NameCipher {
            key,
            siv: Mutex::new(siv),
            memo: super::cache::NameMemo::default(),
        }
    }

    /// A fresh random name key, for a new store.
    pub(crate) fn generate_key() -> Result<Zeroizing<[u8; 64]>, super::CryptError> {
        let mut key = Zeroizing::new([0u8; 64]);
        getrandom::getrandom(&mut key[..]).map_err(|e| super::CryptError::Random(e.to_string()))?;
        Ok(key)
    }

    /// The raw name key (to wrap it in the key record).
    pub(crate) fn key_bytes(&self) -> &[u8; 64] {
        &self.key
    }

    /// The stored name of `name` in the directory `parent`; `None` if the
    /// name is over [`MAX_NAME_BYTES`].
    pub(crate) fn encrypt(&self, parent: &MemoryPath, name: &str) -> Option<String> {
        if name.len() > MAX_NAME_BYTES {
            return None;
        }
        let pad = 16 - name.len() % 16;
        let mut padded = Zeroizing::new(Vec::with_capacity(name.len() + pad));
        padded.extend_from_slice(name.as_bytes());
        padded.extend(std::iter::repeat_n(pad as u8, pad));
        let context = parent.normalized();
        let mut siv = self
            .siv
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let sealed = siv.encrypt([context.as_bytes()], &padded).ok()?;
        Some(base32_encode(&sealed))
    }

    /// The plaintext of a stored name in `parent`; `None` if it is not one
    /// this key made there (tampered, moved from another directory, or
    /// not an encrypted name at all).
    pub(crate) fn decrypt(&self, parent: &MemoryPath, stored: &str) -> Option<String> {
        let sealed = base32_decode(stored)?;
        let context = parent.normalized();
        let mut siv = self
            .siv
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut padded = siv.decrypt([context.as_bytes()], &sealed).ok()?;
        let pad = *padded.last()? as usize;
        if pad == 0 || pad > 16 || pad > padded.len() {
            return None;
        }
        padded.truncate(padded.len() - pad);
        String::from_utf8(padded).ok()
    }
}

const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

fn base32_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(5) * 8);
    let mut buffer: u32 = 0;
    let mut bits = 0;
    for &byte in data {
        buffer = (buffer << 8) | u32::from(byte);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(ALPHABET[((buffer >> bits) & 31) as usize] as char);
        }
    }
    if bits > 0 {
        out.push(ALPHABET[((buffer << (5 - bits)) & 31) as usize] as char);
    }
    out
}

fn base32_decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 5 / 8);
    let mut buffer: u32 = 0;
    let mut bits = 0;
    for c in text.bytes() {
        let value = match c {
            b'a'..=b'z' => u32::from(c - b'a'),
            b'2'..=b'7' => u32::from(c - b'2') + 26,
            _ => return None,
        };
        buffer = (buffer << 5) | value;
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
        }
    }
    // Leftover bits must be zero padding, so each byte string has one
    // spelling.
    if bits >= 5 || buffer & ((1 << bits) - 1) != 0 {
        return None;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base32_round_trips_and_has_one_spelling() {
        for n in 0..40 {
            let data: Vec<u8> = (0..n).map(|i| (i * 37 + 11) as u8).collect();
            let text = base32_encode(&data);
            assert_eq!(base32_decode(&text), Some(data));
        }
        assert_eq!(base32_decode("b"), None);
        assert_eq!(base32_decode("ab"), None, "non-zero leftover bits");
        assert_eq!(base32_decode("A"), None);
    }

    #[test]
    fn the_longest_name_fits_255_bytes() {
        let cipher = NameCipher::new(Zeroizing::new([7u8; 64]));
        let root = MemoryPath::root();
        let long = "n".repeat(MAX_NAME_BYTES);
        let stored = cipher.encrypt(&root, &long).expect("fits");
        assert!(stored.len() <= 255, "{}", stored.len());
        assert_eq!(
            cipher.decrypt(&root, &stored).as_deref(),
            Some(long.as_str())
        );
        assert!(
            cipher
                .encrypt(&root, &"n".repeat(MAX_NAME_BYTES + 1))
                .is_none()
        );
    }

    #[test]
    fn a_name_is_bound_to_its_parent() {
        let cipher = NameCipher::new(Zeroizing::new([7u8; 64]));
        let a = MemoryPath::parse("/memories/a").expect("path");
        let b = MemoryPath::parse("/memories/b").expect("path");
        let stored = cipher.encrypt(&a, "notes.md").expect("fits");
        assert_ne!(Some(stored.clone()), cipher.encrypt(&b, "notes.md"));
        assert_eq!(cipher.decrypt(&b, &stored), None);
    }
}
