//! What every HTTP request passes before rmcp sees it, following the MCP
//! specification's security guidance for streamable HTTP: the `Origin`
//! check against DNS rebinding, the bearer token, the session's holder
//! (`sessions.rs`: a session is usable only with the token that opened
//! it), a bound on requests in flight (overall and per token), a bound on
//! sessions (per token, see `sessions.rs`), and a body that must arrive
//! whole, within its size limit and its time. (The `Host` check is
//! rmcp's, configured by [`HttpServer`](crate::mcp::HttpServer).)
//!
//! Refusals are plain HTTP statuses with a short fixed text: 503 (busy:
//! too many requests or sessions), 403 (a foreign `Origin`), 401 (no or
//! a wrong token, with `WWW-Authenticate: Bearer`), 404 (a session this
//! token did not open: the same answer as for an unknown one), 413 (too
//! big a body), 408 (a body too slow to arrive). None names the store.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body::Body as _;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::WaitForCancellationFutureOwned;

use crate::mcp::auth::Tokens;
use crate::mcp::sessions::{Flight, Holder, Refusal, Sessions};

/// The state the guards share.
pub(crate) struct Guards {
    pub(crate) tokens: Option<Tokens>,
    pub(crate) allowed_origins: Vec<String>,
    pub(crate) permits: Arc<Semaphore>,
    pub(crate) sessions: Arc<Sessions>,
    pub(crate) posts: Arc<Posts>,
    pub(crate) max_body_bytes: usize,
    pub(crate) body_timeout: Duration,
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
    // A refused client's connection is not kept for its next try: slots
    // go to requests the server will answer.
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
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

const SESSION: &str = "mcp-session-id";

/// The request's session id: `None` without the header, `Err` for a
/// value that is not one non-empty visible ASCII string.
fn session_id(headers: &axum::http::HeaderMap) -> Result<Option<String>, ()> {
    let mut values = headers.get_all(SESSION).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    let bytes = value.as_bytes();
    if values.next().is_some()
        || bytes.is_empty()
        || !bytes.iter().all(|b| (0x21..=0x7e).contains(b))
    {
        return Err(());
    }
    value.to_str().map(|id| Some(id.to_owned())).map_err(|_| ())
}

/// The guards, in order: `Origin`, token, the session's holder, requests
/// in flight, sessions, the body.
pub(crate) async fn check(
    State(guards): State<Arc<Guards>>,
    mut request: Request,
    next: Next,
) -> Response {
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
    let mut holder: Holder = None;
    if let Some(tokens) = &guards.tokens {
        let found = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(bearer)
            .and_then(|t| tokens.identify(t));
        match found {
            Some((line, grant)) => {
                holder = Some(line);
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
    // A session id is visible ASCII, given once: rmcp reads any other
    // value as no id at all and would open a session no slot was
    // reserved for, so the guard and rmcp must never read it apart.
    let session = match session_id(request.headers()) {
        Ok(session) => session,
        Err(()) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "Bad Request: Mcp-Session-Id must be one visible ASCII value",
            );
        }
    };
    if let Some(id) = &session
        && !guards.sessions.may_use(holder, id)
    {
        return refuse(StatusCode::NOT_FOUND, "Not Found: Session not found");
    }
    let method = request.method().clone();
    // The session's listening stream: one per session (a newer one ends
    // the older), and only on a session this token holds, so streams are
    // bounded by the token's share of sessions, not by the requests.
    let listener = match &session {
        Some(id) if method == Method::GET && !request.headers().contains_key("last-event-id") => {
            if !guards.sessions.holds(holder, id) {
                return refuse(StatusCode::NOT_FOUND, "Not Found: Session not found");
            }
            Some(guards.sessions.listen(id))
        }
        _ => None,
    };
    let mut permit = None;
    let mut flight = None;
    if listener.is_none() {
        let Ok(p) = Arc::clone(&guards.permits).try_acquire_owned() else {
            return refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "Too many requests in flight; try again",
            );
        };
        permit = Some(p);
        match guards.sessions.start(holder) {
            Ok(f) => flight = Some(f),
            Err(_) => {
                return refuse(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "Too many requests in flight for this token; try again",
                );
            }
        }
    }
    let is_post = method == Method::POST;
    let mut opening = None;
    if is_post {
        let (parts, body) = request.into_parts();
        let bytes = match read_body(body, guards.max_body_bytes, guards.body_timeout).await {
            Ok(bytes) => bytes,
            Err(refusal) => return refusal,
        };
        // Only an initialize opens a session: a stateless request or a
        // `server/discover` probe must not take (or evict) one.
        if session.is_none() && is_initialize(&bytes) {
            match guards.sessions.open(holder).await {
                Ok(o) => opening = Some(o),
                Err(Refusal::Full | Refusal::Busy) => {
                    return refuse(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "Too many sessions; try again later",
                    );
                }
            }
        }
        request = Request::from_parts(parts, Body::from(bytes));
    }
    let post = is_post.then(|| PostGuard::start(Arc::clone(&guards.posts)));
    let response = next.run(request).await;
    // Every session a response opens is bound to the token and counted
    // in its share, whatever the request said (even one rmcp opened for a
    // body not recognised above as an initialize).
    let opened = response
        .headers()
        .get(SESSION)
        .and_then(|v| v.to_str().ok())
        .filter(|id| session.as_deref() != Some(*id));
    match (opening, opened) {
        (Some(opening), Some(id)) => opening.commit(id),
        (None, Some(id)) => guards.sessions.adopt(holder, id).await,
        (Some(opening), None) => drop(opening),
        (None, None) => {}
    }
    let (parts, body) = response.into_parts();
    Response::from_parts(
        parts,
        Body::new(Held {
            body,
            ended: listener.map(|t| Box::pin(t.cancelled_owned())),
            _permit: permit,
            _flight: flight,
            _post: post,
        }),
    )
}

/// Whether a body is a JSON-RPC `initialize` request (anything that does
/// not parse is not: rmcp refuses it without opening a session).
fn is_initialize(body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Method<'a> {
        #[serde(borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
    }
    serde_json::from_slice::<Method<'_>>(body)
        .is_ok_and(|m| m.method.as_deref() == Some("initialize"))
}

/// The whole body, at most `limit` bytes, within `timeout` (a client
/// trickling bytes or never ending a chunked body must not hold a
/// request slot forever).
async fn read_body(mut body: Body, limit: usize, timeout: Duration) -> Result<Bytes, Response> {
    let too_big = || {
        refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            "Payload Too Large: the request body is over the server's limit",
        )
    };
    if body.size_hint().lower() > limit as u64 {
        return Err(too_big());
    }
    let collect = async {
        let mut collected = Vec::new();
        while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
        {
            let Ok(frame) = frame else {
                return Err(refuse(
                    StatusCode::BAD_REQUEST,
                    "Bad Request: the request body could not be read",
                ));
            };
            if let Ok(data) = frame.into_data() {
                if data.len() > limit.saturating_sub(collected.len()) {
                    return Err(too_big());
                }
                collected.extend_from_slice(&data);
            }
        }
        Ok(Bytes::from(collected))
    };
    match tokio::time::timeout(timeout, collect).await {
        Ok(result) => result,
        Err(_) => Err(refuse(
            StatusCode::REQUEST_TIMEOUT,
            "Request Timeout: the request body did not arrive in time",
        )),
    }
}

/// A response body that holds its request's permits (and, for a POST,
/// its place in [`Posts`]) until it is finished or dropped: a streamed
/// answer counts as in flight for as long as it streams. A listening
/// stream ends when a newer one for its session opens.
struct Held {
    body: Body,
    ended: Option<Pin<Box<WaitForCancellationFutureOwned>>>,
    _permit: Option<OwnedSemaphorePermit>,
    _flight: Option<Flight>,
    _post: Option<PostGuard>,
}

impl axum::body::HttpBody for Held {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        if let Some(ended) = &mut this.ended
            && ended.as_mut().poll(cx).is_ready()
        {
            return Poll::Ready(None);
        }
        Pin::new(&mut this.body).poll_frame(cx)
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
