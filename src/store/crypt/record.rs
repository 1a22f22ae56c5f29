//! The key record: one small file in the wrapped store (`_claude-memory-
//! keys`, a name no encrypted name can take, since those are base32) that
//! says which keys the store knows, holds the store's name key wrapped
//! (sealed) under each of them, and keeps the Argon2id salt and costs.
//!
//! It is what refuses the wrong key at open, before any file is read: a
//! key whose id is not in the record, or that cannot unwrap the name key,
//! opens nothing. It holds no plaintext memory content or name.

use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use super::CryptError;
use super::key::{Key, KeyId, KeySource, Keyring};
use super::names::NameCipher;
use super::passphrase::KdfParams;
use super::seal::Sealer;
use crate::path::MemoryPath;
use crate::store::{EntryKind, MemoryStore, MemoryStoreExt as _, StoreError, Version, WriteMode};

/// The record's name in the wrapped store's root.
pub(crate) const RECORD_NAME: &str = crate::store::KEY_RECORD;
/// Prefix of every name the wrapper keeps for itself in the wrapped
/// store's root (the record, move journals): never a base32 name.
pub(crate) const CONTROL_PREFIX: &str = "_claude-memory-";
const NAME_KEY_CONTEXT: &[u8] = b"claude-memory name key";
const RECORD_LIMIT: u64 = 1 << 20;

/// The record as stored (JSON).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Record {
    pub(crate) format: u32,
    /// Argon2id's salt and costs, once a passphrase has been used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) kdf: Option<KdfParams>,
    /// Every key the store accepts, the name key wrapped under each.
    pub(crate) keys: Vec<KeyEntry>,
    /// Set while a rotation to this key id runs (cleared when it ends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) rekey_to: Option<String>,
}

/// One accepted key.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct KeyEntry {
    /// The key's id, hex.
    pub(crate) id: String,
    /// The store's name key sealed under this key, hex.
    pub(crate) name_key: String,
}

/// What opening the record gives the wrapper.
pub(crate) struct Opened {
    /// Content ciphers, the primary first.
    pub(crate) sealers: Vec<Sealer>,
    pub(crate) names: NameCipher,
}

pub(crate) fn record_path() -> MemoryPath {
    MemoryPath::root()
        .join(RECORD_NAME)
        .unwrap_or_else(MemoryPath::root)
}

/// Reads the record (`None` if the store has none yet).
pub(crate) fn read<S: MemoryStore + ?Sized>(
    inner: &S,
) -> Result<Option<(Record, Version)>, CryptError> {
    match inner.read(&record_path(), RECORD_LIMIT) {
        Ok(file) => {
            let record: Record = serde_json::from_slice(&file.data)
                .map_err(|_| CryptError::Record("the key record is not valid JSON"))?;
            if record.format != 1 {
                return Err(CryptError::Record("the key record has an unknown format"));
            }
            Ok(Some((record, file.version)))
        }
        Err(StoreError::NotFound { .. }) => Ok(None),
        Err(e) => Err(CryptError::Store(e)),
    }
}

/// Writes the record with `mode`.
pub(crate) fn write<S: MemoryStore + ?Sized>(
    inner: &S,
    record: &Record,
    mode: WriteMode,
) -> Result<Version, CryptError> {
    let data = serde_json::to_vec_pretty(record)
        .map_err(|_| CryptError::Record("the key record could not be written"))?;
    inner
        .write(&record_path(), &data, mode)
        .map_err(CryptError::Store)
}

/// Opens (or, for an empty store when `create` is set, creates) the
/// record with `ring`.
pub(crate) fn open<S: MemoryStore + ?Sized>(
    inner: &S,
    ring: &Keyring,
    create: bool,
) -> Result<Opened, CryptError> {
    if ring.is_empty() {
        return Err(CryptError::NoKey);
    }
    for _ in 0..8 {
        let Some((mut record, version)) = read(inner)? else {
            if !create {
                return Err(if tenant_base(inner)? {
                    CryptError::TenantBase
                } else if !inner.list(&MemoryPath::root())?.is_empty() {
                    CryptError::NotEmpty
                } else {
                    CryptError::Uninitialised
                });
            }
            match make(inner, ring) {
                Err(CryptError::Store(StoreError::AlreadyExists { .. })) => continue,
                other => return other,
            }
        };
        let has_passphrase = ring
            .sources
            .iter()
            .any(|s| matches!(s, KeySource::Passphrase(..)));
        let mut changed = false;
        if has_passphrase && record.kdf.is_none() {
            record.kdf = Some(new_kdf(ring)?);
            changed = true;
        }
        let keys = resolve(ring, record.kdf.as_ref())?;
        let names = unwrap_name_key(&record, &keys)?;
        let primary = &keys[0];
        if !record.keys.iter().any(|e| e.id == primary.id().to_hex()) {
            record.keys.push(wrap(primary, &names)?);
            changed = true;
        }
        if changed {
            match write(inner, &record, WriteMode::Update(version)) {
                Ok(_) => {}
                Err(CryptError::Store(StoreError::Conflict { .. })) => continue,
                Err(e) => return Err(e),
            }
        }
        return Ok(Opened {
            sealers: keys.iter().map(Sealer::new).collect(),
            names,
        });
    }
    Err(CryptError::Record(
        "the key record kept changing while the store opened",
    ))
}

/// A new store's record: refused over a store that already holds files
/// (they would be plaintext next to encrypted ones).
fn make<S: MemoryStore + ?Sized>(inner: &S, ring: &Keyring) -> Result<Opened, CryptError> {
    if !inner
        .list(&MemoryPath::root())
        .map_err(CryptError::Store)?
        .is_empty()
    {
        return Err(if tenant_base(inner)? {
            CryptError::TenantBase
        } else {
            CryptError::NotEmpty
        });
    }
    let has_passphrase = ring
        .sources
        .iter()
        .any(|s| matches!(s, KeySource::Passphrase(..)));
    let kdf = if has_passphrase {
        Some(new_kdf(ring)?)
    } else {
        None
    };
    let keys = resolve(ring, kdf.as_ref())?;
    let names = NameCipher::new(NameCipher::generate_key()?);
    let record = Record {
        format: 1,
        kdf,
        keys: keys
            .iter()
            .map(|k| wrap(k, &names))
            .collect::<Result<_, _>>()?,
        rekey_to: None,
    };
    write(inner, &record, WriteMode::Create)?;
    Ok(Opened {
        sealers: keys.iter().map(Sealer::new).collect(),
        names,
    })
}

/// Whether `inner` looks like a base of tenants' encrypted stores: a
/// directory of its root holds a key record (the tenant was probably not
/// named). Only asked on the way to an error.
fn tenant_base<S: MemoryStore + ?Sized>(inner: &S) -> Result<bool, CryptError> {
    let root = MemoryPath::root();
    let entries = inner.list(&root).map_err(CryptError::Store)?;
    Ok(entries.iter().any(|e| {
        e.kind == EntryKind::Directory
            && root
                .join(&e.name)
                .and_then(|d| d.join(RECORD_NAME))
                .is_some_and(|p| matches!(inner.stat(&p), Ok(Some(_))))
    }))
}

fn new_kdf(ring: &Keyring) -> Result<KdfParams, CryptError> {
    match ring.kdf_costs {
        Some((m, t, p)) => KdfParams::generate_with(m, t, p),
        None => KdfParams::generate(),
    }
}

/// The ring's keys, passphrases derived with the store's parameters.
fn resolve(ring: &Keyring, kdf: Option<&KdfParams>) -> Result<Vec<Key>, CryptError> {
    ring.sources
        .iter()
        .map(|s| match s {
            KeySource::Key(k) => Ok(k.clone()),
            KeySource::Passphrase(p, tenants) => {
                let key = p.derive(kdf.ok_or(CryptError::Record(
                    "the key record has no Argon2id parameters",
                ))?)?;
                Ok(tenants.iter().fold(key, |k, t| k.for_tenant(t)))
            }
        })
        .collect()
}

fn wrap(key: &Key, names: &NameCipher) -> Result<KeyEntry, CryptError> {
    let sealed = Sealer::new(key).seal(names.key_bytes(), NAME_KEY_CONTEXT)?;
    Ok(KeyEntry {
        id: key.id().to_hex(),
        name_key: hex_encode(&sealed),
    })
}

/// The name key, unwrapped with the first of `keys` the record lists.
fn unwrap_name_key(record: &Record, keys: &[Key]) -> Result<NameCipher, CryptError> {
    for key in keys {
        let Some(entry) = record.keys.iter().find(|e| e.id == key.id().to_hex()) else {
            continue;
        };
        let sealed = hex_decode(&entry.name_key).ok_or(CryptError::Record(
            "the key record's wrapped name key is not hex",
        ))?;
        let plain = Zeroizing::new(Sealer::new(key).open(&sealed, NAME_KEY_CONTEXT).ok_or(
            CryptError::Record("the key record's wrapped name key failed its integrity check"),
        )?);
        let bytes: [u8; 64] = plain[..]
            .try_into()
            .map_err(|_| CryptError::Record("the key record's name key has the wrong length"))?;
        return Ok(NameCipher::new(Zeroizing::new(bytes)));
    }
    Err(CryptError::WrongKey {
        given: keys.iter().map(Key::id).collect(),
        known: record
            .keys
            .iter()
            .filter_map(|e| KeyId::from_hex(&e.id))
            .collect(),
    })
}

/// Lowercase hex.
pub(crate) use crate::store::hex as hex_encode;

/// The inverse of [`hex_encode`].
pub(crate) fn hex_decode(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}
