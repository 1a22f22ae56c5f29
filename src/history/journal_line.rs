//! The journal's lines: their JSON form ([`Line`], [`Record`], [`Head`])
//! and how they are read (line by line, from an offset, or from the
//! tail), for `file_log.rs`.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};

use serde::{Deserialize, Serialize};

use super::file_log::log_error;
use super::{ChangeOp, HistoryError, Revision};

/// The largest line a journal may hold that is read back: a version of a
/// file of at most the store's file limit, as base64, plus its record.
pub(super) const MAX_LINE: usize = 64 * 1024 * 1024;

pub(super) fn json_len(text: &str) -> usize {
    text.bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\t' | b'\r' | 0x08 | 0x0c => 2,
            0..=0x1f => 6,
            _ => 1,
        })
        .sum()
}

/// The id a journal line starts with (`{"id":N,` for a version,
/// `{"last_id":N}` for a mark), from its first bytes.
pub(super) fn leading_id(head: &[u8]) -> Option<u64> {
    let rest = head
        .strip_prefix(b"{\"id\":")
        .or_else(|| head.strip_prefix(b"{\"last_id\":"))?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()
}

/// Where the first line that may hold a version with an id above `after`
/// starts: found by reading the journal backwards from its end until a
/// line with an id at most `after` (0 if there is none).
pub(super) fn tail_after(file: &File, after: u64) -> Result<u64, HistoryError> {
    const CHUNK: u64 = 64 * 1024;
    let len = file.metadata().map_err(log_error)?.len();
    let mut end = len;
    // The start of the line after the one being looked at.
    let mut next = len;
    let mut buf = vec![0u8; CHUNK as usize];
    let mut head = [0u8; 40];
    while end > 0 {
        let start = end.saturating_sub(CHUNK);
        let n = usize::try_from(end - start).unwrap_or(0);
        let mut reader = file;
        reader.seek(SeekFrom::Start(start)).map_err(log_error)?;
        reader.read_exact(&mut buf[..n]).map_err(log_error)?;
        // Line starts in this chunk, last first (a line starts after a
        // newline; the journal's first line at 0).
        let mut starts: Vec<u64> = buf[..n]
            .iter()
            .enumerate()
            .filter(|&(i, &b)| b == b'\n' && start + (i as u64) + 1 < len)
            .map(|(i, _)| start + i as u64 + 1)
            .collect();
        if start == 0 {
            starts.insert(0, 0);
        }
        for &line in starts.iter().rev() {
            if line >= next {
                continue;
            }
            reader.seek(SeekFrom::Start(line)).map_err(log_error)?;
            let m = io::Read::read(&mut reader, &mut head).map_err(log_error)?;
            if leading_id(&head[..m]).is_some_and(|id| id <= after) {
                return Ok(next);
            }
            next = line;
        }
        end = start;
    }
    Ok(0)
}

/// Calls `f` with each line of `file` from `offset`, reading in chunks
/// (a line over [`MAX_LINE`] is skipped, never held whole).
pub(super) fn each_line(
    file: &File,
    offset: u64,
    f: &mut dyn FnMut(&[u8]),
) -> Result<(), HistoryError> {
    let mut reader = io::BufReader::with_capacity(256 * 1024, file);
    reader.seek(SeekFrom::Start(offset)).map_err(log_error)?;
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = io::BufRead::read_until(
            &mut (&mut reader).take(MAX_LINE as u64 + 1),
            b'\n',
            &mut line,
        )
        .map_err(log_error)?;
        if n == 0 {
            return Ok(());
        }
        if line.len() > MAX_LINE {
            // Skip the rest of an overlong line.
            let mut sink = Vec::new();
            loop {
                sink.clear();
                let m = io::BufRead::read_until(
                    &mut (&mut reader).take(MAX_LINE as u64),
                    b'\n',
                    &mut sink,
                )
                .map_err(log_error)?;
                if m == 0 || sink.last() == Some(&b'\n') {
                    break;
                }
            }
            continue;
        }
        f(line.strip_suffix(b"\n").unwrap_or(&line));
    }
}

/// One journal line.
#[derive(Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub(super) enum Line {
    Version(Box<Record>),
    Drop {
        drop: Vec<u64>,
    },
    /// The last id given out, first in a rewritten journal, so no id is
    /// reused after the versions holding the highest ones are gone.
    Mark {
        last_id: u64,
    },
}

/// A version as stored: content as text when it is UTF-8, else base64.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Record {
    pub(super) id: u64,
    file: u64,
    op: ChangeOp,
    path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    from: Option<String>,
    time_ns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    actor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    call: Option<String>,
    sha256: String,
    size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    base64: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    redacted: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

/// A version line without its content (serde skips the `text` or
/// `base64` field without keeping it).
#[derive(Debug, Deserialize)]
pub(super) struct Head {
    pub(super) id: u64,
    file: u64,
    op: ChangeOp,
    path: String,
    #[serde(default)]
    from: Option<String>,
    time_ns: u64,
    #[serde(default)]
    actor: Option<String>,
    #[serde(default)]
    call: Option<String>,
    sha256: String,
    size: u64,
    #[serde(default)]
    redacted: bool,
    #[serde(default)]
    note: Option<String>,
}

impl Head {
    pub(super) fn into_record(self) -> Revision {
        Revision {
            id: self.id,
            file: self.file,
            op: self.op,
            path: self.path,
            from: self.from,
            time: super::from_nanos(self.time_ns),
            actor: self.actor,
            call: self.call,
            sha256: self.sha256,
            size: self.size,
            content: None,
            redacted: self.redacted,
            note: self.note,
        }
    }
}

impl Record {
    pub(super) fn from_version(v: &Revision) -> Record {
        // Text when JSON writes it at most a third longer (base64's
        // cost), else base64: control characters, which JSON writes as
        // six bytes each, never multiply the content's size.
        let (text, base64) = match &v.content {
            None => (None, None),
            Some(data) => match std::str::from_utf8(data) {
                Ok(t) if json_len(t) <= t.len() + t.len() / 3 + 4 => (Some(t.to_owned()), None),
                _ => (None, Some(crate::base64::encode(data))),
            },
        };
        Record {
            id: v.id,
            file: v.file,
            op: v.op,
            path: v.path.clone(),
            from: v.from.clone(),
            time_ns: super::to_nanos(v.time),
            actor: v.actor.clone(),
            call: v.call.clone(),
            sha256: v.sha256.clone(),
            size: v.size,
            text,
            base64,
            redacted: v.redacted,
            note: v.note.clone(),
        }
    }

    pub(super) fn into_version(self) -> Revision {
        let content = match (self.text, self.base64) {
            (Some(t), _) => Some(t.into_bytes()),
            (None, Some(b)) => crate::base64::decode(&b),
            (None, None) => None,
        };
        Revision {
            id: self.id,
            file: self.file,
            op: self.op,
            path: self.path,
            from: self.from,
            time: super::from_nanos(self.time_ns),
            actor: self.actor,
            call: self.call,
            sha256: self.sha256,
            size: self.size,
            content,
            redacted: self.redacted,
            note: self.note,
        }
    }
}
