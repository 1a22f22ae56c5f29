//! The views: a path (a directory's entries, or a file as the model's
//! `view` shows it), search, the changes, one version, a diff, and the
//! store's statistics. Each reads through the store or its history, off
//! the async threads, and bounds what one page holds.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::json;

use super::layout::{self, browse_link, page, problem, q, size, time};
use super::{Ui, blocking, diff};
use crate::config::Config;
use crate::history::{ChangeOp, Query as HistoryQuery, Version, VersionId};
use crate::path::{MemoryPath, is_reserved};
use crate::result::Content;
use crate::store::walk::walk_skipping_unlistable;
use crate::store::{EntryKind, Flow, MemoryStore, Order, Step};
use crate::tool::MemoryTool;

/// Entries a directory page shows.
const ENTRIES: usize = 200;
/// Lines a file page shows, and the most bytes of them.
pub(crate) const LINES: i64 = 500;
const PAGE_BYTES: usize = 128 << 10;
/// Versions a page of changes shows.
const CHANGES: usize = 100;
/// The most files one search looks at, results it shows, and bytes of a
/// file it reads.
const SEARCH_FILES: usize = 20_000;
const SEARCH_RESULTS: usize = 200;
const SEARCH_BYTES: u64 = 1 << 20;

type Page = Result<Markup, (StatusCode, String)>;

fn bad(text: impl Into<String>) -> (StatusCode, String) {
    (StatusCode::BAD_REQUEST, text.into())
}

fn answer(ui: &Arc<Ui>, title: &str, result: Option<Page>) -> Response {
    match result {
        Some(Ok(body)) => page(ui, title, body).into_response(),
        Some(Err((status, text))) => problem(ui, status, &text),
        None => problem(ui, StatusCode::INTERNAL_SERVER_ERROR, "The page failed."),
    }
}

/// A memory path from a URL, checked as a model's is.
pub(crate) fn path_of(raw: Option<&str>) -> Result<MemoryPath, (StatusCode, String)> {
    let raw = raw.unwrap_or(crate::path::ROOT);
    MemoryPath::parse(raw).map_err(|e| bad(format!("Not a memory path: {e}")))
}

/// A version id from a URL.
pub(crate) fn id_of(raw: Option<&str>) -> Result<VersionId, (StatusCode, String)> {
    raw.unwrap_or("").parse().map_err(bad)
}

pub(crate) async fn not_found(State(ui): State<Arc<Ui>>) -> Response {
    problem(&ui, StatusCode::NOT_FOUND, "No such page.")
}

#[derive(Deserialize)]
pub(crate) struct At {
    path: Option<String>,
    page: Option<String>,
    line: Option<String>,
}

/// A number from a URL: absent is `default`, out of range the nearest
/// bound, anything else a 400.
fn number<T: std::str::FromStr + Copy>(
    raw: Option<&str>,
    default: T,
    max: T,
) -> Result<T, (StatusCode, String)> {
    match raw.map(str::trim) {
        None | Some("") => Ok(default),
        Some(text) if text.bytes().all(|b| b.is_ascii_digit()) => Ok(text.parse().unwrap_or(max)),
        Some(text) => Err(bad(format!("Not a number: {text}"))),
    }
}

/// `/?path=…`: a directory's entries, or a file's lines.
pub(crate) async fn browse(State(ui): State<Arc<Ui>>, Query(at): Query<At>) -> Response {
    let result = blocking(&ui, move |ui| -> Page {
        let path = path_of(at.path.as_deref())?;
        let store = ui.backend.store();
        let meta = store
            .stat(&path)
            .map_err(|e| (StatusCode::BAD_GATEWAY, e.to_string()))?;
        match meta {
            None => Err((StatusCode::NOT_FOUND, missing(ui, &path))),
            Some(m) if m.kind == EntryKind::Directory => {
                directory(ui, &path, number(at.page.as_deref(), 0, usize::MAX)?)
            }
            Some(m) => {
                let line = number(at.line.as_deref(), 1i64, 1 << 40)?;
                file(ui, &path, m.len, line.clamp(1, 1 << 40))
            }
        }
    })
    .await;
    answer(&ui, "Browse", result)
}

fn missing(ui: &Ui, path: &MemoryPath) -> String {
    match ui.backend.versions() {
        Some(_) => format!(
            "Nothing is at {path}. Its versions, if it had any, are under Changes (a deleted file can be restored from its last version)."
        ),
        None => format!("Nothing is at {path}."),
    }
}

fn directory(ui: &Ui, dir: &MemoryPath, page_no: usize) -> Page {
    let mut entries = ui
        .backend
        .store()
        .list(dir)
        .map_err(|e| (StatusCode::BAD_GATEWAY, e.to_string()))?;
    entries.retain(|e| !is_reserved(&e.name));
    entries.sort_by(|a, b| {
        (a.kind != EntryKind::Directory, &a.name).cmp(&(b.kind != EntryKind::Directory, &b.name))
    });
    let total = entries.len();
    let pages = total.div_ceil(ENTRIES).max(1);
    // A page past the end is the last one.
    let page_no = page_no.min(pages - 1);
    let shown: Vec<_> = entries
        .into_iter()
        .skip(page_no.saturating_mul(ENTRIES))
        .take(ENTRIES)
        .collect();
    Ok(html! {
        (layout::breadcrumbs(dir))
        p.meta { (total) " entries" @if pages > 1 { ", page " (page_no + 1) " of " (pages) } }
        @if ui.backend.versions().is_some() {
            p { a href=(format!("/changes?prefix={}", q(dir.as_str()))) { "Changes below this directory" } }
        }
        table.entries {
            thead { tr { th { "Name" } th { "Size" } th { "Last change" } } }
            tbody {
                @for e in &shown {
                    @let child = dir.join(&e.name);
                    tr {
                        td {
                            @match &child {
                                Some(p) => a href=(browse_link(p.as_str())) {
                                    (e.name) @if e.kind == EntryKind::Directory { "/" }
                                },
                                None => span.note { (e.name) },
                            }
                        }
                        td.num { @if e.kind == EntryKind::File { (size(e.len)) } }
                        td { @if let Some(t) = e.modified { (time(t)) } }
                    }
                }
            }
        }
        (pager(&format!("{}&page=", browse_link(dir.as_str())), page_no, pages))
    })
}

fn pager(base: &str, page_no: usize, pages: usize) -> Markup {
    html! {
        @if pages > 1 {
            nav.pager {
                @if page_no > 0 { a href=(format!("{base}{}", page_no - 1)) { "← previous" } }
                @if page_no + 1 < pages { a href=(format!("{base}{}", page_no + 1)) { "next →" } }
            }
        }
    }
}

/// A file as the model's `view` shows it, [`LINES`] lines a page.
fn file(ui: &Ui, path: &MemoryPath, len: u64, line: i64) -> Page {
    let tool = MemoryTool::with_config(
        ui.backend.store(),
        Config::default().with_view_output_limit(128 << 10),
    );
    let view = |range: [i64; 2]| {
        tool.dispatch(&json!({"command": "view", "path": path.as_str(), "view_range": range}))
    };
    // One line more than a page: whether there is a next one.
    let mut result = view([line, line + LINES]);
    if result.is_error {
        // Past the end: to the end.
        result = view([line, -1]);
    }
    let mut more = false;
    let shown = match result.content.first() {
        Some(Content::Text(t)) => {
            // The header, then the numbered lines: past a page, there are more.
            more = !result.is_error && t.lines().count() > LINES as usize + 1;
            let t = match more {
                true => t.rsplit_once('\n').map_or(t.as_str(), |(page, _)| page),
                false => t.as_str(),
            };
            // A page holds at most PAGE_BYTES of the file, whatever its lines.
            let mut end = t.len().min(PAGE_BYTES);
            while !t.is_char_boundary(end) {
                end -= 1;
            }
            html! {
                pre.file { (layout::visible(&t[..end])) }
                @if end < t.len() { p.note { "(cut at " (size(PAGE_BYTES as u64)) ": the line is longer)" } }
            }
        }
        Some(Content::Image { .. }) => html! { p.note { "An image, " (size(len)) "." } },
        None => html! {},
    };
    let read_only = ui.options.read_only;
    let p = path.as_str();
    Ok(html! {
        (layout::breadcrumbs(path))
        p.meta { (size(len)) }
        nav.actions {
            @if ui.backend.versions().is_some() {
                a href=(format!("/changes?path={}", q(p))) { "History" }
            }
            @if !read_only {
                a href=(format!("/act/edit?path={}", q(p))) { "Edit" }
                a href=(format!("/act/rename?path={}", q(p))) { "Rename" }
                a href=(format!("/act/delete?path={}", q(p))) { "Delete" }
            }
        }
        (shown)
        nav.pager {
            @if line > 1 {
                a href=(format!("{}&line={}", browse_link(p), (line - LINES).max(1))) { "← previous lines" }
            }
            @if more {
                a href=(format!("{}&line={}", browse_link(p), line + LINES)) { "next lines →" }
            }
        }
    })
}

#[derive(Deserialize)]
pub(crate) struct Search {
    q: Option<String>,
}

/// `/search?q=…`: names and contents holding the text (case-insensitive).
pub(crate) async fn search(State(ui): State<Arc<Ui>>, Query(s): Query<Search>) -> Response {
    let result = blocking(&ui, move |ui| -> Page {
        let text = s.q.unwrap_or_default();
        let found = match text.trim() {
            "" => Vec::new(),
            t => find(ui.backend.store(), &t.to_lowercase(), false)?,
        };
        Ok(html! {
            h1 { "Search" }
            form method="get" action="/search" {
                input type="search" name="q" value=(text) placeholder="a name or a word" autofocus;
                button type="submit" { "Search" }
            }
            @if !text.trim().is_empty() {
                p.meta { (found.len()) " found" @if found.len() >= SEARCH_RESULTS { " (the first " (SEARCH_RESULTS) ")" } }
                ul.results {
                    @for (path, lines) in &found {
                        li {
                            a href=(browse_link(path)) { (path) }
                            @for (n, l) in lines {
                                div.hit { span.n { (n) } " " (layout::visible(l)) }
                            }
                        }
                    }
                }
            }
        })
    })
    .await;
    answer(&ui, "Search", result)
}

/// A file a search found: its path, and up to three matching lines.
type Hit = (String, Vec<(usize, String)>);

/// Files whose path or content holds `needle`: exactly, or (lowercase)
/// whatever the case.
pub(crate) fn find(
    store: &dyn MemoryStore,
    needle: &str,
    exact: bool,
) -> Result<Vec<Hit>, (StatusCode, String)> {
    let fold = |s: &str| match exact {
        true => s.to_owned(),
        false => s.to_lowercase(),
    };
    let mut found = Vec::new();
    let mut seen = 0usize;
    walk_skipping_unlistable(store, &MemoryPath::root(), Order::ByName, &mut |step| {
        let Step::File { dir, entry, .. } = step else {
            let full = seen >= SEARCH_FILES || found.len() >= SEARCH_RESULTS;
            return Ok(if full { Flow::Skip } else { Flow::Continue });
        };
        if seen >= SEARCH_FILES || found.len() >= SEARCH_RESULTS || is_reserved(&entry.name) {
            return Ok(Flow::Continue);
        }
        seen += 1;
        let Some(path) = dir.join(&entry.name) else {
            return Ok(Flow::Continue);
        };
        let mut lines = Vec::new();
        if entry.len <= SEARCH_BYTES
            && let Ok(file) = store.read(&path, SEARCH_BYTES)
        {
            let text = String::from_utf8_lossy(&file.data);
            for (i, line) in text.lines().enumerate() {
                if fold(line).contains(needle) {
                    lines.push((i + 1, line.chars().take(200).collect()));
                    if lines.len() == 3 {
                        break;
                    }
                }
            }
        }
        if !lines.is_empty() || fold(path.as_str()).contains(needle) {
            found.push((path.as_str().to_owned(), lines));
        }
        Ok(Flow::Continue)
    })
    .map_err(|e| (StatusCode::BAD_GATEWAY, e.to_string()))?;
    Ok(found)
}

#[derive(Deserialize)]
pub(crate) struct Changes {
    path: Option<String>,
    prefix: Option<String>,
    actor: Option<String>,
    call: Option<String>,
    since: Option<String>,
    until: Option<String>,
    before: Option<String>,
}

/// A time from a URL: `2026-12-07`, `2026-12-07 22:46` or RFC 3339 (UTC).
fn time_of(raw: &str) -> Result<std::time::SystemTime, (StatusCode, String)> {
    let raw = raw.trim().replace(' ', "T");
    let full = match raw.len() {
        10 => format!("{raw}T00:00:00Z"),
        16 => format!("{raw}:00Z"),
        _ if raw.ends_with('Z') || raw.contains('+') => raw.clone(),
        _ => format!("{raw}Z"),
    };
    humantime::parse_rfc3339_weak(full.trim_end_matches('Z')).map_err(|_| {
        bad(format!(
            "Not a time: {raw} (such as 2026-12-07 or 2026-12-07 22:46)"
        ))
    })
}

fn some(text: Option<String>) -> Option<String> {
    text.filter(|t| !t.trim().is_empty())
}

/// `/changes`: the newest versions, filtered by path, actor or call.
pub(crate) async fn changes(State(ui): State<Arc<Ui>>, Query(c): Query<Changes>) -> Response {
    let result = blocking(&ui, move |ui| -> Page {
        let Some(versions) = ui.backend.versions() else {
            return Err(bad("This store keeps no history: open it with --history."));
        };
        let path = some(c.path).map(|p| path_of(Some(&p))).transpose()?;
        let prefix = some(c.prefix).map(|p| path_of(Some(&p))).transpose()?;
        let before = some(c.before).map(|b| id_of(Some(&b))).transpose()?;
        let (actor, call) = (some(c.actor), some(c.call));
        let (since, until) = (some(c.since), some(c.until));
        let query = HistoryQuery {
            path: path.clone(),
            prefix: prefix.clone(),
            actor: actor.clone(),
            call: call.clone(),
            since: since.as_deref().map(time_of).transpose()?,
            until: until.as_deref().map(time_of).transpose()?,
            before,
            limit: Some(CHANGES),
            ..HistoryQuery::default()
        };
        let page = versions
            .history(&query)
            .map_err(|e| (StatusCode::BAD_GATEWAY, e.to_string()))?;
        let mut filters = String::new();
        for (name, value) in [
            ("path", path.as_ref().map(|p| p.as_str().to_owned())),
            ("prefix", prefix.as_ref().map(|p| p.as_str().to_owned())),
            ("actor", actor.clone()),
            ("call", call.clone()),
            ("since", since.clone()),
            ("until", until.clone()),
        ] {
            if let Some(v) = value {
                filters.push_str(&format!("&{name}={}", q(&v)));
            }
        }
        let older = page
            .first()
            .filter(|_| page.len() == CHANGES)
            .map(|v| format!("/changes?before={}{filters}", q(&v.id.to_string())));
        Ok(html! {
            h1 {
                @match &path { Some(p) => { "History of " (p.as_str()) }, None => "Changes" }
            }
            form.filters method="get" action="/changes" {
                label { "Path " input name="path" value=[path.as_ref().map(|p| p.as_str())]; }
                label { "Actor " input name="actor" value=[actor.as_deref()]; }
                label { "Call " input name="call" value=[call.as_deref()]; }
                label { "Since " input name="since" size="16" placeholder="2026-12-07" value=[since.as_deref()]; }
                label { "Until " input name="until" size="16" value=[until.as_deref()]; }
                button type="submit" { "Filter" }
                " " a href="/changes" { "clear" }
            }
            @if !ui.options.read_only {
                p { a href="/act/erase" { "Erase a text everywhere…" } }
            }
            (timeline(&page))
            @if let Some(link) = older { nav.pager { a href=(link) { "older →" } } }
        })
    })
    .await;
    answer(&ui, "Changes", result)
}

fn op_name(op: ChangeOp) -> &'static str {
    match op {
        ChangeOp::Created => "created",
        ChangeOp::Modified => "modified",
        ChangeOp::Renamed => "renamed",
        ChangeOp::Deleted => "deleted",
    }
}

/// Versions, newest first, as a table.
fn timeline(page: &[Version]) -> Markup {
    html! {
        @if page.is_empty() { p.note { "No versions." } }
        table.timeline {
            thead { tr { th { "Version" } th { "Time" } th { "Operation" } th { "Path" } th { "Actor" } th { "Call" } th { "Size" } } }
            tbody {
                @for v in page.iter().rev() {
                    @let id = v.id.to_string();
                    tr class=(op_name(v.op)) {
                        td { a href=(format!("/version?id={}", q(&id))) { (id) } }
                        td { (time(v.time)) }
                        td { (op_name(v.op)) @if v.redacted { " (redacted)" } }
                        td {
                            @if let Some(p) = &v.path { a href=(browse_link(p)) { (p) } }
                            @if let Some(from) = &v.from { span.note { " from " (from) } }
                        }
                        td { @if let Some(a) = &v.actor { a href=(format!("/changes?actor={}", q(a))) { (a) } } }
                        td { @if let Some(c) = &v.call { a href=(format!("/changes?call={}", q(c))) { (c) } } }
                        td.num { @if let Some(s) = v.size { (size(s)) } }
                    }
                }
            }
        }
    }
}

#[derive(Deserialize)]
pub(crate) struct One {
    id: Option<String>,
}

/// `/version?id=…`: one version, its content and what can be done with it.
pub(crate) async fn version(State(ui): State<Arc<Ui>>, Query(one): Query<One>) -> Response {
    let result = blocking(&ui, move |ui| -> Page {
        let Some(versions) = ui.backend.versions() else {
            return Err(bad("This store keeps no history: open it with --history."));
        };
        let id = id_of(one.id.as_deref())?;
        let v = versions
            .show(&id)
            .map_err(|e| (StatusCode::NOT_FOUND, e.to_string()))?;
        let previous = versions
            .history(&HistoryQuery {
                file: Some(v.file.clone()),
                before: Some(id.clone()),
                limit: Some(1),
                ..HistoryQuery::default()
            })
            .ok()
            .and_then(|page| page.into_iter().next());
        let shown = id.to_string();
        let read_only = ui.options.read_only;
        Ok(html! {
            h1 { "Version " (shown) }
            (timeline(std::slice::from_ref(&v)))
            @if let Some(note) = &v.note { p.note { (note) } }
            nav.actions {
                a href=(format!("/diff?from={}", q(&shown))) { "Diff with now" }
                @if let Some(p) = &previous {
                    a href=(format!("/diff?from={}&to={}", q(&p.id.to_string()), q(&shown))) { "Diff with the version before" }
                }
                @if !read_only && v.content.is_some() {
                    a href=(format!("/act/revert?id={}", q(&shown))) {
                        @if v.op == ChangeOp::Deleted { "Restore the deleted file" } @else { "Revert to this version" }
                    }
                }
                @if !read_only && !v.redacted && v.content.is_some() {
                    a href=(format!("/act/redact?id={}", q(&shown))) { "Redact" }
                }
            }
            @match v.text() {
                Some(text) => {
                    p.meta { @if v.op == ChangeOp::Deleted { "The content it removed:" } @else { "The content after it:" } }
                    pre.file { (layout::visible(&text)) }
                },
                None => p.note { "Its content was redacted." },
            }
        })
    })
    .await;
    answer(&ui, "Version", result)
}

#[derive(Deserialize)]
pub(crate) struct Between {
    from: Option<String>,
    to: Option<String>,
    view: Option<String>,
}

/// The text of a file after version `v` (nothing after a delete).
pub(crate) fn after(v: &Version) -> String {
    match v.op {
        ChangeOp::Deleted => String::new(),
        _ => v.text().unwrap_or_default(),
    }
}

/// `/diff?from=…&to=…`: two versions, or a version and the file now.
pub(crate) async fn diff(State(ui): State<Arc<Ui>>, Query(b): Query<Between>) -> Response {
    let result = blocking(&ui, move |ui| -> Page {
        let Some(versions) = ui.backend.versions() else {
            return Err(bad("This store keeps no history: open it with --history."));
        };
        let from_id = id_of(b.from.as_deref())?;
        let from = versions
            .show(&from_id)
            .map_err(|e| (StatusCode::NOT_FOUND, e.to_string()))?;
        let (to_name, to_text) = match some(b.to) {
            Some(to) => {
                let v = versions
                    .show(&id_of(Some(&to))?)
                    .map_err(|e| (StatusCode::NOT_FOUND, e.to_string()))?;
                (v.id.to_string(), after(&v))
            }
            None => match versions
                .current(&from.file)
                .map_err(|e| (StatusCode::BAD_GATEWAY, e.to_string()))?
            {
                Some((path, data)) => (format!("now ({path})"), String::from_utf8_lossy(&data).into_owned()),
                None => ("now (deleted)".to_owned(), String::new()),
            },
        };
        let split = b.view.as_deref() == Some("split");
        let from_name = from.id.to_string();
        let here = format!(
            "/diff?from={}{}",
            q(&from_name),
            if to_name.starts_with("now") { String::new() } else { format!("&to={}", q(&to_name)) }
        );
        Ok(html! {
            h1 { "Diff " (from_name) " → " (to_name) }
            nav.actions {
                @if split { a href=(here) { "Unified" } } @else { a href=(format!("{here}&view=split")) { "Side by side" } }
                a href=(format!("/version?id={}", q(&from_name))) { "Version " (from_name) }
            }
            (diff::render(&after(&from), &to_text, split))
        })
    })
    .await;
    answer(&ui, "Diff", result)
}

/// `/stats`: files, bytes, the largest and oldest file, and what would
/// not fit a managed memory store.
pub(crate) async fn stats(State(ui): State<Arc<Ui>>) -> Response {
    let result = blocking(&ui, move |ui| -> Page {
        let store = ui.backend.store();
        let (mut files, mut bytes, mut dirs) = (0u64, 0u64, 0u64);
        let mut largest: Option<(u64, String)> = None;
        let mut oldest: Option<(std::time::SystemTime, String)> = None;
        walk_skipping_unlistable(store, &MemoryPath::root(), Order::AsListed, &mut |step| {
            match step {
                Step::File { dir, entry, .. } if !is_reserved(&entry.name) => {
                    files += 1;
                    bytes += entry.len;
                    let path = format!("{}/{}", dir.as_str().trim_end_matches('/'), entry.name);
                    if largest.as_ref().is_none_or(|(l, _)| entry.len > *l) {
                        largest = Some((entry.len, path.clone()));
                    }
                    if let Some(t) = entry.modified
                        && oldest.as_ref().is_none_or(|(o, _)| t < *o)
                    {
                        oldest = Some((t, path));
                    }
                }
                Step::Enter { depth, .. } if depth > 0 => dirs += 1,
                _ => {}
            }
            Ok(Flow::Continue)
        })
        .map_err(|e| (StatusCode::BAD_GATEWAY, e.to_string()))?;
        let misfits = crate::profile::check(store).unwrap_or_default();
        Ok(html! {
            h1 { "Statistics" }
            table.stats {
                tr { th { "Files" } td.num { (files) } }
                tr { th { "Directories" } td.num { (dirs) } }
                tr { th { "Bytes" } td.num { (bytes) " (" (size(bytes)) ")" } }
                @if let Some((n, p)) = &largest { tr { th { "Largest" } td { a href=(browse_link(p)) { (p) } " (" (size(*n)) ")" } } }
                @if let Some((t, p)) = &oldest { tr { th { "Oldest change" } td { a href=(browse_link(p)) { (p) } " (" (time(*t)) ")" } } }
            }
            h2 { "Against a managed memory store's limits" }
            @if misfits.is_empty() {
                p { "Everything fits (20 path segments, 102,400 bytes a memory, UTF-8 text, 2,000 memories)." }
            } @else {
                ul { @for m in &misfits { li { (m.to_string()) } } }
            }
        })
    })
    .await;
    answer(&ui, "Statistics", result)
}
