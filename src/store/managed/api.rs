//! The memory stores API (beta `agent-memory-2026-07-22`) over HTTP: the
//! five memory requests the store makes, each retried on 429 and 5xx with
//! backoff that honours `retry-after`, within a bound.
//!
//! Failures come back as [`Fail`], a closed set: no key, host or URL, and
//! none of the service's own message text, can reach the model.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::store::RemoteCause;
use crate::store::runtime::Io;

/// The beta the memory stores endpoints need.
const BETA: &str = "agent-memory-2026-07-22";
/// The API version every Anthropic request names.
const VERSION: &str = "2023-06-01";
/// Items per list page: the API's maximum for `view=basic`.
const PAGE: &str = "100";
/// The most pages one listing follows: a store holds at most 2,000
/// memories (20 pages); a service that keeps sending `next_page` past
/// that is faulty, and is not followed for ever.
const MAX_PAGES: usize = 25;

/// A memory as the API describes it (content only on a retrieve).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Memory {
    pub id: String,
    pub path: String,
    pub content_sha256: String,
    pub content_size_bytes: u64,
    pub updated_at: String,
    #[serde(default)]
    pub content: Option<String>,
}

/// A memory store as the API describes it: only what the store uses.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct StoreInfo {
    /// When it was archived; `None` while it can be written.
    #[serde(default)]
    pub archived_at: Option<String>,
}

/// One item of a listing: a memory, or (with `depth=1`) a prefix standing
/// for the memories below it.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type")]
pub(crate) enum Item {
    #[serde(rename = "memory")]
    Memory(Memory),
    #[serde(rename = "memory_prefix")]
    Prefix { path: String },
}

/// One of the service's versions of a memory (`path`, `content` and
/// `content_sha256` are `None` once redacted; content only on a retrieve).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Version {
    pub id: String,
    pub memory_id: String,
    pub operation: String,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    pub content_sha256: Option<String>,
    #[serde(default)]
    pub content_size_bytes: Option<u64>,
    pub created_at: String,
    #[serde(default)]
    pub created_by: Option<Value>,
    #[serde(default)]
    pub redacted_at: Option<String>,
}

/// The most pages of versions one listing follows (100 a page).
const MAX_VERSION_PAGES: usize = 200;

#[derive(Deserialize)]
struct Page<T = Item> {
    data: Vec<T>,
    #[serde(default)]
    next_page: Option<String>,
}

/// Why a request failed.
#[derive(Debug)]
pub(crate) enum Fail {
    /// 409: a precondition failed, or the path is taken.
    Conflict,
    /// 404: no such memory (or memory store).
    NotFound,
    /// 400 or 413: the service refused the request as invalid.
    Refused,
    /// Nothing was changed: the service could not be reached, refused the
    /// key, or kept answering 429/5xx until the retries ran out.
    Unreachable(RemoteCause),
    /// A write was sent and no answer came: it may have happened.
    Unknown(RemoteCause),
}

/// How hard to try one request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Retry {
    /// Retries after the first attempt, for 429 and 5xx answers.
    pub retries: u32,
    /// The longest single wait, whatever `retry-after` asks for.
    pub max_wait: Duration,
    /// Each attempt's deadline.
    pub timeout: Duration,
}

/// The client for one memory store.
#[derive(Clone)]
pub(crate) struct Api {
    http: reqwest::Client,
    io: Io,
    /// `{base}/v1/memory_stores/{id}`.
    store_url: String,
    key: String,
    workspace: Option<String>,
    retry: Retry,
}

impl Api {
    pub(crate) fn new(
        http: reqwest::Client,
        io: Io,
        base: &str,
        store_id: &str,
        key: String,
        workspace: Option<String>,
        retry: Retry,
    ) -> Api {
        let store_id: String = percent_encoding::utf8_percent_encode(store_id, QUERY).collect();
        Api {
            http,
            io,
            store_url: format!("{}/v1/memory_stores/{store_id}", base.trim_end_matches('/')),
            key,
            workspace,
            retry,
        }
    }

    /// The memory store itself: whether it exists, the key may use it,
    /// and it is archived.
    pub(crate) fn store(&self) -> Result<StoreInfo, Fail> {
        let body = self.send(reqwest::Method::GET, "", &[], None)?;
        parse(&body)
    }

    /// Archives the memory store (for good: its memories can be read,
    /// never changed); an archived one is answered unchanged.
    pub(crate) fn archive(&self) -> Result<StoreInfo, Fail> {
        let body = self.send(reqwest::Method::POST, "/archive", &[], None)?;
        written(&body)
    }

    /// Every item below `prefix` (ending in `/`), all pages; `depth` 1
    /// rolls deeper memories up into prefixes, 0 lists them all.
    pub(crate) fn list(&self, prefix: &str, depth: u32) -> Result<Vec<Item>, Fail> {
        let depth = depth.to_string();
        let mut items = Vec::new();
        let mut page: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut query = vec![
                ("path_prefix", prefix.to_owned()),
                ("depth", depth.clone()),
                ("limit", PAGE.to_owned()),
                ("view", "basic".to_owned()),
            ];
            if let Some(p) = page.take() {
                query.push(("page", p));
            }
            let body = self.send(reqwest::Method::GET, "/memories", &query, None)?;
            let got: Page = parse(&body)?;
            items.extend(got.data);
            match got.next_page {
                Some(next) if !next.is_empty() => page = Some(next),
                _ => return Ok(items),
            }
        }
        Err(Fail::Unreachable(RemoteCause::Unavailable))
    }

    /// The store's versions, newest first, all pages (at most
    /// [`MAX_VERSION_PAGES`]) or those the `newest` count needs, with the
    /// API's own filters in `filters` (`memory_id`, `created_at[gte]`,
    /// `created_at[lte]`).
    pub(crate) fn versions(
        &self,
        filters: &[(&str, String)],
        newest: Option<usize>,
    ) -> Result<Vec<Version>, Fail> {
        let mut all = Vec::new();
        let mut page: Option<String> = None;
        for _ in 0..MAX_VERSION_PAGES {
            // The newest `n` are on the first pages: no more is read.
            if newest.is_some_and(|n| all.len() >= n) {
                all.truncate(newest.unwrap_or(0));
                return Ok(all);
            }
            let mut query = filters.to_vec();
            query.push(("limit", PAGE.to_owned()));
            if let Some(p) = page.take() {
                query.push(("page", p));
            }
            let body = self.send(reqwest::Method::GET, "/memory_versions", &query, None)?;
            let got: Page<Version> = parse(&body)?;
            all.extend(got.data);
            match got.next_page {
                Some(next) if !next.is_empty() => page = Some(next),
                _ => return Ok(all),
            }
        }
        Err(Fail::Refused)
    }

    /// One version with its content.
    pub(crate) fn version(&self, id: &str) -> Result<Version, Fail> {
        let below = format!("/memory_versions/{}", escaped(id));
        let body = self.send(reqwest::Method::GET, &below, &[], None)?;
        parse(&body)
    }

    /// Erases a version's content and path on the service.
    pub(crate) fn redact(&self, id: &str) -> Result<Version, Fail> {
        let below = format!("/memory_versions/{}/redact", escaped(id));
        // No body, as the API reference and the official SDKs send it.
        let body = self.send(reqwest::Method::POST, &below, &[], None)?;
        written(&body)
    }

    /// One memory with its content.
    pub(crate) fn retrieve(&self, id: &str) -> Result<Memory, Fail> {
        let query = [("view", "full".to_owned())];
        let body = self.send(reqwest::Method::GET, &memory(id), &query, None)?;
        parse(&body)
    }

    /// Creates a memory; 409 if the path is taken.
    pub(crate) fn create(&self, path: &str, content: &str) -> Result<Memory, Fail> {
        let body = json!({"path": path, "content": content});
        let got = self.send(reqwest::Method::POST, "/memories", &[], Some(body))?;
        written(&got)
    }

    /// Changes a memory's content, path or both, only if its content is
    /// still `sha` (409 otherwise, or if the new path is taken).
    pub(crate) fn update(
        &self,
        id: &str,
        sha: &str,
        content: Option<&str>,
        path: Option<&str>,
    ) -> Result<Memory, Fail> {
        let mut body = json!({
            "precondition": {"type": "content_sha256", "content_sha256": sha},
        });
        if let Some(content) = content {
            body["content"] = Value::from(content);
        }
        if let Some(path) = path {
            body["path"] = Value::from(path);
        }
        let got = self.send(reqwest::Method::POST, &memory(id), &[], Some(body))?;
        written(&got)
    }

    /// Deletes a memory only if its content is still `sha`.
    pub(crate) fn delete(&self, id: &str, sha: &str) -> Result<(), Fail> {
        let query = [("expected_content_sha256", sha.to_owned())];
        self.send(reqwest::Method::DELETE, &memory(id), &query, None)
            .map(|_| ())
    }

    /// One request, retried on 429 and 5xx; the answer's body on 2xx.
    fn send(
        &self,
        method: reqwest::Method,
        below: &str,
        query: &[(&str, String)],
        body: Option<Value>,
    ) -> Result<Vec<u8>, Fail> {
        let write = method != reqwest::Method::GET;
        // A 5xx to a create or a delete may come after it happened, and a
        // repeat would then answer 409 or 404 for this call's own change:
        // only reads and preconditioned updates (the service answers 200
        // to an update that finds its change already made) are repeated.
        let repeat = method == reqwest::Method::GET
            || (method == reqwest::Method::POST && below != "/memories" && !below.is_empty());
        let mut url = format!("{}{below}", self.store_url);
        for (i, (name, value)) in query.iter().enumerate() {
            let value = percent_encoding::utf8_percent_encode(value, QUERY);
            url.push_str(&format!("{}{name}={value}", if i == 0 { '?' } else { '&' }));
        }
        let mut request = self
            .http
            .request(method, url)
            .header("authorization", format!("Bearer {}", self.key))
            .header("anthropic-version", VERSION)
            .header("anthropic-beta", BETA)
            .timeout(self.retry.timeout);
        if let Some(ws) = &self.workspace {
            request = request.header("anthropic-workspace-id", ws.as_str());
        }
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        let retry = self.retry;
        self.io
            .run(async move { attempts(request, retry, write, repeat).await })
            .unwrap_or(Err(Fail::Unreachable(RemoteCause::Unavailable)))
    }
}

/// What a query value or an id may not hold as it is: all but RFC 3986's
/// unreserved characters.
const QUERY: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

fn escaped(id: &str) -> String {
    percent_encoding::utf8_percent_encode(id, QUERY).collect()
}

fn memory(id: &str) -> String {
    format!("/memories/{}", escaped(id))
}

fn parse<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, Fail> {
    // An answer that is not the documented shape is a service fault.
    serde_json::from_slice(body).map_err(|_| Fail::Unreachable(RemoteCause::Unavailable))
}

/// A write's 2xx answer: one not of the documented shape still says the
/// write happened, so its outcome is unknown, never "not reached".
fn written<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, Fail> {
    serde_json::from_slice(body).map_err(|_| Fail::Unknown(RemoteCause::Unavailable))
}

/// The attempts of one request.
async fn attempts(
    request: reqwest::RequestBuilder,
    retry: Retry,
    write: bool,
    repeat: bool,
) -> Result<Vec<u8>, Fail> {
    let mut attempt = 0u32;
    // A write repeated after a 5xx may have happened the first time: a 409
    // or 404 to the repeat may then be about this very write.
    let mut maybe_done = false;
    loop {
        let Some(this) = request.try_clone() else {
            return Err(Fail::Unreachable(RemoteCause::Unavailable));
        };
        let response = match this.send().await {
            Ok(r) => r,
            Err(e) => {
                return Err(match transport(&e, write, retry.timeout) {
                    Fail::Unreachable(cause) if maybe_done => Fail::Unknown(cause),
                    fail => fail,
                });
            }
        };
        let status = response.status().as_u16();
        let wait = wait_for(response.headers(), attempt, retry.max_wait);
        let may_retry = response
            .headers()
            .get("x-should-retry")
            .is_none_or(|v| v.as_bytes() != b"false");
        match status {
            200..=299 => return body(response, write, retry.timeout).await,
            409 | 404 if maybe_done => return Err(Fail::Unknown(RemoteCause::Unavailable)),
            409 => return Err(Fail::Conflict),
            404 => return Err(Fail::NotFound),
            400 | 413 | 422 => return Err(Fail::Refused),
            401 | 403 => return Err(Fail::Unreachable(RemoteCause::AccessDenied)),
            429 | 500..=599
                if may_retry && attempt < retry.retries && (repeat || status == 429) =>
            {
                attempt += 1;
                maybe_done |= write && status != 429;
                tokio::time::sleep(wait).await;
            }
            429 if !maybe_done => return Err(Fail::Unreachable(RemoteCause::Throttled)),
            500..=599 if write => return Err(Fail::Unknown(RemoteCause::Unavailable)),
            _ if maybe_done => return Err(Fail::Unknown(RemoteCause::Unavailable)),
            _ => return Err(Fail::Unreachable(RemoteCause::Unavailable)),
        }
    }
}

/// The most bytes one answer may hold: a page of 100 listed memories, or
/// a memory of 102,400 bytes JSON-escaped, is far smaller. A service
/// sending more is faulty, and is not read into memory.
const MAX_ANSWER: usize = 16 << 20;

/// A 2xx answer's body, read up to [`MAX_ANSWER`].
async fn body(
    mut response: reqwest::Response,
    write: bool,
    timeout: Duration,
) -> Result<Vec<u8>, Fail> {
    let mut out = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) if out.len() + chunk.len() <= MAX_ANSWER => {
                out.extend_from_slice(&chunk)
            }
            // A write answered 2xx happened, whatever its answer held.
            Ok(Some(_)) if write => return Err(Fail::Unknown(RemoteCause::Unavailable)),
            Ok(Some(_)) => return Err(Fail::Unreachable(RemoteCause::Unavailable)),
            Ok(None) => return Ok(out),
            Err(e) => return Err(transport(&e, write, timeout)),
        }
    }
}

/// How long to wait before retry `attempt + 1`: the server's
/// `retry-after-ms` or `retry-after` (seconds) if it sent one, else 0.5 s
/// doubling; never more than `max`.
fn wait_for(headers: &reqwest::header::HeaderMap, attempt: u32, max: Duration) -> Duration {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0)
    };
    let asked = header("retry-after-ms")
        .map(|ms| ms / 1000.0)
        .or_else(|| header("retry-after"));
    let wait = match asked {
        Some(secs) => Duration::from_secs_f64(secs.min(max.as_secs_f64())),
        None => Duration::from_millis(500u64.saturating_mul(1 << attempt.min(6))),
    };
    wait.min(max)
}

/// A request that got no HTTP answer.
fn transport(e: &reqwest::Error, write: bool, timeout: Duration) -> Fail {
    let cause = if e.is_timeout() {
        RemoteCause::TimedOut { after: timeout }
    } else if e.is_connect() {
        // Nothing was sent: even a write did not happen.
        return Fail::Unreachable(RemoteCause::ConnectionRefused);
    } else {
        RemoteCause::ConnectionLost
    };
    if write {
        Fail::Unknown(cause)
    } else {
        Fail::Unreachable(cause)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderMap, HeaderValue};

    #[test]
    fn waits_honour_retry_after_within_the_bound() {
        let max = Duration::from_secs(10);
        let mut h = HeaderMap::new();
        assert_eq!(wait_for(&h, 0, max), Duration::from_millis(500));
        assert_eq!(wait_for(&h, 2, max), Duration::from_secs(2));
        assert_eq!(wait_for(&h, 30, max), max);
        h.insert("retry-after", HeaderValue::from_static("3"));
        assert_eq!(wait_for(&h, 0, max), Duration::from_secs(3));
        h.insert("retry-after", HeaderValue::from_static("86400"));
        assert_eq!(wait_for(&h, 0, max), max);
        h.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(wait_for(&h, 0, max), Duration::from_millis(250));
        h.insert("retry-after-ms", HeaderValue::from_static("NaN"));
        assert_eq!(wait_for(&h, 0, max), max, "NaN falls back to retry-after");
    }

    #[test]
    fn list_items_parse_both_kinds() {
        let page: Page = serde_json::from_str(
            r#"{"data":[{"type":"memory_prefix","path":"/a/"},
            {"type":"memory","id":"mem_1","path":"/b.md","content_sha256":"00",
             "content_size_bytes":2,"updated_at":"2026-01-01T00:00:00Z","content":null,
             "memory_store_id":"memstore_1","memory_version_id":"memver_1",
             "created_at":"2026-01-01T00:00:00Z"}],"next_page":null}"#,
        )
        .unwrap();
        assert!(matches!(&page.data[0], Item::Prefix { path } if path == "/a/"));
        assert!(matches!(&page.data[1], Item::Memory(m) if m.id == "mem_1" && m.content.is_none()));
        assert!(page.next_page.is_none());
    }
}
