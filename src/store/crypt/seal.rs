//! Content sealing: an AEAD with a fresh random 24-byte nonce per seal,
//! the key id in the header, and the header and the file's plaintext path
//! as associated data, so a flipped bit, a truncation, another key or a
//! file moved to another path all fail the tag.
//!
//! Two formats, told apart by the header's first byte (which is itself
//! authenticated, as part of the header):
//!
//! - `1`: XChaCha20-Poly1305, written where the CPU has no AES
//!   instructions (constant time in software, and fast there);
//! - `2`: AES-256-GCM with a 192-bit nonce (GCM derives its counter block
//!   from a nonce of any length through GHASH, as gocryptfs uses 128-bit
//!   ones), written where the CPU has AES and carry-less multiply
//!   (x86 AES-NI and PCLMULQDQ): a 2 KB open took 1.7 us against 3.3 us
//!   for format 1 on the development machine, which was the whole of the
//!   encrypted view's cost over the plain one.
//!
//! Every store reads both, whichever machine wrote a file. Each format has
//! its own subkey of the master key. Layout (a fixed [`OVERHEAD`] of 49
//! bytes in both, so a listing's sizes are the plaintext's without opening
//! a file):
//!
//! ```text
//! [1: format][8: key id][24: nonce][len + 16: ciphertext and tag]
//! ```

use aes_gcm::aes::Aes256;
use aes_gcm::{AesGcm, aead::consts::U24};
use chacha20poly1305::aead::{AeadInPlace, KeyInit};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

use super::CryptError;
use super::key::{KEY_ID_BYTES, Key, KeyId};

/// The format byte of an XChaCha20-Poly1305 seal.
const XCHACHA: u8 = 1;
/// The format byte of an AES-256-GCM seal (192-bit nonce).
const AES_GCM: u8 = 2;
const NONCE_BYTES: usize = 24;
const TAG_BYTES: usize = 16;
pub(crate) const HEADER: usize = 1 + KEY_ID_BYTES + NONCE_BYTES;
/// Bytes a seal adds to its plaintext.
pub const OVERHEAD: u64 = (HEADER + TAG_BYTES) as u64;

/// AES-256-GCM with the seal's 24-byte nonce.
type Aes256Gcm24 = AesGcm<Aes256, U24>;

#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
cpufeatures::new!(aes_and_clmul, "aes", "pclmulqdq");

/// The format new seals are written in on this CPU.
fn write_format() -> u8 {
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    if aes_and_clmul::get() {
        return AES_GCM;
    }
    XCHACHA
}

/// One master key's content ciphers (one per format), with its id.
pub(crate) struct Sealer {
    id: KeyId,
    xchacha: XChaCha20Poly1305,
    gcm: Aes256Gcm24,
    format: u8,
}

impl Sealer {
    pub(crate) fn new(key: &Key) -> Sealer {
        Self::with_format(key, write_format())
    }

    /// A sealer that writes `format` (both are always read): for tests of
    /// the format a machine without AES instructions writes.
    fn with_format(key: &Key, format: u8) -> Sealer {
        let xchacha = key.subkey::<32>(b"claude-memory content v1");
        let gcm = key.subkey::<32>(b"claude-memory content v2 aes-256-gcm");
        Sealer {
            id: key.id(),
            xchacha: XChaCha20Poly1305::new((&*xchacha).into()),
            gcm: Aes256Gcm24::new((&*gcm).into()),
            format,
        }
    }

    pub(crate) fn id(&self) -> KeyId {
        self.id
    }

    /// Seals `plain` for `context` (a file's normalised path, or a record's
    /// purpose).
    pub(crate) fn seal(&self, plain: &[u8], context: &[u8]) -> Result<Vec<u8>, CryptError> {
        let mut out = Vec::with_capacity(HEADER + plain.len() + TAG_BYTES);
        out.resize(HEADER, 0);
        out[0] = self.format;
        out[1..1 + KEY_ID_BYTES].copy_from_slice(&self.id.0);
        getrandom::getrandom(&mut out[1 + KEY_ID_BYTES..HEADER])
            .map_err(|e| CryptError::Random(e.to_string()))?;
        out.extend_from_slice(plain);
        let (header, body) = out.split_at_mut(HEADER);
        let nonce = XNonce::from_slice(&header[1 + KEY_ID_BYTES..]);
        let aad = associated(header, context);
        let tag = match self.format {
            AES_GCM => self.gcm.encrypt_in_place_detached(nonce, &aad, body),
            _ => self.xchacha.encrypt_in_place_detached(nonce, &aad, body),
        }
        .map_err(|_| CryptError::Random("the cipher refused to seal".to_owned()))?;
        out.extend_from_slice(&tag);
        Ok(out)
    }

    /// Opens a seal made by this key for `context`; `None` if anything
    /// about it is wrong.
    pub(crate) fn open(&self, sealed: &[u8], context: &[u8]) -> Option<Vec<u8>> {
        self.open_owned(sealed.to_vec(), context)
    }
}

impl Sealer {
    /// [`open`](Self::open) in place: the stored bytes become the
    /// plaintext, with no second buffer (a view's whole cost beyond the
    /// read is this one pass over the file).
    pub(crate) fn open_owned(&self, mut sealed: Vec<u8>, context: &[u8]) -> Option<Vec<u8>> {
        self.open_in_place(&mut sealed, context)?;
        sealed.drain(..HEADER);
        Some(sealed)
    }

    /// [`open`](Self::open) in place, the header left in front: on
    /// success `sealed[HEADER..]` is the plaintext (the tag cut off), so a
    /// reader can start there without moving the bytes.
    pub(crate) fn open_in_place(&self, sealed: &mut Vec<u8>, context: &[u8]) -> Option<()> {
        if sealed.len() < OVERHEAD as usize {
            return None;
        }
        let (header, rest) = sealed.split_at_mut(HEADER);
        let (body, tag) = rest.split_at_mut(rest.len() - TAG_BYTES);
        let nonce = XNonce::from_slice(&header[1 + KEY_ID_BYTES..]);
        let aad = associated(header, context);
        let tag = (&*tag).into();
        match header[0] {
            XCHACHA => self
                .xchacha
                .decrypt_in_place_detached(nonce, &aad, body, tag),
            AES_GCM => self.gcm.decrypt_in_place_detached(nonce, &aad, body, tag),
            _ => return None,
        }
        .ok()?;
        sealed.truncate(sealed.len() - TAG_BYTES);
        Some(())
    }
}

/// The key id a seal names, if it is long enough to be one.
pub(crate) fn key_id_of(sealed: &[u8]) -> Option<KeyId> {
    let id = sealed.get(1..1 + KEY_ID_BYTES)?;
    Some(KeyId(id.try_into().ok()?))
}

const AAD_PREFIX: &[u8] = b"claude-memory seal v1\0";

/// The associated data: the prefix, the header, the context. On the
/// stack when it fits (every path up to a few hundred bytes), so opening
/// a file allocates nothing for it; `heap` (empty, so unallocated,
/// otherwise) holds a longer one.
struct Associated {
    stack: [u8; STACK_AAD],
    len: usize,
    heap: Vec<u8>,
}

const STACK_AAD: usize = 320;

impl std::ops::Deref for Associated {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        if self.heap.is_empty() {
            &self.stack[..self.len]
        } else {
            &self.heap
        }
    }
}

fn associated(header: &[u8], context: &[u8]) -> Associated {
    let len = AAD_PREFIX.len() + header.len() + context.len();
    let mut out = Associated {
        stack: [0u8; STACK_AAD],
        len,
        heap: Vec::new(),
    };
    if len <= STACK_AAD {
        let (a, rest) = out.stack.split_at_mut(AAD_PREFIX.len());
        a.copy_from_slice(AAD_PREFIX);
        let (b, rest) = rest.split_at_mut(header.len());
        b.copy_from_slice(header);
        rest[..context.len()].copy_from_slice(context);
    } else {
        out.heap.reserve_exact(len);
        out.heap.extend_from_slice(AAD_PREFIX);
        out.heap.extend_from_slice(header);
        out.heap.extend_from_slice(context);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> Key {
        Key::generate().expect("key")
    }

    #[test]
    fn both_formats_open_whichever_format_a_sealer_writes() {
        let key = key();
        let chacha = Sealer::with_format(&key, XCHACHA);
        let gcm = Sealer::with_format(&key, AES_GCM);
        for (writer, format) in [(&chacha, XCHACHA), (&gcm, AES_GCM)] {
            let sealed = writer.seal(b"a note", b"/memories/a.md").expect("seal");
            assert_eq!(sealed[0], format);
            assert_eq!(sealed.len() as u64, 6 + OVERHEAD);
            for reader in [&chacha, &gcm] {
                assert_eq!(
                    reader.open(&sealed, b"/memories/a.md").as_deref(),
                    Some(&b"a note"[..])
                );
                assert_eq!(reader.open(&sealed, b"/memories/b.md"), None);
            }
        }
    }

    #[test]
    fn a_seal_with_its_format_byte_changed_or_any_byte_flipped_does_not_open() {
        let key = key();
        for format in [XCHACHA, AES_GCM] {
            let sealer = Sealer::with_format(&key, format);
            let sealed = sealer.seal(b"secret text", b"ctx").expect("seal");
            for i in 0..sealed.len() {
                let mut bad = sealed.clone();
                bad[i] ^= if i == 0 { 3 } else { 1 };
                assert_eq!(sealer.open(&bad, b"ctx"), None, "byte {i}, format {format}");
            }
            assert_eq!(sealer.open(&sealed[..sealed.len() - 1], b"ctx"), None);
        }
    }

    #[test]
    fn another_key_opens_neither_format() {
        let (a, b) = (key(), key());
        for format in [XCHACHA, AES_GCM] {
            let sealed = Sealer::with_format(&a, format)
                .seal(b"x", b"ctx")
                .expect("seal");
            assert_eq!(Sealer::with_format(&b, format).open(&sealed, b"ctx"), None);
        }
    }
}
