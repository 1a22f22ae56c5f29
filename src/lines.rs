//! Line arithmetic shared by `view`, `str_replace` and `insert` (SPEC §3),
//! so every command counts lines the same way: split on `\n`, a final `\n`
//! ends the last line, a `\r` before `\n` is not part of the line.

/// Files with more lines than this are refused by `view`.
pub(crate) const MAX_LINES: usize = 999_999;

/// The lines of `text`, without terminators. `""` has none; `"a\nb\n"` two.
pub(crate) fn split(text: &str) -> impl Iterator<Item = &str> {
    let (body, terminated) = match text.strip_suffix('\n') {
        Some(body) => (body, true),
        None => (text, false),
    };
    let last = body.matches('\n').count();
    body.split('\n')
        .take(if text.is_empty() { 0 } else { usize::MAX })
        .enumerate()
        .map(move |(i, line)| {
            if terminated || i < last {
                line.strip_suffix('\r').unwrap_or(line)
            } else {
                line
            }
        })
}

/// The number of lines, counted as [`split`] does.
pub(crate) fn count(text: &str) -> usize {
    let newlines = count_newlines(text.as_bytes());
    if text.is_empty() || text.ends_with('\n') {
        newlines
    } else {
        newlines + 1
    }
}

/// The 1-based line holding byte `offset`.
pub(crate) fn line_at(text: &str, offset: usize) -> usize {
    count_newlines(&text.as_bytes()[..offset.min(text.len())]) + 1
}

/// Byte offset just past line `n` (its terminator included); `0` for
/// `n == 0`, and the end of `text` when `n` is its unterminated last line.
pub(crate) fn end_of_line(text: &str, n: usize) -> usize {
    if n == 0 {
        return 0;
    }
    text.bytes()
        .enumerate()
        .filter(|&(_, b)| b == b'\n')
        .nth(n - 1)
        .map_or(text.len(), |(i, _)| i + 1)
}

/// Counts `\n` bytes. Summing in `u8` over blocks of 255 lets the compiler
/// use 16 byte-wide lanes instead of one 64-bit counter per byte.
pub(crate) fn count_newlines(bytes: &[u8]) -> usize {
    bytes
        .chunks(255)
        .map(|block| usize::from(block.iter().map(|&b| u8::from(b == b'\n')).sum::<u8>()))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<&str> {
        split(text).collect()
    }

    #[test]
    fn counts_like_cat_n() {
        assert_eq!(lines(""), Vec::<&str>::new());
        assert_eq!(lines("a"), ["a"]);
        assert_eq!(lines("a\nb\n"), ["a", "b"]);
        assert_eq!(lines("a\nb"), ["a", "b"]);
        assert_eq!(lines("\n"), [""]);
        assert_eq!(lines("\n\n"), ["", ""]);
        for t in ["", "a", "a\nb\n", "a\nb", "\n", "\n\n", "x\r\ny"] {
            assert_eq!(count(t), lines(t).len(), "{t:?}");
        }
    }

    #[test]
    fn carriage_return_before_newline_is_hidden() {
        assert_eq!(lines("a\r\nb\r\n"), ["a", "b"]);
        assert_eq!(lines("a\r\nb\r"), ["a", "b\r"]);
    }

    #[test]
    fn newline_counting_matches_a_plain_count() {
        for len in [0, 1, 254, 255, 256, 1000, 70_000] {
            let data: Vec<u8> = (0..len)
                .map(|i| if i % 7 == 3 { b'\n' } else { b'a' })
                .collect();
            assert_eq!(
                count_newlines(&data),
                data.iter().filter(|&&b| b == b'\n').count()
            );
        }
        assert_eq!(count_newlines(&[b'\n'; 1000]), 1000);
    }

    #[test]
    fn offsets_and_line_ends() {
        assert_eq!(line_at("a\nb\nc", 0), 1);
        assert_eq!(line_at("a\nb\nc", 2), 2);
        assert_eq!(line_at("a\nb\nc", 4), 3);
        assert_eq!(end_of_line("a\nb\nc", 0), 0);
        assert_eq!(end_of_line("a\nb\nc", 1), 2);
        assert_eq!(end_of_line("a\nb\nc", 3), 5);
        assert_eq!(end_of_line("a\nb\n", 2), 4);
    }
}
