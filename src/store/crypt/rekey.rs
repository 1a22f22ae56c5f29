//! Key rotation: re-seal every file under the primary key, then retire
//! the other keys from the key record.
//!
//! Each file is re-sealed by one compare-and-swap write, so at every
//! instant each file is sealed under the old key or the new one, both
//! loaded: a rotation killed at any point leaves every file readable with
//! the keys given, and running it again resumes (files already under the
//! primary are skipped). Only once every file is under the primary does
//! the record drop the other keys.

use super::CryptError;
use super::record;
use super::seal;
use super::store::EncryptedStore;
use crate::path::MemoryPath;
use crate::store::walk::{Flow, Order, Step, walk};
use crate::store::{
    MemoryStore, MemoryStoreExt as _, StoreError, UPDATE_ATTEMPTS, WriteMode, retry,
};

/// What a rotation did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RekeyReport {
    /// Files re-sealed under the primary key by this run.
    pub resealed: u64,
    /// Files that already were (sealed by a write, or by an earlier,
    /// interrupted run).
    pub already: u64,
    /// Keys retired from the key record (hex ids).
    pub retired: Vec<String>,
}

impl<S: MemoryStore> EncryptedStore<S> {
    /// Re-seals every file under the primary key (the first of the ring
    /// the store was opened with) and retires every other key from the
    /// store's key record. Resumable: after a kill, open with the same
    /// keys and call it again.
    ///
    /// The store's name key is re-wrapped, not changed (changing it would
    /// rename every entry): see the README's key handling.
    pub fn rekey(&self) -> Result<RekeyReport, CryptError> {
        let primary = self.keys().sealers[0].id();
        let (mut rec, version) = self.record()?;
        rec.rekey_to = Some(primary.to_hex());
        record::write(self.inner(), &rec, WriteMode::Update(version))?;
        let mut report = RekeyReport::default();
        // A second pass finds what a writer that opened the store before
        // `rekey_to` was set wrote behind the first (writers check the
        // record before each write, see `rotation`); it re-seals nothing
        // otherwise, and the keys are retired only after a pass that
        // found every file under the primary.
        let mut clean = false;
        for pass in 0..4 {
            let mut files = Vec::new();
            walk(self, &MemoryPath::root(), Order::AsListed, &mut |step| {
                if let Step::File { dir, entry, .. } = step
                    && let Some(p) = dir.join(&entry.name)
                {
                    files.push(p);
                }
                Ok(Flow::Continue)
            })?;
            let mut resealed = 0;
            for file in files {
                if self.reseal(&file, primary)? {
                    resealed += 1;
                } else if pass == 0 {
                    report.already += 1;
                }
            }
            report.resealed += resealed;
            if pass > 0 && resealed == 0 {
                clean = true;
                break;
            }
        }
        if !clean {
            return Err(CryptError::Record(
                "files kept appearing under other keys while the store was rekeyed: stop the other writers, then run rekey again",
            ));
        }
        // A move journal left by a process killed mid-rename (and not yet
        // finished by an open) is sealed under the key it had: re-seal it
        // too, or retiring that key leaves a store that no longer opens.
        self.reseal_journals()?;
        let (mut rec, version) = self.record()?;
        let hex = primary.to_hex();
        report.retired = rec
            .keys
            .iter()
            .filter(|e| e.id != hex)
            .map(|e| e.id.clone())
            .collect();
        rec.keys.retain(|e| e.id == hex);
        rec.rekey_to = None;
        record::write(self.inner(), &rec, WriteMode::Update(version))?;
        Ok(report)
    }

    /// Re-seals one file under `primary` unless it already is; `false`
    /// if it was (or is gone).
    fn reseal(&self, path: &MemoryPath, primary: super::KeyId) -> Result<bool, CryptError> {
        let Some(ep) = self.enc(path) else {
            return Ok(false);
        };
        let resealed = retry::until_swapped(UPDATE_ATTEMPTS, retry::LOCAL, || {
            let stored = match self
                .inner()
                .read(&ep, super::read::MAX_FILE_BYTES + super::OVERHEAD)
            {
                Ok(f) => f,
                Err(StoreError::NotFound { .. }) => return Ok(Some(false)),
                Err(e) => return Err(CryptError::Store(self.outer(e, &[(&ep, path)]))),
            };
            if seal::key_id_of(&stored.data) == Some(primary) {
                return Ok(Some(false));
            }
            let plain = zeroize::Zeroizing::new(self.unseal(path, &stored.data)?);
            let sealed = self.seal(path, &plain)?;
            match self
                .inner()
                .write(&ep, &sealed, WriteMode::Update(stored.version))
            {
                Ok(_) => Ok(Some(true)),
                Err(StoreError::Conflict { .. }) => Ok(None),
                Err(StoreError::NotFound { .. }) => Ok(Some(false)),
                Err(e) => Err(CryptError::Store(self.outer(e, &[(&ep, path)]))),
            }
        })?;
        resealed.ok_or_else(|| CryptError::Store(StoreError::Conflict { path: path.clone() }))
    }
}
