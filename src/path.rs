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

/// Longest accepted path component, in bytes.
pub const MAX_COMPONENT_BYTES: usize = 255;

/// Prefix reserved for the crate's own temporary and lock files, in every
/// backend; no model-supplied component may start with it.
pub const RESERVED_PREFIX: &str = ".claude-memory";

/// Why a path string was rejected. The `Display` text is the short reason
/// shown to the model after `is not a valid memory path: `.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    /// The path string was empty.
    #[error("it is empty")]
    Empty,
    /// Longer than [`MAX_PATH_BYTES`].
    #[error("it is longer than 1024 bytes")]
    TooLong,
    /// A component longer than [`MAX_COMPONENT_BYTES`].
    #[error("a component is longer than 255 bytes")]
    ComponentTooLong,
    /// A control character (`char::is_control`).
    #[error("control characters are not allowed")]
    ControlCharacter,
    /// A backslash anywhere.
    #[error("'\\' is not allowed")]
    Backslash,
    /// Not `/memories` or `/memories/…`.
    #[error("it must start with /memories")]
    OutsideRoot,
    /// A `..` component.
    #[error("'..' is not allowed")]
    ParentComponent,
    /// A component starting with [`RESERVED_PREFIX`].
    #[error("names starting with .claude-memory are reserved")]
    Reserved,
    /// The percent-decoded form breaks one of the rules above.
    #[error("{0} once percent-decoded")]
    Encoded(Box<PathError>),
    /// The percent-decoded form holds a `/` the raw path did not.
    #[error("an encoded '/' is not allowed")]
    EncodedSlash,
}

/// A path the model may use: `/memories` or below it, normalised, checked.
///
/// Keeps the string as sent (results echo it) and the normalised components
/// (what storage uses). Two spellings of one location compare equal.
#[derive(Clone)]
pub struct MemoryPath {
    raw: String,
    /// Components below `/memories`; empty for the root.
    components: Vec<String>,
}

impl MemoryPath {
    /// Validates a path string from the model (SPEC §2).
    pub fn parse(raw: &str) -> Result<Self, PathError> {
        let components = check(raw)?;
        if !raw.contains('%') {
            return Ok(MemoryPath {
                raw: raw.to_owned(),
                components,
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
        })
    }

    /// The root, `/memories`.
    pub fn root() -> Self {
        MemoryPath {
            raw: ROOT.to_owned(),
            components: Vec::new(),
        }
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
        Some(Self::from_components(rest.to_vec()))
    }

    /// Every ancestor from the root down, excluding `self`.
    pub fn ancestors(&self) -> impl Iterator<Item = MemoryPath> + '_ {
        (0..self.components.len()).map(|n| Self::from_components(self.components[..n].to_vec()))
    }

    /// A child of this directory path, if `name` is a valid component
    /// (used for names that come from a backend's listing).
    pub fn join(&self, name: &str) -> Option<MemoryPath> {
        let mut s = self.normalized();
        s.push('/');
        s.push_str(name);
        let child = MemoryPath::parse(&s).ok()?;
        // `name` must be exactly one new component ("a/b" or "." is not).
        (child.components.len() == self.components.len() + 1 && child.name() == Some(name))
            .then(|| Self::from_components(child.components))
    }

    /// True when `name` is a valid single component below this directory
    /// (what [`join`](Self::join) checks, without building the path).
    pub fn is_valid_child(&self, name: &str) -> bool {
        if name.contains('%') {
            return self.join(name).is_some();
        }
        let len: usize = ROOT.len()
            + self.components.iter().map(|c| c.len() + 1).sum::<usize>()
            + 1
            + name.len();
        len <= MAX_PATH_BYTES
            && !name.is_empty()
            && name != "."
            && name != ".."
            && name.len() <= MAX_COMPONENT_BYTES
            && !name.starts_with(RESERVED_PREFIX)
            && !name.contains(['/', '\\'])
            && !name.chars().any(char::is_control)
    }

    /// True when `self` is strictly below `other`.
    pub fn is_strictly_inside(&self, other: &MemoryPath) -> bool {
        self.components.len() > other.components.len()
            && self.components.starts_with(&other.components)
    }

    /// `/memories/<prefix>/…` for this path (tenant stores), spelled in
    /// normalised form.
    pub(crate) fn with_prefix(&self, prefix: &str) -> MemoryPath {
        let mut components = Vec::with_capacity(self.components.len() + 1);
        components.push(prefix.to_owned());
        components.extend(self.components.iter().cloned());
        Self::from_components(components)
    }

    /// The inverse of [`with_prefix`](Self::with_prefix); a path outside
    /// the prefix is returned as it is.
    pub(crate) fn strip_prefix(&self, prefix: &str) -> MemoryPath {
        match self.components.split_first() {
            Some((first, rest)) if first == prefix => Self::from_components(rest.to_vec()),
            _ => self.clone(),
        }
    }

    fn from_components(components: Vec<String>) -> Self {
        let mut p = MemoryPath {
            raw: String::new(),
            components,
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
    if raw.contains('\\') {
        return Err(PathError::Backslash);
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
            _ if part.starts_with(RESERVED_PREFIX) => return Err(PathError::Reserved),
            _ => components.push(part.to_owned()),
        }
    }
    Ok(components)
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
