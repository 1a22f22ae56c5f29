//! The review page in a real browser, as a person uses it: Debian's
//! chromium, headless, driven through chromedriver (WebDriver, with
//! fantoccini) over the CLI's `ui`, on a directory store with history, a
//! SQLite store's tenant and a managed memory store (the emulator). Each
//! finds a memory, opens its versions, diffs two, reverts one, and checks
//! the store and its history afterwards. Screenshots of the main views go
//! to target/ui-screenshots/.
//!
//! Needs chromedriver (`.ci/browser.sh` installs chromium and
//! chromium-driver): CLAUDE_MEMORY_TEST_CHROMEDRIVER, else
//! /usr/bin/chromedriver; without one a test prints "skipped" and passes,
//! unless CLAUDE_MEMORY_REQUIRE_BROWSER=1.
#![cfg(all(feature = "ui", feature = "cli", unix))]

use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

const CLI: &str = env!("CARGO_BIN_EXE_claude-memory-cli");

fn chromedriver() -> Option<PathBuf> {
    let found = std::env::var_os("CLAUDE_MEMORY_TEST_CHROMEDRIVER")
        .map(PathBuf::from)
        .or_else(|| Some(PathBuf::from("/usr/bin/chromedriver")))
        .filter(|p| p.exists());
    if found.is_none() {
        assert!(
            std::env::var("CLAUDE_MEMORY_REQUIRE_BROWSER").as_deref() != Ok("1"),
            "CLAUDE_MEMORY_REQUIRE_BROWSER=1 but no chromedriver (source .ci/browser.sh)"
        );
        eprintln!("skipped: no chromedriver (source .ci/browser.sh)");
    }
    found
}

/// A child process killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// chromedriver on a free port, ready.
fn start_driver(path: &Path) -> (Running, String) {
    let port = free_port();
    let child = Command::new(path)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromedriver");
    let running = Running(child);
    let url = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "chromedriver did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (running, url)
}

/// Headless chromium, with the flags a closed network needs.
async fn browser(driver: &str, profile: &Path) -> Client {
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    let mut caps = serde_json::Map::new();
    let chromium =
        std::env::var("CLAUDE_MEMORY_TEST_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": chromium,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--disable-quic", "--no-first-run", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync", "--window-size=1280,900",
                     format!("--user-data-dir={}", profile.display())],
        }),
    );
    ClientBuilder::new(connector)
        .capabilities(caps)
        .connect(driver)
        .await
        .expect("a browser session")
}

/// The CLI with `args`, and `env`.
fn cli(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut c = Command::new(CLI);
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run the CLI")
}

/// Replays tool calls through `serve` on `store` (with `args` before).
fn serve(args: &[&str], env: &[(&str, &str)], calls: &[serde_json::Value]) {
    let mut c = Command::new(CLI);
    c.args(args)
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c.spawn().expect("serve");
    {
        let mut stdin = child.stdin.take().expect("stdin");
        for call in calls {
            writeln!(stdin, "{call}").expect("write");
        }
    }
    let out = child.wait_with_output().expect("serve ran");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("\"is_error\":true"), "{text}");
}

/// The CLI's `ui` with `args`: the process and the URL on its first line.
fn ui(args: &[&str], env: &[(&str, &str)]) -> (Running, String) {
    let mut c = Command::new(CLI);
    c.args(args)
        .arg("ui")
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c.spawn().expect("ui");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("the first line");
    let url = line.trim().to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{url:?}");
    (Running(child), url)
}

/// The model's calls, as `tool_use` blocks (each id is the version's call).
fn calls() -> Vec<serde_json::Value> {
    [
        json!({"command": "create", "path": "/memories/notes/todo.md",
               "file_text": "buy milk\nwrite the tests\ncall Alice\n"}),
        json!({"command": "str_replace", "path": "/memories/notes/todo.md",
               "old_str": "buy milk", "new_str": "buy oat milk"}),
        json!({"command": "create", "path": "/memories/x<img src=x onerror=alert(1)>.md",
               "file_text": "</script><script>alert(2)</script>\n"}),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, input)| json!({"type": "tool_use", "id": format!("toolu_01Ab{i}"), "name": "memory", "input": input}))
    .collect()
}

fn shots() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/ui-screenshots");
    std::fs::create_dir_all(&dir).expect("screenshots dir");
    dir
}

async fn shot(c: &Client, name: &str) {
    let png = c.screenshot().await.expect("a screenshot");
    std::fs::write(shots().join(format!("{name}.png")), png).expect("save");
}

/// The element `locator` finds once the page shows it (a page loads
/// after a click, as a person waits for it), within 30 s.
async fn shown(
    c: &Client,
    locator: Locator<'_>,
) -> Result<fantoccini::elements::Element, fantoccini::error::CmdError> {
    c.wait()
        .at_most(Duration::from_secs(30))
        .for_element(locator)
        .await
}

async fn click_link(c: &Client, text: &str) {
    shown(c, Locator::LinkText(text))
        .await
        .unwrap_or_else(|e| panic!("a link {text:?}: {e}"))
        .click()
        .await
        .expect("click");
}

async fn text_of(c: &Client, css: &str) -> String {
    shown(c, Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .text()
        .await
        .expect("text")
}

/// The walk every store gets: find the memory, its versions, a diff of the
/// first with now, a revert to it; no script from a memory ever runs.
async fn review(c: &Client, url: &str, name: Option<&str>) {
    c.goto(url).await.expect("open the page");
    assert!(c.get_alert_text().await.is_err(), "a memory's script ran");
    if let Some(n) = name {
        shot(c, &format!("{n}-browse")).await;
    }
    click_link(c, "notes/").await;
    click_link(c, "todo.md").await;
    let file = text_of(c, "pre.file").await;
    assert!(file.contains("buy oat milk"), "{file}");
    // Numbered as the model's view numbers it (WebDriver shows the tab as
    // a space).
    assert!(file.contains("     1 buy oat milk"), "{file}");
    if let Some(n) = name {
        shot(c, &format!("{n}-file")).await;
    }
    click_link(c, "History").await;
    shown(c, Locator::Css("table.timeline"))
        .await
        .expect("the history page");
    let rows = c
        .find_all(Locator::Css("table.timeline tbody tr"))
        .await
        .expect("rows");
    assert!(rows.len() >= 2, "{} versions", rows.len());
    if let Some(n) = name {
        shot(c, &format!("{n}-history")).await;
    }
    // The oldest (the create) is the last row.
    let oldest = rows.last().expect("a row");
    oldest
        .find(Locator::Css("td a"))
        .await
        .expect("its link")
        .click()
        .await
        .expect("click");
    click_link(c, "Diff with now").await;
    shown(c, Locator::Css("table.diff"))
        .await
        .expect("the diff page");
    let marks = c
        .find_all(Locator::Css("table.diff mark"))
        .await
        .expect("marks");
    assert!(!marks.is_empty(), "the changed word is marked");
    let diff = text_of(c, "table.diff").await;
    assert!(
        diff.contains("buy milk") && diff.contains("buy oat milk"),
        "{diff}"
    );
    if let Some(n) = name {
        shot(c, &format!("{n}-diff")).await;
    }
    click_link(c, "Side by side").await;
    assert!(c.find(Locator::Css("table.diff.split")).await.is_ok());
    if let Some(n) = name {
        shot(c, &format!("{n}-diff-side-by-side")).await;
    }
    c.back().await.expect("back");
    c.back().await.expect("back to the version");
    click_link(c, "Revert to this version").await;
    let preview = text_of(c, "table.diff").await;
    assert!(preview.contains("buy oat milk"), "{preview}");
    shown(c, Locator::Css("form button[type=submit]"))
        .await
        .expect("the confirm button")
        .click()
        .await
        .expect("click");
    let Ok(done) = shown(c, Locator::Css("p.done")).await else {
        panic!("no Done page: {}", c.source().await.unwrap_or_default());
    };
    let done = done.text().await.expect("text");
    assert!(
        done.starts_with("Reverted /memories/notes/todo.md"),
        "{done}"
    );
    assert!(c.get_alert_text().await.is_err(), "a memory's script ran");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn a_directory_store_with_history_is_reviewed_and_reverted_in_a_browser() {
    let Some(driver_path) = chromedriver() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("memory");
    let store = root.to_str().expect("utf-8").to_owned();
    serve(&["--store", &store, "--history"], &[], &calls());
    let (_ui, url) = ui(&["--store", &store], &[("USER", "alice")]);
    let (_driver, driver) = start_driver(&driver_path);
    runtime().block_on(async {
        let c = browser(&driver, &dir.path().join("profile")).await;
        review(&c, &url, Some("ui")).await;
        c.close().await.expect("close");
    });
    let text = std::fs::read_to_string(root.join("notes/todo.md")).expect("the file");
    assert_eq!(text, "buy milk\nwrite the tests\ncall Alice\n");
    let history = cli(
        &["--store", &store, "history", "/memories/notes/todo.md"],
        &[],
    );
    let history = String::from_utf8_lossy(&history.stdout);
    assert!(
        history.contains("ui:alice"),
        "the revert is alice's change: {history}"
    );
}

#[test]
fn a_sqlite_stores_tenant_is_reviewed_and_reverted_in_a_browser() {
    let Some(driver_path) = chromedriver() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let db = format!("sqlite:{}", dir.path().join("m.db").display());
    serve(
        &["--store", &db, "--tenant", "alice", "--history"],
        &[],
        &calls(),
    );
    serve(
        &["--store", &db, "--tenant", "bob", "--history"],
        &[],
        &[json!({"command": "create", "path": "/memories/notes/todo.md", "file_text": "bob's\n"})],
    );
    let (_ui, url) = ui(&["--store", &db, "--tenant", "alice"], &[]);
    let (_driver, driver) = start_driver(&driver_path);
    runtime().block_on(async {
        let c = browser(&driver, &dir.path().join("profile")).await;
        review(&c, &url, None).await;
        c.close().await.expect("close");
    });
    let view = |tenant: &str| {
        let out = cli(
            &[
                "--store",
                &db,
                "--tenant",
                tenant,
                "view",
                "/memories/notes/todo.md",
            ],
            &[],
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(view("alice").contains("buy milk") && !view("alice").contains("oat"));
    assert!(view("bob").contains("bob's"), "bob's tenant is untouched");
}

#[cfg(feature = "managed")]
#[test]
fn a_managed_store_is_reviewed_and_reverted_in_a_browser() {
    #[path = "../managed_support/mod.rs"]
    mod managed_support;
    let Some(driver_path) = chromedriver() else {
        return;
    };
    let Some(id) = managed_support::new_store() else {
        return;
    };
    let (base, key) = managed_support::endpoint().expect("an emulator");
    let env = [
        ("ANTHROPIC_BASE_URL", base.as_str()),
        ("ANTHROPIC_API_KEY", key.as_str()),
    ];
    let store = format!("managed:{id}");
    serve(&["--store", &store], &env, &calls());
    let dir = tempfile::tempdir().expect("tempdir");
    let (_ui, url) = ui(&["--store", &store], &env);
    let (_driver, driver) = start_driver(&driver_path);
    runtime().block_on(async {
        let c = browser(&driver, &dir.path().join("profile")).await;
        review(&c, &url, None).await;
        c.close().await.expect("close");
    });
    let all = managed_support::memories(&id);
    let todo = all
        .iter()
        .find(|(p, _)| p == "/notes/todo.md")
        .expect("the memory");
    assert_eq!(todo.1, "buy milk\nwrite the tests\ncall Alice\n");
}

#[cfg(feature = "postgres")]
#[test]
fn a_postgresql_store_with_history_is_reviewed_and_reverted_in_a_browser() {
    let Some(driver_path) = chromedriver() else {
        return;
    };
    let Ok(url) = std::env::var("CLAUDE_MEMORY_TEST_POSTGRES_URL") else {
        assert!(
            std::env::var("CLAUDE_MEMORY_REQUIRE_POSTGRES").as_deref() != Ok("1"),
            "CLAUDE_MEMORY_REQUIRE_POSTGRES=1 but CLAUDE_MEMORY_TEST_POSTGRES_URL is not set"
        );
        eprintln!("skipped: no PostgreSQL (source .ci/postgres.sh)");
        return;
    };
    // A tenant of its own, so runs and other tests never meet.
    let tenant = format!("ui-{}-{}", std::process::id(), free_port());
    let args = ["--store", url.as_str(), "--tenant", tenant.as_str()];
    let mut with_history = args.to_vec();
    with_history.push("--history");
    serve(&with_history, &[], &calls());
    let (_ui, page) = ui(&args, &[]);
    let (_driver, driver) = start_driver(&driver_path);
    let dir = tempfile::tempdir().expect("tempdir");
    runtime().block_on(async {
        let c = browser(&driver, &dir.path().join("profile")).await;
        review(&c, &page, None).await;
        c.close().await.expect("close");
    });
    let mut view = args.to_vec();
    view.extend(["view", "/memories/notes/todo.md"]);
    let out = cli(&view, &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("buy milk") && !text.contains("oat"), "{text}");
}
