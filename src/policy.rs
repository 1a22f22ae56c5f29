//! Content policy: a hook on every write, and an opt-in secret detector.

use std::ops::Range;

use crate::path::MemoryPath;

mod shapes;

/// What a [`ContentPolicy`] decides about content about to be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Write it as it is.
    Allow,
    /// Write nothing; the model sees this reason in an error result.
    Reject(String),
    /// Write this text instead.
    Redact(String),
}

/// Called with the path and the whole new content of the file before every
/// `create`, `str_replace` and `insert` writes it.
pub trait ContentPolicy: Send + Sync {
    /// Decides about one write.
    fn check(&self, path: &MemoryPath, content: &str) -> Decision;

    /// Decides about a name a write creates: the path of every `create`,
    /// and the destination of every `rename`, before anything is written
    /// or moved. `Some(reason)` refuses the call (the model sees the
    /// reason); the default allows every name.
    fn check_path(&self, path: &MemoryPath) -> Option<String> {
        let _ = path;
        None
    }
}

impl<F: Fn(&MemoryPath, &str) -> Decision + Send + Sync> ContentPolicy for F {
    fn check(&self, path: &MemoryPath, content: &str) -> Decision {
        self(path, content)
    }
}

/// A policy from a closure whose parameter types are inferred (passing a
/// bare closure to [`MemoryTool::with_policy`](crate::MemoryTool::with_policy)
/// needs them written out, since its bound is the trait, not `Fn`):
///
/// ```
/// use claude_memory::policy::{self, Decision};
/// use claude_memory::{InMemoryStore, MemoryTool};
/// use serde_json::json;
///
/// let tool = MemoryTool::new(InMemoryStore::new()).with_policy(policy::from_fn(|_path, text| {
///     if text.contains("password") {
///         Decision::Reject("memories must not hold passwords".into())
///     } else {
///         Decision::Allow
///     }
/// }));
/// let result = tool.dispatch(&json!({"command": "create", "path": "/memories/a.md",
///                                    "file_text": "password: hunter2"}));
/// assert!(result.is_error);
/// ```
pub fn from_fn<F>(f: F) -> impl ContentPolicy
where
    F: Fn(&MemoryPath, &str) -> Decision + Send + Sync,
{
    f
}

/// What [`SecretDetector`] does with a secret it finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretAction {
    /// Refuse the write, naming the kinds of secret found.
    Reject,
    /// Replace each secret with `[REDACTED {kind}]` and write.
    Redact,
}

/// One secret found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretMatch {
    /// What kind of secret, e.g. `"AWS access key id"`.
    pub kind: &'static str,
    /// Where it is, in bytes.
    pub range: Range<usize>,
}

/// An opt-in detector for secrets that should never reach a memory file,
/// in its content or in its name (the path of a `create`, the destination
/// of a `rename`; a secret in a name is always refused, never redacted):
/// private key blocks and key bodies without their `BEGIN` line, AWS
/// access key ids and secret access keys (under `aws_secret_access_key` or
/// beside their key id), Anthropic, OpenAI (`sk-proj-`, `sk-svcacct-`,
/// `sk-admin-`, older `sk-`), GitHub, Slack, Google and Stripe keys, and
/// payment card numbers (13 to 19 digits passing the Luhn check). Patterns
/// are matched by hand, conservatively: a key must have its full shape and
/// stand on its own (not inside a longer word; a `-suffix` or `_suffix`
/// after it does not hide it).
///
/// ```
/// use claude_memory::policy::SecretDetector;
/// use claude_memory::{InMemoryStore, MemoryTool};
/// use serde_json::json;
///
/// let tool = MemoryTool::new(InMemoryStore::new()).with_policy(SecretDetector::redact());
/// tool.dispatch(&json!({"command": "create", "path": "/memories/env.md",
///                       "file_text": "key AKIAIOSFODNN7EXAMPLE\n"}));
/// let view = tool.dispatch(&json!({"command": "view", "path": "/memories/env.md"}));
/// assert!(!view.text().unwrap_or_default().contains("AKIAIOSFODNN7EXAMPLE"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SecretDetector {
    action: SecretAction,
}

impl SecretDetector {
    /// A detector that refuses writes holding secrets.
    pub fn reject() -> Self {
        SecretDetector {
            action: SecretAction::Reject,
        }
    }

    /// A detector that redacts secrets and writes the rest.
    pub fn redact() -> Self {
        SecretDetector {
            action: SecretAction::Redact,
        }
    }

    /// Every secret in `text`, in order, not overlapping.
    pub fn find(&self, text: &str) -> Vec<SecretMatch> {
        let mut found = Vec::new();
        private_keys(text, &mut found);
        shapes::key_bodies(text, &mut found);
        for (prefix, kind, body, min, max) in TOKENS {
            tokens(text, prefix, kind, *body, *min, *max, &mut found);
        }
        shapes::aws_secret_keys(text, &mut found);
        cards(text, &mut found);
        found.sort_by_key(|m| (m.range.start, std::cmp::Reverse(m.range.end)));
        let mut merged: Vec<SecretMatch> = Vec::new();
        for m in found {
            match merged.last() {
                Some(last) if m.range.start < last.range.end => {}
                _ => merged.push(m),
            }
        }
        merged
    }
}

impl ContentPolicy for SecretDetector {
    /// Refuses a path (as it is stored: normalised) holding a secret,
    /// whatever the action: a name cannot be redacted.
    fn check_path(&self, path: &MemoryPath) -> Option<String> {
        let found = self.find(&path.normalized());
        if found.is_empty() {
            return None;
        }
        let mut kinds: Vec<&str> = found.iter().map(|m| m.kind).collect();
        kinds.dedup();
        Some(format!(
            "its name contains what looks like a secret ({}); name memory files without secrets",
            kinds.join(", ")
        ))
    }

    fn check(&self, _path: &MemoryPath, content: &str) -> Decision {
        let found = self.find(content);
        if found.is_empty() {
            return Decision::Allow;
        }
        match self.action {
            SecretAction::Reject => {
                let mut kinds: Vec<&str> = found.iter().map(|m| m.kind).collect();
                kinds.dedup();
                Decision::Reject(format!(
                    "it contains what looks like a secret ({}); store a reference to it instead, never the secret itself",
                    kinds.join(", ")
                ))
            }
            SecretAction::Redact => {
                let mut out = String::with_capacity(content.len());
                let mut at = 0;
                for m in &found {
                    out.push_str(&content[at..m.range.start]);
                    out.push_str(&format!("[REDACTED {}]", m.kind));
                    at = m.range.end;
                }
                out.push_str(&content[at..]);
                Decision::Redact(out)
            }
        }
    }
}

/// Token body characters.
#[derive(Debug, Clone, Copy)]
enum Body {
    /// `[A-Z0-9]`
    UpperAlnum,
    /// `[A-Za-z0-9]`
    Alnum,
    /// `[A-Za-z0-9_-]`
    Url,
}

impl Body {
    fn allows(self, b: u8) -> bool {
        match self {
            Body::UpperAlnum => b.is_ascii_uppercase() || b.is_ascii_digit(),
            Body::Alnum => b.is_ascii_alphanumeric(),
            Body::Url => b.is_ascii_alphanumeric() || b == b'_' || b == b'-',
        }
    }
}

/// (prefix, kind, body characters, min body length, max body length)
const TOKENS: &[(&str, &str, Body, usize, usize)] = &[
    ("AKIA", "AWS access key id", Body::UpperAlnum, 16, 16),
    ("ASIA", "AWS access key id", Body::UpperAlnum, 16, 16),
    ("sk-ant-", "Anthropic API key", Body::Url, 20, 256),
    ("sk-proj-", "OpenAI API key", Body::Url, 20, 256),
    ("sk-svcacct-", "OpenAI API key", Body::Url, 20, 256),
    ("sk-admin-", "OpenAI API key", Body::Url, 20, 256),
    ("sk-", "OpenAI API key", Body::Alnum, 32, 256),
    ("ghp_", "GitHub token", Body::Alnum, 36, 36),
    ("gho_", "GitHub token", Body::Alnum, 36, 36),
    ("ghu_", "GitHub token", Body::Alnum, 36, 36),
    ("ghs_", "GitHub token", Body::Alnum, 36, 36),
    ("ghr_", "GitHub token", Body::Alnum, 36, 36),
    ("github_pat_", "GitHub token", Body::Url, 22, 255),
    ("xoxb-", "Slack token", Body::Url, 10, 255),
    ("xoxp-", "Slack token", Body::Url, 10, 255),
    ("xoxa-", "Slack token", Body::Url, 10, 255),
    ("xoxr-", "Slack token", Body::Url, 10, 255),
    ("xoxs-", "Slack token", Body::Url, 10, 255),
    ("AIza", "Google API key", Body::Url, 35, 35),
    ("sk_live_", "Stripe secret key", Body::Alnum, 16, 255),
    ("rk_live_", "Stripe secret key", Body::Alnum, 16, 255),
];

fn word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn tokens(
    text: &str,
    prefix: &str,
    kind: &'static str,
    body: Body,
    min: usize,
    max: usize,
    found: &mut Vec<SecretMatch>,
) {
    let bytes = text.as_bytes();
    for (start, _) in text.match_indices(prefix) {
        if start > 0 && word_byte(bytes[start - 1]) {
            continue; // inside a longer word
        }
        let body_start = start + prefix.len();
        let len = bytes[body_start..]
            .iter()
            .take_while(|&&b| body.allows(b))
            .count();
        let end = body_start + len;
        // The key ends where its characters do: `AKIA…-old` or `ghp_…_x`
        // holds the whole key, while a letter or digit after it makes a
        // longer word.
        let boundary = bytes.get(end).is_none_or(|&b| !b.is_ascii_alphanumeric());
        if (min..=max).contains(&len) && boundary {
            found.push(SecretMatch {
                kind,
                range: start..end,
            });
        }
    }
}

fn private_keys(text: &str, found: &mut Vec<SecretMatch>) {
    for (start, _) in text.match_indices("-----BEGIN ") {
        let rest = &text[start..];
        let Some(header_end) = rest[11..].find("-----").map(|i| i + 11) else {
            continue;
        };
        let header = &rest[..header_end];
        if !header.contains("PRIVATE KEY") {
            continue;
        }
        let end = rest
            .find("-----END ")
            .and_then(|e| rest[e + 9..].find("-----").map(|f| e + 9 + f + 5))
            .unwrap_or(rest.len());
        found.push(SecretMatch {
            kind: "private key",
            range: start..start + end,
        });
    }
}

/// Runs of 13 to 19 digits (single spaces, dashes or dots between groups
/// allowed) that pass the Luhn check. With dots, the groups must be those
/// printed on cards (fours, the last one shorter, or Amex's 4-6-5), so a
/// decimal number such as 3.14159265358979 is not taken for one.
fn cards(text: &str, found: &mut Vec<SecretMatch>) {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_digit()
            || (i > 0 && (bytes[i - 1].is_ascii_digit() || word_byte(bytes[i - 1])))
        {
            i += 1;
            continue;
        }
        let start = i;
        let mut digits = Vec::new();
        let mut groups = vec![0usize];
        let mut dots = false;
        let mut end = i;
        let mut j = i;
        while j < bytes.len() {
            let b = bytes[j];
            if b.is_ascii_digit() {
                digits.push(b - b'0');
                if let Some(g) = groups.last_mut() {
                    *g += 1;
                }
                j += 1;
                end = j;
            } else if matches!(b, b' ' | b'-' | b'.')
                && bytes.get(j + 1).is_some_and(u8::is_ascii_digit)
                && j > start
            {
                dots |= b == b'.';
                groups.push(0);
                j += 1;
            } else {
                break;
            }
            if digits.len() > 19 {
                break;
            }
        }
        let after_ok = bytes.get(end).is_none_or(|&b| !word_byte(b))
            // A dot right after the digits may end a sentence, but not
            // continue a dotted number.
            && !(dots && bytes.get(end) == Some(&b'.') && bytes.get(end + 1).is_some_and(u8::is_ascii_digit));
        let grouped = !dots || card_groups(&groups);
        if (13..=19).contains(&digits.len()) && after_ok && grouped && luhn(&digits) {
            found.push(SecretMatch {
                kind: "payment card number",
                range: start..end,
            });
        }
        i = end.max(i + 1);
    }
}

/// Whether digit groups are laid out as on a card: fours with a shorter
/// (or equal) last group, or 4-6-5.
fn card_groups(groups: &[usize]) -> bool {
    let Some((last, rest)) = groups.split_last() else {
        return false;
    };
    groups == [4, 6, 5]
        || (!rest.is_empty() && rest.iter().all(|&g| g == 4) && (1..=4).contains(last))
}

fn luhn(digits: &[u8]) -> bool {
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            let d = u32::from(d);
            if i % 2 == 1 {
                let x = d * 2;
                if x > 9 { x - 9 } else { x }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<&'static str> {
        SecretDetector::reject()
            .find(text)
            .into_iter()
            .map(|m| m.kind)
            .collect()
    }

    #[test]
    fn true_positives() {
        assert_eq!(
            kinds("aws key AKIAIOSFODNN7EXAMPLE here"),
            ["AWS access key id"]
        );
        assert_eq!(
            kinds("ANTHROPIC_API_KEY=sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123"),
            ["Anthropic API key"]
        );
        assert_eq!(
            kinds("token ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
            ["GitHub token"]
        );
        assert_eq!(kinds("slack xoxb-1234567890-abcdefghij"), ["Slack token"]);
        assert_eq!(
            kinds("key=AIzaSyA1234567890abcdefghijklmnopqrstuv"),
            ["Google API key"]
        );
        assert_eq!(
            kinds("stripe sk_live_abcdefghijklmnop1234"),
            ["Stripe secret key"]
        );
        assert_eq!(
            kinds("openai sk-proj-abcdefghijklmnopqrstuvwxyz"),
            ["OpenAI API key"]
        );
        assert_eq!(
            kinds("card 4111 1111 1111 1111 exp 12/29"),
            ["payment card number"]
        );
        assert_eq!(kinds("card 4111-1111-1111-1111."), ["payment card number"]);
        assert_eq!(kinds("5500005555555559"), ["payment card number"]);
        let pem =
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\n";
        assert_eq!(kinds(pem), ["private key"]);
        assert_eq!(
            kinds("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA"),
            ["private key"]
        );
    }

    #[test]
    fn false_positives_are_avoided() {
        for text in [
            "the customer prefers email follow-ups",
            "task-antelope and disk-antenna",  // sk-ant inside words
            "AKIA is a prefix, AKIASHORT too", // too short
            "XAKIAIOSFODNN7EXAMPLE",           // inside a longer word
            "4111 1111 1111 1112",             // fails Luhn
            "order 1234567890123",             // 13 digits, fails Luhn
            "call +1 555 123 4567",            // too few digits
            "-----BEGIN PUBLIC KEY-----\nMIIBIjANBg\n-----END PUBLIC KEY-----",
            "version 2024-11-29 build 12345",
            "sk-short",
            "ghp_tooshort",
        ] {
            assert!(kinds(text).is_empty(), "{text}: {:?}", kinds(text));
        }
    }

    #[test]
    fn luhn_check() {
        assert!(luhn(&[4, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]));
        assert!(!luhn(&[4, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2]));
        assert!(luhn(&[7, 9, 9, 2, 7, 3, 9, 8, 7, 1, 3]));
    }

    #[test]
    fn redaction_keeps_the_rest() {
        let p = MemoryPath::root();
        let d =
            SecretDetector::redact().check(&p, "id AKIAIOSFODNN7EXAMPLE, card 4111111111111111!");
        assert_eq!(
            d,
            Decision::Redact(
                "id [REDACTED AWS access key id], card [REDACTED payment card number]!".into()
            )
        );
        assert_eq!(
            SecretDetector::redact().check(&p, "nothing here"),
            Decision::Allow
        );
        match SecretDetector::reject().check(&p, "AKIAIOSFODNN7EXAMPLE") {
            Decision::Reject(reason) => assert!(reason.contains("AWS access key id")),
            other => panic!("{other:?}"),
        }
    }
}
