//! The validated memory path: the only way code names a file in a store.
//!
//! Every path string from the model is hostile until [`MemoryPath::parse`]
//! accepts it. Backends receive `&MemoryPath` and never a raw string, so a
//! backend cannot forget a check: `..`, control characters, backslashes and
//! the crate's reserved housekeeping names are unrepresentable.

use std::fmt;

use percent_encoding::percent_decode_str;

/// The virtual root every memory path lives under.
pub const ROOT: &str = "/memories";

/// Longest accepted path, in bytes.
pub const MAX_PATH_BYTES: usize = 1024;

/// Longest path a store may hold, in bytes: [`MAX_PATH_BYTES`] plus a
/// tenant prefix (`/` and an id of at most 64 bytes, the limit in
/// `tenant.rs`) in a shared base store. [`MemoryPath::from_stored`]
/// refuses anything longer, so no import can make a path no command can
/// name (SPEC §7).
pub const MAX_STORED_PATH_BYTES: usize = MAX_PATH_BYTES + 1 + 64;

/// Longest accepted path component, in bytes.
pub const MAX_COMPONENT_BYTES: usize = 255;

/// Prefix reserved for the crate's own temporary and lock files, in every
/// backend; no model-supplied component may start with it.
pub const RESERVED_PREFIX: &str = ".claude-memory";

/// Why a path string was rejected: a value, so this leaf module formats
/// no text. Its `Display` (implemented in `render.rs`, with every other
/// model-facing string) is the short reason shown to the model after
/// `is not a valid memory path: `.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PathError {
    /// The path string was empty.
    Empty,
    /// Longer than [`MAX_PATH_BYTES`].
    TooLong,
    /// A component longer than [`MAX_COMPONENT_BYTES`].
    ComponentTooLong,
    /// A control character (`char::is_control`).
    ControlCharacter,
    /// A backslash anywhere.
    Backslash,
    /// Not `/memories` or `/memories/…`.
    OutsideRoot,
    /// A `..` component.
    ParentComponent,
    /// A component starting with [`RESERVED_PREFIX`].
    Reserved,
    /// A Unicode format character (general category Cf, such as U+200B or
    /// U+202E) or the separators U+2028 and U+2029.
    FormatCharacter,
    /// Not in Unicode Normalization Form C.
    NotNfc,
    /// The percent-decoded form breaks one of the rules above.
    Encoded(Box<PathError>),
    /// The percent-decoded form holds a `/` the raw path did not.
    EncodedSlash,
}

impl std::error::Error for PathError {}

/// A path the model may use: `/memories` or below it, normalised, checked.
///
/// Keeps the string as sent (results echo it) and the normalised components
/// (what storage uses). Two spellings of one location compare equal.
#[derive(Clone)]
pub struct MemoryPath {
    raw: String,
    /// Components below `/memories`; empty for the root.
    components: Vec<String>,
    /// The longest normalised path, in bytes, that the store this path is
    /// handed to may hold at or below it: [`MAX_PATH_BYTES`] as the model
    /// sees it, plus what a [`TenantStore`](crate::store::TenantStore)
    /// prefix adds. Stores check it when a move could lengthen paths.
    limit: usize,
}

impl MemoryPath {
    /// Validates a path string from the model (SPEC §2).
    pub fn parse(raw: &str) -> Result<Self, PathError> {
        let components = check(raw)?;
        if !raw.contains('%') {
            return Ok(MemoryPath {
                raw: raw.to_owned(),
                components,
                limit: MAX_PATH_BYTES,
            });
        }
        // The decoded form must pass too, and must not invent separators.
        let mut decoded = raw.to_owned();
        loop {
            let next = percent_decode_str(&decoded)
                .decode_utf8_lossy()
                .into_owned();
            if next == decoded {
                break;
            }
            decoded = next;
        }
        if decoded != raw {
            check(&decoded).map_err(|e| PathError::Encoded(Box::new(e)))?;
            if decoded.matches('/').count() != raw.matches('/').count() {
                return Err(PathError::EncodedSlash);
            }
        }
        Ok(MemoryPath {
            raw: raw.to_owned(),
            components,
            limit: MAX_PATH_BYTES,
        })
    }

    /// The root, `/memories`.
    pub fn root() -> Self {
        MemoryPath {
            raw: ROOT.to_owned(),
            components: Vec::new(),
            limit: MAX_PATH_BYTES,
        }
    }

    /// The longest normalised path, in bytes, that may exist at or below
    /// this path in the store it is handed to: [`MAX_PATH_BYTES`], plus
    /// the length of any tenant prefix the path was given on its way to a
    /// shared base store. `rename` refuses a move that would put an entry
    /// over it ([`StoreError::PathTooLong`](crate::store::StoreError::PathTooLong)).
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The length in bytes of [`normalized`](Self::normalized), without
    /// building it.
    pub fn normalized_len(&self) -> usize {
        ROOT.len() + self.components.iter().map(|c| c.len() + 1).sum::<usize>()
    }

    /// The path exactly as the model sent it.
    pub fn as_str(&self) -> &str {
        &self.raw
    }

    /// Components below `/memories`, normalised (no empty or `.` parts).
    pub fn components(&self) -> &[String] {
        &self.components
    }

    /// True for `/memories` in any spelling.
    pub fn is_root(&self) -> bool {
        self.components.is_empty()
    }

    /// The last component, or `None` for the root.
    pub fn name(&self) -> Option<&str> {
        self.components.last().map(String::as_str)
    }

    /// True when the raw string ends in `/` (only `create` cares).
    pub fn has_trailing_slash(&self) -> bool {
        self.raw.ends_with('/')
    }

    /// The normalised form, e.g. `/memories/a/b.txt`.
    pub fn normalized(&self) -> String {
        let mut s = String::from(ROOT);
        for c in &self.components {
            s.push('/');
            s.push_str(c);
        }
        s
    }

    /// The parent directory, or `None` for the root.
    pub fn parent(&self) -> Option<MemoryPath> {
        let (_, rest) = self.components.split_last()?;
        Some(Self::from_components(rest.to_vec(), self.limit))
    }

    /// Every ancestor from the root down, excluding `self`.
    pub fn ancestors(&self) -> impl Iterator<Item = MemoryPath> + '_ {
        (0..self.components.len())
            .map(|n| Self::from_components(self.components[..n].to_vec(), self.limit))
    }

    /// A child of this directory path, if `name` is a valid component
    /// (used for names that come from a backend's listing).
    ///
    /// The total length is not checked: an entry a store lists exists,
    /// and every whole-tree job (size totals, exports, expiry) must see
    /// it, including a shared base store's entries, whose paths carry a
    /// tenant prefix on top of the tenant's own 1,024 bytes.
    pub fn join(&self, name: &str) -> Option<MemoryPath> {
        if !self.is_valid_child(name) {
            return None;
        }
        let mut components = Vec::with_capacity(self.components.len() + 1);
        components.extend(self.components.iter().cloned());
        components.push(name.to_owned());
        Some(Self::from_components(components, self.limit))
    }

    /// True when `name` is a valid single component below this directory
    /// (what [`join`](Self::join) checks, without building the path):
    /// every rule of SPEC §2 that applies to one component, on the name
    /// and on its percent-decoded form.
    pub fn is_valid_child(&self, name: &str) -> bool {
        if !component_ok(name) {
            return false;
        }
        if !name.contains('%') {
            return true;
        }
        let mut decoded = name.to_owned();
        loop {
            let next = percent_decode_str(&decoded)
                .decode_utf8_lossy()
                .into_owned();
            if next == decoded {
                break;
            }
            decoded = next;
        }
        decoded == name || (component_ok(&decoded) && !decoded.contains('/'))
    }
}

/// The single-component rules (SPEC §2), on one spelling.
fn component_ok(name: &str) -> bool {
    if name.is_empty()
        || name == "."
        || name == ".."
        || name.len() > MAX_COMPONENT_BYTES
        || is_reserved(name)
    {
        return false;
    }
    // An ASCII name (the common case, checked for every entry a directory
    // view lists) is always NFC and holds no format character: one pass
    // over its bytes decides the rest.
    if name.is_ascii() {
        return !name
            .bytes()
            .any(|b| b.is_ascii_control() || b == b'/' || b == b'\\');
    }
    !name.contains(['/', '\\'])
        && !name.chars().any(char::is_control)
        && !name.chars().any(is_format)
        && is_nfc(name)
}

impl MemoryPath {
    /// True when `self` is strictly below `other`.
    pub fn is_strictly_inside(&self, other: &MemoryPath) -> bool {
        self.components.len() > other.components.len()
            && self.components.starts_with(&other.components)
    }

    /// `/memories/<prefix>/…` for this path (tenant stores), spelled in
    /// normalised form.
    /// Its [`limit`](Self::limit) grows by the prefix's length, so a
    /// tenant's limits in the base are those of its own paths.
    pub(crate) fn with_prefix(&self, prefix: &str) -> MemoryPath {
        let mut components = Vec::with_capacity(self.components.len() + 1);
        components.push(prefix.to_owned());
        components.extend(self.components.iter().cloned());
        Self::from_components(components, self.limit + 1 + prefix.len())
    }

    /// The inverse of [`with_prefix`](Self::with_prefix); a path outside
    /// the prefix is returned as it is.
    pub(crate) fn strip_prefix(&self, prefix: &str) -> MemoryPath {
        match self.components.split_first() {
            Some((first, rest)) if first == prefix => {
                Self::from_components(rest.to_vec(), self.limit.saturating_sub(1 + prefix.len()))
            }
            _ => self.clone(),
        }
    }

    /// A path from components a store or a backup already holds (each a
    /// valid component, the whole at most [`MAX_STORED_PATH_BYTES`]: a
    /// tenant's 1,024 bytes under a shared base store's tenant prefix);
    /// `None` if a component is not valid or the path is longer.
    pub fn from_stored(normalized: &str) -> Option<MemoryPath> {
        if normalized.len() > MAX_STORED_PATH_BYTES {
            return None;
        }
        let rest = normalized.strip_prefix(ROOT)?;
        let mut path = MemoryPath::root();
        if rest.is_empty() {
            return Some(path);
        }
        let rest = rest.strip_prefix('/')?;
        for part in rest.split('/') {
            path = path.join(part)?;
        }
        Some(path)
    }

    fn from_components(components: Vec<String>, limit: usize) -> Self {
        let mut p = MemoryPath {
            raw: String::new(),
            components,
            limit,
        };
        p.raw = p.normalized();
        p
    }
}

/// The syntactic rules, on one spelling. Returns the normalised components.
fn check(raw: &str) -> Result<Vec<String>, PathError> {
    if raw.is_empty() {
        return Err(PathError::Empty);
    }
    if raw.len() > MAX_PATH_BYTES {
        return Err(PathError::TooLong);
    }
    if raw.chars().any(char::is_control) {
        return Err(PathError::ControlCharacter);
    }
    if raw.chars().any(is_format) {
        return Err(PathError::FormatCharacter);
    }
    if raw.contains('\\') {
        return Err(PathError::Backslash);
    }
    if !is_nfc(raw) {
        return Err(PathError::NotNfc);
    }
    let rest = raw.strip_prefix(ROOT).ok_or(PathError::OutsideRoot)?;
    if !(rest.is_empty() || rest.starts_with('/')) {
        return Err(PathError::OutsideRoot);
    }
    let mut components = Vec::new();
    for part in rest.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(PathError::ParentComponent),
            _ if part.len() > MAX_COMPONENT_BYTES => return Err(PathError::ComponentTooLong),
            _ if is_reserved(part) => return Err(PathError::Reserved),
            _ => components.push(part.to_owned()),
        }
    }
    Ok(components)
}

/// True for a name starting with [`RESERVED_PREFIX`] in any ASCII case
/// (`.CLAUDE-MEMORY.lock` names the lock file on a case-insensitive
/// filesystem).
pub fn is_reserved(name: &str) -> bool {
    name.as_bytes()
        .get(..RESERVED_PREFIX.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(RESERVED_PREFIX.as_bytes()))
}

/// Unicode format characters (general category Cf) and the line and
/// paragraph separators U+2028 and U+2029: invisible in a listing, or
/// reordering what is shown (SPEC §2).
fn is_format(c: char) -> bool {
    use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};
    // No ASCII character is one, and the category table costs about 20
    // instructions a character: a directory view checks every name it
    // lists (11% of a view's instructions when profiled).
    if c.is_ascii() {
        return false;
    }
    c == '\u{2028}' || c == '\u{2029}' || c.general_category() == GeneralCategory::Format
}

/// Whether `s` is in Unicode Normalization Form C (a full check, not the
/// quick one, so "maybe" never passes).
fn is_nfc(s: &str) -> bool {
    use unicode_normalization::UnicodeNormalization;
    if s.is_ascii() {
        return true;
    }
    s.chars().eq(s.nfc())
}

impl PartialEq for MemoryPath {
    fn eq(&self, other: &Self) -> bool {
        self.components == other.components
    }
}

impl Eq for MemoryPath {}

impl std::hash::Hash for MemoryPath {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.components.hash(state);
    }
}

impl fmt::Debug for MemoryPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MemoryPath({:?})", self.raw)
    }
}

impl fmt::Display for MemoryPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

impl std::str::FromStr for MemoryPath {
    type Err = PathError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        MemoryPath::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ascii_fast_path_of_component_ok_agrees_with_the_full_rules() {
        for b in 0u8..=127 {
            let name = format!("a{}b", char::from(b));
            let full = !name.contains(['/', '\\'])
                && !name.chars().any(char::is_control)
                && !name.chars().any(is_format)
                && is_nfc(&name);
            assert_eq!(component_ok(&name), full, "{name:?}");
        }
    }

    #[test]
    fn the_ascii_fast_path_of_is_format_agrees_with_the_table() {
        use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};
        for c in (0u8..=127).map(char::from) {
            assert_eq!(
                is_format(c),
                c.general_category() == GeneralCategory::Format,
                "{c:?}"
            );
        }
        // Beyond ASCII the table still decides.
        assert!(is_format('\u{200B}') && is_format('\u{202E}') && is_format('\u{2028}'));
        assert!(!is_format('é'));
    }

    fn comps(p: &str) -> Vec<String> {
        match MemoryPath::parse(p) {
            Ok(p) => p.components().to_vec(),
            Err(e) => panic!("{p} rejected: {e}"),
        }
    }

    fn reason(p: &str) -> String {
        match MemoryPath::parse(p) {
            Ok(_) => panic!("{p} accepted"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn root_spellings_are_the_root() {
        for p in [
            "/memories",
            "/memories/",
            "/memories//",
            "/memories/.",
            "/memories/./",
        ] {
            assert!(comps(p).is_empty(), "{p}");
        }
    }

    #[test]
    fn normalises_repeated_slashes_and_dots() {
        assert_eq!(comps("/memories//a/./b.txt/"), ["a", "b.txt"]);
        let p = MemoryPath::parse("/memories//a/./b.txt/").map(|p| p.normalized());
        assert_eq!(p.as_deref(), Ok("/memories/a/b.txt"));
    }

    #[test]
    fn rejects_by_component_not_prefix() {
        for p in [
            "/memoriesX",
            "/memories_backup/a",
            "memories/a",
            "/Memories/a",
            "//memories",
        ] {
            assert_eq!(reason(p), "it must start with /memories", "{p}");
        }
    }

    #[test]
    fn rejects_each_rule_with_its_reason() {
        assert_eq!(reason(""), "it is empty");
        assert_eq!(reason("/memories/../etc"), "'..' is not allowed");
        assert_eq!(reason("/memories/a\\b"), "'\\' is not allowed");
        assert_eq!(
            reason("/memories/a\0"),
            "control characters are not allowed"
        );
        assert_eq!(
            reason("/memories/a\u{85}"),
            "control characters are not allowed"
        );
        assert_eq!(
            reason(&format!("/memories/{}", "a".repeat(256))),
            "a component is longer than 255 bytes"
        );
        assert_eq!(
            reason(&format!("/memories/{}", "a/".repeat(600))),
            "it is longer than 1024 bytes"
        );
        assert_eq!(
            reason("/memories/.claude-memory.lock"),
            "names starting with .claude-memory are reserved"
        );
    }

    #[test]
    fn percent_encoded_attacks_are_rejected() {
        assert_eq!(
            reason("/memories/%2e%2e/x"),
            "'..' is not allowed once percent-decoded"
        );
        assert_eq!(
            reason("/memories/%252e%252e/x"),
            "'..' is not allowed once percent-decoded"
        );
        assert_eq!(reason("/memories/a%2fb"), "an encoded '/' is not allowed");
        assert_eq!(
            reason("/memories/a%5cb"),
            "'\\' is not allowed once percent-decoded"
        );
        assert_eq!(
            reason("/memories/a%00"),
            "control characters are not allowed once percent-decoded"
        );
    }

    #[test]
    fn a_literal_percent_is_a_name() {
        assert_eq!(comps("/memories/100%.md"), ["100%.md"]);
        assert_eq!(comps("/memories/a%20b"), ["a%20b"]);
    }

    #[test]
    fn is_valid_child_agrees_with_join() {
        let root = MemoryPath::root();
        let long = "n".repeat(256);
        for name in [
            "a.txt",
            "a/b",
            "..",
            ".",
            "",
            ".claude-memory.x",
            "a\\b",
            "a\u{1}",
            "100%.md",
            "%2e%2e",
            "a%2fb",
            ".hidden",
            &long,
        ] {
            assert_eq!(
                root.is_valid_child(name),
                root.join(name).is_some(),
                "{name:?}"
            );
        }
    }

    #[test]
    fn join_accepts_only_one_valid_component() {
        let root = MemoryPath::root();
        assert!(root.join("a.txt").is_some());
        assert!(root.join("a/b").is_none());
        assert!(root.join("..").is_none());
        assert!(root.join(".").is_none());
        assert!(root.join(".claude-memory.tmp").is_none());
    }
}
