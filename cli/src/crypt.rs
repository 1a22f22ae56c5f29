//! Encrypted stores on the command line: `--key-file` (repeatable; the
//! first is the primary) and `--passphrase-file` open any `--store`
//! through an `EncryptedStore`; `keygen` makes a key file; `rekey`
//! rotates; a history over an encrypted store keeps its versions sealed.

use std::path::{Path, PathBuf};

use claude_memory::MemoryStore;
use claude_memory::TenantId;
use claude_memory::store::crypt::{EncryptedStore, Key, Keyring, Passphrase};

use crate::output::{Failure, Outcome, count, err, failed};

/// The keys the command line gives, if any: with `--tenant`, each
/// tenant's own, derived from them (HKDF with the tenant id), so one
/// tenant's directory copied over another's is refused at open.
pub fn ring(
    key_files: &[PathBuf],
    passphrase_file: Option<&Path>,
    tenant: Option<&TenantId>,
) -> Result<Option<Keyring>, Failure> {
    let mut ring: Option<Keyring> = None;
    for file in key_files {
        let key = Key::from_file(file).map_err(failed)?;
        ring = Some(match ring {
            None => Keyring::new(key),
            Some(r) => r.with(key),
        });
    }
    if let Some(file) = passphrase_file {
        let pass = Passphrase::from_file(file).map_err(failed)?;
        ring = Some(match ring {
            None => Keyring::from_passphrase(pass),
            Some(r) => r.with_passphrase(pass),
        });
    }
    Ok(match tenant {
        Some(tenant) => ring.map(|r| r.for_tenant(tenant)),
        None => ring,
    })
}

/// `keygen --output FILE`.
pub fn keygen(output: &Path) -> Outcome {
    let key = Key::generate_file(output).map_err(failed)?;
    err(format_args!(
        "wrote key {} to {} (mode 0600): keep a copy somewhere safe, without it the store cannot be read",
        key.id(),
        output.display()
    ));
    Ok(())
}

/// `rekey`: re-seal everything under the primary key, retire the others.
pub fn rekey(store: Box<dyn MemoryStore>, ring: Option<&Keyring>) -> Outcome {
    let ring = ring.ok_or_else(|| {
        Failure::Usage(
            "rekey needs the new key first, then the old: --key-file NEW --key-file OLD".into(),
        )
    })?;
    let encrypted = EncryptedStore::open(store, ring.clone()).map_err(failed)?;
    let report = encrypted.rekey().map_err(failed)?;
    err(format_args!(
        "re-encrypted {} ({} already under the new key); retired keys: {}",
        count(
            usize::try_from(report.resealed).unwrap_or(usize::MAX),
            "file",
            "files"
        ),
        report.already,
        if report.retired.is_empty() {
            "none".to_owned()
        } else {
            report.retired.join(", ")
        }
    ));
    Ok(())
}

/// The store under an encrypted one, for an encrypted export (its
/// ciphertext and key record, as stored).
pub fn raw(
    store: Box<dyn MemoryStore>,
    ring: Option<&Keyring>,
) -> Result<Box<dyn MemoryStore>, Failure> {
    if let Some(ring) = ring {
        // Checks the key before exporting anything.
        drop(EncryptedStore::open_existing(&store, ring.clone()).map_err(failed)?);
    }
    Ok(store)
}
