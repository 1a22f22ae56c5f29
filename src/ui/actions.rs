//! The changes the page makes: edit, rename and delete a path; revert a
//! version (or restore a deleted file), redact one, erase a text
//! everywhere. Each is shown before it is made (`GET /act/NAME`, then a
//! form whose `step=preview` shows what will change), and made by a
//! second form (`step=do`), through the store's history where it keeps
//! one: every change is a version of its own, which can be reverted.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Form, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use serde_json::json;

use super::layout::{browse_link, page, problem, q, size};
use super::pages::{after, id_of, path_of};
use super::{Ui, blocking, diff};
use crate::history::ChangeOp;
use crate::path::MemoryPath;
use crate::store::{
    Abort, Context, DeleteIf, DeleteOptions, EntryKind, StoreError, UpdateOptions, Version,
    WriteMode, WriteOptions,
};
use crate::tool::MemoryTool;

type Fields = HashMap<String, String>;
type Done = Result<Markup, (StatusCode, String)>;

/// The largest file the page edits.
const EDIT_BYTES: u64 = 1 << 20;
/// What the history notes for a change made here.
const NOTE: &str = "made in the review page";

fn bad(text: impl Into<String>) -> (StatusCode, String) {
    (StatusCode::BAD_REQUEST, text.into())
}

fn failed(e: impl std::fmt::Display) -> (StatusCode, String) {
    (StatusCode::CONFLICT, e.to_string())
}

fn field<'f>(fields: &'f Fields, name: &str) -> Option<&'f str> {
    fields.get(name).map(String::as_str)
}

/// A form posting to `/act/{action}` with its anti-forgery token and the
/// hidden `fields`, and a submit button saying `button`.
fn form(
    ui: &Ui,
    action: &str,
    step: &str,
    fields: &[(&str, &str)],
    inner: Markup,
    button: &str,
) -> Markup {
    let to = format!("/act/{action}");
    html! {
        form method="post" action=(to) {
            input type="hidden" name="csrf" value=(ui.guard.token(&to));
            input type="hidden" name="step" value=(step);
            @for (name, value) in fields { input type="hidden" name=(name) value=(value); }
            (inner)
            button type="submit" { (button) }
            " " a href="/" { "Cancel" }
        }
    }
}

/// `GET /act/{action}`: what the action will do, and the form that asks
/// for it.
pub(crate) async fn confirm(
    State(ui): State<Arc<Ui>>,
    Path(action): Path<String>,
    Query(fields): Query<Fields>,
) -> Response {
    if ui.options.read_only {
        return problem(&ui, StatusCode::FORBIDDEN, "This page is read-only.");
    }
    let result = blocking(&ui, move |ui| step(ui, &action, "ask", &fields)).await;
    respond(&ui, result)
}

/// `POST /act/{action}`: the preview (`step=preview`) or the change
/// (`step=do`), only with the form's anti-forgery token.
pub(crate) async fn act(
    State(ui): State<Arc<Ui>>,
    Path(action): Path<String>,
    Form(fields): Form<Fields>,
) -> Response {
    if ui.options.read_only {
        return problem(&ui, StatusCode::FORBIDDEN, "This page is read-only.");
    }
    let token = field(&fields, "csrf").unwrap_or("");
    if !ui.guard.token_ok(&format!("/act/{action}"), token) {
        return problem(
            &ui,
            StatusCode::FORBIDDEN,
            "This form is not one this page gave (its anti-forgery token does not match): open the page again.",
        );
    }
    let result = blocking(&ui, move |ui| {
        let at = field(&fields, "step").unwrap_or("preview").to_owned();
        step(ui, &action, &at, &fields)
    })
    .await;
    respond(&ui, result)
}

fn respond(ui: &Arc<Ui>, result: Option<Done>) -> Response {
    match result {
        Some(Ok(body)) => page(ui, "Change", body).into_response(),
        Some(Err((status, text))) => problem(ui, status, &text),
        None => problem(ui, StatusCode::INTERNAL_SERVER_ERROR, "The change failed."),
    }
}

fn step(ui: &Ui, action: &str, at: &str, f: &Fields) -> Done {
    match (action, at) {
        ("edit", _) => edit(ui, at, f),
        ("rename", _) => rename(ui, at, f),
        ("delete", _) => delete(ui, at, f),
        ("revert", _) => revert(ui, at, f),
        ("redact", _) => redact(ui, at, f),
        ("erase", _) => erase(ui, at, f),
        _ => Err((StatusCode::NOT_FOUND, format!("No action {action}."))),
    }
}

fn done(text: String, link: &str) -> Done {
    Ok(html! {
        h1 { "Done" }
        p.done { (text) }
        p { a href=(link) { "Go on" } }
    })
}

/// A textarea's text as the file should hold it: browsers send every line
/// end as CRLF, which a file that has none must not get.
fn as_file_has_it(sent: &str, current: &str) -> String {
    match current.contains("\r\n") {
        true => sent.to_owned(),
        false => sent.replace("\r\n", "\n"),
    }
}

fn edit(ui: &Ui, at: &str, f: &Fields) -> Done {
    let path = path_of(field(f, "path"))?;
    let store = ui.backend.store();
    let current = store.read(&path, EDIT_BYTES).map_err(|e| match e {
        StoreError::TooLarge { .. } => bad(format!(
            "{path} is over {}: the page does not edit it.",
            size(EDIT_BYTES)
        )),
        e => failed(e),
    })?;
    let Ok(text) = String::from_utf8(current.data) else {
        return Err(bad(format!(
            "{path} is not UTF-8 text: the page does not edit it."
        )));
    };
    let base = current.version.get().to_string();
    let p = path.as_str();
    match at {
        "ask" => Ok(html! {
            h1 { "Edit " (p) }
            (form(ui, "edit", "preview", &[("path", p), ("base", &base)], html! {
                // A newline right after <textarea> is dropped by the
                // parser: this one, not the file's first.
                textarea name="content" rows="30" cols="100" { "\n" (text) }
            }, "Show the change"))
        }),
        "preview" => {
            let new = as_file_has_it(field(f, "content").unwrap_or(""), &text);
            Ok(html! {
                h1 { "Edit " (p) ": the change" }
                (diff::render(&text, &new, false))
                (form(ui, "edit", "do", &[("path", p), ("base", field(f, "base").unwrap_or("")), ("content", &new)], html! {}, "Save"))
            })
        }
        _ => {
            let new = as_file_has_it(field(f, "content").unwrap_or(""), &text);
            let base: u128 = field(f, "base")
                .and_then(|b| b.parse().ok())
                .ok_or_else(|| bad("No base version."))?;
            let options = WriteOptions {
                mode: WriteMode::Update(Version::new(base)),
                quota: None,
                context: Context {
                    call: None,
                    note: Some(NOTE),
                },
            };
            match store.write_opts(&path, new.as_bytes(), options) {
                Ok(_) => done(format!("Saved {p}."), &browse_link(p)),
                Err(StoreError::Conflict { .. }) => Err(failed(format!(
                    "{p} changed since you opened it: nothing was saved. Open it again."
                ))),
                Err(e) => Err(failed(e)),
            }
        }
    }
}

/// Runs one memory command through the handler, as a model's would run.
fn command(ui: &Ui, input: serde_json::Value) -> Result<String, (StatusCode, String)> {
    let tool = MemoryTool::new(ui.backend.store());
    let result = tool.dispatch(&input);
    let text = result.text().unwrap_or_default().to_owned();
    match result.is_error {
        true => Err(failed(text)),
        false => Ok(text),
    }
}

fn rename(ui: &Ui, at: &str, f: &Fields) -> Done {
    let path = path_of(field(f, "path"))?;
    if path.is_root() {
        return Err(bad("/memories itself cannot be renamed."));
    }
    let p = path.as_str();
    match at {
        "ask" => Ok(html! {
            h1 { "Rename " (p) }
            (form(ui, "rename", "preview", &[("path", p)], html! {
                label { "New path " input name="to" value=(p) size="80" required; }
            }, "Show the change"))
        }),
        "preview" => {
            let to = path_of(field(f, "to"))?;
            if ui.backend.store().stat(&to).map_err(failed)?.is_some() {
                return Err(failed(format!(
                    "{} already exists: nothing was moved.",
                    to.as_str()
                )));
            }
            Ok(html! {
                h1 { "Rename" }
                p { "Move " code { (p) } " to " code { (to.as_str()) } "." }
                (form(ui, "rename", "do", &[("path", p), ("to", to.as_str())], html! {}, "Rename"))
            })
        }
        _ => {
            let to = path_of(field(f, "to"))?;
            let text = command(
                ui,
                json!({"command": "rename", "old_path": p, "new_path": to.as_str()}),
            )?;
            done(text, &browse_link(to.as_str()))
        }
    }
}

/// What a delete's preview saw of a file (its size and last change), so
/// the delete removes only that: `dir` for a directory.
fn seen(meta: &crate::store::Metadata) -> String {
    match meta.kind {
        EntryKind::Directory => "dir".to_owned(),
        _ => {
            let at = meta
                .modified
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            format!("{}:{at}", meta.len)
        }
    }
}

fn delete(ui: &Ui, at: &str, f: &Fields) -> Done {
    let path = path_of(field(f, "path"))?;
    if path.is_root() {
        return Err(bad("/memories itself cannot be deleted."));
    }
    let p = path.as_str();
    let parent = path.parent().unwrap_or_else(MemoryPath::root);
    let store = ui.backend.store();
    let meta = store
        .stat(&path)
        .map_err(failed)?
        .ok_or_else(|| (StatusCode::NOT_FOUND, format!("Nothing is at {p}.")))?;
    let changed = || {
        failed(format!(
            "{p} changed since you saw it: nothing was deleted. Look again."
        ))
    };
    match at {
        "ask" | "preview" => {
            let what = match meta.kind {
                EntryKind::Directory => "the directory and everything below it".to_owned(),
                _ => format!("the file ({})", size(meta.len)),
            };
            Ok(html! {
                h1 { "Delete " (p) }
                p { "This deletes " (what) "." @if ui.backend.versions().is_some() { " Its versions stay: it can be restored from its delete's version (unless its content was redacted)." } }
                (form(ui, "delete", "do", &[("path", p), ("base", &seen(&meta))], html! {}, "Delete"))
            })
        }
        _ => {
            let base = field(f, "base")
                .ok_or_else(|| bad("The form does not say what it showed: open it again."))?;
            if base != seen(&meta) {
                return Err(changed());
            }
            let context = Context {
                call: None,
                note: Some(NOTE),
            };
            let mut same = |now: &crate::store::Metadata| seen(now) == base;
            let condition = match meta.kind {
                EntryKind::Directory => DeleteIf::Exists,
                _ => DeleteIf::FileWhere(&mut same),
            };
            match store.delete_opts(&path, DeleteOptions { condition, context }) {
                Ok(true) => done(format!("Deleted {p}."), &browse_link(parent.as_str())),
                Ok(false) => Err(changed()),
                Err(e) => Err(failed(e)),
            }
        }
    }
}

fn versions(
    ui: &Ui,
) -> Result<&(dyn crate::history::Versions + Send + Sync), (StatusCode, String)> {
    ui.backend
        .versions()
        .ok_or_else(|| bad("This store keeps no history: open it with --history."))
}

/// The sha256 of what a file holds now (`none` once deleted) and its text:
/// what a revert's preview showed, checked again before the revert.
fn now_of(
    versions: &(dyn crate::history::Versions + Send + Sync),
    file: &str,
) -> Result<(String, String), (StatusCode, String)> {
    Ok(match versions.current(file).map_err(failed)? {
        Some((_, data)) => (
            crate::store::sha256_hex(&data),
            String::from_utf8_lossy(&data).into_owned(),
        ),
        None => ("none".to_owned(), String::new()),
    })
}

fn revert(ui: &Ui, at: &str, f: &Fields) -> Done {
    let versions = versions(ui)?;
    let id = id_of(field(f, "id"))?;
    let shown = id.to_string();
    let v = versions.show(&id).map_err(failed)?;
    let (sha, now) = now_of(versions, &v.file)?;
    match at {
        "ask" | "preview" => {
            let target = match v.op {
                ChangeOp::Deleted => v.text().unwrap_or_default(),
                _ => after(&v),
            };
            let path = v.path.clone().unwrap_or_default();
            Ok(html! {
                h1 { @if v.op == ChangeOp::Deleted { "Restore " } @else { "Revert " } (path) " to " (shown) }
                p { "The file now, and as it will be:" }
                (diff::render(&now, &target, false))
                (form(ui, "revert", "do", &[("id", &shown), ("base", &sha)], html! {}, "Revert"))
            })
        }
        _ => {
            let base = field(f, "base")
                .ok_or_else(|| bad("The form does not say what it showed: open it again."))?;
            if base != sha {
                return Err(failed(
                    "The file changed since you saw it: nothing was reverted. Look again.",
                ));
            }
            match versions.revert_to(&id).map_err(failed)? {
                Some(path) => done(
                    format!("Reverted {path} to {shown}."),
                    &format!("/changes?path={}", q(&path)),
                ),
                None => done(
                    format!("The file already holds {shown}: nothing changed."),
                    "/changes",
                ),
            }
        }
    }
}

fn redact(ui: &Ui, at: &str, f: &Fields) -> Done {
    let versions = versions(ui)?;
    let id = id_of(field(f, "id"))?;
    let shown = id.to_string();
    match at {
        "ask" | "preview" => Ok(html! {
            h1 { "Redact " (shown) }
            p { "This erases the content of version " (shown) " (and, where the history keeps them, of every version holding the same content), for good. The file as it is now does not change." }
            (form(ui, "redact", "do", &[("id", &shown)], html! {}, "Redact"))
        }),
        _ => {
            let erased = versions.redact_version(&id).map_err(failed)?;
            let list: Vec<String> = erased.iter().map(ToString::to_string).collect();
            done(format!("Redacted: {}.", list.join(", ")), "/changes")
        }
    }
}

/// The most versions an erasure's preview reads, and the most it names.
const ERASE_SCAN: usize = 10_000;
const ERASE_SHOWN: usize = 200;

/// The versions holding `text` (among the first [`ERASE_SCAN`]): their
/// ids, and whether there were more to read.
fn holding(
    versions: &(dyn crate::history::Versions + Send + Sync),
    text: &str,
) -> Result<(Vec<String>, bool), (StatusCode, String)> {
    let mut ids = Vec::new();
    let mut read = 0usize;
    let mut more = false;
    versions
        .each(&crate::history::Query::default(), &mut |v| {
            if read >= ERASE_SCAN {
                more = true;
                return Ok(());
            }
            read += 1;
            if let Ok(full) = versions.show(&v.id)
                && full
                    .content
                    .is_some_and(|c| String::from_utf8_lossy(&c).contains(text))
            {
                ids.push(v.id.to_string());
            }
            Ok(())
        })
        .map_err(failed)?;
    Ok((ids, more))
}

fn erase(ui: &Ui, at: &str, f: &Fields) -> Done {
    let versions = versions(ui)?;
    let text = field(f, "text").unwrap_or("");
    if at != "ask" && text.is_empty() {
        return Err(bad("No text to erase."));
    }
    match at {
        "ask" => Ok(html! {
            h1 { "Erase a text everywhere" }
            (form(ui, "erase", "preview", &[], html! {
                label { "Text " input name="text" size="60" required; }
            }, "Show what holds it"))
        }),
        "preview" => {
            let (ids, more) = holding(versions, text)?;
            let files =
                super::pages::find(ui.backend.store(), text, true).map_err(|(_, e)| failed(e))?;
            Ok(html! {
                h1 { "Erase a text everywhere" }
                pre.file { (super::layout::visible(text)) }
                p { "Each copy becomes [redacted], for good: in every version that holds it (the history records no version of this), and in the files that hold it now (an edit of each, recorded as a change of the page)." }
                p { "Versions that hold it: " (ids.len()) @if more { " among the first " (ERASE_SCAN) } }
                @if !ids.is_empty() {
                    ul { @for id in ids.iter().take(ERASE_SHOWN) { li { a href=(format!("/version?id={}", q(id))) { (id) } } } }
                }
                p { "Files that hold it now: " (files.len()) }
                @if !files.is_empty() {
                    ul { @for (path, _) in &files { li { (path) } } }
                }
                (form(ui, "erase", "do", &[("text", text)], html! {}, "Erase"))
            })
        }
        _ => {
            let (ids, files) = versions.erase_text(text.as_bytes()).map_err(failed)?;
            let store = ui.backend.store();
            let mut edited = Vec::new();
            let mut left = Vec::new();
            for file in &files {
                let replaced = MemoryPath::parse(file).ok().and_then(|path| {
                    let options = UpdateOptions {
                        limit: u64::MAX,
                        quota: None,
                        context: Context {
                            call: None,
                            note: Some(NOTE),
                        },
                    };
                    let mut change = |data: &[u8]| -> Result<Vec<u8>, Abort> {
                        let now = String::from_utf8_lossy(data);
                        match now.contains(text) {
                            true => Ok(now.replace(text, "[redacted]").into_bytes()),
                            false => Err(Abort),
                        }
                    };
                    store.update_opts(&path, options, &mut change).ok()
                });
                match replaced {
                    Some(_) => edited.push(file.clone()),
                    None => left.push(file.clone()),
                }
            }
            Ok(html! {
                h1 { "Done" }
                p.done { "Erased from " (ids.len()) " versions and " (edited.len()) " files." }
                @if !left.is_empty() {
                    p.error { "These files could not be edited and still hold it:" }
                    ul { @for f in &left { li { a href=(format!("/act/edit?path={}", q(f))) { (f) } } } }
                }
                p { a href="/changes" { "Go on" } }
            })
        }
    }
}
