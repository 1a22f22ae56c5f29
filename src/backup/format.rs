//! The backup document: typed, versioned, and read with its header first,
//! so a document from a newer claude-memory is refused by its version
//! rather than by whatever field it added.

use std::io::{self, Write};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::base64;

/// The `format` field of every backup.
pub const FORMAT: &str = "claude-memory-export";

/// The version this crate writes: 2 adds `modified` times and empty
/// directories to version 1's files.
pub const VERSION: u32 = 2;

/// The oldest version this crate still reads.
pub const OLDEST_VERSION: u32 = 1;

/// A whole store as one document.
///
/// ```json
/// {"format": "claude-memory-export", "version": 2, "files": [
///   {"path": "/memories/a.md", "text": "alpha\n", "modified": "2025-01-02T03:04:05.678Z"},
///   {"path": "/memories/logo.png", "base64": "iVBORw0K…", "modified": "…"},
///   {"path": "/memories/empty", "directory": true}
/// ]}
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Backup {
    /// Always [`FORMAT`].
    pub format: String,
    /// [`VERSION`] when written by this crate; [`OLDEST_VERSION`] to
    /// [`VERSION`] are read.
    pub version: u32,
    /// Files and empty directories, in path order.
    pub files: Vec<Entry>,
    /// Entries [`of_store`](Self::of_store) found but could not take: their
    /// names are ones no memory path can spell (made outside the store's
    /// API, or by a release with looser path rules, such as a name not in
    /// NFC), so the backup does not hold them. Never serialized; a caller
    /// should not take the backup for complete unless this is empty (the
    /// CLI refuses to write it).
    #[serde(skip)]
    pub unspellable: Vec<String>,
}

/// One file or empty directory of a [`Backup`]: exactly one of `text`,
/// `base64` or `directory: true`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// The memory path (`/memories/…`).
    pub path: String,
    /// The content, for a UTF-8 file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The content in standard base64, for any other file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base64: Option<String>,
    /// True for an empty directory (one with files is implied by them).
    #[serde(default, skip_serializing_if = "is_false")]
    pub directory: bool,
    /// When the file was last written, in RFC 3339 (UTC), if the store
    /// knew. Kept for reference: an import cannot set it (restored files
    /// carry the time of the import).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified: Option<String>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// What an [`Entry`] holds, once checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// A file and its bytes.
    File(Vec<u8>),
    /// An empty directory.
    Directory,
}

impl Entry {
    /// A file entry: `text` if `data` is UTF-8, else `base64`.
    pub fn file(path: impl Into<String>, data: Vec<u8>, modified: Option<SystemTime>) -> Self {
        let (text, base64) = match String::from_utf8(data) {
            Ok(text) => (Some(text), None),
            Err(e) => (None, Some(base64::encode(e.as_bytes()))),
        };
        Entry {
            path: path.into(),
            text,
            base64,
            directory: false,
            modified: modified.and_then(rfc3339),
        }
    }

    /// An empty directory entry.
    pub fn directory(path: impl Into<String>) -> Self {
        Entry {
            path: path.into(),
            text: None,
            base64: None,
            directory: true,
            modified: None,
        }
    }

    /// The checked content, or why the entry is malformed.
    pub fn content(&self) -> Result<Content, String> {
        match (&self.text, &self.base64, self.directory) {
            (Some(text), None, false) => Ok(Content::File(text.as_bytes().to_vec())),
            (None, Some(b64), false) => base64::decode(b64)
                .map(Content::File)
                .ok_or_else(|| "its base64 is not valid".to_owned()),
            (None, None, true) => Ok(Content::Directory),
            _ => Err("it needs exactly one of text, base64 or \"directory\": true".to_owned()),
        }
    }

    /// The parsed `modified` time, or why it does not parse.
    pub fn modified_time(&self) -> Result<Option<SystemTime>, String> {
        self.modified
            .as_deref()
            .map(|m| {
                humantime::parse_rfc3339(m)
                    .map_err(|e| format!("its modified time `{m}` is not RFC 3339 UTC: {e}"))
            })
            .transpose()
    }
}

/// `t` in RFC 3339 UTC, or `None` for a time it cannot spell (before 1970
/// or after 9999, as a filesystem may hold): the formatter panics on those,
/// and no store state may make an export panic.
fn rfc3339(t: SystemTime) -> Option<String> {
    /// 10000-01-01T00:00:00Z, in seconds since the epoch.
    const YEAR_10000: u64 = 253_402_300_800;
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) if d.as_secs() < YEAR_10000 => Some(humantime::format_rfc3339_millis(t).to_string()),
        _ => None,
    }
}

/// Why a document is not a backup this crate can read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// Not JSON at all.
    #[error("not JSON: {0}")]
    NotJson(String),
    /// The `format` field is missing or not [`FORMAT`].
    #[error("not a claude-memory export (the \"format\" field is not \"{FORMAT}\")")]
    NotABackup,
    /// A version above [`VERSION`]: written by a newer claude-memory.
    #[error(
        "this export is version {0}, from a newer claude-memory; this one reads versions {OLDEST_VERSION} to {VERSION}: upgrade claude-memory to import it"
    )]
    Newer(u64),
    /// A missing, non-integer or unknown version.
    #[error(
        "this export has version {0}, which no claude-memory writes (this one reads versions {OLDEST_VERSION} to {VERSION})"
    )]
    UnknownVersion(String),
    /// The header is fine but the rest does not fit the version's shape.
    #[error("a malformed version {version} export: {reason}")]
    Malformed {
        /// The document's version.
        version: u32,
        /// What serde said.
        reason: String,
    },
}

impl Backup {
    /// A backup of the current [`VERSION`] holding `files`.
    pub fn new(files: Vec<Entry>) -> Self {
        Backup {
            format: FORMAT.to_owned(),
            version: VERSION,
            files,
            unspellable: Vec::new(),
        }
    }

    /// Parses a document: checks `format` and `version` before anything
    /// else, so a newer version is refused as such.
    pub fn from_json(text: &str) -> Result<Self, FormatError> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| FormatError::NotJson(e.to_string()))?;
        Self::from_value(&value)
    }

    /// [`from_json`](Self::from_json) for an already parsed document.
    pub fn from_value(value: &Value) -> Result<Self, FormatError> {
        if value.get("format").and_then(Value::as_str) != Some(FORMAT) {
            return Err(FormatError::NotABackup);
        }
        let version = match value.get("version") {
            Some(Value::Number(n)) => match n.as_u64() {
                Some(v) if v > u64::from(VERSION) => return Err(FormatError::Newer(v)),
                Some(v) if v >= u64::from(OLDEST_VERSION) => v as u32,
                _ => return Err(FormatError::UnknownVersion(n.to_string())),
            },
            Some(other) => return Err(FormatError::UnknownVersion(other.to_string())),
            None => return Err(FormatError::UnknownVersion("(none)".to_owned())),
        };
        let backup: Backup =
            serde_json::from_value(value.clone()).map_err(|e| FormatError::Malformed {
                version,
                reason: e.to_string(),
            })?;
        if version == 1
            && let Some(e) = backup
                .files
                .iter()
                .find(|e| e.directory || e.modified.is_some())
        {
            return Err(FormatError::Malformed {
                version,
                reason: format!("{}: version 1 has no directory or modified fields", e.path),
            });
        }
        Ok(backup)
    }

    /// The document as pretty-printed JSON, with a final newline.
    pub fn to_json(&self) -> String {
        let mut out = Vec::new();
        // Writing to a vector cannot fail, and JSON is UTF-8.
        let _ = self.write_json(&mut out);
        String::from_utf8(out).unwrap_or_default()
    }

    /// [`to_json`](Self::to_json) into `out`.
    pub(super) fn write_json(&self, out: &mut dyn Write) -> io::Result<()> {
        let mut json = JsonWriter::start(out, &self.format, self.version)?;
        for entry in &self.files {
            json.entry(entry)?;
        }
        json.end()
    }

    /// How many file entries (not directories).
    pub fn file_count(&self) -> usize {
        self.files.iter().filter(|e| !e.directory).count()
    }

    /// How many empty-directory entries.
    pub fn directory_count(&self) -> usize {
        self.files.iter().filter(|e| e.directory).count()
    }
}

/// Writes a backup document one entry at a time, laid out as
/// `serde_json`'s pretty printer lays out a whole [`Backup`] (so an
/// export can stream a store of any size, one file in memory at a time).
pub(super) struct JsonWriter<'a> {
    out: &'a mut dyn Write,
    empty: bool,
}

impl<'a> JsonWriter<'a> {
    /// Writes the header, up to the opening of `files`.
    pub(super) fn start(out: &'a mut dyn Write, format: &str, version: u32) -> io::Result<Self> {
        out.write_all(b"{\n  \"format\": ")?;
        serde_json::to_writer(&mut *out, format)?;
        write!(out, ",\n  \"version\": {version},\n  \"files\": [")?;
        Ok(JsonWriter { out, empty: true })
    }

    /// Writes one entry of `files`.
    pub(super) fn entry(&mut self, entry: &Entry) -> io::Result<()> {
        let open: &[u8] = if self.empty { b"\n    {" } else { b",\n    {" };
        self.out.write_all(open)?;
        self.empty = false;
        // `directory` is the one field that is not a string.
        let fields = [
            ("path", Some(entry.path.as_str())),
            ("text", entry.text.as_deref()),
            ("base64", entry.base64.as_deref()),
            ("directory", entry.directory.then_some("true")),
            ("modified", entry.modified.as_deref()),
        ];
        let present = fields.into_iter().filter_map(|(n, v)| v.map(|v| (n, v)));
        for (i, (name, value)) in present.enumerate() {
            let sep = if i == 0 { "\n      " } else { ",\n      " };
            write!(self.out, "{sep}\"{name}\": ")?;
            if name == "directory" {
                self.out.write_all(value.as_bytes())?;
            } else {
                serde_json::to_writer(&mut *self.out, value)?;
            }
        }
        self.out.write_all(b"\n    }")
    }

    /// Closes `files` and the document, with a final newline.
    pub(super) fn end(self) -> io::Result<()> {
        let close: &[u8] = if self.empty { b"]\n}\n" } else { b"\n  ]\n}\n" };
        self.out.write_all(close)
    }
}

#[cfg(test)]
mod tests {
    use super::{Backup, Entry};

    /// The streamed layout is `serde_json`'s pretty one, byte for byte.
    #[test]
    fn the_streamed_document_is_the_pretty_printed_one() {
        let empty = Backup::new(Vec::new());
        let mut files = vec![
            Entry::file(
                "/memories/a.md",
                b"alpha\n\"quoted\" \x01\t\\ \xc3\xa9".to_vec(),
                None,
            ),
            Entry::file("/memories/b.bin", vec![0xff, 0, 1], None),
            Entry::directory("/memories/empty"),
        ];
        files[0].modified = Some("2025-01-02T03:04:05.678Z".to_owned());
        for backup in [empty, Backup::new(files)] {
            let mut pretty = serde_json::to_string_pretty(&backup).expect("serialize");
            pretty.push('\n');
            assert_eq!(backup.to_json(), pretty);
        }
    }
}
