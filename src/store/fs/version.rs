//! The filesystem store's content [`Version`], for compare-and-swap writes
//! ([`WriteMode::Update`](crate::store::WriteMode::Update)).
//!
//! A file on disk carries no generation counter a program that ignores the
//! store would bump, so the version is derived from the content itself: a
//! keyed hash of the bytes, plus their length.

use crate::store::Version;

/// A content hash: equal content, equal version, whatever wrote it.
///
/// Versions are only compared within one process (an edit reads, then
/// compares under the lock), so the hash is keyed with a per-process random
/// seed: content cannot be crafted to collide. It folds 8 bytes per
/// multiply, several GB/s, since edits hash the file twice.
pub(super) fn content_version(data: &[u8]) -> Version {
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let seed = *SEED.get_or_init(|| {
        use std::hash::BuildHasher;
        std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64)
    });
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let fold = |a: u64, b: u64| {
        let m = u128::from(a).wrapping_mul(u128::from(b));
        (m as u64) ^ ((m >> 64) as u64)
    };
    let mut h = seed ^ (data.len() as u64).wrapping_mul(K);
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        h = fold(h ^ u64::from_le_bytes(b), K);
    }
    let mut last = [0u8; 8];
    last[..words.remainder().len()].copy_from_slice(words.remainder());
    h = fold(h ^ u64::from_le_bytes(last), K ^ seed);
    h = fold(h, K.rotate_left(17));
    Version::new((u128::from(h) << 64) | data.len() as u128)
}

#[cfg(test)]
mod tests {
    use super::content_version;

    #[test]
    fn versions_tell_contents_apart() {
        let mut seen = std::collections::HashSet::new();
        let base = b"the quick brown fox jumps over the lazy dog".to_vec();
        for i in 0..base.len() {
            for bit in 0..8 {
                let mut v = base.clone();
                v[i] ^= 1 << bit;
                assert!(
                    seen.insert(content_version(&v)),
                    "collision at byte {i} bit {bit}"
                );
            }
        }
        assert!(seen.insert(content_version(&base)));
        assert_eq!(content_version(b"same"), content_version(b"same"));
        assert_ne!(content_version(b""), content_version(b"\0"));
        assert_ne!(content_version(b"a"), content_version(b"a\0"));
    }
}
