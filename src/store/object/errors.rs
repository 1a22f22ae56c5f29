//! object_store's errors as the store's (SPEC §4).
//!
//! A failure to reach the service becomes [`StoreError::Unreachable`] (or,
//! for a write that was sent, [`StoreError::OutcomeUnknown`]) with a
//! [`RemoteCause`]: a closed set of words, so no bucket, host, key, URL or
//! credential can reach the model. The driver's error stays the `source`,
//! for programmers and logs.

use std::time::Duration;

#[cfg(feature = "cloud-http")]
use object_store::client::{HttpError, HttpErrorKind};

use crate::path::MemoryPath;
use crate::store::{RemoteCause, StoreError};

/// Whether the failed request could have changed the bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sent {
    /// A read (GET, HEAD, LIST): nothing changed.
    Read,
    /// A write (PUT, COPY, DELETE): it may have happened.
    Write,
}

/// Maps an object_store error for the entry at `path`.
pub(super) fn map(
    e: object_store::Error,
    path: &MemoryPath,
    sent: Sent,
    timeout: Duration,
) -> StoreError {
    let path = path.clone();
    match e {
        object_store::Error::NotFound { .. } => StoreError::NotFound { path },
        object_store::Error::AlreadyExists { .. } => StoreError::AlreadyExists { path },
        object_store::Error::Precondition { .. } => StoreError::Conflict { path },
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => StoreError::Unreachable {
            path,
            cause: RemoteCause::AccessDenied,
            source: Some(Box::new(e)),
        },
        other => match cause(&other, timeout) {
            Some(cause) => {
                // A refused connection sent nothing; anything else after a
                // write was sent leaves its outcome unknown.
                let unknown = sent == Sent::Write
                    && cause != RemoteCause::ConnectionRefused
                    && cause != RemoteCause::AccessDenied;
                let source = Some(Box::new(other) as Box<dyn std::error::Error + Send + Sync>);
                if unknown {
                    StoreError::OutcomeUnknown {
                        path,
                        cause,
                        source,
                    }
                } else {
                    StoreError::Unreachable {
                        path,
                        cause,
                        source,
                    }
                }
            }
            None => StoreError::Backend {
                path,
                source: Box::new(other),
            },
        },
    }
}

/// The remote cause of a transport or server failure, if it is one.
fn cause(e: &object_store::Error, timeout: Duration) -> Option<RemoteCause> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let mut status = None;
    while let Some(err) = next {
        #[cfg(feature = "cloud-http")]
        if let Some(http) = err.downcast_ref::<HttpError>() {
            return Some(match http.kind() {
                HttpErrorKind::Connect => RemoteCause::ConnectionRefused,
                HttpErrorKind::Timeout => RemoteCause::TimedOut { after: timeout },
                _ => RemoteCause::ConnectionLost,
            });
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            return Some(match io.kind() {
                std::io::ErrorKind::ConnectionRefused => RemoteCause::ConnectionRefused,
                std::io::ErrorKind::TimedOut => RemoteCause::TimedOut { after: timeout },
                _ => RemoteCause::ConnectionLost,
            });
        }
        // object_store's retry error is private; its text carries the
        // HTTP status ("… status code: 503 …"), read here and never shown.
        if status.is_none() {
            status = status_in(&err.to_string());
        }
        next = err.source();
    }
    match status? {
        429 => Some(RemoteCause::Throttled),
        503 => Some(RemoteCause::Throttled),
        401 | 403 => Some(RemoteCause::AccessDenied),
        500..=599 => Some(RemoteCause::Unavailable),
        _ => None,
    }
}

/// What an operator is told of a failure at open: the remote cause, the
/// HTTP status and the service's error code, never the service's body
/// (S3's `SignatureDoesNotMatch` body holds the access key id, and a
/// service may echo more) or the request's URL.
#[derive(Debug)]
pub(super) struct ForOperator(String);

impl std::fmt::Display for ForOperator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ForOperator {}

impl ForOperator {
    /// The summary of `e` and its causes.
    pub(super) fn of(e: &(dyn std::error::Error + 'static), timeout: Duration) -> Self {
        let mut status = None;
        let mut code = None;
        let mut kind = None;
        let mut next = Some(e);
        while let Some(err) = next {
            let text = err.to_string();
            status = status.or_else(|| status_in(&text));
            code = code.or_else(|| code_in(&text));
            if let Some(os) = err.downcast_ref::<object_store::Error>() {
                kind = kind.or(Some(match os {
                    object_store::Error::NotFound { .. } => "not found",
                    object_store::Error::PermissionDenied { .. } => "permission denied",
                    object_store::Error::Unauthenticated { .. } => "not authenticated",
                    object_store::Error::Precondition { .. } => "precondition failed",
                    _ => "the request failed",
                }));
            }
            next = err.source();
        }
        let mut summary = match e
            .downcast_ref::<object_store::Error>()
            .and_then(|os| cause(os, timeout))
        {
            Some(cause) => cause.to_string(),
            // No service error anywhere (a recovery the store refused to
            // finish): the store's own words, which quote no service.
            None => kind.map_or_else(|| e.to_string(), str::to_owned),
        };
        if let Some(status) = status {
            summary.push_str(&format!(", HTTP {status}"));
        }
        if let Some(code) = code {
            summary.push_str(&format!(", {code}"));
        }
        ForOperator(summary)
    }
}

/// The service's error code in an error's text: S3's and Azure's XML
/// `<Code>`, or a JSON `"code"`/`"reason"` string; letters and digits
/// only, at most 64.
fn code_in(text: &str) -> Option<String> {
    let after = text
        .find("<Code>")
        .map(|at| &text[at + "<Code>".len()..])
        .or_else(|| {
            ["\"code\":", "\"reason\":"].iter().find_map(|k| {
                let at = text.find(k)? + k.len();
                text[at..].trim_start().strip_prefix('"')
            })
        })?;
    let code: String = after
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '.')
        .take(64)
        .collect();
    (!code.is_empty()).then_some(code)
}

/// The HTTP status an error's text names, if any.
fn status_in(text: &str) -> Option<u16> {
    let at = text.find("status code: ")? + "status code: ".len();
    text.get(at..at + 3)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_read_from_the_retry_text() {
        assert_eq!(
            status_in("Server returned non-2xx status code: 503 Service Unavailable: x"),
            Some(503)
        );
        assert_eq!(status_in("no status here"), None);
    }

    #[test]
    fn the_model_never_sees_the_bucket() {
        let p = MemoryPath::parse("/memories/a.md").expect("valid");
        let e = object_store::Error::Generic {
            store: "S3",
            source: "Server returned non-2xx status code: 500 for https://secret-bucket.example/key?X-Amz-Credential=AKIA".into(),
        };
        let mapped = map(e, &p, Sent::Read, Duration::from_secs(30));
        let shown = crate::render::storage_failure(&mapped, "/memories/a.md").to_string();
        assert_eq!(
            shown,
            "Error: Could not reach the memory store (service unavailable) for /memories/a.md"
        );
    }
}
