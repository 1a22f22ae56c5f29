//! Why a remote store could not be reached, as a closed set.
//!
//! SPEC §4 puts the cause in the model's text (`Could not reach the memory
//! store ({cause}) for {path}`), and requires it to be "short and free of
//! hosts, keys and URLs". A closed enum makes that a property of the type:
//! a backend cannot put a driver's message, a connection string or a bucket
//! URL into it, only pick one of these words.

use std::fmt;
use std::time::Duration;

/// Why a store (a database, object storage) could not be reached, or why a
/// write's outcome is unknown. Shown to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RemoteCause {
    /// No answer within the store's timeout (`timed out after 30 s`).
    TimedOut {
        /// The timeout that ran out.
        after: Duration,
    },
    /// The connection was refused or could not be made.
    ConnectionRefused,
    /// The connection dropped before the answer came.
    ConnectionLost,
    /// The server answered with a server error (HTTP 5xx, a database that is
    /// shutting down or recovering).
    Unavailable,
    /// The server asked the client to slow down (HTTP 429 or 503 SlowDown)
    /// and the retries ran out.
    Throttled,
    /// The server refused the store's credentials. Nothing a model can fix,
    /// but it says why every command fails.
    AccessDenied,
}

impl fmt::Display for RemoteCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RemoteCause::TimedOut { after } => {
                let secs = after.as_secs();
                if secs == 0 {
                    write!(f, "timed out after {} ms", after.as_millis())
                } else {
                    write!(f, "timed out after {secs} s")
                }
            }
            RemoteCause::ConnectionRefused => f.write_str("connection refused"),
            RemoteCause::ConnectionLost => f.write_str("connection lost"),
            RemoteCause::Unavailable => f.write_str("service unavailable"),
            RemoteCause::Throttled => f.write_str("too many requests"),
            RemoteCause::AccessDenied => f.write_str("access denied"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_read_as_spec_4_spells_them() {
        let cases = [
            (
                RemoteCause::TimedOut {
                    after: Duration::from_secs(30),
                },
                "timed out after 30 s",
            ),
            (
                RemoteCause::TimedOut {
                    after: Duration::from_millis(250),
                },
                "timed out after 250 ms",
            ),
            (RemoteCause::ConnectionRefused, "connection refused"),
            (RemoteCause::ConnectionLost, "connection lost"),
            (RemoteCause::Unavailable, "service unavailable"),
            (RemoteCause::Throttled, "too many requests"),
            (RemoteCause::AccessDenied, "access denied"),
        ];
        for (cause, text) in cases {
            assert_eq!(cause.to_string(), text);
        }
    }
}
