//! The review page attacked over HTTP: a foreign `Host` (DNS rebinding),
//! a change from another origin or without its form's token, markup in
//! names and contents, `..` and encoded paths in URLs, a 1 GiB sparse
//! file, a directory of 100,000 files, a read-only page, and a page off
//! loopback that needs a token. One test per attack.
#![cfg(feature = "ui")]

use std::time::Instant;

use claude_memory::history::{FileLog, HistoryStore};
use claude_memory::mcp::Tokens;
use claude_memory::store::{MemoryStoreExt as _, WriteMode};
use claude_memory::ui::{Backend, UiError, UiOptions};
use claude_memory::{FilesystemStore, MemoryPath, MemoryStore, MemoryTool};
use serde_json::json;

#[path = "../ui_support/mod.rs"]
mod ui_support;

use ui_support::{Page, get, post, raw, serve};

fn p(text: &str) -> MemoryPath {
    MemoryPath::parse(text).expect("path")
}

/// A directory store with history, holding `files` (path, text).
fn store(dir: &std::path::Path, files: &[(&str, &str)]) -> HistoryStore<FilesystemStore> {
    let history = HistoryStore::open(
        FilesystemStore::open(dir).expect("store"),
        FileLog::for_store(dir).expect("log"),
    )
    .expect("history");
    for (path, text) in files {
        history
            .write(&p(path), text.as_bytes(), WriteMode::Overwrite)
            .expect("write");
    }
    history
}

fn page(dir: &std::path::Path, files: &[(&str, &str)]) -> Page {
    serve(
        Backend::History(Box::new(store(dir, files))),
        UiOptions::default(),
    )
}

fn read(dir: &std::path::Path, path: &str) -> Option<String> {
    let s = FilesystemStore::open(dir).expect("store");
    s.read(&p(path), u64::MAX)
        .ok()
        .map(|f| String::from_utf8_lossy(&f.data).into_owned())
}

#[test]
fn a_foreign_host_gets_421_and_nothing_else() {
    let dir = tempfile::tempdir().expect("tempdir");
    let page = page(dir.path(), &[("/memories/secret.md", "the secret\n")]);
    let port = page.addr.port();
    for host in [
        "evil.example".to_owned(),
        format!("evil.example:{port}"),
        format!("127.0.0.1:{}", port.wrapping_add(1)),
        format!("localhost.evil.example:{port}"),
    ] {
        for target in ["/", "/?path=/memories/secret.md", "/assets/ui.css"] {
            let a = raw(page.addr, "GET", target, &[("Host", &host)], "");
            assert_eq!(a.status, 421, "{host} {target}");
            assert!(!a.body.contains("secret"), "{host}: {}", a.body);
        }
    }
    let a = raw(page.addr, "GET", "/", &[], "");
    assert!(a.status == 421 || a.status == 400, "no Host: {}", a.status);
    for host in [format!("127.0.0.1:{port}"), format!("localhost:{port}")] {
        let a = raw(page.addr, "GET", "/", &[("Host", &host)], "");
        assert_eq!(a.status, 200, "{host}");
    }
}

/// The token of the form a GET of `confirm` gives.
fn token(page: &Page, confirm: &str) -> String {
    let a = get(page, confirm);
    assert_eq!(a.status, 200, "{confirm}: {}", a.body);
    a.hidden("csrf").expect("the form's token")
}

#[test]
fn a_change_from_another_origin_or_without_one_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let page = page(dir.path(), &[("/memories/a.md", "keep\n")]);
    let csrf = token(&page, "/act/delete?path=/memories/a.md");
    let host = page.addr.to_string();
    let body = ui_support::form(&[("csrf", &csrf), ("step", "do"), ("path", "/memories/a.md")]);
    let cases: [&[(&str, &str)]; 4] = [
        &[("Host", &host), ("Origin", "http://evil.example")],
        &[("Host", &host)],
        &[("Host", &host), ("Origin", "null")],
        &[
            ("Host", &host),
            ("Origin", &format!("http://{host}")),
            ("Sec-Fetch-Site", "cross-site"),
        ],
    ];
    for headers in cases {
        let mut all = headers.to_vec();
        all.push(("Content-Type", "application/x-www-form-urlencoded"));
        let a = raw(page.addr, "POST", "/act/delete", &all, &body);
        assert_eq!(a.status, 403, "{headers:?}: {}", a.body);
    }
    assert_eq!(
        read(dir.path(), "/memories/a.md").as_deref(),
        Some("keep\n")
    );
}

#[test]
fn a_change_without_its_forms_token_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let page = page(dir.path(), &[("/memories/a.md", "keep\n")]);
    // Another form's token, a made-up one, none.
    let other = token(&page, "/act/rename?path=/memories/a.md");
    for csrf in [other.as_str(), &"0".repeat(64), ""] {
        let a = post(
            &page,
            "/act/delete",
            &[("csrf", csrf), ("step", "do"), ("path", "/memories/a.md")],
        );
        assert_eq!(a.status, 403, "{csrf:?}: {}", a.body);
    }
    assert_eq!(
        read(dir.path(), "/memories/a.md").as_deref(),
        Some("keep\n")
    );
    // The right one works.
    let form = get(&page, "/act/delete?path=/memories/a.md");
    let csrf = form.hidden("csrf").expect("token");
    let base = form.hidden("base").expect("what it showed");
    let a = post(
        &page,
        "/act/delete",
        &[
            ("csrf", &csrf),
            ("step", "do"),
            ("path", "/memories/a.md"),
            ("base", &base),
        ],
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(read(dir.path(), "/memories/a.md"), None);
}

#[test]
fn markup_in_names_and_contents_is_shown_as_text() {
    let dir = tempfile::tempdir().expect("tempdir");
    let name = "/memories/x<img src=x onerror=alert(1)>.md";
    let content = "</script><script>alert(2)</script>\n<img src=x onerror=alert(3)>\n";
    let page = page(
        dir.path(),
        &[(name, content), ("/memories/b.md", "plain\n")],
    );
    let history = get(&page, "/changes");
    let id = history
        .body
        .split("/version?id=")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a version link")
        .to_owned();
    for target in [
        "/".to_owned(),
        format!("/?path={}", ui_support::enc(name)),
        "/search?q=alert".to_owned(),
        "/search?q=%3Cimg".to_owned(),
        "/changes".to_owned(),
        format!("/version?id={id}"),
        format!("/diff?from={id}"),
        format!("/act/edit?path={}", ui_support::enc(name)),
    ] {
        let a = get(&page, &target);
        assert_eq!(a.status, 200, "{target}");
        for raw_markup in ["<img src=x", "<script>alert", "</script><script>"] {
            assert!(!a.body.contains(raw_markup), "{target} shows {raw_markup}");
        }
        let csp = a.header("content-security-policy").unwrap_or("");
        assert!(csp.contains("script-src 'self'") && csp.contains("default-src 'none'"));
        assert_eq!(a.header("x-frame-options"), Some("DENY"));
    }
    // Every script and stylesheet is the page's own.
    let a = get(&page, "/");
    assert!(a.body.contains("<script src=\"/assets/ui.js\""));
    assert!(!a.body.contains("http://") && !a.body.contains("https://"));
}

#[test]
fn dot_dot_and_encoded_paths_in_urls_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let outside = dir.path().join("outside.txt");
    std::fs::write(&outside, "host file\n").expect("write");
    let root = dir.path().join("store");
    std::fs::create_dir(&root).expect("mkdir");
    let page = page(&root, &[("/memories/a.md", "a\n")]);
    for target in [
        "/?path=/memories/../outside.txt",
        "/?path=/memories/..%2Foutside.txt",
        "/?path=%2Fmemories%2F%2E%2E%2Foutside.txt",
        "/?path=/memories/%252e%252e/outside.txt",
        "/?path=/etc/passwd",
        "/?path=/memories/..\\outside.txt",
        "/?path=memories/a.md",
        "/act/edit?path=/memories/../outside.txt",
        "/changes?path=/memories/../outside.txt",
        "/search?q=host%20file",
    ] {
        let a = get(&page, target);
        match target.starts_with("/search") {
            true => assert!(a.body.contains("0 found"), "{target}: {}", a.body),
            false => {
                assert!(!a.body.contains("host file"), "{target}: {}", a.body);
                assert!(a.status == 400 || a.status == 404, "{target}: {}", a.status);
            }
        }
    }
    for target in [
        "/../outside.txt",
        "/assets/../../outside.txt",
        "/%2e%2e/outside.txt",
    ] {
        let a = get(&page, target);
        assert!(!a.body.contains("host file"), "{target}");
    }
}

#[test]
fn a_1_gib_sparse_file_is_shown_in_bounded_pages() {
    let dir = tempfile::tempdir().expect("tempdir");
    let page = page(dir.path(), &[("/memories/a.md", "a\n")]);
    let big = std::fs::File::create(dir.path().join("big.md")).expect("create");
    big.set_len(1 << 30).expect("sparse");
    let started = Instant::now();
    let a = get(&page, "/?path=/memories/big.md");
    assert_eq!(a.status, 200);
    assert!(a.body.len() < 2 << 20, "{} bytes", a.body.len());
    assert!(started.elapsed().as_secs() < 60);
    // Search skips what it will not read whole.
    let a = get(&page, "/search?q=zzz");
    assert_eq!(a.status, 200);
    assert!(a.body.len() < 1 << 20);
}

#[test]
fn a_directory_of_100000_files_is_shown_in_pages() {
    let dir = tempfile::tempdir().expect("tempdir");
    let many = dir.path().join("many");
    std::fs::create_dir(&many).expect("mkdir");
    for i in 0..100_000 {
        std::fs::write(many.join(format!("f{i:06}.md")), "x").expect("write");
    }
    let page = serve(
        Backend::Plain(Box::new(FilesystemStore::open(dir.path()).expect("store"))),
        UiOptions::default(),
    );
    let a = get(&page, "/?path=/memories/many");
    assert_eq!(a.status, 200);
    assert!(
        a.body.contains("100000 entries, page 1 of 500"),
        "{}",
        &a.body[..500.min(a.body.len())]
    );
    assert_eq!(
        a.body.matches("<tr>").count(),
        201,
        "a header row and 200 entries"
    );
    let a = get(
        &page,
        "/?path=/memories/many&line=9223372036854775807&page=499",
    );
    assert!(a.body.contains("f099999.md"));
    let a = get(&page, "/?path=/memories/many&page=18446744073709551615");
    assert_eq!(a.status, 200, "a page past the end is the last one");
    assert!(a.body.contains("f099999.md"));
}

#[test]
fn a_read_only_page_shows_no_change_and_makes_none() {
    let dir = tempfile::tempdir().expect("tempdir");
    let page = serve(
        Backend::History(Box::new(store(dir.path(), &[("/memories/a.md", "keep\n")]))),
        UiOptions::default().read_only(),
    );
    let a = get(&page, "/?path=/memories/a.md");
    assert!(a.body.contains("read-only"));
    assert!(!a.body.contains("/act/"), "{}", a.body);
    assert_eq!(get(&page, "/act/delete?path=/memories/a.md").status, 403);
    let a = post(
        &page,
        "/act/delete",
        &[("step", "do"), ("path", "/memories/a.md")],
    );
    assert_eq!(a.status, 403);
    assert_eq!(
        read(dir.path(), "/memories/a.md").as_deref(),
        Some("keep\n")
    );
}

#[test]
fn a_page_off_loopback_needs_a_token_and_a_signed_in_browser() {
    let dir = tempfile::tempdir().expect("tempdir");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let refused = runtime.block_on(claude_memory::ui::ReviewServer::bind(
        "0.0.0.0:0".parse().expect("addr"),
        Backend::Plain(Box::new(FilesystemStore::open(dir.path()).expect("store"))),
        UiOptions::default(),
    ));
    assert!(
        matches!(refused, Err(UiError::NeedsTokens(_))),
        "{refused:?}"
    );
    let token = "a-token-of-at-least-thirty-two-characters-x";
    let tokens = Tokens::single(token).expect("tokens");
    let page = serve(
        Backend::History(Box::new(store(
            dir.path(),
            &[("/memories/a.md", "secret\n")],
        ))),
        UiOptions::default().with_tokens(tokens),
    );
    let a = get(&page, "/?path=/memories/a.md");
    assert_eq!(a.status, 303);
    assert_eq!(a.header("location"), Some("/login"));
    assert!(!a.body.contains("secret"));
    let login = get(&page, "/login");
    let csrf = login.hidden("csrf").expect("token");
    let wrong = post(&page, "/login", &[("csrf", &csrf), ("token", "not-it")]);
    assert_eq!(wrong.status, 401);
    assert!(wrong.header("set-cookie").is_none());
    let right = post(&page, "/login", &[("csrf", &csrf), ("token", token)]);
    assert_eq!(right.status, 303, "{}", right.body);
    let cookie = right.header("set-cookie").expect("a cookie").to_owned();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
    let session = cookie.split(';').next().expect("name=value");
    let host = page.addr.to_string();
    let a = raw(
        page.addr,
        "GET",
        "/?path=/memories/a.md",
        &[("Host", &host), ("Cookie", session)],
        "",
    );
    assert_eq!(a.status, 200);
    assert!(a.body.contains("secret"));
    let forged = raw(
        page.addr,
        "GET",
        "/",
        &[("Host", &host), ("Cookie", "claude_memory_ui=00")],
        "",
    );
    assert_eq!(forged.status, 303);
}

/// A model's view and the page's show one file alike.
#[test]
fn a_file_is_shown_as_the_models_view_shows_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = "one\ntwo\n";
    let page = page(dir.path(), &[("/memories/a.md", text)]);
    let tool = MemoryTool::new(FilesystemStore::open(dir.path()).expect("store"));
    let view = tool.dispatch(&json!({"command": "view", "path": "/memories/a.md"}));
    let shown = view.text().expect("text");
    let a = get(&page, "/?path=/memories/a.md");
    for line in shown.lines() {
        assert!(a.body.contains(line), "{line:?} not on the page");
    }
}

/// Numbers in URLs at their limits answer, never panic.
#[test]
fn numbers_at_their_limits_in_urls_answer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let page = page(dir.path(), &[("/memories/a.md", "a\n")]);
    for target in [
        "/?path=/memories/a.md&line=9223372036854775807",
        "/?path=/memories/a.md&line=-9223372036854775808",
        "/?path=/memories&page=18446744073709551615",
        "/?path=/memories&page=-1",
        "/version?id=v18446744073709551615",
        "/version?id=v99999999999999999999999",
        "/diff?from=v1&to=v18446744073709551615",
        "/changes?before=v0",
        "/changes?before=memver_",
    ] {
        let a = get(&page, target);
        assert!(
            [200, 400, 404].contains(&a.status),
            "{target}: {} {}",
            a.status,
            a.body
        );
    }
}

/// Bound to every address (with tokens), the page answers under the
/// machine's IP addresses and loopback names, and a DNS name only when
/// allowed: rebinding needs a name.
#[test]
fn bound_to_every_address_a_name_needs_to_be_allowed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = Tokens::single("a-token-of-at-least-thirty-two-characters-x").expect("tokens");
    let mut options = UiOptions::default().with_tokens(tokens);
    options.allowed_hosts = vec!["memory.example".into()];
    let page = ui_support::serve_on(
        "0.0.0.0:0".parse().expect("addr"),
        Backend::Plain(Box::new(FilesystemStore::open(dir.path()).expect("store"))),
        options,
    );
    let port = page.addr.port();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    for (host, status) in [
        (format!("127.0.0.1:{port}"), 303),
        (format!("localhost:{port}"), 303),
        (format!("10.1.2.3:{port}"), 303),
        (format!("[::1]:{port}"), 303),
        (format!("memory.example:{port}"), 303),
        (format!("evil.example:{port}"), 421),
        (format!("127.0.0.1.nip.io:{port}"), 421),
    ] {
        let a = raw(addr, "GET", "/", &[("Host", &host)], "");
        assert_eq!(a.status, status, "{host}");
    }
    let a = raw(addr, "GET", "/", &[("Host", "evil.example")], "");
    assert!(a.body.contains("--allow-host"), "{}", a.body);
}
