//! A SQL driver's error as SPEC §4 answers it: an unreachable database is
//! [`StoreError::Unreachable`], a write whose outcome is unknown is
//! [`StoreError::OutcomeUnknown`], each with a [`RemoteCause`] from a
//! closed set (never the driver's text, which may name hosts).

use std::error::Error;

use crate::path::MemoryPath;
use crate::store::{RemoteCause, StoreError};

/// What a driver error says about the database: why it could not be
/// reached, and whether a write may have reached it anyway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Remote {
    /// Why, in words safe for the model.
    pub(super) cause: RemoteCause,
    /// The statement may have run: the connection dropped, or the answer
    /// did not come, after it was sent.
    pub(super) maybe_done: bool,
}

/// The store error for a driver error at `path`; `writing` says whether
/// the call was a mutation (then a lost answer leaves its outcome unknown).
pub(super) fn store_error(
    source: Box<dyn Error + Send + Sync>,
    path: &MemoryPath,
    writing: bool,
) -> StoreError {
    match classify(source.as_ref()) {
        Some(r) if r.maybe_done && writing => StoreError::OutcomeUnknown {
            path: path.clone(),
            cause: r.cause,
            source: Some(source),
        },
        Some(r) => StoreError::Unreachable {
            path: path.clone(),
            cause: r.cause,
            source: Some(source),
        },
        None => StoreError::Backend {
            path: path.clone(),
            source,
        },
    }
}

#[cfg(feature = "postgres")]
fn classify(e: &(dyn Error + Send + Sync + 'static)) -> Option<Remote> {
    use super::PostgresError as P;
    let known = |cause| {
        Some(Remote {
            cause,
            maybe_done: false,
        })
    };
    let unknown = |cause| {
        Some(Remote {
            cause,
            maybe_done: true,
        })
    };
    match e.downcast_ref::<P>()? {
        P::Connect(inner) => known(connect_cause(inner.as_ref())),
        P::ConnectTimeout(after) => known(RemoteCause::TimedOut { after: *after }),
        P::CheckoutTimeout { timeout, .. } => known(RemoteCause::TimedOut { after: *timeout }),
        // The server cancelled the statement: nothing was done.
        P::LockTimeout(after) | P::StatementTimeout(after) => {
            known(RemoteCause::TimedOut { after: *after })
        }
        P::NoAnswer(after) => unknown(RemoteCause::TimedOut { after: *after }),
        P::ConnectionLost(_) => unknown(RemoteCause::ConnectionLost),
        _ => None,
    }
}

#[cfg(not(feature = "postgres"))]
fn classify(_: &(dyn Error + Send + Sync + 'static)) -> Option<Remote> {
    None
}

/// Why a connection could not be made: credentials refused, or the server
/// refused or is not there.
#[cfg(feature = "postgres")]
fn connect_cause(e: &(dyn Error + Send + Sync + 'static)) -> RemoteCause {
    use tokio_postgres::error::SqlState;
    let code = e
        .downcast_ref::<tokio_postgres::Error>()
        .and_then(tokio_postgres::Error::code);
    match code {
        Some(c)
            if *c == SqlState::INVALID_PASSWORD
                || *c == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
                || *c == SqlState::INSUFFICIENT_PRIVILEGE =>
        {
            RemoteCause::AccessDenied
        }
        Some(c) if *c == SqlState::CANNOT_CONNECT_NOW || *c == SqlState::TOO_MANY_CONNECTIONS => {
            RemoteCause::Unavailable
        }
        Some(c) if *c == SqlState::INVALID_CATALOG_NAME => RemoteCause::Unavailable,
        _ => RemoteCause::ConnectionRefused,
    }
}

/// The innermost error of a chain, in its own words: what a driver says
/// two `source()` levels down ("password authentication failed for user
/// …", "database … does not exist").
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) fn deepest(e: &(dyn Error + 'static)) -> String {
    let mut last = e;
    while let Some(next) = last.source() {
        last = next;
    }
    last.to_string()
}

#[cfg(all(test, feature = "postgres"))]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::store::sql::PostgresError;

    fn at() -> MemoryPath {
        MemoryPath::root()
    }

    fn mapped(e: PostgresError, writing: bool) -> StoreError {
        store_error(Box::new(e), &at(), writing)
    }

    #[test]
    fn an_unreachable_database_is_spec_4s_unreachable_answer() {
        let d = Duration::from_secs(5);
        let cases: [(fn() -> PostgresError, RemoteCause); 4] = [
            (
                || PostgresError::ConnectTimeout(Duration::from_secs(5)),
                RemoteCause::TimedOut { after: d },
            ),
            (
                || PostgresError::CheckoutTimeout {
                    timeout: Duration::from_secs(5),
                    size: 2,
                },
                RemoteCause::TimedOut { after: d },
            ),
            (
                || PostgresError::LockTimeout(Duration::from_secs(5)),
                RemoteCause::TimedOut { after: d },
            ),
            (
                || PostgresError::Connect("connection refused".into()),
                RemoteCause::ConnectionRefused,
            ),
        ];
        for (make, cause) in cases {
            for writing in [false, true] {
                match mapped(make(), writing) {
                    StoreError::Unreachable { cause: c, .. } => assert_eq!(c, cause),
                    other => panic!("{:?}: {other:?}", make()),
                }
            }
        }
    }

    #[test]
    fn a_lost_answer_to_a_write_is_an_unknown_outcome() {
        let d = Duration::from_secs(35);
        assert!(matches!(
            mapped(PostgresError::NoAnswer(d), true),
            StoreError::OutcomeUnknown {
                cause: RemoteCause::TimedOut { .. },
                ..
            }
        ));
        assert!(matches!(
            mapped(PostgresError::ConnectionLost("gone".into()), true),
            StoreError::OutcomeUnknown {
                cause: RemoteCause::ConnectionLost,
                ..
            }
        ));
        // A read changes nothing: it is simply unreachable.
        assert!(matches!(
            mapped(PostgresError::ConnectionLost("gone".into()), false),
            StoreError::Unreachable {
                cause: RemoteCause::ConnectionLost,
                ..
            }
        ));
        // Anything else stays a backend failure.
        assert!(matches!(
            mapped(PostgresError::Config("x".into()), true),
            StoreError::Backend { .. }
        ));
    }
}
