//! The review page for tests: served in-process on a free loopback port
//! (or the CLI's `ui`), and spoken to over plain HTTP/1.1, every header
//! as the test writes it (a foreign `Host`, a missing `Origin`).
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use claude_memory::ui::{Backend, ReviewServer, UiOptions};

/// A page served on a thread of its own until dropped.
pub struct Page {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Page {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Serves `backend` with `options` on 127.0.0.1, a free port.
pub fn serve(backend: Backend, options: UiOptions) -> Page {
    serve_on("127.0.0.1:0".parse().expect("addr"), backend, options)
}

pub fn serve_on(addr: SocketAddr, backend: Backend, options: UiOptions) -> Page {
    let (tx, rx) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let page = ReviewServer::bind(addr, backend, options)
                .await
                .expect("bind");
            let url = page.url();
            tx.send(url).expect("send the url");
            page.serve(async {
                let _ = stopped.await;
            })
            .await
            .expect("serve");
        });
    });
    let url = rx.recv().expect("the page's url");
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .expect("an address");
    Page {
        addr,
        stop: Some(stop),
        thread: Some(thread),
    }
}

/// An answer: status, headers (lowercase names), body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The value of the hidden input `name` in the first form.
    pub fn hidden(&self, name: &str) -> Option<String> {
        let at = self.body.find(&format!("name=\"{name}\" value=\""))?;
        let rest = &self.body[at + name.len() + 15..];
        Some(unescape(&rest[..rest.find('"')?]))
    }
}

fn unescape(text: &str) -> String {
    text.replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// One request with exactly these headers (and Content-Length for a
/// body); `Connection: close`.
pub fn raw(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let mut request = format!("{method} {target} HTTP/1.1\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() || method == "POST" {
        request.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    request.push_str("Connection: close\r\n\r\n");
    request.push_str(body);
    // A server refusing a body may answer and close before it is all
    // sent: the answer is still read.
    let _ = stream.write_all(request.as_bytes());
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Answer {
        status,
        headers,
        body: body.to_owned(),
    }
}

/// A GET as the page's own browser sends it.
pub fn get(page: &Page, target: &str) -> Answer {
    let host = page.addr.to_string();
    raw(page.addr, "GET", target, &[("Host", &host)], "")
}

/// A form POST as the page's own browser sends it (same origin).
pub fn post(page: &Page, target: &str, fields: &[(&str, &str)]) -> Answer {
    let host = page.addr.to_string();
    let origin = format!("http://{host}");
    let body = form(fields);
    raw(
        page.addr,
        "POST",
        target,
        &[
            ("Host", &host),
            ("Origin", &origin),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        &body,
    )
}

/// `application/x-www-form-urlencoded`.
pub fn form(fields: &[(&str, &str)]) -> String {
    fields
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

pub fn enc(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}
