//! Bearer tokens for the HTTP server: a token file (one token a line,
//! optionally followed by the tenant it is mapped to), checked in constant
//! time.
//!
//! Each token is kept as its SHA-256 digest, and a presented token is
//! hashed and compared with every stored digest with `subtle`'s
//! constant-time equality, without stopping at a match: the time a check
//! takes says nothing about how much of a token was right, nor which line
//! matched.

use std::path::Path;

use sha2::{Digest, Sha256};
use subtle::{ConditionallySelectable, ConstantTimeEq};

use crate::tenant::TenantId;

/// Tokens shorter than this are refused: a bearer token is a password.
pub const MIN_TOKEN_LEN: usize = 16;

/// What a valid token grants, put in the request's extensions for the
/// handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The tenant whose `/memories` the token sees; `None`: the server's
    /// own store.
    pub tenant: Option<TenantId>,
}

/// The accepted tokens.
#[derive(Clone, Default)]
pub struct Tokens {
    entries: Vec<([u8; 32], Option<TenantId>)>,
}

impl std::fmt::Debug for Tokens {
    // Never prints a token or its digest.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("count", &self.entries.len())
            .finish()
    }
}

/// Why a token file was refused (the line number, never the token).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// The file could not be read.
    #[error("cannot read the token file: {0}")]
    Read(#[from] std::io::Error),
    /// A line's token is too short.
    #[error("line {line}: a token must be at least {MIN_TOKEN_LEN} characters")]
    TooShort {
        /// 1-based line number.
        line: usize,
    },
    /// A line's tenant is not a valid tenant id.
    #[error("line {line}: {reason}")]
    Tenant {
        /// 1-based line number.
        line: usize,
        /// Why the tenant id was refused.
        reason: String,
    },
    /// More than a token and a tenant on a line.
    #[error("line {line}: expected TOKEN or TOKEN TENANT")]
    Shape {
        /// 1-based line number.
        line: usize,
    },
    /// The same token twice.
    #[error("line {line}: this token is already on an earlier line")]
    Duplicate {
        /// 1-based line number.
        line: usize,
    },
    /// No token at all.
    #[error("the token file holds no token")]
    Empty,
}

fn digest(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}

impl Tokens {
    /// Parses a token file's text: one `TOKEN` or `TOKEN TENANT` a line
    /// (separated by spaces or tabs); blank lines and lines starting with
    /// `#` are skipped.
    pub fn parse(text: &str) -> Result<Tokens, TokenError> {
        let mut tokens = Tokens::default();
        for (i, line) in text.lines().enumerate() {
            let line_no = i + 1;
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut words = line.split_whitespace();
            let token = words.next().unwrap_or_default();
            let tenant = words.next();
            if words.next().is_some() {
                return Err(TokenError::Shape { line: line_no });
            }
            if token.len() < MIN_TOKEN_LEN {
                return Err(TokenError::TooShort { line: line_no });
            }
            let tenant = match tenant {
                Some(t) => Some(TenantId::parse(t).map_err(|e| TokenError::Tenant {
                    line: line_no,
                    reason: e.to_string(),
                })?),
                None => None,
            };
            let d = digest(token.as_bytes());
            if tokens.entries.iter().any(|(e, _)| *e == d) {
                return Err(TokenError::Duplicate { line: line_no });
            }
            tokens.entries.push((d, tenant));
        }
        if tokens.entries.is_empty() {
            return Err(TokenError::Empty);
        }
        Ok(tokens)
    }

    /// Reads and parses a token file.
    pub fn from_file(path: &Path) -> Result<Tokens, TokenError> {
        Tokens::parse(&std::fs::read_to_string(path)?)
    }

    /// One token with no tenant (for tests and embedding).
    pub fn single(token: &str) -> Result<Tokens, TokenError> {
        Tokens::parse(token)
    }

    /// How many tokens there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The grant of `presented`, if it is one of the tokens. Every stored
    /// token is compared, in constant time each.
    pub fn check(&self, presented: &[u8]) -> Option<Grant> {
        self.identify(presented).map(|(_, grant)| grant)
    }

    /// The index of the token `presented` matches (which token holds a
    /// session) and its grant.
    pub(crate) fn identify(&self, presented: &[u8]) -> Option<(usize, Grant)> {
        let d = digest(presented);
        let mut found = subtle::Choice::from(0);
        let mut index = 0u64;
        for (i, (stored, _)) in self.entries.iter().enumerate() {
            let hit = stored.ct_eq(&d);
            index.conditional_assign(&(i as u64), hit);
            found |= hit;
        }
        if bool::from(found) {
            let index = usize::try_from(index).ok()?;
            let (_, tenant) = self.entries.get(index)?;
            Some((
                index,
                Grant {
                    tenant: tenant.clone(),
                },
            ))
        } else {
            None
        }
    }

    /// Whether any token names a tenant.
    pub fn has_tenants(&self) -> bool {
        self.entries.iter().any(|(_, t)| t.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_map_to_tenants_and_wrong_ones_are_refused() {
        let tokens =
            Tokens::parse("# comment\n\nalpha-alpha-alpha-1 alice\n  beta-beta-beta-beta-2\n")
                .unwrap();
        assert_eq!(tokens.len(), 2);
        let alice = tokens.check(b"alpha-alpha-alpha-1").unwrap();
        assert_eq!(alice.tenant.unwrap().as_str(), "alice");
        assert_eq!(tokens.check(b"beta-beta-beta-beta-2").unwrap().tenant, None);
        assert!(tokens.check(b"alpha-alpha-alpha-").is_none());
        assert!(tokens.check(b"").is_none());
        assert!(format!("{tokens:?}").contains("count: 2"));
        assert!(!format!("{tokens:?}").contains("alpha"));
    }

    #[test]
    fn bad_token_files_are_refused_with_the_line() {
        assert!(matches!(
            Tokens::parse("short"),
            Err(TokenError::TooShort { line: 1 })
        ));
        assert!(matches!(
            Tokens::parse("aaaaaaaaaaaaaaaaaaaa ../bob"),
            Err(TokenError::Tenant { line: 1, .. })
        ));
        assert!(matches!(
            Tokens::parse("aaaaaaaaaaaaaaaaaaaa a b"),
            Err(TokenError::Shape { line: 1 })
        ));
        assert!(matches!(
            Tokens::parse("aaaaaaaaaaaaaaaaaaaa\naaaaaaaaaaaaaaaaaaaa x"),
            Err(TokenError::Duplicate { line: 2 })
        ));
        assert!(matches!(
            Tokens::parse("# nothing\n"),
            Err(TokenError::Empty)
        ));
    }
}
