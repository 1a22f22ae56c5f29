//! What every HTTP request passes before rmcp sees it, following the MCP
//! specification's security guidance for streamable HTTP: a bound on
//! requests in flight, the `Origin` check against DNS rebinding, the
//! bearer token, and a bound on sessions. (The `Host` check and the body
//! limit are rmcp's, configured by [`HttpServer`](crate::mcp::HttpServer).)
//!
//! Refusals are plain HTTP statuses with a short fixed text: 503 (busy:
//! too many requests or sessions), 403 (a foreign `Origin`), 401 (no or
//! a wrong token, with `WWW-Authenticate: Bearer`). None names the store.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use crate::mcp::auth::Tokens;

/// The state the guards share.
pub(crate) struct Guards {
    pub(crate) tokens: Option<Tokens>,
    pub(crate) allowed_origins: Vec<String>,
    pub(crate) permits: Arc<Semaphore>,
    pub(crate) sessions: Arc<LocalSessionManager>,
    pub(crate) max_sessions: usize,
    pub(crate) posts: Arc<Posts>,
}

/// POST requests whose response is not finished: a graceful shutdown
/// waits for these (the answers to calls in flight) before it ends the
/// sessions' streams.
#[derive(Default)]
pub(crate) struct Posts {
    count: AtomicUsize,
    idle: Notify,
}

impl Posts {
    pub(crate) async fn finished(&self) {
        loop {
            let notified = self.idle.notified();
            if self.count.load(Ordering::SeqCst) == 0 {
                return;
            }
            notified.await;
        }
    }
}

struct PostGuard(Arc<Posts>);

impl PostGuard {
    fn start(posts: Arc<Posts>) -> Self {
        posts.count.fetch_add(1, Ordering::SeqCst);
        PostGuard(posts)
    }
}

impl Drop for PostGuard {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

fn refuse(status: StatusCode, text: &'static str) -> Response {
    let mut response = (status, text).into_response();
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"claude-memory\""),
        );
    }
    response
}

/// An `Origin` a browser on this machine sends: `http(s)://localhost`,
/// `127.0.0.1` or `[::1]`, any port.
fn is_loopback_origin(origin: &str) -> bool {
    let Some(rest) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    let host = match rest.strip_prefix("[::1]") {
        Some(port) => return port.is_empty() || is_port(port),
        None => rest,
    };
    let (name, port) = match host.split_once(':') {
        Some((name, port)) => (name, Some(port)),
        None => (host, None),
    };
    matches!(name, "localhost" | "127.0.0.1") && port.is_none_or(|p| is_port(&format!(":{p}")))
}

fn is_port(text: &str) -> bool {
    text.strip_prefix(':')
        .is_some_and(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether a request's `Origin` (if any) may reach the server. No
/// `Origin`: not a browser, allowed (the token still applies).
pub(crate) fn origin_allowed(origin: Option<&str>, allowed: &[String]) -> bool {
    match origin {
        None => true,
        Some(origin) => is_loopback_origin(origin) || allowed.iter().any(|a| a == origin),
    }
}

/// The `Bearer` token of an `Authorization` header.
fn bearer(value: &HeaderValue) -> Option<&[u8]> {
    let bytes = value.as_bytes();
    let (scheme, token) = (bytes.get(..7)?, bytes.get(7..)?);
    scheme.eq_ignore_ascii_case(b"bearer ").then_some(token)
}

/// The guards, in order: requests in flight, `Origin`, token, sessions.
pub(crate) async fn check(
    State(guards): State<Arc<Guards>>,
    mut request: Request,
    next: Next,
) -> Response {
    let Ok(permit) = Arc::clone(&guards.permits).try_acquire_owned() else {
        return refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "Too many requests in flight; try again",
        );
    };
    let origin = request
        .headers()
        .get(header::ORIGIN)
        .map(|v| v.to_str().unwrap_or("\u{0}"));
    if !origin_allowed(origin, &guards.allowed_origins) {
        return refuse(
            StatusCode::FORBIDDEN,
            "Forbidden: this Origin is not allowed",
        );
    }
    if let Some(tokens) = &guards.tokens {
        let grant = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(bearer)
            .and_then(|t| tokens.check(t));
        match grant {
            Some(grant) => {
                request.extensions_mut().insert(grant);
            }
            None => {
                return refuse(
                    StatusCode::UNAUTHORIZED,
                    "Unauthorized: a valid bearer token is required",
                );
            }
        }
    }
    let is_post = request.method() == Method::POST;
    if is_post && !request.headers().contains_key("mcp-session-id") {
        // This request may open a session (an initialize).
        if guards.sessions.sessions.read().await.len() >= guards.max_sessions {
            return refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "Too many sessions; try again later",
            );
        }
    }
    let post = is_post.then(|| PostGuard::start(Arc::clone(&guards.posts)));
    let response = next.run(request).await;
    let (parts, body) = response.into_parts();
    Response::from_parts(
        parts,
        Body::new(Held {
            body,
            _permit: permit,
            _post: post,
        }),
    )
}

/// A response body that holds its request's permit (and, for a POST, its
/// place in [`Posts`]) until it is finished or dropped: a streamed answer
/// counts as in flight for as long as it streams.
struct Held {
    body: Body,
    _permit: OwnedSemaphorePermit,
    _post: Option<PostGuard>,
}

impl axum::body::HttpBody for Held {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_and_listed_origins_pass() {
        let listed = vec!["https://app.example.com".to_owned()];
        for ok in [
            None,
            Some("http://localhost"),
            Some("http://localhost:6274"),
            Some("http://127.0.0.1:3000"),
            Some("https://[::1]:8443"),
            Some("https://app.example.com"),
        ] {
            assert!(origin_allowed(ok, &listed), "{ok:?}");
        }
        for bad in [
            "http://evil.example",
            "http://localhost.evil.example",
            "http://127.0.0.1.evil.example",
            "http://localhost:80x",
            "http://[::1].evil",
            "null",
            "file://",
            "https://app.example.com.evil",
            "\u{0}",
        ] {
            assert!(!origin_allowed(Some(bad), &listed), "{bad}");
        }
    }

    #[test]
    fn bearer_needs_the_scheme() {
        let v = HeaderValue::from_static("Bearer abc");
        assert_eq!(bearer(&v), Some(&b"abc"[..]));
        let v = HeaderValue::from_static("bearer abc");
        assert_eq!(bearer(&v), Some(&b"abc"[..]));
        assert_eq!(bearer(&HeaderValue::from_static("Basic abc")), None);
        assert_eq!(bearer(&HeaderValue::from_static("Bear")), None);
    }
}
