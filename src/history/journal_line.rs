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

/// An offset to read forward from to find the first version line whose
/// id is at least `target`: no version line before it has one. Ids grow
/// along the journal, and lines are of similar lengths, so the search
/// guesses where the id lies from the ids at the ends of the range
/// (interpolation: a few probes, whatever the journal's length), and
/// halves the range every other step, so uneven lines cost at most the
/// log of the length. Each probe reads a line's first bytes.
pub(super) fn lower_bound(file: &File, len: u64, target: u64) -> Result<u64, HistoryError> {
    const SCAN: u64 = 16 * 1024;
    // Ids at the ends of the range, once probed (versions below `lo` are
    // below the target, versions from `hi` on are at least it).
    let (mut lo, mut hi) = (0u64, len);
    let (mut lo_id, mut hi_id): (Option<u64>, Option<u64>) = (None, None);
    let mut step = 0u32;
    while hi - lo > SCAN {
        step += 1;
        let guess = match (lo_id, hi_id) {
            (Some(a), Some(b)) if step.is_multiple_of(2) && b > a && target > a => {
                let share = (target - a) as f64 / (b - a) as f64;
                lo + ((hi - lo) as f64 * share.min(1.0)) as u64
            }
            _ => lo + (hi - lo) / 2,
        };
        // Never at an end, so every step shrinks the range.
        let mid = guess.clamp(lo + 1, hi - 1);
        let start = next_line_start(file, mid, hi)?;
        if start >= hi {
            if step.is_multiple_of(2) {
                continue; // a guess past the last line start: halve instead
            }
            break; // no line starts in the upper half: read the rest by line
        }
        // No version in [start, hi): reading from `start` finds the same
        // first version as reading from `hi`.
        match first_version_at(file, start, hi)? {
            // Ids grow along the journal: the first at least the target.
            Some((at, id)) if id == target => return Ok(at),
            Some((at, id)) if id < target => {
                lo = next_line_start(file, at + 1, hi)?;
                lo_id = Some(id);
            }
            Some((at, id)) => {
                hi = at;
                hi_id = Some(id);
            }
            None => hi = start,
        }
    }
    // The last stretch, line by line.
    let mut found = hi;
    let mut at = lo;
    each_line_until(file, lo, &mut |line| {
        if at >= hi {
            return false;
        }
        if leading_version_id(line).is_some_and(|id| id >= target) {
            found = at;
            return false;
        }
        at += line.len() as u64 + 1;
        true
    })?;
    Ok(found.min(hi))
}

/// The start of the first line at or after `at` (a line starts after a
/// newline, or at 0), or `end` if none starts before it.
fn next_line_start(file: &File, at: u64, end: u64) -> Result<u64, HistoryError> {
    if at == 0 {
        return Ok(0);
    }
    let mut reader = io::BufReader::with_capacity(4096, file);
    reader.seek(SeekFrom::Start(at - 1)).map_err(log_error)?;
    let mut skipped = Vec::new();
    let n = io::BufRead::read_until(
        &mut (&mut reader).take(MAX_LINE as u64 + 1),
        b'\n',
        &mut skipped,
    )
    .map_err(log_error)?;
    Ok((at - 1 + n as u64).min(end))
}

/// The first version line at or after line start `start`, before `end`:
/// its offset and id, from each line's first bytes (a version line is
/// never read whole).
fn first_version_at(file: &File, start: u64, end: u64) -> Result<Option<(u64, u64)>, HistoryError> {
    let mut at = start;
    let mut head = [0u8; 32];
    while at < end {
        let mut reader = file;
        reader.seek(SeekFrom::Start(at)).map_err(log_error)?;
        let n = reader.read(&mut head).map_err(log_error)?;
        if n == 0 {
            return Ok(None);
        }
        if let Some(id) = leading_version_id(&head[..n]) {
            return Ok(Some((at, id)));
        }
        // A mark, a 0.4 drop line, a torn line: the next line.
        at = next_line_start(file, at + 1, end)?;
    }
    Ok(None)
}

/// The time (ns since the epoch) in a version line's first bytes: the
/// `"time_ns":` key cannot occur inside a JSON string, where a quote is
/// escaped.
pub(super) fn time_of(head: &[u8]) -> Option<u64> {
    const KEY: &[u8] = b"\"time_ns\":";
    let at = head.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let rest = &head[at..];
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == rest.len() {
        return None; // cut off: the number may go on
    }
    std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()
}

/// An offset to read forward from to find the first version made at or
/// after `since` (ns): no version line before it is. Times grow along a
/// journal of this format, so it halves the range, reading a line's
/// first bytes per step; a line whose time is not in them ends the
/// search, and the rest is read line by line.
pub(super) fn time_bound(file: &File, len: u64, since: u64) -> Result<u64, HistoryError> {
    const SCAN: u64 = 16 * 1024;
    let (mut lo, mut hi) = (0u64, len);
    while hi - lo > SCAN {
        let mid = lo + (hi - lo) / 2;
        let start = next_line_start(file, mid, hi)?;
        let Some((at, head)) = first_version_head(file, start, hi)? else {
            hi = start;
            continue;
        };
        match time_of(&head) {
            Some(t) if t < since => lo = next_line_start(file, at + 1, hi)?,
            Some(_) => hi = at,
            None => break,
        }
    }
    Ok(lo)
}

/// The first version line at or after line start `start`, before `end`:
/// its offset and its first 16 KiB.
fn first_version_head(
    file: &File,
    start: u64,
    end: u64,
) -> Result<Option<(u64, Vec<u8>)>, HistoryError> {
    let Some((at, _)) = first_version_at(file, start, end)? else {
        return Ok(None);
    };
    let mut head = vec![0u8; 16 * 1024];
    let mut reader = file;
    reader.seek(SeekFrom::Start(at)).map_err(log_error)?;
    let n = reader.read(&mut head).map_err(log_error)?;
    head.truncate(n);
    Ok(Some((at, head)))
}

/// The id a version line starts with (`{"id":N,`).
pub(super) fn leading_version_id(line: &[u8]) -> Option<u64> {
    let rest = line.strip_prefix(b"{\"id\":")?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()
}

/// The journal's lines read backwards from an offset, each with where it
/// starts: for a page of the newest versions, reading only the journal's
/// tail. A line over [`MAX_LINE`] is skipped.
pub(super) struct BackLines<'f> {
    file: &'f File,
    /// Where the unread part ends.
    pos: u64,
    /// The bytes read and not yet given out (a line's end, at the front).
    buf: Vec<u8>,
}

impl<'f> BackLines<'f> {
    /// The lines that end before `end` (a line start), last first.
    pub(super) fn new(file: &'f File, end: u64) -> Self {
        BackLines {
            file,
            pos: end,
            buf: Vec::new(),
        }
    }

    /// The previous line and its offset, `None` at the journal's start.
    pub(super) fn prev(&mut self) -> Result<Option<(u64, Vec<u8>)>, HistoryError> {
        const CHUNK: u64 = 64 * 1024;
        loop {
            // The buffer holds [pos, pos + buf.len()): a line within it
            // starts after its last newline but one (the trailing one).
            let body = match self.buf.last() {
                Some(b'\n') => &self.buf[..self.buf.len() - 1],
                _ => &self.buf[..],
            };
            if let Some(nl) = body.iter().rposition(|&b| b == b'\n') {
                let line = body[nl + 1..].to_vec();
                let at = self.pos + nl as u64 + 1;
                self.buf.truncate(nl + 1);
                return Ok(Some((at, line)));
            }
            if self.pos == 0 {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                let line = body.to_vec();
                self.buf.clear();
                return Ok(Some((0, line)));
            }
            if self.buf.len() > MAX_LINE + 1 {
                // An overlong line: skip to its start.
                let keep = self.buf.last() == Some(&b'\n');
                self.buf.clear();
                if keep {
                    self.buf.push(b'\n');
                }
                while self.pos > 0 {
                    let start = self.pos.saturating_sub(CHUNK);
                    let chunk = self.read(start, self.pos)?;
                    self.pos = start;
                    if let Some(nl) = chunk.iter().rposition(|&b| b == b'\n') {
                        let mut rest = chunk[..=nl].to_vec();
                        rest.append(&mut self.buf);
                        self.buf = rest;
                        break;
                    }
                }
                continue;
            }
            let start = self.pos.saturating_sub(CHUNK);
            let mut chunk = self.read(start, self.pos)?;
            chunk.append(&mut self.buf);
            self.buf = chunk;
            self.pos = start;
        }
    }

    fn read(&self, start: u64, end: u64) -> Result<Vec<u8>, HistoryError> {
        let mut chunk = vec![0u8; usize::try_from(end - start).unwrap_or(0)];
        let mut reader = self.file;
        reader.seek(SeekFrom::Start(start)).map_err(log_error)?;
        reader.read_exact(&mut chunk).map_err(log_error)?;
        Ok(chunk)
    }
}

/// Calls `f` with each line from `offset` while it returns `true`,
/// reading in chunks (a line over [`MAX_LINE`] is skipped, never held
/// whole).
pub(super) fn each_line_until(
    file: &File,
    offset: u64,
    f: &mut dyn FnMut(&[u8]) -> bool,
) -> Result<(), HistoryError> {
    let mut reader = io::BufReader::with_capacity(64 * 1024, file);
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
            if line.last() == Some(&b'\n') {
                continue; // read whole, just over the limit
            }
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
        if !f(line.strip_suffix(b"\n").unwrap_or(&line)) {
            return Ok(());
        }
    }
}

/// Calls `f` with each line of `file` from `offset` (see
/// [`each_line_until`]).
pub(super) fn each_line(
    file: &File,
    offset: u64,
    f: &mut dyn FnMut(&[u8]),
) -> Result<(), HistoryError> {
    each_line_until(file, offset, &mut |line| {
        f(line);
        true
    })
}

/// The journal format this release writes: a mark line first, no drop
/// lines (a dropped version is cut off or rewritten away), so a version
/// read by its id is never one a later line dropped.
pub(super) const FORMAT: u32 = 2;

/// One journal line.
#[derive(Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub(super) enum Line {
    Version(Box<Record>),
    Drop {
        drop: Vec<u64>,
    },
    /// The last id given out, first in a rewritten journal, so no id is
    /// reused after the versions holding the highest ones are gone; and
    /// the journal's format: [`FORMAT`] once it holds no drop lines (0.4
    /// wrote drop lines, and no format).
    Mark {
        last_id: u64,
        #[serde(default)]
        format: u32,
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    prev: Option<u64>,
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
    #[serde(default)]
    prev: Option<u64>,
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
            prev: self.prev,
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
            prev: v.prev,
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
            prev: self.prev,
        }
    }
}
