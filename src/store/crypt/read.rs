//! Reading a sealed file whole, within a bound: an AEAD checks a file
//! before any of it is used, so a read holds the file in memory, and the
//! view's path (open, one read into a buffer of the file's length, the
//! tag checked in place) is kept free of copies and allocations beyond
//! that buffer.

use super::seal::{self, OVERHEAD};
use super::store::EncryptedStore;
use crate::path::MemoryPath;
use crate::store::{FileReader, MemoryStore, StoreError, StoreResult};

/// `path`'s normalised form (what names and seals are bound to), without
/// a copy when the model already spelled it so (the common case).
pub(crate) fn normalized(path: &MemoryPath) -> std::borrow::Cow<'_, str> {
    let raw = path.as_str();
    let spelled = raw.strip_prefix("/memories").is_some_and(|mut rest| {
        path.components().iter().all(|c| {
            match rest
                .strip_prefix('/')
                .and_then(|r| r.strip_prefix(c.as_str()))
            {
                Some(r) => {
                    rest = r;
                    true
                }
                None => false,
            }
        }) && rest.is_empty()
    });
    if spelled {
        std::borrow::Cow::Borrowed(raw)
    } else {
        std::borrow::Cow::Owned(path.normalized())
    }
}

/// The largest file (plaintext bytes) an encrypted store writes or reads.
/// An AEAD checks a file whole before any of it is used, so each read
/// holds the file in memory: this bounds that memory whatever the storage
/// holds (a planted sparse file of a terabyte is refused, not read). It is
/// far above the handler's default `max_file_size` (1 MiB).
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// Refuses a write over [`MAX_FILE_BYTES`] (it could not be read back).
pub(crate) fn check_len(path: &MemoryPath, data: &[u8]) -> StoreResult<()> {
    if data.len() as u64 > MAX_FILE_BYTES {
        return Err(StoreError::TooLarge {
            path: path.clone(),
            len: data.len() as u64,
        });
    }
    Ok(())
}

impl<S: MemoryStore> EncryptedStore<S> {
    /// The plaintext of an opened stored file, after the seal's header
    /// (`[seal::HEADER..]`): refused over the bound, read in one pass into
    /// a buffer of its length, opened in place.
    pub(crate) fn read_sealed(
        &self,
        path: &MemoryPath,
        key: &str,
        file: FileReader<'_>,
    ) -> StoreResult<Vec<u8>> {
        use std::io::Read;
        if file.len > MAX_FILE_BYTES.saturating_add(OVERHEAD) {
            return Err(StoreError::TooLarge {
                path: path.clone(),
                len: file.len.saturating_sub(OVERHEAD),
            });
        }
        let len = usize::try_from(file.len).unwrap_or(usize::MAX);
        let mut sealed = Vec::with_capacity(len);
        file.reader
            .take(file.len)
            .read_to_end(&mut sealed)
            .map_err(|e| StoreError::io(crate::store::Op::Read, path, e))?;
        let id = seal::key_id_of(&sealed);
        self.keys()
            .sealers
            .iter()
            .find(|s| Some(s.id()) == id)
            .and_then(|s| s.open_in_place(&mut sealed, key.as_bytes()))
            .ok_or_else(|| StoreError::Integrity { path: path.clone() })?;
        Ok(sealed)
    }
}
