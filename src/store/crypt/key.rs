//! Key material: a 32-byte master key, its id, the subkeys derived from
//! it, key files, and the set of keys a store is opened with.
//!
//! Every key is wiped from memory when dropped ([`zeroize`]). A key's id is
//! derived from the key (HKDF-SHA256), so it names the key in every seal
//! without revealing it, and a seal under a key that is not loaded is
//! recognised as such.

use std::fmt;
use std::io::Write;
use std::path::Path;

use hkdf::Hkdf;
use sha2_010::Sha256;
use zeroize::{Zeroize, Zeroizing};

use super::CryptError;
use super::passphrase::Passphrase;

/// Bytes in a key (and in a key file).
pub const KEY_BYTES: usize = 32;
/// Bytes of a key id, recorded in every seal.
pub const KEY_ID_BYTES: usize = 8;

/// A key's id: the first bytes of HKDF-SHA256(key, "claude-memory key id").
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyId(pub(crate) [u8; KEY_ID_BYTES]);

impl KeyId {
    /// The id as 16 lowercase hex digits (what the key record and the CLI
    /// show).
    pub fn to_hex(self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Parses [`to_hex`](Self::to_hex)'s form.
    pub fn from_hex(hex: &str) -> Option<KeyId> {
        let bytes = super::record::hex_decode(hex)?;
        Some(KeyId(bytes.try_into().ok()?))
    }
}

impl fmt::Debug for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyId({})", self.to_hex())
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

/// A 32-byte master key, zeroized on drop. Never printed: its `Debug`
/// shows the id only.
#[derive(Clone)]
pub struct Key {
    bytes: Zeroizing<[u8; KEY_BYTES]>,
    id: KeyId,
}

impl Drop for Key {
    fn drop(&mut self) {
        // `Zeroizing` wipes the bytes; the id is public information.
        self.bytes.zeroize();
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Key")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Key {
    /// A key from 32 bytes (a key file's content, or a KDF's output).
    pub fn from_bytes(bytes: [u8; KEY_BYTES]) -> Key {
        let bytes = Zeroizing::new(bytes);
        let mut id = [0u8; KEY_ID_BYTES];
        derive_into(&bytes[..], b"claude-memory key id v1", &mut id);
        Key {
            bytes,
            id: KeyId(id),
        }
    }

    /// A fresh random key from the operating system's generator.
    pub fn generate() -> Result<Key, CryptError> {
        let mut bytes = Zeroizing::new([0u8; KEY_BYTES]);
        getrandom::getrandom(&mut bytes[..]).map_err(|e| CryptError::Random(e.to_string()))?;
        Ok(Key::from_bytes(*bytes))
    }

    /// This key's id.
    pub fn id(&self) -> KeyId {
        self.id
    }

    /// The key a tenant's store is opened with: HKDF-SHA256 of this master
    /// key with the tenant id, so one tenant's key opens nothing of
    /// another's and the master key never reaches a tenant's store.
    pub fn for_tenant(&self, tenant: &crate::TenantId) -> Key {
        let mut out = Zeroizing::new([0u8; KEY_BYTES]);
        let info = [
            b"claude-memory tenant v1\0".as_slice(),
            tenant.as_str().as_bytes(),
        ]
        .concat();
        derive_into(&self.bytes[..], &info, &mut out[..]);
        Key::from_bytes(*out)
    }

    /// A subkey for one purpose (contents, names), wiped on drop.
    pub(crate) fn subkey<const N: usize>(&self, purpose: &[u8]) -> Zeroizing<[u8; N]> {
        let mut out = Zeroizing::new([0u8; N]);
        derive_into(&self.bytes[..], purpose, &mut out[..]);
        out
    }

    /// Reads a key file: exactly 32 bytes, readable by its owner only.
    ///
    /// A key file that group or others may read or write (mode `& 0o077`)
    /// is refused, as ssh refuses a private key: whoever could read it has
    /// the memories.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Key, CryptError> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let meta = secret_file(path).map_err(|reason| CryptError::KeyFile {
            path: shown.clone(),
            reason,
        })?;
        if !meta.is_file() || meta.len() != KEY_BYTES as u64 {
            return Err(CryptError::KeyFile {
                path: shown,
                reason: format!(
                    "a key file is exactly {KEY_BYTES} bytes (make one with `claude-memory keygen`)"
                ),
            });
        }
        let data = Zeroizing::new(std::fs::read(path).map_err(|e| CryptError::KeyFile {
            path: shown.clone(),
            reason: format!("it cannot be read ({e})"),
        })?);
        let bytes: [u8; KEY_BYTES] = data[..].try_into().map_err(|_| CryptError::KeyFile {
            path: shown,
            reason: format!("a key file is exactly {KEY_BYTES} bytes"),
        })?;
        Ok(Key::from_bytes(bytes))
    }

    /// Writes a new random key to `path` (which must not exist), created
    /// with mode 0600 on Unix, and returns it.
    pub fn generate_file(path: impl AsRef<Path>) -> Result<Key, CryptError> {
        let path = path.as_ref();
        let key = Key::generate()?;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let fail = |e: std::io::Error| CryptError::KeyFile {
            path: path.display().to_string(),
            reason: format!("it cannot be created ({e})"),
        };
        let mut file = options.open(path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                CryptError::KeyFileExists {
                    path: path.display().to_string(),
                }
            } else {
                fail(e)
            }
        })?;
        file.write_all(&key.bytes[..]).map_err(fail)?;
        file.sync_all().map_err(fail)?;
        Ok(key)
    }
}

/// HKDF-SHA256 expand of `ikm` for `info` into `out` (at most 255 × 32
/// bytes, far above any use here).
/// Checks a file that holds a secret (a key or a passphrase) before it
/// is read: it exists, and (on Unix) group and others have no access. The
/// reason, for the caller's error, if not.
pub(crate) fn secret_file(path: &Path) -> Result<std::fs::Metadata, String> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => "it does not exist".to_owned(),
        _ => format!("it cannot be read ({e})"),
    })?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(format!(
                "its mode is {mode:04o}: group and others must have no access (chmod 600 it)"
            ));
        }
    }
    Ok(meta)
}

fn derive_into(ikm: &[u8], info: &[u8], out: &mut [u8]) {
    let hk = Hkdf::<Sha256>::new(Some(b"claude-memory"), ikm);
    // Only fails for outputs over 8160 bytes; every caller asks for <= 64.
    if hk.expand(info, out).is_err() {
        out.fill(0);
    }
}

/// Where one key of a [`Keyring`] comes from.
#[derive(Debug, Clone)]
pub(crate) enum KeySource {
    Key(Key),
    /// A passphrase, and the tenants whose keys are then derived from
    /// the key it gives (in order; empty for none).
    Passphrase(Passphrase, Vec<crate::TenantId>),
}

/// The keys a store is opened with: the first is the **primary**, which
/// seals every new write; the others only open what they sealed before
/// (during and after a rotation).
#[derive(Debug, Clone, Default)]
pub struct Keyring {
    pub(crate) sources: Vec<KeySource>,
    /// Argon2id costs for a store that has no parameters yet.
    pub(crate) kdf_costs: Option<(u32, u32, u32)>,
}

impl Keyring {
    /// A ring with `key` as its primary.
    pub fn new(key: Key) -> Keyring {
        Keyring {
            sources: vec![KeySource::Key(key)],
            kdf_costs: None,
        }
    }

    /// A ring whose primary is derived from a passphrase (Argon2id, with
    /// the salt and parameters the store keeps).
    pub fn from_passphrase(passphrase: Passphrase) -> Keyring {
        Keyring {
            sources: vec![KeySource::Passphrase(passphrase, Vec::new())],
            kdf_costs: None,
        }
    }

    /// Adds an older key, still accepted for reading.
    pub fn with(mut self, key: Key) -> Keyring {
        self.sources.push(KeySource::Key(key));
        self
    }

    /// Adds an older passphrase, still accepted for reading.
    pub fn with_passphrase(mut self, passphrase: Passphrase) -> Keyring {
        self.sources
            .push(KeySource::Passphrase(passphrase, Vec::new()));
        self
    }

    /// The ring for one tenant: every key derived for it
    /// ([`Key::for_tenant`]), a passphrase's once Argon2id has made it (a
    /// tenant's store has its own salt too, but a salt travels with a
    /// copied key record: the derivation is what makes one tenant's
    /// whole directory, copied over another's, refused at open).
    pub fn for_tenant(&self, tenant: &crate::TenantId) -> Keyring {
        Keyring {
            sources: self
                .sources
                .iter()
                .map(|s| match s {
                    KeySource::Key(k) => KeySource::Key(k.for_tenant(tenant)),
                    KeySource::Passphrase(p, tenants) => {
                        let mut tenants = tenants.clone();
                        tenants.push(tenant.clone());
                        KeySource::Passphrase(p.clone(), tenants)
                    }
                })
                .collect(),
            kdf_costs: self.kdf_costs,
        }
    }

    /// Argon2id costs (memory in KiB, passes, lanes) for a store whose
    /// passphrase parameters are made now; the default is 64 MiB, 3
    /// passes, 1 lane. Ignored by a store that has them already.
    pub fn with_kdf_costs(mut self, m_cost_kib: u32, t_cost: u32, p_cost: u32) -> Keyring {
        self.kdf_costs = Some((m_cost_kib, t_cost, p_cost));
        self
    }

    /// True when the ring holds no key.
    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }
}
