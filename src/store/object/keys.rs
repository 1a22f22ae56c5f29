//! Where each entry lives in the bucket.
//!
//! - A file `/memories/a/b.md` is the object `PREFIX/a/b.md`, its bytes
//!   exactly (so other tools read and write memories as plain objects).
//! - A directory exists while any object has a key below `PREFIX/dir/`.
//!   An empty one keeps the zero-byte marker `PREFIX/dir/.claude-memory-dir`;
//!   the store writes it whenever a directory could become empty (a delete
//!   or a move out of it), so creating a file costs no marker writes.
//! - The crate's own objects, all named `.claude-memory*` so no memory
//!   path can spell them and no listing shows them: the markers, the intent
//!   record of a multi-object operation ([`INTENT`]), the store size lock
//!   ([`QUOTA_LOCK`]) and the probe written at open ([`PROBE`]).
//!
//! Names are percent-encoded by object_store's `PathPart` where S3 advises
//! against a character (`%` itself included), and decoded when listed, so
//! every memory name round-trips.

use object_store::path::{Path, PathPart};

use crate::path::MemoryPath;

/// The marker object that keeps an empty directory.
pub(super) const MARKER: &str = ".claude-memory-dir";
/// The intent record of a directory or file move, or a directory delete.
pub(super) const INTENT: &str = ".claude-memory-intent";
/// The lock held while a write is checked against the store size limit.
pub(super) const QUOTA_LOCK: &str = ".claude-memory-quota-lock";
/// The object the conditional-write probe at open writes.
pub(super) const PROBE: &str = ".claude-memory-probe";
/// The probe's second object, the target of its conditional copy.
pub(super) const PROBE_COPY: &str = ".claude-memory-probe-copy";

/// The store's prefix in the bucket and the keys below it.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    prefix: Path,
}

impl Layout {
    /// A layout under `prefix` (`""` for the whole bucket; slashes separate
    /// levels, empty levels are dropped).
    pub(super) fn new(prefix: &str) -> Layout {
        let parts = prefix
            .split('/')
            .filter(|p| !p.is_empty())
            .map(PathPart::from);
        Layout {
            prefix: Path::from_iter(parts),
        }
    }

    /// This layout's prefix with `more` below it.
    pub(super) fn below(&self, more: &str) -> Layout {
        let mut prefix = self.prefix.clone();
        for part in more.split('/').filter(|p| !p.is_empty()) {
            prefix = prefix.join(PathPart::from(part));
        }
        Layout { prefix }
    }

    /// The object of the file at `path` (the prefix itself for the root).
    pub(super) fn key(&self, path: &MemoryPath) -> Path {
        let mut key = self.prefix.clone();
        for c in path.components() {
            key = key.join(PathPart::from(c.as_str()));
        }
        key
    }

    /// The marker of the directory at `path`.
    pub(super) fn marker(&self, path: &MemoryPath) -> Path {
        self.key(path).join(MARKER)
    }

    /// One of the store's own objects at the top of the prefix.
    pub(crate) fn own(&self, name: &'static str) -> Path {
        self.prefix.clone().join(name)
    }

    /// The key `key` (below `from`'s key) would have below `to`'s key.
    pub(super) fn moved(&self, key: &Path, from: &MemoryPath, to: &MemoryPath) -> Option<Path> {
        let rest = key.prefix_match(&self.key(from))?;
        let mut out = self.key(to);
        for part in rest {
            out = out.join(part);
        }
        Some(out)
    }

    /// The parts of `key` below the store's prefix, if it is below it.
    pub(super) fn relative(&self, key: &Path) -> Option<Vec<String>> {
        let rest = key.prefix_match(&self.prefix)?;
        Some(rest.map(|p| decode(&p)).collect())
    }
}

/// A listed name as the memory path spells it (undoing `PathPart`'s
/// encoding; a name that does not decode to UTF-8 stays encoded, so no
/// memory path matches it and it is reported as unspellable).
///
/// A key another program wrote raw where `PathPart` encodes (`é`, `#`),
/// or with a `%` that `PathPart` would not have
/// written (`x%41`) decodes to a name whose key is another (`xA`): it
/// would be listed under a name that then names nothing. Such a name is
/// given a NUL in front, which no memory path can hold, so it is treated
/// as every name a path cannot spell is (never shown as a path).
pub(super) fn decode(part: &PathPart<'_>) -> String {
    let raw = part.as_ref();
    if !raw.contains('%') {
        // Another program's raw key (`résumé.md`, `notes #1.md`): this
        // store's key for that name is the encoded one, so the raw key
        // names nothing a path reaches, and is not shown as one (else two
        // entries would list as one path).
        if PathPart::from(raw).as_ref() != raw {
            return format!("\u{0}{raw}");
        }
        return raw.to_owned();
    }
    match percent_encoding::percent_decode_str(raw).decode_utf8() {
        Ok(name) if PathPart::from(name.as_ref()).as_ref() == raw => name.into_owned(),
        _ => format!("\u{0}{raw}"),
    }
}

/// The last part of `key`, decoded.
pub(super) fn name_of(key: &Path) -> Option<String> {
    key.parts().next_back().map(|p| decode(&p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_keys() {
        let layout = Layout::new("/team//alice/");
        for name in ["a%20b", "hash#tag", "{x}", "plain.md", "é"] {
            let path = MemoryPath::parse(&format!("/memories/d/{name}")).expect("valid");
            let key = layout.key(&path);
            assert!(key.as_ref().starts_with("team/alice/d/"), "{key}");
            assert_eq!(name_of(&key).as_deref(), Some(name));
            assert_eq!(
                layout.relative(&key),
                Some(vec!["d".to_owned(), name.to_owned()])
            );
        }
        assert_eq!(layout.key(&MemoryPath::root()).as_ref(), "team/alice");
        // A `%` no memory name would have written names nothing.
        assert!(decode(&PathPart::parse("x%41").expect("part")).starts_with('\u{0}'));
        assert_eq!(decode(&PathPart::from("x%41")), "x%41");
        assert_eq!(
            layout.marker(&MemoryPath::root()).as_ref(),
            "team/alice/.claude-memory-dir"
        );
    }

    #[test]
    fn moved_keys_keep_their_tail() {
        let layout = Layout::new("p");
        let from = MemoryPath::parse("/memories/a").expect("valid");
        let to = MemoryPath::parse("/memories/b/c").expect("valid");
        let key = Path::from("p/a/x/y.md");
        assert_eq!(
            layout.moved(&key, &from, &to).map(|k| k.to_string()),
            Some("p/b/c/x/y.md".to_owned())
        );
        assert_eq!(layout.moved(&Path::from("p/ab/x"), &from, &to), None);
    }
}
