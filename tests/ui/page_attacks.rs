//! The review page attacked again, past tests/ui/attacks.rs: as a web
//! page on another origin (CSRF tricks, DNS rebinding with odd `Host`
//! forms), as the model that wrote the memories (markup, control
//! characters, NUL, invalid UTF-8, right-to-left overrides in every field
//! the page shows), as a network client with or without a token (slow
//! requests, sessions, a TLS proxy), as a local process planting FIFOs,
//! links and odd timestamps in a directory store, and as a second writer
//! racing a confirmed change. One test per attack; a test that fails
//! names a break.
#![cfg(feature = "ui")]

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant, UNIX_EPOCH};

use claude_memory::history::{FileLog, HistoryStore, Query, Versions as _};
use claude_memory::mcp::Tokens;
use claude_memory::store::{Context, MemoryStoreExt as _, WriteMode, WriteOptions};
use claude_memory::ui::{Backend, UiOptions};
use claude_memory::{FilesystemStore, MemoryPath, MemoryStore};

#[path = "../ui_support/mod.rs"]
mod ui_support;

use ui_support::{Answer, Page, get, post, raw, serve};

const TOKEN: &str = "a-token-of-at-least-thirty-two-characters-x";

fn p(text: &str) -> MemoryPath {
    MemoryPath::parse(text).expect("path")
}

/// A directory store with history, its versions labelled `label`.
fn open(dir: &std::path::Path, label: &str) -> HistoryStore<FilesystemStore> {
    HistoryStore::open(
        FilesystemStore::open(dir).expect("store"),
        FileLog::for_store(dir).expect("log"),
    )
    .expect("history")
    .with_label(label)
}

/// The page over `dir` (history labelled `ui:tester`), `options`.
fn page_with(dir: &std::path::Path, options: UiOptions) -> Page {
    serve(Backend::History(Box::new(open(dir, "ui:tester"))), options)
}

fn page(dir: &std::path::Path) -> Page {
    page_with(dir, UiOptions::default())
}

fn write(dir: &std::path::Path, path: &str, text: &[u8]) {
    open(dir, "model")
        .write(&p(path), text, WriteMode::Overwrite)
        .expect("write");
}

/// The file as it is on disk, read by a store outside the page.
fn read(dir: &std::path::Path, path: &str) -> Option<Vec<u8>> {
    FilesystemStore::open(dir)
        .expect("store")
        .read(&p(path), u64::MAX)
        .ok()
        .map(|f| f.data)
}

fn text(dir: &std::path::Path, path: &str) -> Option<String> {
    read(dir, path).map(|d| String::from_utf8_lossy(&d).into_owned())
}

/// The form a GET of `confirm` shows: its token.
fn csrf(page: &Page, confirm: &str) -> String {
    let a = get(page, confirm);
    assert_eq!(a.status, 200, "{confirm}: {}", a.body);
    a.hidden("csrf").expect("the form's token")
}

/// Versions of `path`, oldest first.
fn versions_of(dir: &std::path::Path, path: &str) -> Vec<claude_memory::history::Version> {
    open(dir, "reader")
        .history(&Query {
            path: Some(p(path)),
            ..Query::default()
        })
        .expect("history")
}

/// Every file under `root` (the store and its history), with its bytes.
fn snapshot(root: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("read_dir") {
            let e = e.expect("entry");
            let t = e.file_type().expect("type");
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_file() {
                out.push((e.path(), std::fs::read(e.path()).unwrap_or_default()));
            } else {
                out.push((e.path(), Vec::new()));
            }
        }
    }
    out.sort();
    out
}

/// One request on a fresh connection, giving up after `wait`: the status
/// (0 for no answer).
fn status_within(addr: SocketAddr, request: &str, wait: Duration) -> u16 {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, wait) else {
        return 0;
    };
    let _ = s.set_read_timeout(Some(wait));
    let _ = s.set_write_timeout(Some(wait));
    if s.write_all(request.as_bytes()).is_err() {
        return 0;
    }
    let mut head = [0u8; 64];
    let n = s.read(&mut head).unwrap_or(0);
    String::from_utf8_lossy(&head[..n])
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

// ---------------------------------------------------------------------
// Breaks the review found, each fixed: the test keeps it so.
// ---------------------------------------------------------------------

/// docs/ui.md lists "erase a text from every version and file" among the
/// page's changes, and the Changes page links "Erase a text from every
/// version and file…": the history's `erase_text` only lists the live
/// files that still hold the text, and nothing erases it from them. A
/// user erasing a leaked key (since 6645583 told so on the preview, in
/// small print) is left with the key in the memory the model reads next.
#[test]
fn an_erasure_of_every_version_and_file_leaves_the_live_file_holding_the_text() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "/memories/keys.md",
        b"deploy key sk-live-4242\n",
    );
    let page = page(dir.path());
    let token = csrf(&page, "/act/erase");
    let done = post(
        &page,
        "/act/erase",
        &[("csrf", &token), ("step", "do"), ("text", "sk-live-4242")],
    );
    assert_eq!(done.status, 200, "{}", done.body);
    assert!(done.body.contains("Erased from"), "{}", done.body);
    let now = text(dir.path(), "/memories/keys.md").unwrap_or_default();
    assert!(
        !now.contains("sk-live-4242"),
        "the page said {:?}, and the live file still holds the text: {now:?}",
        done.body
            .split("<p class=\"done\">")
            .nth(1)
            .and_then(|r| r.split('<').next())
    );
}

/// Every change "shows what it will change first": the erase form's
/// button says "Show what holds it", and its preview shows only the text,
/// never a version or a file holding it (an erasure of a common word
/// rewrites every version, for good, unseen).
#[test]
fn an_erasures_preview_does_not_show_what_it_will_erase() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "/memories/keys.md",
        b"deploy key sk-live-4242\n",
    );
    write(dir.path(), "/memories/keys.md", b"rotated\n");
    let page = page(dir.path());
    let ask = get(&page, "/act/erase");
    assert!(ask.body.contains("Show what holds it"), "{}", ask.body);
    let token = ask.hidden("csrf").expect("token");
    let preview = post(
        &page,
        "/act/erase",
        &[
            ("csrf", &token),
            ("step", "preview"),
            ("text", "sk-live-4242"),
        ],
    );
    assert_eq!(preview.status, 200, "{}", preview.body);
    let v1 = versions_of(dir.path(), "/memories/keys.md")[0]
        .id
        .to_string();
    assert!(
        preview.body.contains("/memories/keys.md") || preview.body.contains(&v1),
        "the preview names no version or file it will rewrite: {}",
        preview.body
    );
}

/// A second writer (the model) changes a file after the user opened a
/// revert's preview; the user confirms the diff they saw, and the page
/// overwrites the model's new content with the old version: the revert
/// form carries nothing of what it showed (unlike the edit's `base`).
#[test]
fn a_revert_overwrites_a_change_made_after_its_preview() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "/memories/a.md", b"first\n");
    write(dir.path(), "/memories/a.md", b"second\n");
    let page = page(dir.path());
    let first = versions_of(dir.path(), "/memories/a.md")[0].id.to_string();
    let shown = get(&page, &format!("/act/revert?id={first}"));
    assert!(shown.body.contains("second"), "{}", shown.body);
    let token = shown.hidden("csrf").expect("token");
    // The model writes while the user reads the preview.
    write(
        dir.path(),
        "/memories/a.md",
        b"third: the model's new memory\n",
    );
    let done = post(
        &page,
        "/act/revert",
        &[("csrf", &token), ("step", "do"), ("id", &first)],
    );
    assert_eq!(
        text(dir.path(), "/memories/a.md").as_deref(),
        Some("third: the model's new memory\n"),
        "the revert wrote over a change its preview never showed ({}): {}",
        done.status,
        done.body
    );
}

/// "At most 256 connections, each sending its headers within 10 s": a
/// client that sends its headers at once and then its body one byte at a
/// time is never cut. Off loopback, without a token, 256 such sign-in
/// posts (the sign-in form is open to all) take every connection, and the
/// page answers no one.
#[test]
fn a_slow_body_to_the_sign_in_form_holds_every_connection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = Tokens::single(TOKEN).expect("tokens");
    let page = page_with(dir.path(), UiOptions::default().with_tokens(tokens));
    let host = page.addr.to_string();
    let slow = format!(
        "POST /login HTTP/1.1\r\nHost: {host}\r\nOrigin: http://{host}\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100000\r\n\r\ncsrf="
    );
    let mut held = Vec::new();
    for _ in 0..256 {
        let mut s = TcpStream::connect(page.addr).expect("connect");
        s.write_all(slow.as_bytes()).expect("send");
        held.push(s);
    }
    // Past the header deadline, a byte of body now and then.
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(12) {
        std::thread::sleep(Duration::from_secs(3));
        for s in &mut held {
            let _ = s.write_all(b"0");
        }
    }
    let probe = format!("GET /login HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    let status = status_within(page.addr, &probe, Duration::from_secs(10));
    drop(held);
    assert_eq!(
        status, 200,
        "the page answered no one while 256 slow bodies were open"
    );
}

/// Behind the TLS proxy docs/ui.md asks for off loopback (`allowed_hosts`
/// naming the proxy), a browser's own posts carry
/// `Origin: https://NAME`, and the guard only accepts `http://{Host}`:
/// nobody can sign in, and no change can be made.
#[test]
fn a_page_behind_a_tls_proxy_refuses_its_own_sign_in() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut options = UiOptions::default().with_tokens(Tokens::single(TOKEN).expect("tokens"));
    options.allowed_hosts = vec!["memory.example".into()];
    let page = page_with(dir.path(), options);
    let login = raw(
        page.addr,
        "GET",
        "/login",
        &[("Host", "memory.example")],
        "",
    );
    assert_eq!(login.status, 200, "{}", login.body);
    let token = login.hidden("csrf").expect("token");
    let body = ui_support::form(&[("csrf", &token), ("token", TOKEN)]);
    let a = raw(
        page.addr,
        "POST",
        "/login",
        &[
            ("Host", "memory.example"),
            ("Origin", "https://memory.example"),
            ("Sec-Fetch-Site", "same-origin"),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        &body,
    );
    assert_eq!(
        a.status, 303,
        "the browser's own sign-in through the proxy: {}",
        a.body
    );
}

/// docs/ui.md's own example `--http 0.0.0.0:8766 --token-file tokens`:
/// the page bound to every address accepts only `Host: 0.0.0.0:PORT`,
/// so a browser reaching it at any of the machine's addresses gets 421
/// (without `--allow-host`). An IP literal can never be a rebinding.
#[test]
fn a_page_on_every_address_refuses_the_address_it_is_reached_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let page = ui_support::serve_on(
        "0.0.0.0:0".parse().expect("addr"),
        Backend::History(Box::new(open(dir.path(), "ui:tester"))),
        UiOptions::default().with_tokens(Tokens::single(TOKEN).expect("tokens")),
    );
    let port = page.addr.port();
    let reached = SocketAddr::from(([127, 0, 0, 1], port));
    let host = reached.to_string();
    let a = raw(reached, "GET", "/login", &[("Host", &host)], "");
    assert_eq!(a.status, 200, "Host {host}: {}", a.body);
}

/// A file whose modification time is past year 9999 (a local process, a
/// restored backup, a clock gone wrong; tmpfs, XFS and btrfs keep it)
/// makes `layout::time` panic (humantime's formatter fails past 9999),
/// so its directory's page and the statistics answer 500: the rest of
/// that directory cannot be reviewed or changed in the page.
#[test]
fn a_file_dated_past_year_9999_breaks_its_directory_and_the_statistics() {
    let base = std::path::Path::new("/dev/shm");
    let dir = match base.is_dir() {
        true => tempfile::tempdir_in(base).expect("tempdir"),
        false => tempfile::tempdir().expect("tempdir"),
    };
    write(dir.path(), "/memories/notes/ok.md", b"fine\n");
    let planted = dir.path().join("notes/late.md");
    std::fs::write(&planted, "from the far future\n").expect("plant");
    let far = UNIX_EPOCH + Duration::from_secs(300_000_000_000);
    std::fs::File::options()
        .write(true)
        .open(&planted)
        .expect("open")
        .set_modified(far)
        .expect("set mtime");
    let kept = std::fs::metadata(&planted).and_then(|m| m.modified()).ok();
    if kept != Some(far) {
        eprintln!("skipped: this filesystem does not keep a time past 9999 ({kept:?})");
        return;
    }
    let page = page(dir.path());
    for target in ["/?path=/memories/notes", "/stats"] {
        let a = get(&page, target);
        assert_eq!(a.status, 200, "{target}: {}", a.body);
        assert!(a.body.contains("ok.md"), "{target}");
    }
}

// ---------------------------------------------------------------------
// Held: attacks that found nothing, asserting what the page does.
// ---------------------------------------------------------------------

/// DNS rebinding with odd `Host` forms: case, a trailing dot, other
/// spellings of loopback, userinfo, a foreign name first of two, an
/// absolute-form target naming another host.
#[test]
fn odd_host_forms_get_421() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "/memories/secret.md", b"the secret\n");
    let page = page(dir.path());
    let port = page.addr.port();
    for host in [
        format!("LOCALHOST:{port}"),
        format!("localhost.:{port}"),
        format!("127.0.0.1.:{port}"),
        format!("127.1:{port}"),
        format!("2130706433:{port}"),
        format!("0x7f.0.0.1:{port}"),
        format!("[::ffff:127.0.0.1]:{port}"),
        format!("[0:0:0:0:0:0:0:1]:{port}"),
        format!("user@127.0.0.1:{port}"),
        format!("127.0.0.1:0{port}"),
        format!("evil.example:{port}, 127.0.0.1:{port}"),
        format!("localhost:{port}.evil.example"),
        String::new(),
    ] {
        let a = raw(
            page.addr,
            "GET",
            "/?path=/memories/secret.md",
            &[("Host", &host)],
            "",
        );
        assert!(
            a.status == 421 || a.status == 400,
            "{host:?}: {} {}",
            a.status,
            a.body
        );
        assert!(!a.body.contains("the secret"), "{host:?}");
    }
    // Two Host headers, the foreign one first.
    let own = page.addr.to_string();
    let a = raw(
        page.addr,
        "GET",
        "/?path=/memories/secret.md",
        &[("Host", &format!("evil.example:{port}")), ("Host", &own)],
        "",
    );
    assert!(!a.body.contains("the secret"), "{}", a.status);
    // An absolute-form target naming another host, with a foreign Host.
    let a = raw(
        page.addr,
        "GET",
        &format!("http://127.0.0.1:{port}/?path=/memories/secret.md"),
        &[("Host", &format!("evil.example:{port}"))],
        "",
    );
    assert!(!a.body.contains("the secret"), "{}", a.status);
}

/// A page on another origin forging a change every way a browser lets
/// it: text/plain and multipart forms, method overrides, GET with the
/// change's fields, another method, a same-site sibling, a second
/// `Origin`, an `Origin` naming the page by another of its names.
#[test]
fn forged_changes_by_content_type_method_and_origin_tricks_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "/memories/a.md", b"keep\n");
    let page = page(dir.path());
    let token = csrf(&page, "/act/delete?path=/memories/a.md");
    let host = page.addr.to_string();
    let own = format!("http://{host}");
    let port = page.addr.port();
    let fields = ui_support::form(&[("csrf", &token), ("step", "do"), ("path", "/memories/a.md")]);
    let plain = format!("csrf={token}\r\nstep=do\r\npath=/memories/a.md\r\n");
    let multipart = format!(
        "--b\r\nContent-Disposition: form-data; name=\"csrf\"\r\n\r\n{token}\r\n\
         --b\r\nContent-Disposition: form-data; name=\"step\"\r\n\r\ndo\r\n\
         --b\r\nContent-Disposition: form-data; name=\"path\"\r\n\r\n/memories/a.md\r\n--b--\r\n"
    );
    let other_name = format!("http://localhost:{port}");
    let sibling = format!("http://127.0.0.1:{}", port.wrapping_add(1));
    let slash = format!("{own}/");
    let https = format!("https://{host}");
    // (method, target, extra headers, body)
    type Case<'a> = (&'a str, String, Vec<(&'a str, &'a str)>, &'a str);
    let cases: Vec<Case> = vec![
        (
            "POST",
            "/act/delete".into(),
            vec![
                ("Origin", "http://evil.example"),
                ("Content-Type", "text/plain"),
            ],
            &plain,
        ),
        (
            "POST",
            "/act/delete".into(),
            vec![
                ("Origin", "http://evil.example"),
                ("Content-Type", "multipart/form-data; boundary=b"),
            ],
            &multipart,
        ),
        (
            "POST",
            "/act/delete?_method=GET".into(),
            vec![
                ("Origin", "http://evil.example"),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            &fields,
        ),
        (
            "POST",
            "/act/delete".into(),
            vec![
                ("Origin", "http://evil.example"),
                ("X-HTTP-Method-Override", "GET"),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            &fields,
        ),
        (
            "POST",
            "/act/delete".into(),
            vec![
                ("Origin", &sibling),
                ("Sec-Fetch-Site", "same-site"),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            &fields,
        ),
        (
            "POST",
            "/act/delete".into(),
            vec![
                ("Origin", &own),
                ("Sec-Fetch-Site", "same-site"),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            &fields,
        ),
        (
            "POST",
            "/act/delete".into(),
            vec![
                ("Origin", "http://evil.example"),
                ("Origin", &own),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            &fields,
        ),
        (
            "POST",
            "/act/delete".into(),
            vec![
                ("Origin", &other_name),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            &fields,
        ),
        (
            "POST",
            "/act/delete".into(),
            vec![
                ("Origin", &slash),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            &fields,
        ),
        (
            "POST",
            "/act/delete".into(),
            vec![
                ("Origin", &https),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            &fields,
        ),
        (
            "POST",
            "/act/delete".into(),
            vec![
                ("Referer", &slash),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            &fields,
        ),
        (
            "PUT",
            "/act/delete".into(),
            vec![
                ("Origin", &own),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            &fields,
        ),
        (
            "DELETE",
            "/act/delete".into(),
            vec![
                ("Origin", &own),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            &fields,
        ),
        (
            "PATCH",
            "/act/delete".into(),
            vec![
                ("Origin", &own),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            &fields,
        ),
        // Own origin, but not a form: the token alone does not make it one.
        (
            "POST",
            "/act/delete".into(),
            vec![("Origin", &own), ("Content-Type", "text/plain")],
            &plain,
        ),
        (
            "POST",
            "/act/delete".into(),
            vec![
                ("Origin", &own),
                ("Content-Type", "multipart/form-data; boundary=b"),
            ],
            &multipart,
        ),
        // A GET carrying the change's fields (a link or an <img>).
        ("GET", format!("/act/delete?{fields}"), vec![], ""),
        ("HEAD", format!("/act/delete?{fields}"), vec![], ""),
        (
            "GET",
            format!("/act/delete?{fields}&_method=POST"),
            vec![("X-HTTP-Method-Override", "POST")],
            "",
        ),
    ];
    for (method, target, extra, body) in cases {
        let mut headers = vec![("Host", host.as_str())];
        headers.extend(extra.iter().copied());
        let a = raw(page.addr, method, &target, &headers, body);
        assert!(
            matches!(a.status, 200 | 400 | 403 | 405 | 415 | 422),
            "{method} {target} {extra:?}: {}",
            a.status
        );
        assert_eq!(
            text(dir.path(), "/memories/a.md").as_deref(),
            Some("keep\n"),
            "{method} {target} {extra:?} deleted it: {}",
            a.status
        );
    }
    // Sign-in from another origin (login CSRF) is refused too.
    let a = raw(
        page.addr,
        "POST",
        "/login",
        &[
            ("Host", &host),
            ("Origin", "http://evil.example"),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        "csrf=x&token=y",
    );
    assert_eq!(a.status, 403);
}

fn login(page: &Page) -> Answer {
    let csrf = get(page, "/login").hidden("csrf").expect("token");
    post(page, "/login", &[("csrf", &csrf), ("token", TOKEN)])
}

fn session_of(a: &Answer) -> String {
    a.header("set-cookie")
        .and_then(|c| c.split(';').next())
        .expect("a cookie")
        .to_owned()
}

fn with_cookie(page: &Page, cookie: &str) -> u16 {
    let host = page.addr.to_string();
    raw(
        page.addr,
        "GET",
        "/stats",
        &[("Host", &host), ("Cookie", cookie)],
        "",
    )
    .status
}

/// A network client with a token file: a cookie it made up or planted
/// (fixation) is never a session, a sign-in always makes a fresh one,
/// near-miss tokens fail, the 65th sign-in forgets only the oldest
/// session, and a session cookie cannot be smuggled in a second cookie
/// of the same name after a forged one.
#[test]
fn sessions_cannot_be_fixed_guessed_or_smuggled() {
    let dir = tempfile::tempdir().expect("tempdir");
    let page = page_with(
        dir.path(),
        UiOptions::default().with_tokens(Tokens::single(TOKEN).expect("tokens")),
    );
    let planted = format!("claude_memory_ui={}", "ab".repeat(32));
    assert_eq!(with_cookie(&page, &planted), 303);
    let csrf = get(&page, "/login").hidden("csrf").expect("token");
    let host = page.addr.to_string();
    let a = raw(
        page.addr,
        "POST",
        "/login",
        &[
            ("Host", &host),
            ("Origin", &format!("http://{host}")),
            ("Cookie", &planted),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        &ui_support::form(&[("csrf", &csrf), ("token", TOKEN)]),
    );
    assert_eq!(a.status, 303);
    let fresh = session_of(&a);
    assert_ne!(fresh, planted, "the planted id became the session");
    assert_eq!(with_cookie(&page, &planted), 303);
    assert_eq!(with_cookie(&page, &fresh), 200);
    // Near misses, an empty token, the token with a NUL.
    for wrong in [
        &TOKEN[..TOKEN.len() - 1],
        &format!("{TOKEN}x"),
        &format!("{TOKEN}\0"),
        &TOKEN.to_uppercase(),
        "",
    ] {
        let a = post(&page, "/login", &[("csrf", &csrf), ("token", wrong)]);
        assert_eq!(a.status, 401, "{wrong:?}");
        assert!(a.header("set-cookie").is_none());
    }
    // The session's id with one character changed, cut, or doubled.
    let id = fresh.trim_start_matches("claude_memory_ui=");
    let flipped = format!("{}{}", &id[..63], if id.ends_with('0') { '1' } else { '0' });
    for bad in [
        format!("claude_memory_ui={flipped}"),
        format!("claude_memory_ui={}", &id[..32]),
        format!("claude_memory_ui={id}{id}"),
        format!("claude_memory_ui={}", id.to_uppercase()),
        format!("Claude_Memory_UI={id}"),
        format!("x_claude_memory_ui={id}"),
    ] {
        assert_eq!(with_cookie(&page, &bad), 303, "{bad}");
    }
    // The open paths (/login, /assets/) lead nowhere else without a session.
    std::fs::write(dir.path().join("a.md"), "SIGNED-IN ONLY\n").expect("write");
    for target in [
        "/assets/../?path=/memories/a.md",
        "/assets/..%2F?path=/memories/a.md",
        "/assets/%2e%2e/stats",
        "/assets/../act/delete?path=/memories/a.md",
        "/login/../?path=/memories/a.md",
        "/login?path=/memories/a.md",
        "/login/",
        "/LOGIN",
        "//login",
    ] {
        let a = raw(page.addr, "GET", target, &[("Host", &host)], "");
        assert!(!a.body.contains("SIGNED-IN ONLY"), "{target}: {}", a.status);
        assert!(
            !a.body.contains("name=\"csrf\" value") || a.body.contains("action=\"/login\""),
            "{target}"
        );
    }
    // A forged cookie first, the real one second: the first is used.
    assert_eq!(with_cookie(&page, &format!("{planted}; {fresh}")), 303);
    // 64 sessions at most: the 65th sign-in forgets the first only.
    let sessions: Vec<String> = (0..64).map(|_| session_of(&login(&page))).collect();
    assert_eq!(with_cookie(&page, &fresh), 303, "the oldest is forgotten");
    assert_eq!(with_cookie(&page, &sessions[0]), 200);
    assert_eq!(with_cookie(&page, &sessions[63]), 200);
}

/// A model's markup, control characters, NUL, invalid UTF-8 and
/// right-to-left overrides in content, actor, call and note: every page
/// that shows them keeps them text, inside their element, under the CSP.
#[test]
fn a_models_markup_and_control_characters_stay_text_in_every_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let evil = "\"><svg onload=alert(1)>'</textarea></pre><script>alert(2)</script>";
    let actor = format!("model{evil}");
    let call = format!("toolu_{evil}\u{202e}gpj.exe");
    let note = format!("note{evil}\u{1b}[31m");
    let mut content = format!("line one {evil}\n\u{202e}txt.exe\n").into_bytes();
    content.extend_from_slice(b"nul \0 here, esc \x1b[2J, bad utf-8 \xff\xfe, cr\rend\n");
    content.extend_from_slice("x".repeat(300_000).as_bytes());
    content.push(b'\n');
    let history = open(dir.path(), &actor);
    history
        .write_opts(
            &p("/memories/x.md"),
            &content,
            WriteOptions {
                mode: WriteMode::Create,
                quota: None,
                context: Context {
                    call: Some(&call),
                    note: Some(&note),
                },
            },
        )
        .expect("write");
    history
        .write(
            &p("/memories/x.md"),
            b"later <b>bold</b>\n",
            WriteMode::Overwrite,
        )
        .expect("write");
    drop(history);
    let page = page(dir.path());
    let first = versions_of(dir.path(), "/memories/x.md")[0].id.to_string();
    for target in [
        "/?path=/memories/x.md".to_owned(),
        "/?path=/memories".to_owned(),
        "/search?q=line".to_owned(),
        "/search?q=%22%3E%3Csvg".to_owned(),
        "/changes".to_owned(),
        format!("/changes?actor={}", ui_support::enc(&actor)),
        format!("/changes?call={}", ui_support::enc(&call)),
        format!("/version?id={first}"),
        format!("/diff?from={first}"),
        format!("/diff?from={first}&view=split"),
        format!("/act/revert?id={first}"),
        format!("/act/redact?id={first}"),
        "/stats".to_owned(),
    ] {
        let a = get(&page, &target);
        assert_eq!(
            a.status,
            200,
            "{target}: {}",
            &a.body[..a.body.len().min(300)]
        );
        for bad in [
            "<svg",
            "<script>alert",
            "</textarea>",
            "</pre><script",
            "<b>bold",
        ] {
            assert!(!a.body.contains(bad), "{target} shows {bad:?}");
        }
        assert!(a.body.len() < 2 << 20, "{target}: {} bytes", a.body.len());
        let csp = a.header("content-security-policy").unwrap_or("");
        assert!(csp.contains("default-src 'none'"), "{target}");
    }
    // The file's edit form: the content stays inside its textarea.
    write(dir.path(), "/memories/y.md", format!("{evil}\n").as_bytes());
    let a = get(&page, "/act/edit?path=/memories/y.md");
    assert_eq!(a.status, 200);
    assert_eq!(a.body.matches("</textarea>").count(), 1, "{}", a.body);
    // Its preview carries the new content in a hidden input's value.
    let token = a.hidden("csrf").expect("token");
    let base = a.hidden("base").expect("base");
    let preview = post(
        &page,
        "/act/edit",
        &[
            ("csrf", &token),
            ("step", "preview"),
            ("path", "/memories/y.md"),
            ("base", &base),
            ("content", evil),
        ],
    );
    assert_eq!(preview.status, 200);
    for bad in ["<svg", "<script>alert", "</textarea>"] {
        assert!(
            !preview.body.contains(bad),
            "the edit's preview shows {bad:?}"
        );
    }
    assert_eq!(preview.hidden("content").as_deref(), Some(evil));
}

/// A local process plants a FIFO, a hard link and a symbolic link to a
/// file outside the store, and a link to a directory outside it: every
/// page answers at once, none shows the outside file, none hangs.
#[cfg(unix)]
#[test]
fn planted_fifos_and_links_neither_hang_nor_leak() {
    let dir = tempfile::tempdir().expect("tempdir");
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).expect("mkdir");
    std::fs::write(outside.join("host.txt"), "HOST SECRET\n").expect("write");
    let root = dir.path().join("store");
    std::fs::create_dir(&root).expect("mkdir");
    write(&root, "/memories/a.md", b"a\n");
    let page = page(&root);
    let fifo = root.join("fifo.md");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    std::fs::hard_link(outside.join("host.txt"), root.join("hard.md")).expect("hard link");
    std::os::unix::fs::symlink(outside.join("host.txt"), root.join("soft.md")).expect("symlink");
    std::os::unix::fs::symlink(&outside, root.join("out")).expect("dir link");
    let started = Instant::now();
    for target in [
        "/",
        "/?path=/memories/fifo.md",
        "/?path=/memories/hard.md",
        "/?path=/memories/soft.md",
        "/?path=/memories/out",
        "/?path=/memories/out/host.txt",
        "/search?q=secret",
        "/search?q=a",
        "/stats",
        "/act/edit?path=/memories/fifo.md",
        "/act/edit?path=/memories/hard.md",
        "/act/edit?path=/memories/soft.md",
        "/act/delete?path=/memories/out",
        "/act/rename?path=/memories/fifo.md",
    ] {
        let a = get(&page, target);
        assert!(a.status != 0, "{target}: no answer");
        assert!(
            !a.body.contains("HOST SECRET"),
            "{target} shows the outside file"
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    // A change through a planted link writes nothing outside.
    let token = csrf(&page, "/act/delete?path=/memories/a.md");
    for path in [
        "/memories/soft.md",
        "/memories/out/host.txt",
        "/memories/hard.md",
    ] {
        let _ = post(
            &page,
            "/act/delete",
            &[("csrf", &token), ("step", "do"), ("path", path)],
        );
    }
    assert_eq!(
        std::fs::read_to_string(outside.join("host.txt")).expect("still there"),
        "HOST SECRET\n"
    );
}

/// Numbers and ids at their limits in every URL that takes one, odd
/// times, and paths with encodings, backslashes, NUL and look-alike dots.
#[test]
fn odd_numbers_times_and_paths_in_urls_answer_without_leaking() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("..outside"), "x").ok();
    let root = dir.path().join("store");
    std::fs::create_dir(&root).expect("mkdir");
    std::fs::write(dir.path().join("outside.txt"), "HOST FILE\n").expect("write");
    write(&root, "/memories/a.md", b"a\n");
    write(&root, "/memories/a.md", b"b\n");
    let page = page(&root);
    for target in [
        "/changes?since=9999-12-31T23:59:59Z",
        "/changes?until=9999-12-31%2023:59",
        "/changes?since=1970-01-01&until=1970-01-01",
        "/changes?since=0000-00-00",
        "/changes?since=2026-13-45",
        "/changes?since=2026-12-07T25:61:61%2B99:99",
        "/changes?since=%E2%80%AE2026-12-07",
        "/changes?until=1969-12-31",
        "/changes?since=99999-01-01",
        "/changes?before=v18446744073709551615",
        "/changes?before=v-1",
        "/changes?before=memver_%00",
        "/changes?actor=%00&call=%FF",
        "/changes?prefix=/memories/..",
        "/version?id=",
        "/version?id=v0",
        "/version?id=+1",
        "/version?id=v1%00",
        "/diff?from=v1&to=v1",
        "/diff?from=v2&to=v1&view=split",
        "/diff?from=v18446744073709551615",
        "/diff?from=memver_abc",
        "/?path=/memories/a.md&line=0",
        "/?path=/memories/a.md&line=-1",
        "/?path=/memories/a.md&line=99999999999999999999",
        "/?path=/memories&page=99999999999999999999999",
        "/?path=/memories/..%5Coutside.txt",
        "/?path=/memories/%C0%AE%C0%AE/outside.txt",
        "/?path=/memories/%EF%BC%8E%EF%BC%8E/outside.txt",
        "/?path=/memories/%E2%88%95..%E2%88%95outside.txt",
        "/?path=/memories/a.md%00.txt",
        "/?path=/memories/%FF",
        "/?path=/memories//a.md",
        "/?path=/memories/./a.md",
        "/?path=/memories/a.md/",
        "/?path=%2Fmemories%2F..%2F..%2Foutside.txt",
        "/?path=/memories/a.md&path=/memories/../outside.txt",
        "/act/%2e%2e?path=/memories/a.md",
        "/act/edit%2F..%2F..?path=/memories/a.md",
        "/act/..%2Fedit?path=/memories/a.md",
        "/act/EDIT?path=/memories/a.md",
        "/act/unknown",
        "/act/?path=/memories/a.md",
        "/act/edit?path=/memories",
        "/act/delete?path=/memories",
        "/act/rename?path=/memories",
        "/act/revert?id=v18446744073709551615",
        "/act/redact?id=memver_x",
        "/assets/..%2f..%2fCargo.toml",
        "/assets/ui.css%00.js",
        "//etc/passwd",
        "/\\..\\outside.txt",
    ] {
        let a = get(&page, target);
        assert!(
            [200, 400, 404, 405, 409].contains(&a.status),
            "{target}: {} {}",
            a.status,
            &a.body[..a.body.len().min(300)]
        );
        assert!(!a.body.contains("HOST FILE"), "{target}");
        assert!(!a.body.contains("panicked"), "{target}");
    }
    // Deleting the root through the page is refused.
    let token = csrf(&page, "/act/delete?path=/memories/a.md");
    let a = post(
        &page,
        "/act/delete",
        &[("csrf", &token), ("step", "do"), ("path", "/memories")],
    );
    assert_ne!(a.status, 200, "{}", a.body);
    assert!(text(&root, "/memories/a.md").is_some());
}

/// Huge requests: a body over 4 MiB, a header of 1 MiB, 300 header
/// lines: refused, nothing written.
#[test]
fn huge_bodies_and_headers_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "/memories/a.md", b"small\n");
    let page = page(dir.path());
    let form = get(&page, "/act/edit?path=/memories/a.md");
    let token = form.hidden("csrf").expect("token");
    let base = form.hidden("base").expect("base");
    let big = "y".repeat(5 << 20);
    let a = post(
        &page,
        "/act/edit",
        &[
            ("csrf", &token),
            ("step", "do"),
            ("path", "/memories/a.md"),
            ("base", &base),
            ("content", &big),
        ],
    );
    // 413, or the connection cut before the answer could be read (the
    // server closes on a body it will not take): refused either way.
    assert!(
        a.status == 413 || a.status == 0,
        "{} {}",
        a.status,
        &a.body[..a.body.len().min(300)]
    );
    assert_eq!(
        text(dir.path(), "/memories/a.md").as_deref(),
        Some("small\n")
    );
    let host = page.addr.to_string();
    let long = "z".repeat(1 << 20);
    let a = raw(
        page.addr,
        "GET",
        "/",
        &[("Host", &host), ("X-Long", &long)],
        "",
    );
    assert!(
        a.status == 431 || a.status == 400 || a.status == 0,
        "{}",
        a.status
    );
    let names: Vec<String> = (0..300).map(|i| format!("X-H{i}")).collect();
    let mut headers: Vec<(&str, &str)> = vec![("Host", &host)];
    headers.extend(names.iter().map(|n| (n.as_str(), "v")));
    let a = raw(page.addr, "GET", "/", &headers, "");
    assert!(
        a.status == 431 || a.status == 400 || a.status == 0,
        "{}",
        a.status
    );
    // The page still answers.
    assert_eq!(get(&page, "/").status, 200);
}

/// Every change the page makes is a version of the page's actor, and
/// each can be reverted through the page again; an edit of a file a
/// second writer changed outside the history saves nothing.
#[test]
fn every_change_is_a_version_of_the_page_and_can_be_reverted() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "/memories/a.md", b"one\n");
    let page = page(dir.path());
    // Edit.
    let form = get(&page, "/act/edit?path=/memories/a.md");
    let (token, base) = (
        form.hidden("csrf").expect("t"),
        form.hidden("base").expect("b"),
    );
    let a = post(
        &page,
        "/act/edit",
        &[
            ("csrf", &token),
            ("step", "do"),
            ("path", "/memories/a.md"),
            ("base", &base),
            ("content", "two\n"),
        ],
    );
    assert!(a.body.contains("Saved"), "{}", a.body);
    // Rename, then delete.
    let t = csrf(&page, "/act/rename?path=/memories/a.md");
    let a = post(
        &page,
        "/act/rename",
        &[
            ("csrf", &t),
            ("step", "do"),
            ("path", "/memories/a.md"),
            ("to", "/memories/b.md"),
        ],
    );
    assert_eq!(a.status, 200, "{}", a.body);
    let form = get(&page, "/act/delete?path=/memories/b.md");
    let t = form.hidden("csrf").expect("token");
    let base = form.hidden("base").expect("what it showed");
    let a = post(
        &page,
        "/act/delete",
        &[
            ("csrf", &t),
            ("step", "do"),
            ("path", "/memories/b.md"),
            ("base", &base),
        ],
    );
    assert_eq!(a.status, 200, "{}", a.body);
    let all = versions_of(dir.path(), "/memories/b.md");
    let ours: Vec<_> = all
        .iter()
        .filter(|v| v.actor.as_deref() == Some("ui:tester"))
        .collect();
    assert_eq!(ours.len(), 3, "{all:?}");
    // Restore the delete through the page: the file comes back.
    let id = ours[2].id.to_string();
    let form = get(&page, &format!("/act/revert?id={id}"));
    let t = form.hidden("csrf").expect("token");
    let base = form.hidden("base").expect("what it showed");
    let a = post(
        &page,
        "/act/revert",
        &[("csrf", &t), ("step", "do"), ("id", &id), ("base", &base)],
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(text(dir.path(), "/memories/b.md").as_deref(), Some("two\n"));
    // A second writer outside the history; the page's edit is refused.
    let form = get(&page, "/act/edit?path=/memories/b.md");
    let (token, base) = (
        form.hidden("csrf").expect("t"),
        form.hidden("base").expect("b"),
    );
    std::fs::write(dir.path().join("b.md"), "theirs\n").expect("write");
    let a = post(
        &page,
        "/act/edit",
        &[
            ("csrf", &token),
            ("step", "do"),
            ("path", "/memories/b.md"),
            ("base", &base),
            ("content", "mine\n"),
        ],
    );
    assert_eq!(a.status, 409, "{}", a.body);
    assert_eq!(
        text(dir.path(), "/memories/b.md").as_deref(),
        Some("theirs\n")
    );
}

/// A read-only page served by the library over a writable history:
/// every route, every method, with the page's own origin, a made-up
/// token and every step, changes no byte of the store or its history.
#[test]
fn a_read_only_page_changes_nothing_on_any_route_or_method() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "/memories/a.md", b"one\n");
    write(dir.path(), "/memories/a.md", b"two\n");
    let page = page_with(dir.path(), UiOptions::default().read_only());
    let before = snapshot(dir.path());
    let host = page.addr.to_string();
    let origin = format!("http://{host}");
    let fake = "0".repeat(64);
    for action in [
        "edit", "rename", "delete", "revert", "redact", "erase", "nope",
    ] {
        for step in ["ask", "preview", "do", ""] {
            let body = ui_support::form(&[
                ("csrf", &fake),
                ("step", step),
                ("path", "/memories/a.md"),
                ("to", "/memories/b.md"),
                ("id", "v1"),
                ("text", "one"),
                ("content", "x"),
                ("base", "0"),
            ]);
            for method in ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"] {
                let target = match method {
                    "GET" | "HEAD" => format!("/act/{action}?{body}"),
                    _ => format!("/act/{action}"),
                };
                let a = raw(
                    page.addr,
                    method,
                    &target,
                    &[
                        ("Host", &host),
                        ("Origin", &origin),
                        ("Content-Type", "application/x-www-form-urlencoded"),
                    ],
                    if matches!(method, "GET" | "HEAD") {
                        ""
                    } else {
                        &body
                    },
                );
                assert!(
                    a.status >= 400 || method == "HEAD",
                    "{method} {target}: {}",
                    a.status
                );
            }
        }
    }
    for target in [
        "/",
        "/search?q=one",
        "/changes",
        "/version?id=v1",
        "/diff?from=v1",
        "/stats",
        "/login",
    ] {
        for method in ["GET", "POST"] {
            let _ = raw(
                page.addr,
                method,
                target,
                &[("Host", &host), ("Origin", &origin)],
                "",
            );
        }
    }
    assert_eq!(
        snapshot(dir.path()),
        before,
        "a read-only page changed a byte"
    );
}

/// The CLI's `ui --read-only` over a directory store with history that
/// was changed outside it: browsing everything records nothing (no
/// catch-up version, no index, no lock file left changed).
#[cfg(all(feature = "cli", unix))]
#[test]
fn the_clis_read_only_page_writes_nothing_even_to_catch_up() {
    use std::io::BufRead as _;
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("memory");
    std::fs::create_dir(&root).expect("mkdir");
    write(&root, "/memories/a.md", b"one\n");
    // Outside the history: the next writable open would record it.
    std::fs::write(root.join("a.md"), "changed outside\n").expect("write");
    std::fs::write(root.join("new.md"), "new outside\n").expect("write");
    let before = snapshot(&root);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_claude-memory-cli"))
        .args([
            "--store",
            root.to_str().expect("utf-8"),
            "ui",
            "--read-only",
        ])
        .env("USER", "tester")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("ui");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("url");
    let addr: SocketAddr = line
        .trim()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .expect("an address");
    let host = addr.to_string();
    for target in [
        "/",
        "/?path=/memories/a.md",
        "/?path=/memories/new.md",
        "/search?q=outside",
        "/changes",
        "/version?id=v1",
        "/diff?from=v1",
        "/stats",
        "/act/edit?path=/memories/a.md",
    ] {
        let a = raw(addr, "GET", target, &[("Host", &host)], "");
        assert!(a.status != 0, "{target}");
    }
    let a = raw(
        addr,
        "POST",
        "/act/revert",
        &[
            ("Host", &host),
            ("Origin", &format!("http://{host}")),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        "step=do&id=v1&csrf=00",
    );
    assert_eq!(a.status, 403);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        snapshot(&root),
        before,
        "the read-only page wrote to the store"
    );
}

/// Many connections that send nothing are cut after 10 s: the page
/// answers again once they are.
#[test]
fn silent_connections_are_cut_and_the_page_answers_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "/memories/a.md", b"a\n");
    let page = page(dir.path());
    let held: Vec<TcpStream> = (0..300)
        .map(|_| TcpStream::connect(page.addr).expect("connect"))
        .collect();
    std::thread::sleep(Duration::from_secs(12));
    let host = page.addr.to_string();
    let probe = format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    let status = status_within(page.addr, &probe, Duration::from_secs(15));
    drop(held);
    assert_eq!(status, 200);
}

/// An edit made in a real browser: the preview's "Save" form carries the
/// new content in a hidden input, and a browser sends every form value
/// with its line breaks as CRLF (the HTML form encoding). The preview
/// turns the textarea's CRLF back into LF; the save does not, so every
/// line of the file is saved with a CR the preview never showed.
#[cfg(unix)]
#[test]
fn an_edit_saved_in_a_browser_rewrites_every_line_ending() {
    use fantoccini::{ClientBuilder, Locator};
    let driver_path = std::path::PathBuf::from(
        std::env::var_os("CLAUDE_MEMORY_TEST_CHROMEDRIVER")
            .unwrap_or("/usr/bin/chromedriver".into()),
    );
    if !driver_path.exists() {
        eprintln!("skipped: no chromedriver");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("store");
    std::fs::create_dir(&root).expect("mkdir");
    write(&root, "/memories/a.md", b"one\ntwo\n");
    let page = page(&root);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _driver = Kill(
        std::process::Command::new(&driver_path)
            .arg(format!("--port={port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("chromedriver"),
    );
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "chromedriver did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let chromium =
        std::env::var("CLAUDE_MEMORY_TEST_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let profile = dir.path().join("profile");
    let url = format!("http://{}/act/edit?path=/memories/a.md", page.addr);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--no-first-run", "--disable-background-networking", "--disable-sync",
                         format!("--user-data-dir={}", profile.display())],
            }),
        );
        let c = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("a browser session");
        c.goto(&url).await.expect("open the edit form");
        let wait = |l| c.wait().at_most(Duration::from_secs(30)).for_element(l);
        let area = wait(Locator::Css("textarea")).await.expect("the textarea");
        area.send_keys("three").await.expect("type");
        wait(Locator::Css("form button[type=submit]"))
            .await
            .expect("Show the change")
            .click()
            .await
            .expect("click");
        let preview = wait(Locator::Css("table.diff")).await.expect("the diff").text().await.expect("text");
        assert!(preview.contains("three"), "{preview}");
        wait(Locator::Css("form button[type=submit]"))
            .await
            .expect("Save")
            .click()
            .await
            .expect("click");
        let done = wait(Locator::Css("p.done")).await.expect("Done").text().await.expect("text");
        assert!(done.starts_with("Saved"), "{done}");
        c.close().await.expect("close");
    });
    let saved = read(&root, "/memories/a.md").expect("the file");
    assert_eq!(
        String::from_utf8_lossy(&saved),
        "one\ntwo\nthree",
        "the file as saved, against what the preview showed"
    );
}

/// A model's memory holding a right-to-left override (U+202E): the page
/// shows the bytes as they are in the file page, a version and a diff,
/// so the browser reorders them and the reviewer reads another text
/// than the one stored ("Trojan Source"). Paths refuse format characters
/// for this very reason ("reordering what is shown"); the page shows
/// contents with them raw (and NUL and ESC raw in a version and a diff,
/// which the file page's `view` already neutralizes).
#[test]
fn a_right_to_left_override_in_a_memory_reorders_what_the_review_shows() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Stored: "rule: never \u{202e}tpmorp eht wollof\u{202c}" reads, on
    // screen, "rule: never follow the prompt".
    write(dir.path(), "/memories/rules.md", b"rule: keep secrets\n");
    write(
        dir.path(),
        "/memories/rules.md",
        "rule: never \u{202e}tpmorp eht wollof\u{202c}\n".as_bytes(),
    );
    let page = page(dir.path());
    let ids: Vec<String> = versions_of(dir.path(), "/memories/rules.md")
        .iter()
        .map(|v| v.id.to_string())
        .collect();
    for target in [
        "/?path=/memories/rules.md".to_owned(),
        format!("/version?id={}", ids[1]),
        format!("/diff?from={}&to={}", ids[0], ids[1]),
    ] {
        let a = get(&page, &target);
        assert_eq!(a.status, 200, "{target}");
        assert!(
            !a.body.contains('\u{202e}'),
            "{target} shows a raw right-to-left override: the browser reorders the line"
        );
    }
}

/// A store without history: the delete form shows "the file (6 B)"; the
/// model rewrites the file before the user confirms; the page deletes
/// the content it never showed, and with no history it is gone for good.
/// (The edit form carries the version it showed; the delete form
/// carries nothing.)
#[test]
fn a_delete_removes_content_written_after_its_preview() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = FilesystemStore::open(dir.path()).expect("store");
    store
        .write(&p("/memories/a.md"), b"stale\n", WriteMode::Create)
        .expect("write");
    let page = serve(
        Backend::Plain(Box::new(FilesystemStore::open(dir.path()).expect("store"))),
        UiOptions::default(),
    );
    let shown = get(&page, "/act/delete?path=/memories/a.md");
    assert!(shown.body.contains("6 B"), "{}", shown.body);
    let token = shown.hidden("csrf").expect("token");
    let fresh = "the model's new, important memory\n".repeat(30);
    store
        .write(&p("/memories/a.md"), fresh.as_bytes(), WriteMode::Overwrite)
        .expect("write");
    let done = post(
        &page,
        "/act/delete",
        &[("csrf", &token), ("step", "do"), ("path", "/memories/a.md")],
    );
    assert_eq!(
        text(dir.path(), "/memories/a.md").as_deref(),
        Some(fresh.as_str()),
        "the delete removed content its preview never showed ({}), with no history to restore it",
        done.status
    );
}

/// The CLI's page over one tenant of a SQLite store with history: no id,
/// diff, search or filter shows another tenant's versions.
#[cfg(all(feature = "cli", feature = "sqlite", unix))]
#[test]
fn a_tenants_page_shows_no_other_tenants_versions() {
    use std::io::BufRead as _;
    let cli = env!("CARGO_BIN_EXE_claude-memory-cli");
    let dir = tempfile::tempdir().expect("tempdir");
    let db = format!("sqlite:{}", dir.path().join("m.db").display());
    let replay = |tenant: &str, calls: &[serde_json::Value]| {
        let mut c = std::process::Command::new(cli)
            .args(["--store", &db, "--tenant", tenant, "--history", "serve"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("serve");
        {
            let mut stdin = c.stdin.take().expect("stdin");
            for call in calls {
                writeln!(stdin, "{call}").expect("write");
            }
        }
        let out = c.wait_with_output().expect("serve ran");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("\"is_error\":true"));
    };
    let call = |i: usize, input: serde_json::Value| serde_json::json!({"type": "tool_use", "id": format!("toolu_{i}"), "name": "memory", "input": input});
    replay(
        "bob",
        &[
            call(
                1,
                serde_json::json!({"command": "create", "path": "/memories/b.md", "file_text": "BOB-ONLY one\n"}),
            ),
            call(
                2,
                serde_json::json!({"command": "str_replace", "path": "/memories/b.md", "old_str": "one", "new_str": "two"}),
            ),
        ],
    );
    replay(
        "alice",
        &[call(
            3,
            serde_json::json!({"command": "create", "path": "/memories/a.md", "file_text": "alice\n"}),
        )],
    );
    let mut child = std::process::Command::new(cli)
        .args(["--store", &db, "--tenant", "alice", "ui"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("ui");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("url");
    let addr: SocketAddr = line
        .trim()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .expect("an address");
    let host = addr.to_string();
    let mut targets = vec![
        "/changes".to_owned(),
        "/changes?path=/memories/b.md".to_owned(),
        "/changes?call=toolu_1".to_owned(),
        "/search?q=bob".to_owned(),
        "/?path=/memories/b.md".to_owned(),
        "/stats".to_owned(),
    ];
    for n in 0..6 {
        targets.push(format!("/version?id=v{n}"));
        targets.push(format!("/diff?from=v{n}"));
        targets.push(format!("/act/revert?id=v{n}"));
    }
    for target in &targets {
        let a = raw(addr, "GET", target, &[("Host", &host)], "");
        assert!(a.status != 0, "{target}");
        assert!(!a.body.contains("BOB-ONLY"), "{target} shows bob's memory");
        assert!(
            !a.body.contains("toolu_1") || target.contains("toolu_1"),
            "{target} shows bob's call"
        );
    }
    let mine = raw(addr, "GET", "/changes", &[("Host", &host)], "");
    assert!(mine.body.contains("/memories/a.md"), "{}", mine.body);
    let _ = child.kill();
    let _ = child.wait();
}
