//! What the CLI prints when the object store refuses it: the status and
//! the service's error code, never the service's body. S3 answers a bad
//! signature with `SignatureDoesNotMatch` and a body that holds the access
//! key id and the string it signed; a service may echo more. The service
//! here is a listener that answers every request that way, as S3 does.
#![cfg(all(feature = "cli", feature = "s3"))]

use std::io::{Read, Write};
use std::net::TcpListener;

const LEAKED: &str = "AKIAEXAMPLELEAKEDKEY";

/// Answers every request on a port of its own with S3's 403
/// `SignatureDoesNotMatch`, until the process ends.
fn refusing_s3() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 65536];
                let _ = stream.read(&mut buf);
                let body = format!(
                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not match the signature you provided.</Message><AWSAccessKeyId>{LEAKED}</AWSAccessKeyId><StringToSign>AWS4-HMAC-SHA256 secret-bearing-string</StringToSign><RequestId>1</RequestId></Error>"
                );
                let response = format!(
                    "HTTP/1.1 403 Forbidden\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes());
            });
        }
    });
    port
}

#[test]
fn a_refused_signature_prints_the_status_and_code_never_the_services_body() {
    let port = refusing_s3();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_claude-memory-cli"))
        .args(["--store", "s3://bucket/prefix", "view", "/memories"])
        .env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}"))
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_ACCESS_KEY_ID", LEAKED)
        .env("AWS_SECRET_ACCESS_KEY", "wrong-secret")
        .env("AWS_REGION", "us-east-1")
        .output()
        .expect("run the CLI");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stderr}");
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    for shown in [&stderr, &stdout] {
        assert!(
            !shown.contains(LEAKED),
            "the access key id was printed: {shown}"
        );
        assert!(
            !shown.contains("StringToSign"),
            "the service's body was printed: {shown}"
        );
        assert!(
            !shown.contains("127.0.0.1"),
            "the request's URL was printed: {shown}"
        );
    }
    assert!(stderr.contains("403"), "{stderr}");
    assert!(stderr.contains("SignatureDoesNotMatch"), "{stderr}");
}
