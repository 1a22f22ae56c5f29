//! Streaming `cat -n` for file views: one pass over a file of any size,
//! holding only the lines that will be shown.
//!
//! It validates UTF-8, counts every line (for the 999,999-line limit and the
//! `of {n_lines}` in notices), and keeps the numbered lines of the requested
//! range up to the output limit. Memory is bounded by the output limit plus
//! one line of at most `max_line_bytes`, whatever the file's size.

use crate::lines::count_newlines;
use crate::render;

/// The result of a pass: what to show, and how many lines the file has.
#[derive(Debug)]
pub(crate) struct Numbered {
    /// The prefix given to [`Numberer::new`], then `\n` and each shown
    /// numbered line.
    pub text: String,
    /// First and last line shown, if any.
    pub shown: Option<(usize, usize)>,
    /// Total lines in the file, counted as [`crate::lines`] does.
    pub n_lines: usize,
}

/// Feeds bytes in any chunking; [`Numberer::finish`] gives the result.
pub(crate) struct Numberer {
    first: usize,
    last: usize,
    limit: usize,
    max_line_bytes: usize,
    /// 1-based number of the line being read.
    line: usize,
    /// The current line's bytes, while it may be shown.
    current: Vec<u8>,
    /// The current line grew past `max_line_bytes` and is cut.
    current_cut: bool,
    /// Bytes of an incomplete UTF-8 sequence at the end of the last chunk.
    utf8_tail: Vec<u8>,
    out: String,
    used: usize,
    shown: Option<(usize, usize)>,
    /// Output is full: later lines are only counted.
    full: bool,
    any_bytes: bool,
    ends_with_newline: bool,
}

/// The bytes fed were not UTF-8.
#[derive(Debug)]
pub(crate) struct NotUtf8;

impl Numberer {
    /// Shows lines `first..=last` (1-based) within `limit` characters,
    /// appending each as `\n{numbered line}` to `prefix` (the view's header,
    /// so the output is built in place).
    pub(crate) fn new(
        prefix: String,
        first: usize,
        last: usize,
        limit: usize,
        max_line_bytes: usize,
    ) -> Self {
        Numberer {
            first,
            last,
            limit,
            max_line_bytes,
            line: 1,
            current: Vec::new(),
            current_cut: false,
            utf8_tail: Vec::new(),
            out: prefix,
            used: 0,
            shown: None,
            full: false,
            any_bytes: false,
            ends_with_newline: false,
        }
    }

    fn wanted(&self) -> bool {
        !self.full && self.line >= self.first && self.line <= self.last
    }

    /// Processes the next chunk of the file.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> Result<(), NotUtf8> {
        if chunk.is_empty() {
            return Ok(());
        }
        self.any_bytes = true;
        self.ends_with_newline = chunk.last() == Some(&b'\n');
        // `head` completes a character split by the last chunk, `tail`
        // starts one this chunk splits; neither holds a newline.
        let (head, text, tail) = self.split_utf8(chunk)?;
        if self.wanted() {
            self.take(head);
        }
        let mut rest = self.skip_to_first(text);
        while let Some(i) = rest.find('\n') {
            if self.wanted() {
                let line = &rest[..i];
                if self.current.is_empty() && !self.current_cut {
                    self.emit(line, true); // the whole line is here: no copy
                } else {
                    self.take(line.as_bytes());
                    let bytes = std::mem::take(&mut self.current);
                    self.emit(&lossless(&bytes), true);
                }
            }
            self.line += 1;
            rest = &rest[i + 1..];
            if self.full || self.line > self.last {
                // Nothing more to show: only count.
                self.line += count_newlines(rest.as_bytes());
                return Ok(());
            }
        }
        if self.wanted() {
            self.take(rest.as_bytes());
            self.take(tail);
        }
        Ok(())
    }

    /// Ends the pass.
    pub(crate) fn finish(mut self) -> Result<Numbered, NotUtf8> {
        if !self.utf8_tail.is_empty() {
            return Err(NotUtf8);
        }
        let n_lines = if !self.any_bytes {
            0
        } else if self.ends_with_newline {
            self.line - 1
        } else {
            if self.wanted() {
                let bytes = std::mem::take(&mut self.current);
                self.emit(&lossless(&bytes), false);
            }
            self.line
        };
        Ok(Numbered {
            text: self.out,
            shown: self.shown,
            n_lines,
        })
    }

    fn take(&mut self, bytes: &[u8]) {
        let room = self.max_line_bytes.saturating_sub(self.current.len());
        if bytes.len() > room {
            self.current_cut = true;
        }
        self.current
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// Skips whole blocks that end before line `first`, counting their
    /// newlines in bulk instead of finding them one by one.
    fn skip_to_first<'t>(&mut self, mut text: &'t str) -> &'t str {
        const BLOCK: usize = 4096;
        while self.line < self.first && text.len() > BLOCK {
            let mut end = BLOCK;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            let newlines = count_newlines(&text.as_bytes()[..end]);
            if self.line + newlines >= self.first {
                break;
            }
            if newlines > 0 {
                // The line in progress ended inside the block, unshown.
                self.current.clear();
                self.current_cut = false;
            }
            self.line += newlines;
            text = &text[end..];
        }
        text
    }

    /// Shows one line (without its `\n`), if it fits.
    fn emit(&mut self, line: &str, terminated: bool) {
        let cut = self.current_cut || line.len() > self.max_line_bytes;
        self.current_cut = false;
        let mut line = &line[..floor_char_boundary(line, self.max_line_bytes)];
        if terminated && !cut {
            line = line.strip_suffix('\r').unwrap_or(line);
        }
        let start = self.out.len();
        self.out.push('\n');
        render::numbered_line(&mut self.out, self.line, line);
        // The newline joining lines counts; the one after the header does not.
        let added = &self.out[start + usize::from(self.shown.is_none())..];
        let cost = if added.is_ascii() {
            added.len()
        } else {
            added.chars().count()
        };
        if self.shown.is_some() && self.used + cost > self.limit {
            self.out.truncate(start);
            self.full = true;
            return;
        }
        self.used += cost;
        let first = self.shown.map_or(self.line, |(a, _)| a);
        self.shown = Some((first, self.line));
    }

    /// Splits a chunk into the bytes completing a character the previous
    /// chunk split, the valid text, and an incomplete character at the end
    /// (kept for the next chunk).
    fn split_utf8<'c>(
        &mut self,
        chunk: &'c [u8],
    ) -> Result<(&'c [u8], &'c str, &'c [u8]), NotUtf8> {
        let mut start = 0;
        if let Some(&lead) = self.utf8_tail.first() {
            let total = match lead {
                0xC0..=0xDF => 2,
                0xE0..=0xEF => 3,
                _ => 4,
            };
            let need = total - self.utf8_tail.len();
            start = need.min(chunk.len());
            self.utf8_tail.extend_from_slice(&chunk[..start]);
            match std::str::from_utf8(&self.utf8_tail) {
                Ok(_) => self.utf8_tail.clear(),
                Err(e) if e.error_len().is_none() && start < need => {
                    return Ok((chunk, "", &[]));
                }
                Err(_) => return Err(NotUtf8),
            }
        }
        let (head, body) = chunk.split_at(start);
        match std::str::from_utf8(body) {
            Ok(text) => Ok((head, text, &[])),
            Err(e) if e.error_len().is_none() => {
                let (valid, tail) = body.split_at(e.valid_up_to());
                self.utf8_tail = tail.to_vec();
                let text = std::str::from_utf8(valid).map_err(|_| NotUtf8)?;
                Ok((head, text, tail))
            }
            Err(_) => Err(NotUtf8),
        }
    }
}

/// Bytes of a line assembled across chunks: valid UTF-8 unless a cut split
/// a character, whose broken end is dropped.
fn lossless(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.into(),
        Err(e) => String::from_utf8_lossy(&bytes[..e.valid_up_to()]),
    }
}

/// The largest char boundary of `s` not above `max`.
fn floor_char_boundary(s: &str, max: usize) -> usize {
    if max >= s.len() {
        return s.len();
    }
    (0..=max)
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(
        data: &[u8],
        chunk: usize,
        first: usize,
        last: usize,
        limit: usize,
    ) -> Result<Numbered, NotUtf8> {
        let mut n = Numberer::new(String::new(), first, last, limit, 1 << 20);
        for c in data.chunks(chunk.max(1)) {
            n.feed(c)?;
        }
        n.finish()
    }

    #[test]
    fn every_chunking_gives_the_same_view() {
        let data = "a\r\nbé\n\nlast\r".as_bytes();
        for chunk in 1..=data.len() {
            let v = match run(data, chunk, 1, usize::MAX, 1000) {
                Ok(v) => v,
                Err(_) => panic!("chunk {chunk}: not utf8"),
            };
            assert_eq!(
                v.text, "\n     1\ta\n     2\tbé\n     3\t\n     4\tlast\r",
                "chunk {chunk}"
            );
            assert_eq!(v.n_lines, 4);
            assert_eq!(v.shown, Some((1, 4)));
        }
    }

    #[test]
    fn invalid_utf8_is_found_in_any_chunking() {
        let data = b"ok\n\xe2\x82x\n";
        for chunk in 1..=data.len() {
            assert!(
                run(data, chunk, 1, usize::MAX, 1000).is_err(),
                "chunk {chunk}"
            );
        }
        let truncated = "é".as_bytes();
        assert!(run(&truncated[..1], 1, 1, usize::MAX, 100).is_err());
    }

    #[test]
    fn range_limit_and_counting() {
        let data: String = (1..=10).map(|i| format!("l{i}\n")).collect();
        for chunk in [1, 3, 100] {
            let v = run(data.as_bytes(), chunk, 3, 5, 1000).map_err(|_| ()).ok();
            let v = v.map(|v| (v.text, v.shown, v.n_lines));
            assert_eq!(
                v,
                Some((
                    "\n     3\tl3\n     4\tl4\n     5\tl5".to_owned(),
                    Some((3, 5)),
                    10
                ))
            );
            // "     3\tl3" is 9 characters; two lines are 19.
            let v = run(data.as_bytes(), chunk, 3, usize::MAX, 19)
                .map_err(|_| ())
                .ok();
            let v = v.map(|v| (v.shown, v.n_lines));
            assert_eq!(v, Some((Some((3, 4)), 10)));
        }
    }

    #[test]
    fn skipping_whole_blocks_keeps_counts_exact() {
        let data: String = (1..=3000).map(|i| format!("line {i} é\n")).collect();
        for chunk in [7, 4096, 5000, 1 << 20] {
            for first in [1, 2, 450, 451, 1000, 2999, 3000] {
                let v = run(data.as_bytes(), chunk, first, first + 1, 1000)
                    .map_err(|_| ())
                    .ok();
                let v = v.map(|v| (v.text, v.shown, v.n_lines));
                let second = if first < 3000 {
                    format!("\n{:>6}\tline {} é", first + 1, first + 1)
                } else {
                    String::new()
                };
                let want = format!("\n{first:>6}\tline {first} é{second}");
                assert_eq!(
                    v,
                    Some((want, Some((first, (first + 1).min(3000))), 3000)),
                    "chunk {chunk}, first {first}"
                );
            }
        }
    }

    #[test]
    fn an_overlong_line_is_cut() {
        let mut n = Numberer::new(String::new(), 1, usize::MAX, 5, 4);
        assert!(n.feed(b"abcdefgh\nxy\n").is_ok());
        let v = n
            .finish()
            .map_err(|_| ())
            .ok()
            .map(|v| (v.text, v.shown, v.n_lines));
        assert_eq!(v, Some(("\n     1\tabcd".to_owned(), Some((1, 1)), 2)));
    }
}
