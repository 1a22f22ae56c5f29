//! Each change the review page makes, over HTTP as its forms post it:
//! shown first, then made, recorded in the history as a change of its own
//! (actor and note), and refused where it would lose another writer's
//! change.
#![cfg(feature = "ui")]

use claude_memory::history::{ChangeOp, FileLog, HistoryStore, Query, Versions as _};
use claude_memory::store::{MemoryStoreExt as _, WriteMode};
use claude_memory::ui::{Backend, UiOptions};
use claude_memory::{FilesystemStore, MemoryPath, MemoryStore};

#[path = "../ui_support/mod.rs"]
mod ui_support;

use ui_support::{Answer, Page, get, post, serve};

fn p(text: &str) -> MemoryPath {
    MemoryPath::parse(text).expect("path")
}

fn open(dir: &std::path::Path) -> HistoryStore<FilesystemStore> {
    HistoryStore::open(
        FilesystemStore::open(dir).expect("store"),
        FileLog::for_store(dir).expect("log"),
    )
    .expect("history")
    .with_label("ui:tester")
}

fn page(dir: &std::path::Path) -> Page {
    serve(Backend::History(Box::new(open(dir))), UiOptions::default())
}

fn read(dir: &std::path::Path, path: &str) -> Option<String> {
    FilesystemStore::open(dir)
        .expect("store")
        .read(&p(path), u64::MAX)
        .ok()
        .map(|f| String::from_utf8_lossy(&f.data).into_owned())
}

/// Posts the form a GET of `confirm` shows, with `extra` fields, step
/// `step`: the answer.
fn submit(page: &Page, confirm: &str, action: &str, step: &str, extra: &[(&str, &str)]) -> Answer {
    let form = get(page, confirm);
    assert_eq!(form.status, 200, "{confirm}: {}", form.body);
    let csrf = form.hidden("csrf").expect("a token");
    // What the form showed (a revert's or a delete's base), as a browser
    // would send it back.
    let base = form.hidden("base");
    let mut fields = vec![("csrf", csrf.as_str()), ("step", step)];
    if let Some(base) = &base
        && !extra.iter().any(|(k, _)| *k == "base")
    {
        fields.push(("base", base));
    }
    fields.extend_from_slice(extra);
    post(page, &format!("/act/{action}"), &fields)
}

fn newest(dir: &std::path::Path, path: &str) -> claude_memory::history::Version {
    let page = open(dir)
        .history(&Query {
            path: Some(p(path)),
            limit: Some(1),
            ..Query::default()
        })
        .expect("history");
    page.into_iter().last().expect("a version")
}

#[test]
fn an_edit_is_previewed_then_saved_as_a_version_of_the_pages_actor() {
    let dir = tempfile::tempdir().expect("tempdir");
    open(dir.path())
        .write(&p("/memories/a.md"), b"one\ntwo\n", WriteMode::Create)
        .expect("write");
    let page = page(dir.path());
    let form = get(&page, "/act/edit?path=/memories/a.md");
    let base = form.hidden("base").expect("the base version");
    let preview = submit(
        &page,
        "/act/edit?path=/memories/a.md",
        "edit",
        "preview",
        &[
            ("path", "/memories/a.md"),
            ("base", &base),
            ("content", "one\nTWO\n"),
        ],
    );
    assert_eq!(preview.status, 200);
    assert!(
        preview.body.contains("<mark>TWO</mark>"),
        "{}",
        preview.body
    );
    assert_eq!(
        read(dir.path(), "/memories/a.md").as_deref(),
        Some("one\ntwo\n"),
        "a preview changes nothing"
    );
    let saved = submit(
        &page,
        "/act/edit?path=/memories/a.md",
        "edit",
        "do",
        &[
            ("path", "/memories/a.md"),
            ("base", &base),
            ("content", "one\nTWO\n"),
        ],
    );
    assert!(
        saved.body.contains("Saved /memories/a.md."),
        "{}",
        saved.body
    );
    assert_eq!(
        read(dir.path(), "/memories/a.md").as_deref(),
        Some("one\nTWO\n")
    );
    let v = newest(dir.path(), "/memories/a.md");
    assert_eq!(v.actor.as_deref(), Some("ui:tester"));
    assert_eq!(v.note.as_deref(), Some("made in the review page"));
}

#[test]
fn an_edit_of_a_file_changed_since_its_form_opened_saves_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    store
        .write(&p("/memories/a.md"), b"one\n", WriteMode::Create)
        .expect("write");
    let page = page(dir.path());
    let form = get(&page, "/act/edit?path=/memories/a.md");
    let base = form.hidden("base").expect("base");
    let csrf = form.hidden("csrf").expect("csrf");
    // Another writer, after the form was shown.
    store
        .write(&p("/memories/a.md"), b"theirs\n", WriteMode::Overwrite)
        .expect("write");
    let a = post(
        &page,
        "/act/edit",
        &[
            ("csrf", &csrf),
            ("step", "do"),
            ("path", "/memories/a.md"),
            ("base", &base),
            ("content", "mine\n"),
        ],
    );
    assert_eq!(a.status, 409, "{}", a.body);
    assert!(a.body.contains("changed since you opened it"));
    assert_eq!(
        read(dir.path(), "/memories/a.md").as_deref(),
        Some("theirs\n")
    );
}

#[test]
fn a_revert_and_a_restore_are_changes_of_their_own() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    store
        .write(&p("/memories/a.md"), b"first\n", WriteMode::Create)
        .expect("write");
    store
        .write(&p("/memories/a.md"), b"second\n", WriteMode::Overwrite)
        .expect("write");
    let page = page(dir.path());
    let first = open(dir.path())
        .history(&Query {
            path: Some(p("/memories/a.md")),
            ..Query::default()
        })
        .expect("history")[0]
        .id
        .to_string();
    let a = submit(
        &page,
        &format!("/act/revert?id={first}"),
        "revert",
        "do",
        &[("id", &first)],
    );
    assert!(
        a.body
            .contains(&format!("Reverted /memories/a.md to {first}.")),
        "{}",
        a.body
    );
    assert_eq!(
        read(dir.path(), "/memories/a.md").as_deref(),
        Some("first\n")
    );
    // Delete it, then restore it from its delete's version.
    let a = submit(
        &page,
        "/act/delete?path=/memories/a.md",
        "delete",
        "do",
        &[("path", "/memories/a.md")],
    );
    assert!(a.body.contains("Deleted /memories/a.md."), "{}", a.body);
    assert_eq!(read(dir.path(), "/memories/a.md"), None);
    let deleted = newest(dir.path(), "/memories/a.md");
    assert_eq!(deleted.op, ChangeOp::Deleted);
    let id = deleted.id.to_string();
    let version = get(&page, &format!("/version?id={id}"));
    assert!(version.body.contains("Restore the deleted file"));
    let a = submit(
        &page,
        &format!("/act/revert?id={id}"),
        "revert",
        "do",
        &[("id", &id)],
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(
        read(dir.path(), "/memories/a.md").as_deref(),
        Some("first\n")
    );
}

#[test]
fn a_redaction_and_an_erasure_remove_the_text_from_the_history() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    store
        .write(
            &p("/memories/a.md"),
            b"key sk-secret-1\n",
            WriteMode::Create,
        )
        .expect("write");
    store
        .write(&p("/memories/a.md"), b"no key\n", WriteMode::Overwrite)
        .expect("write");
    store
        .write(
            &p("/memories/b.md"),
            b"token tk-hidden-2\n",
            WriteMode::Create,
        )
        .expect("write");
    let page = page(dir.path());
    let first = open(dir.path())
        .history(&Query {
            path: Some(p("/memories/a.md")),
            ..Query::default()
        })
        .expect("history")[0]
        .id
        .to_string();
    let a = submit(
        &page,
        &format!("/act/redact?id={first}"),
        "redact",
        "do",
        &[("id", &first)],
    );
    assert!(a.body.contains("Redacted:"), "{}", a.body);
    let v = get(&page, &format!("/version?id={first}"));
    assert!(
        !v.body.contains("sk-secret-1") && v.body.contains("redacted"),
        "{}",
        v.body
    );
    let preview = submit(
        &page,
        "/act/erase",
        "erase",
        "preview",
        &[("text", "tk-hidden-2")],
    );
    assert!(preview.body.contains("tk-hidden-2"));
    assert_eq!(
        read(dir.path(), "/memories/b.md").as_deref(),
        Some("token tk-hidden-2\n")
    );
    let a = submit(
        &page,
        "/act/erase",
        "erase",
        "do",
        &[("text", "tk-hidden-2")],
    );
    assert!(
        a.body.contains("Erased from 1 versions and 1 files."),
        "{}",
        a.body
    );
    // The live file too, as a change of the page's own.
    assert_eq!(
        read(dir.path(), "/memories/b.md").as_deref(),
        Some("token [redacted]\n")
    );
    let history = open(dir.path());
    let b = history
        .history(&Query {
            path: Some(p("/memories/b.md")),
            ..Query::default()
        })
        .expect("history");
    let shown = history.show(&b[0].id).expect("show");
    assert!(
        !shown.text().unwrap_or_default().contains("tk-hidden-2"),
        "{shown:?}"
    );
}

#[test]
fn a_rename_keeps_the_files_history_and_the_changes_filter_by_time_actor_and_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    open(dir.path())
        .write(&p("/memories/a.md"), b"a\n", WriteMode::Create)
        .expect("write");
    let page = page(dir.path());
    let a = submit(
        &page,
        "/act/rename?path=/memories/a.md",
        "rename",
        "do",
        &[("path", "/memories/a.md"), ("to", "/memories/notes/b.md")],
    );
    assert!(
        a.body
            .contains("Successfully renamed /memories/a.md to /memories/notes/b.md"),
        "{}",
        a.body
    );
    let timeline = get(&page, "/changes?path=/memories/notes/b.md");
    assert!(
        timeline.body.contains("created") && timeline.body.contains("renamed"),
        "{}",
        timeline.body
    );
    let by_actor = get(&page, "/changes?actor=ui:tester");
    assert!(by_actor.body.contains("renamed"));
    let later = get(&page, "/changes?since=2999-01-01");
    assert!(later.body.contains("No versions."), "{}", later.body);
    let today = get(&page, "/changes?since=2000-01-01&until=2999-01-01%2000:00");
    assert!(today.body.contains("renamed"));
    let bad = get(&page, "/changes?since=yesterday");
    assert_eq!(bad.status, 400);
    assert!(bad.body.contains("Not a time"));
}

/// A browser sends a textarea's line ends as CRLF: a file with LF line
/// ends keeps them, and its first line, blank or not, survives the form.
#[test]
fn an_edit_from_a_browser_keeps_the_files_line_ends_and_first_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    open(dir.path())
        .write(&p("/memories/a.md"), b"\nn=249\n", WriteMode::Create)
        .expect("write");
    let page = page(dir.path());
    let form = get(&page, "/act/edit?path=/memories/a.md");
    assert!(
        form.body
            .contains("<textarea name=\"content\" rows=\"30\" cols=\"100\">\n\nn=249\n</textarea>"),
        "the parser drops one newline after <textarea>: {}",
        form.body
    );
    let base = form.hidden("base").expect("base");
    let sent = "\r\nn=250\r\n";
    let preview = submit(
        &page,
        "/act/edit?path=/memories/a.md",
        "edit",
        "preview",
        &[
            ("path", "/memories/a.md"),
            ("base", &base),
            ("content", sent),
        ],
    );
    assert!(
        preview.body.contains("<mark>n=250</mark>"),
        "{}",
        preview.body
    );
    submit(
        &page,
        "/act/edit?path=/memories/a.md",
        "edit",
        "do",
        &[
            ("path", "/memories/a.md"),
            ("base", &base),
            ("content", sent),
        ],
    );
    assert_eq!(
        read(dir.path(), "/memories/a.md").as_deref(),
        Some("\nn=250\n")
    );
}

#[test]
fn a_file_page_offers_next_lines_only_when_there_are_more() {
    let dir = tempfile::tempdir().expect("tempdir");
    let long: String = (1..=1_200).map(|i| format!("line {i}\n")).collect();
    let store = open(dir.path());
    store
        .write(&p("/memories/short.md"), b"one\n", WriteMode::Create)
        .expect("write");
    store
        .write(&p("/memories/long.md"), long.as_bytes(), WriteMode::Create)
        .expect("write");
    let page = page(dir.path());
    assert!(
        !get(&page, "/?path=/memories/short.md")
            .body
            .contains("next lines")
    );
    let first = get(&page, "/?path=/memories/long.md");
    assert!(first.body.contains("next lines"), "{}", first.body);
    assert!(first.body.contains("\tline 500"));
    assert!(!first.body.contains("\tline 501"), "a page is 500 lines");
    let last = get(&page, "/?path=/memories/long.md&line=1001");
    assert!(last.body.contains("\tline 1200") && !last.body.contains("next lines"));
    assert_eq!(get(&page, "/?path=/memories/long.md&line=abc").status, 400);
    assert_eq!(
        get(&page, "/?path=/memories/long.md&line=99999999999999999999").status,
        200,
        "past the end is the end"
    );
}

#[test]
fn the_root_and_an_existing_destination_are_refused_before_the_confirmation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    store
        .write(&p("/memories/a.md"), b"a\n", WriteMode::Create)
        .expect("write");
    store
        .write(&p("/memories/b.md"), b"b\n", WriteMode::Create)
        .expect("write");
    let page = page(dir.path());
    assert_eq!(get(&page, "/act/delete?path=/memories").status, 400);
    assert_eq!(get(&page, "/act/rename?path=/memories").status, 400);
    let a = submit(
        &page,
        "/act/rename?path=/memories/a.md",
        "rename",
        "preview",
        &[("path", "/memories/a.md"), ("to", "/memories/b.md")],
    );
    assert_eq!(a.status, 409);
    assert!(
        a.body.contains("/memories/b.md already exists"),
        "{}",
        a.body
    );
    assert!(!a.body.contains("Error: Error"));
}

#[test]
fn a_redacted_version_offers_no_revert() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    store
        .write(&p("/memories/a.md"), b"secret\n", WriteMode::Create)
        .expect("write");
    store
        .write(&p("/memories/a.md"), b"public\n", WriteMode::Overwrite)
        .expect("write");
    let first = store
        .history(&Query {
            path: Some(p("/memories/a.md")),
            ..Query::default()
        })
        .expect("history")[0]
        .id
        .clone();
    store.redact_version(&first).expect("redact");
    let page = page(dir.path());
    let v = get(&page, &format!("/version?id={first}"));
    assert!(v.body.contains("redacted"));
    assert!(
        !v.body.contains("/act/revert") && !v.body.contains("/act/redact"),
        "{}",
        v.body
    );
}
