//! Secrets [`SecretDetector`](super::SecretDetector) recognises by their
//! shape in context rather than by a prefix: AWS secret access keys (40
//! characters that only mean something under their name or beside their
//! key id) and private key bodies pasted without their `BEGIN` line.

use std::ops::Range;

use super::SecretMatch;

/// The characters of a base64 body (standard alphabet, no padding).
fn base64_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'+' || b == b'/'
}

/// How far (in bytes) an AWS secret access key may stand from its key id.
const NEAR_KEY_ID: usize = 256;

/// AWS secret access keys: 40 base64 characters standing alone, right
/// after an `aws_secret_access_key` name (any case, with `=`, `:`, quotes
/// or spaces between) or within [`NEAR_KEY_ID`] bytes of an AWS access key
/// id already in `found`. Forty characters anywhere else are left alone:
/// git commit ids and hashes have that shape too.
pub(super) fn aws_secret_keys(text: &str, found: &mut Vec<SecretMatch>) {
    let bytes = text.as_bytes();
    let lower = text.to_ascii_lowercase();
    let mut hits = Vec::new();
    for (at, name) in lower.match_indices("aws_secret_access_key") {
        let mut i = at + name.len();
        let mut skipped = 0;
        while i < bytes.len()
            && skipped < 8
            && matches!(bytes[i], b' ' | b'\t' | b'=' | b':' | b'"' | b'\'')
        {
            i += 1;
            skipped += 1;
        }
        if let Some(range) = secret_at(bytes, i) {
            hits.push(range);
        }
    }
    let mut ids: Vec<Range<usize>> = found
        .iter()
        .filter(|m| m.kind == "AWS access key id")
        .map(|m| m.range.clone())
        .collect();
    ids.sort_by_key(|r| r.start);
    // Each byte is looked at once, however many ids stand near it; a
    // secret starting within a window counts whole.
    let mut scanned = 0;
    for id in ids {
        let mut i = id.start.saturating_sub(NEAR_KEY_ID).max(scanned);
        let to = (id.end + NEAR_KEY_ID).min(text.len());
        while i < to {
            match secret_at(bytes, i) {
                Some(range) => {
                    i = range.end;
                    hits.push(range);
                }
                None => i += 1,
            }
        }
        scanned = i;
    }
    for range in hits {
        found.push(SecretMatch {
            kind: "AWS secret access key",
            range,
        });
    }
}

/// A run of exactly 40 base64 characters starting at `i`, standing alone
/// (no base64 character on either side, no `=` padding after it), holding a letter and a
/// digit, `/` or `+` (so not a word). Byte-wise: a run of ASCII always
/// starts and ends on char boundaries.
fn secret_at(bytes: &[u8], i: usize) -> Option<Range<usize>> {
    if i > 0 && base64_byte(bytes[i - 1]) {
        return None;
    }
    let run_len = bytes
        .get(i..)?
        .iter()
        .take_while(|&&b| base64_byte(b))
        .count();
    let end = i + run_len;
    let alone = bytes.get(end).is_none_or(|&b| b != b'=');
    let run = &bytes[i..end];
    let mixed = run.iter().any(u8::is_ascii_alphabetic)
        && run
            .iter()
            .any(|&b| b.is_ascii_digit() || b == b'/' || b == b'+');
    (run_len == 40 && alone && mixed).then_some(i..end)
}

/// Shortest first line (in base64 characters) of a key body.
const MIN_BODY_LINE: usize = 40;

/// Private key bodies without their `BEGIN` line: a run of at least
/// [`MIN_BODY_LINE`] base64 characters, standing alone, whose first bytes
/// decode to the start of a private key (DER `SEQUENCE` then `INTEGER`
/// version 0 or 1: PKCS#1, PKCS#8 and SEC1 keys; certificates and public
/// keys start with a nested `SEQUENCE` instead) or of an OpenSSH key
/// (`openssh-key-v1`). The match runs over the following base64 lines and
/// an `-----END …-----` line right after them.
pub(super) fn key_bodies(text: &str, found: &mut Vec<SecretMatch>) {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let starts_run = base64_byte(bytes[i]) && (i == 0 || !base64_byte(bytes[i - 1]));
        if !starts_run {
            i += 1;
            continue;
        }
        let run_len = bytes[i..].iter().take_while(|&&b| base64_byte(b)).count();
        if run_len >= MIN_BODY_LINE && looks_like_a_private_key(&text[i..i + run_len]) {
            let end = body_end(text, i + run_len, run_len);
            found.push(SecretMatch {
                kind: "private key",
                range: i..end,
            });
            i = end;
        } else {
            i += run_len;
        }
    }
}

fn looks_like_a_private_key(head: &str) -> bool {
    let prefix = &head[..head.len().min(64) / 4 * 4];
    let Some(der) = crate::base64::decode(prefix) else {
        return false;
    };
    if der.starts_with(b"openssh-key-v1\0") {
        return true;
    }
    // SEQUENCE, its length (short or long form), INTEGER of one byte, 0 or 1.
    let after_length = match der.get(1) {
        Some(&n) if n < 0x80 => 2,
        Some(&n) if (0x81..=0x84).contains(&n) => 2 + usize::from(n - 0x80),
        _ => return false,
    };
    der.first() == Some(&0x30)
        && der
            .get(after_length..after_length + 3)
            .is_some_and(|v| v[0] == 0x02 && v[1] == 0x01 && v[2] <= 1)
}

/// Where a key body whose first run (of `width` characters) ends at `at`
/// ends: after its padding, every following line of base64 as wide as the
/// first, a last shorter one that holds a digit, `+`, `/` or padding (not
/// a word such as `thanks`), and an `-----END …-----` line right after.
fn body_end(text: &str, mut at: usize, width: usize) -> usize {
    let bytes = text.as_bytes();
    while bytes.get(at) == Some(&b'=') {
        at += 1;
    }
    loop {
        let rest = &text[at..];
        let skip = if rest.starts_with("\r\n") {
            2
        } else if rest.starts_with('\n') {
            1
        } else {
            return at;
        };
        let line = &rest[skip..];
        let line = line[..line.find('\n').unwrap_or(line.len())].trim_end_matches('\r');
        let body = line
            .bytes()
            .take_while(|&b| base64_byte(b) || b == b'=')
            .count();
        let encoded = line
            .bytes()
            .any(|b| b.is_ascii_digit() || matches!(b, b'+' | b'/' | b'='));
        if body > 0 && body == line.len() && body == width {
            at += skip + body;
        } else if body > 0 && body == line.len() && body < width && encoded {
            // The last line; only an END line may follow.
            at += skip + body;
            let after = &text[at..];
            let skip =
                usize::from(after.starts_with('\n')) + usize::from(after.starts_with("\r\n")) * 2;
            let next = &after[skip.min(after.len())..];
            let next = next[..next.find('\n').unwrap_or(next.len())].trim_end_matches('\r');
            if skip > 0 && next.starts_with("-----END ") && next.ends_with("-----") {
                return at + skip + next.len();
            }
            return at;
        } else if line.starts_with("-----END ") && line.ends_with("-----") {
            return at + skip + line.len();
        } else {
            return at;
        }
    }
}
