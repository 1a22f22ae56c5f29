//! Who may ask, and what every answer carries.
//!
//! - `Host` must name this page (a loopback name, the bound address, or an
//!   allowed name): a foreign one (DNS rebinding) gets 421 and nothing
//!   else.
//! - A change (any method but GET and HEAD) must come from this page:
//!   `Origin` is this page's own, `Sec-Fetch-Site` (where sent) is
//!   `same-origin`, and the form carries its anti-forgery token, an
//!   HMAC of the form's action under a key made at start.
//! - With tokens, a browser signs in once with one (a form) and then holds
//!   a cookie (`HttpOnly`, `SameSite=Strict`) naming a random session.
//! - Every answer forbids framing, sniffing, caching and any script or
//!   style not the page's own (Content-Security-Policy), and sends no
//!   referrer to another origin (`same-origin`: with `no-referrer` a
//!   browser posts the page's own forms with `Origin: null`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use axum::extract::{Form, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use hmac::{Hmac, Mac};
use maud::html;
use serde::Deserialize;

use super::{Ui, layout};

/// The largest request body: an edited file of 1 MiB, form-encoded.
pub(crate) const MAX_BODY: usize = 4 << 20;
/// How long a request's body may take to arrive (the headers have 10 s):
/// a body trickled in holds its connection no longer.
const BODY_TIME: std::time::Duration = std::time::Duration::from_secs(10);
/// Signed-in browsers remembered at once; the oldest is forgotten first.
const MAX_SESSIONS: usize = 64;
const COOKIE: &str = "claude_memory_ui";
const CSP: &str = "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; \
                   form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

type HmacSha256 = Hmac<sha2_010::Sha256>;

/// The keys of one run of the page.
pub(crate) struct Keys {
    /// Signs each form's anti-forgery token.
    form: [u8; 32],
    /// The sessions of signed-in browsers.
    sessions: Mutex<VecDeque<String>>,
}

impl Keys {
    pub(crate) fn new() -> std::io::Result<Keys> {
        let mut form = [0u8; 32];
        getrandom::getrandom(&mut form).map_err(std::io::Error::other)?;
        Ok(Keys {
            form,
            sessions: Mutex::new(VecDeque::new()),
        })
    }

    fn mac(&self, action: &str) -> Option<HmacSha256> {
        let mut mac = HmacSha256::new_from_slice(&self.form).ok()?;
        mac.update(action.as_bytes());
        Some(mac)
    }

    /// The anti-forgery token of the form that posts to `action`.
    pub(crate) fn token(&self, action: &str) -> String {
        self.mac(action)
            .map(|m| crate::store::hex(&m.finalize().into_bytes()))
            .unwrap_or_default()
    }

    /// Whether `presented` is `action`'s token (in constant time).
    pub(crate) fn token_ok(&self, action: &str, presented: &str) -> bool {
        let Some(bytes) = unhex(presented) else {
            return false;
        };
        self.mac(action)
            .is_some_and(|m| m.verify_slice(&bytes).is_ok())
    }

    fn new_session(&self) -> Option<String> {
        let mut id = [0u8; 32];
        getrandom::getrandom(&mut id).ok()?;
        let id = crate::store::hex(&id);
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        if sessions.len() >= MAX_SESSIONS {
            sessions.pop_front();
        }
        sessions.push_back(id.clone());
        Some(id)
    }

    fn session_ok(&self, presented: &str) -> bool {
        use subtle::ConstantTimeEq as _;
        let sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.iter().fold(false, |hit, s| {
            hit | bool::from(s.as_bytes().ct_eq(presented.as_bytes()))
        })
    }
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() != 64 {
        return None;
    }
    (0..32)
        .map(|i| u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok())
        .collect()
}

/// The `Host` names this page answers to.
fn host_ok(ui: &Ui, host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    let port_ok = match host.rsplit_once(':') {
        Some((_, port)) if !host.ends_with(']') => port == ui.addr.port().to_string(),
        _ => true,
    };
    let ip = ui.addr.ip();
    let loopback_name = matches!(name, "localhost" | "127.0.0.1" | "::1");
    let loopback = (ip.is_loopback() || ip.is_unspecified()) && loopback_name;
    // Bound to every address: any of this machine's addresses, spelled as
    // an IP (DNS rebinding needs a name, never an IP literal).
    let any_ip = ip.is_unspecified() && name.parse::<std::net::IpAddr>().is_ok();
    let own = name == ip.to_string() || any_ip;
    let allowed = ui.options.allowed_hosts.iter().any(|h| h == name);
    port_ok && (loopback || own || allowed)
}

fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find_map(|(k, v)| (k == name).then_some(v))
}

fn plain(status: StatusCode, text: &'static str) -> Response {
    let mut response = (status, text).into_response();
    harden(response.headers_mut());
    response
}

/// The headers every answer carries.
fn harden(headers: &mut HeaderMap) {
    let set = [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "same-origin"),
        (header::CACHE_CONTROL, "no-store"),
    ];
    for (name, value) in set {
        headers.insert(name, HeaderValue::from_static(value));
    }
}

/// The guards, in order: `Host`, `Origin` for a change, the session.
pub(crate) async fn check(State(ui): State<Arc<Ui>>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let Some(host) = host.filter(|h| host_ok(&ui, h)) else {
        return plain(
            StatusCode::MISDIRECTED_REQUEST,
            "Misdirected Request: this page answers to its own address only (serve it under another name with ui --allow-host NAME)",
        );
    };
    let reading = matches!(*request.method(), Method::GET | Method::HEAD);
    if !reading {
        let origin = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok());
        let site = headers.get("sec-fetch-site").and_then(|s| s.to_str().ok());
        // The page's own origin: http, or https behind a TLS proxy.
        let own = origin.is_some_and(|o| {
            o.strip_prefix("http://")
                .or_else(|| o.strip_prefix("https://"))
                .is_some_and(|rest| rest == host)
        });
        if !own || site.is_some_and(|s| s != "same-origin") {
            return plain(
                StatusCode::FORBIDDEN,
                "Forbidden: a change must come from this page",
            );
        }
    }
    let path = request.uri().path();
    let open = path == "/login" || path.starts_with("/assets/");
    if ui.options.tokens.is_some()
        && !open
        && !cookie(headers, COOKIE).is_some_and(|c| ui.guard.session_ok(c))
    {
        let mut response = match reading {
            true => Redirect::to("/login").into_response(),
            false => (StatusCode::FORBIDDEN, "Forbidden: sign in first").into_response(),
        };
        harden(response.headers_mut());
        return response;
    }
    let request = match reading {
        true => request,
        false => match whole(request).await {
            Ok(request) => request,
            Err(refused) => return refused,
        },
    };
    let mut response = next.run(request).await;
    harden(response.headers_mut());
    response
}

/// A change's request with its whole body, read within [`BODY_TIME`] and
/// [`MAX_BODY`]; past either, an answer that closes the connection.
async fn whole(request: Request) -> Result<Request, Response> {
    let (parts, body) = request.into_parts();
    let refused = |status, text| {
        let mut response = plain(status, text);
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        response
    };
    match tokio::time::timeout(BODY_TIME, axum::body::to_bytes(body, MAX_BODY)).await {
        Ok(Ok(bytes)) => Ok(Request::from_parts(parts, axum::body::Body::from(bytes))),
        Ok(Err(_)) => Err(refused(
            StatusCode::PAYLOAD_TOO_LARGE,
            "Payload Too Large: at most 4 MiB",
        )),
        Err(_) => Err(refused(
            StatusCode::REQUEST_TIMEOUT,
            "Request Timeout: the body did not arrive within 10 s",
        )),
    }
}

/// The sign-in form, where the page has tokens.
pub(crate) async fn login_page(State(ui): State<Arc<Ui>>) -> Response {
    let body = layout::page(
        &ui,
        "Sign in",
        html! {
            h1 { "Sign in" }
            p { "This page needs one of the tokens of its token file." }
            form method="post" action="/login" {
                input type="hidden" name="csrf" value=(ui.guard.token("/login"));
                label { "Token " input type="password" name="token" autocomplete="current-password" required; }
                button type="submit" { "Sign in" }
            }
        },
    );
    body.into_response()
}

#[derive(Deserialize)]
pub(crate) struct Login {
    token: String,
    csrf: String,
}

/// Checks a token; a good one gets a session cookie.
pub(crate) async fn login(State(ui): State<Arc<Ui>>, Form(form): Form<Login>) -> Response {
    let good = ui.guard.token_ok("/login", &form.csrf)
        && ui
            .options
            .tokens
            .as_ref()
            .is_some_and(|t| t.check(form.token.as_bytes()).is_some());
    if !good {
        return layout::problem(
            &ui,
            StatusCode::UNAUTHORIZED,
            "That token is not one of the page's.",
        );
    }
    let Some(session) = ui.guard.new_session() else {
        return layout::problem(
            &ui,
            StatusCode::INTERNAL_SERVER_ERROR,
            "No random session could be made.",
        );
    };
    let mut response = Redirect::to("/").into_response();
    let cookie = format!("{COOKIE}={session}; HttpOnly; SameSite=Strict; Path=/");
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}
