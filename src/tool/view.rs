//! `view`: a file with line numbers (streamed, whatever its size), an
//! image, or a directory listing two levels deep with sizes.

use std::io::Read;

use super::{MemoryTool, Outcome, parse};
use crate::lines;
use crate::numbered::Numberer;
use crate::path::MemoryPath;
use crate::render::{self, ModelError};
use crate::result::{Content, ImageFormat};
use crate::store::walk::walk_noting_unlistable;
use crate::store::{FileReader, Flow, MemoryStore, Op, Order, Step, StoreError};

/// Bytes read from a file at a time while viewing it.
const READ_CHUNK: usize = 64 * 1024;

/// A shown line is cut after this many bytes (or `max_file_size`, if
/// larger), so one huge line cannot exhaust memory.
const MIN_SHOWN_LINE_BYTES: u64 = 1024 * 1024;

/// The narrowest size column (`0B`) and its tab: rows are kept while a
/// lower bound of the output's length fits the limit, so every row that can
/// be shown is kept, before any size is known.
const MIN_SIZE_WIDTH: usize = 3;

/// Rows of a directory view. Only rows that may still fit the output limit
/// are kept; the rest are only counted, so a huge tree costs its walk (the
/// sizes need it) but not its formatting.
struct Listing {
    rows: Vec<(u64, String, bool)>,
    chars: usize,
    budget: usize,
    entries: usize,
}

impl Listing {
    /// Counts an entry and keeps its row if it may fit; returns its index.
    fn push(&mut self, parent: &str, name: &str, is_dir: bool) -> Option<usize> {
        self.entries += 1;
        if self.chars > self.budget {
            return None;
        }
        let mut path = String::with_capacity(parent.len() + 1 + name.len());
        path.push_str(parent);
        path.push('/');
        path.push_str(name);
        self.chars += path.chars().count() + MIN_SIZE_WIDTH + 1;
        self.rows.push((0, path, is_dir));
        Some(self.rows.len() - 1)
    }
}

impl<S: MemoryStore> MemoryTool<S> {
    pub(super) fn view(&self, raw: &str, range: Option<[i64; 2]>) -> Outcome {
        let path = parse(raw)?;
        // Open first: a file (the common case) then costs one lookup.
        match self.store.open(&path) {
            Ok(file) => self.view_file(&path, file, range),
            Err(StoreError::IsADirectory { .. }) => self.view_directory(&path).map(Content::Text),
            Err(StoreError::NotFound { .. }) => Err(render::view_missing(raw)),
            Err(e) => Err(render::storage_failure(&e, raw)),
        }
    }

    fn view_directory(&self, dir: &MemoryPath) -> Result<String, ModelError> {
        let base = dir.normalized();
        let mut listing = Listing {
            rows: vec![(0, base.clone(), false)],
            chars: base.chars().count() + MIN_SIZE_WIDTH,
            // Rows past this many characters cannot be shown: count them only.
            budget: self.config.view_output_limit,
            entries: 1,
        };
        // One frame per open directory: how it is shown (depth < 2 only:
        // deeper ones have no listed children), its row, its visible total.
        let mut open: Vec<(String, Option<usize>, u64)> = Vec::new();
        // An unlistable subdirectory is shown without its contents: one
        // entry that cannot be read must not hide all the others.
        let mut unlisted = Vec::new();
        walk_noting_unlistable(
            &self.store,
            dir,
            Order::ByName,
            &mut unlisted,
            &mut |step| {
                match step {
                    Step::Enter { entry: None, .. } => open.push((base.clone(), Some(0), 0)),
                    Step::Enter {
                        path,
                        entry: Some(entry),
                        depth,
                    } => {
                        if is_hidden(&entry.name) {
                            // Its `Leave` still comes: a frame that adds nothing.
                            open.push((String::new(), None, 0));
                            return Ok(Flow::Skip);
                        }
                        let row = match open.last() {
                            Some((parent, ..)) if depth <= 2 => {
                                listing.push(parent, &entry.name, true)
                            }
                            _ => None,
                        };
                        let shown = if depth < 2 {
                            path.normalized()
                        } else {
                            String::new()
                        };
                        open.push((shown, row, 0));
                    }
                    // A name no memory path can spell is not shown.
                    Step::File { dir, entry, depth }
                        if !is_hidden(&entry.name) && dir.is_valid_child(&entry.name) =>
                    {
                        if let Some((parent, _, total)) = open.last_mut() {
                            if depth <= 2
                                && let Some(row) = listing.push(parent, &entry.name, false)
                            {
                                listing.rows[row].0 = entry.len;
                            }
                            *total += entry.len;
                        }
                    }
                    Step::File { .. } => {}
                    Step::Leave { .. } => {
                        if let Some((_, row, total)) = open.pop() {
                            if let Some(row) = row {
                                listing.rows[row].0 = total;
                            }
                            if let Some((_, _, parent_total)) = open.last_mut() {
                                *parent_total += total;
                            }
                        }
                    }
                }
                Ok(Flow::Continue)
            },
        )
        .map_err(|e| render::storage_failure(&e, &base))?;
        // A subdirectory that could not be listed is marked, never shown
        // as an empty one (SPEC §7: an error for that entry).
        let unlisted: std::collections::HashSet<String> =
            unlisted.iter().map(MemoryPath::normalized).collect();
        let mut out = render::directory_header(&base);
        let limit = self.config.view_output_limit;
        // The rows kept, their sizes at most 8 characters (`1023.9K`) and
        // a newline: one allocation for the whole listing, mostly.
        out.reserve(listing.chars.min(limit.saturating_mul(4)) + 6 * listing.rows.len());
        let mut used = 0;
        let mut shown = 0;
        for (size, path, is_dir) in &listing.rows {
            // Written in place, and taken back if it does not fit.
            let before = out.len();
            out.push('\n');
            let mut cost =
                render::push_listing_line(&mut out, *size, path, *is_dir) + usize::from(shown > 0);
            if *is_dir && unlisted.contains(path) {
                out.push_str(render::UNLISTED);
                cost += render::UNLISTED.len();
            }
            if shown > 0 && used + cost > limit {
                out.truncate(before);
                break;
            }
            used += cost;
            shown += 1;
        }
        if shown < listing.entries {
            out.push('\n');
            out.push_str(&render::listing_truncated(listing.entries - shown));
        }
        Ok(out)
    }

    fn view_file(
        &self,
        path: &MemoryPath,
        file: FileReader<'_>,
        range: Option<[i64; 2]>,
    ) -> Outcome {
        let raw = path.as_str();
        let read_error =
            |e: std::io::Error| render::storage_failure(&StoreError::io(Op::Read, path, e), raw);
        let mut reader = file.reader;
        // Small files need a small buffer (zeroing 64 KiB costs more than
        // numbering a short note).
        let size = usize::try_from(file.len)
            .unwrap_or(READ_CHUNK)
            .saturating_add(1);
        let mut buf = vec![0; size.clamp(8, READ_CHUNK)];
        let head_len = read_full(&mut reader, &mut buf[..8]).map_err(read_error)?;
        if let Some(format) = ImageFormat::detect(raw, &buf[..head_len]) {
            let limit = self.config.max_image_size;
            let mut data = buf[..head_len].to_vec();
            (&mut reader)
                .take(limit.saturating_add(1).saturating_sub(head_len as u64))
                .read_to_end(&mut data)
                .map_err(read_error)?;
            let size = file.len.max(data.len() as u64);
            if size > limit {
                return Err(render::image_too_large(raw, size, limit));
            }
            return Ok(Content::Image { format, data });
        }

        // Text: one streaming pass, whatever the file's size.
        let (first, last) = match range {
            None => (1, usize::MAX),
            Some([start, end]) if start >= 1 && (end == -1 || end >= start) => (
                usize::try_from(start).unwrap_or(usize::MAX),
                usize::try_from(end).unwrap_or(usize::MAX),
            ),
            Some(_) => (usize::MAX, 0), // invalid: only count lines for the message
        };
        let max_line = self.config.max_file_size.max(MIN_SHOWN_LINE_BYTES);
        // Room for the numbered text of a small file, without regrowing.
        let mut header = String::with_capacity(
            usize::try_from(file.len.saturating_mul(2))
                .unwrap_or(usize::MAX)
                .clamp(64, 4 * self.config.view_output_limit + 256),
        );
        header.push_str(&render::file_header(raw));
        let mut numberer = Numberer::new(
            header,
            first,
            last,
            self.config.view_output_limit,
            usize::try_from(max_line).unwrap_or(usize::MAX),
        );
        let not_utf8 = |_| render::not_utf8(raw);
        numberer.feed(&buf[..head_len]).map_err(not_utf8)?;
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(read_error(e)),
            };
            numberer.feed(&buf[..n]).map_err(not_utf8)?;
        }
        let view = numberer.finish().map_err(not_utf8)?;
        let n_lines = view.n_lines;
        if n_lines > lines::MAX_LINES {
            return Err(render::too_many_lines(raw));
        }
        if let Some([start, end]) = range {
            if start < 1 || start as u64 > n_lines as u64 {
                return Err(render::view_range_start(start, end, n_lines));
            }
            if end != -1 && end < start {
                return Err(render::view_range_end(start, end));
            }
        }
        let mut out = view.text;
        if let Some((a, b)) = view.shown
            && b < last.min(n_lines)
        {
            out.push('\n');
            out.push_str(&render::file_truncated(a, b, n_lines));
        }
        Ok(Content::Text(out))
    }
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Names a directory view leaves out, with their subtrees.
fn is_hidden(name: &str) -> bool {
    name.starts_with('.') || name == "node_modules"
}
