//! Content sealing: XChaCha20-Poly1305 with a fresh random 24-byte nonce
//! per seal, the key id in the header, and the header and the file's
//! plaintext path as associated data, so a flipped bit, a truncation,
//! another key or a file moved to another path all fail the tag.
//!
//! Layout (fixed [`OVERHEAD`] of 49 bytes, so a listing's sizes are the
//! plaintext's without opening a file):
//!
//! ```text
//! [1: format = 1][8: key id][24: nonce][len + 16: ciphertext and tag]
//! ```

use chacha20poly1305::aead::{Aead, AeadInPlace, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

use super::CryptError;
use super::key::{KEY_ID_BYTES, Key, KeyId};

/// The format byte of every seal.
const FORMAT: u8 = 1;
const NONCE_BYTES: usize = 24;
const TAG_BYTES: usize = 16;
pub(crate) const HEADER: usize = 1 + KEY_ID_BYTES + NONCE_BYTES;
/// Bytes a seal adds to its plaintext.
pub const OVERHEAD: u64 = (HEADER + TAG_BYTES) as u64;

/// One master key's content cipher, with its id.
pub(crate) struct Sealer {
    id: KeyId,
    cipher: XChaCha20Poly1305,
}

impl Sealer {
    pub(crate) fn new(key: &Key) -> Sealer {
        let sub = key.subkey::<32>(b"claude-memory content v1");
        Sealer {
            id: key.id(),
            cipher: XChaCha20Poly1305::new((&*sub).into()),
        }
    }

    pub(crate) fn id(&self) -> KeyId {
        self.id
    }

    /// Seals `plain` for `context` (a file's normalised path, or a record's
    /// purpose).
    pub(crate) fn seal(&self, plain: &[u8], context: &[u8]) -> Result<Vec<u8>, CryptError> {
        let mut header = [0u8; HEADER];
        header[0] = FORMAT;
        header[1..1 + KEY_ID_BYTES].copy_from_slice(&self.id.0);
        getrandom::getrandom(&mut header[1 + KEY_ID_BYTES..])
            .map_err(|e| CryptError::Random(e.to_string()))?;
        let nonce = XNonce::from_slice(&header[1 + KEY_ID_BYTES..]);
        let aad = associated(&header, context);
        let body = self
            .cipher
            .encrypt(
                nonce,
                Payload {
                    msg: plain,
                    aad: &aad,
                },
            )
            .map_err(|_| CryptError::Random("the cipher refused to seal".to_owned()))?;
        let mut out = Vec::with_capacity(HEADER + body.len());
        out.extend_from_slice(&header);
        out.extend_from_slice(&body);
        Ok(out)
    }

    /// Opens a seal made by this key for `context`; `None` if anything
    /// about it is wrong.
    pub(crate) fn open(&self, sealed: &[u8], context: &[u8]) -> Option<Vec<u8>> {
        if sealed.len() < OVERHEAD as usize || sealed[0] != FORMAT {
            return None;
        }
        let (header, body) = sealed.split_at(HEADER);
        let nonce = XNonce::from_slice(&header[1 + KEY_ID_BYTES..]);
        let aad = associated(header, context);
        self.cipher
            .decrypt(
                nonce,
                Payload {
                    msg: body,
                    aad: &aad,
                },
            )
            .ok()
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
        if sealed.len() < OVERHEAD as usize || sealed[0] != FORMAT {
            return None;
        }
        let (header, rest) = sealed.split_at_mut(HEADER);
        let (body, tag) = rest.split_at_mut(rest.len() - TAG_BYTES);
        let nonce = XNonce::from_slice(&header[1 + KEY_ID_BYTES..]);
        let aad = associated(header, context);
        self.cipher
            .decrypt_in_place_detached(nonce, &aad, body, (&*tag).into())
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
