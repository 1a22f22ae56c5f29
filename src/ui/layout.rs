//! The page around every view: its head, the navigation, the embedded
//! assets, and the small formatters the views share (sizes, times, links).

use std::time::SystemTime;

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};

use super::Ui;

const CSS: &str = include_str!("assets/ui.css");
const JS: &str = include_str!("assets/ui.js");

/// The stylesheet, embedded in the binary.
pub(crate) async fn css() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], CSS).into_response()
}

/// The script, embedded in the binary: conveniences only.
pub(crate) async fn js() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        JS,
    )
        .into_response()
}

/// A whole page: `title`, then `body` below the navigation.
pub(crate) fn page(ui: &Ui, title: &str, body: Markup) -> Markup {
    let name = match ui.options.title.as_str() {
        "" => "memory",
        t => t,
    };
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · " (name) " · claude-memory" }
                link rel="stylesheet" href="/assets/ui.css";
                script src="/assets/ui.js" defer {}
            }
            body {
                header {
                    a.brand href="/" { "claude-memory" }
                    span.store { (name) }
                    nav {
                        a href="/" { "Browse" }
                        a href="/search" { "Search" }
                        @if ui.backend.versions().is_some() {
                            a href="/changes" { "Changes" }
                        }
                        a href="/stats" { "Statistics" }
                    }
                    @if ui.options.read_only {
                        span.badge { "read-only" }
                    }
                }
                main { (body) }
            }
        }
    }
}

/// A page answering with `status`: an error a person can act on.
pub(crate) fn problem(ui: &Ui, status: StatusCode, text: &str) -> Response {
    let body = page(
        ui,
        "Error",
        html! {
            h1 { "That did not work" }
            p.error { (text.strip_prefix("Error: ").unwrap_or(text)) }
            p { a href="/" { "Back to the memory" } }
        },
    );
    (status, body).into_response()
}

/// `1.2 KiB`, `340 B`.
pub(crate) fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// `2026-12-07 22:46:59` (UTC); a time past the year 9999 (a planted
/// file's) as such.
pub(crate) fn time(t: SystemTime) -> String {
    const LAST: u64 = 253_402_300_799; // 9999-12-31 23:59:59
    let past = t
        .duration_since(std::time::UNIX_EPOCH)
        .is_ok_and(|d| d.as_secs() > LAST);
    if past {
        return "after 9999".to_owned();
    }
    humantime::format_rfc3339_seconds(t)
        .to_string()
        .replace('T', " ")
        .trim_end_matches('Z')
        .to_owned()
}

/// Text as the page shows memory content: characters that would reorder
/// or hide what a reviewer reads shown, never applied: a C0 control (but
/// the line end and the tab) as its control picture (`␀`), other control,
/// format and bidirectional characters as `<U+202E>`.
pub(crate) fn visible(text: &str) -> std::borrow::Cow<'_, str> {
    let hidden = |c: char| {
        (c.is_control() && !matches!(c, '\n' | '\t' | '\r'))
            || matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
    };
    if !text.chars().any(hidden) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match (hidden(c), u32::from(c)) {
            (false, _) => out.push(c),
            (true, n @ 0..=0x1f) => out.push(char::from_u32(0x2400 + n).unwrap_or('?')),
            (true, 0x7f) => out.push('\u{2421}'),
            (true, n) => out.push_str(&format!("<U+{n:04X}>")),
        }
    }
    out.into()
}

/// A query value, percent-encoded.
pub(crate) fn q(value: &str) -> String {
    percent_encoding::utf8_percent_encode(value, QUERY).collect()
}

/// What a query value may not hold as it is: all but RFC 3986's
/// unreserved characters and `/`.
const QUERY: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'/');

/// The link to a path's page.
pub(crate) fn browse_link(path: &str) -> String {
    format!("/?path={}", q(path))
}

/// Links to each ancestor of `path`, the last one plain.
pub(crate) fn breadcrumbs(path: &crate::path::MemoryPath) -> Markup {
    let parts: Vec<crate::path::MemoryPath> = path
        .ancestors()
        .chain(std::iter::once(path.clone()))
        .collect();
    html! {
        nav.crumbs {
            @for (i, p) in parts.iter().enumerate() {
                @let name = p.components().last().map_or("/memories", String::as_str);
                @if i + 1 == parts.len() {
                    strong { (name) }
                } @else {
                    a href=(browse_link(p.as_str())) { (name) } " / "
                }
            }
        }
    }
}
