//! `SecretDetector` misses found in issue 18 (edge 8), one test each, on
//! the detector and through the handler.

use claude_memory::policy::SecretDetector;
use claude_memory::{InMemoryStore, MemoryTool};
use serde_json::json;

fn kinds(text: &str) -> Vec<&'static str> {
    SecretDetector::reject()
        .find(text)
        .into_iter()
        .map(|m| m.kind)
        .collect()
}

/// The text of each match.
fn found(text: &str) -> Vec<&str> {
    SecretDetector::reject()
        .find(text)
        .into_iter()
        .map(|m| &text[m.range])
        .collect()
}

#[test]
fn openai_service_account_and_admin_keys() {
    let svc =
        "sk-svcacct-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789_-AbCdEfGhIjKlMnOpQrStT3BlbkFJabcdefghij";
    let admin = "sk-admin-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_AbCdEfGhIjKlMnOpQr";
    assert_eq!(found(&format!("OPENAI_API_KEY={svc}\n")), [svc]);
    assert_eq!(kinds(&format!("admin key: {admin}")), ["OpenAI API key"]);
    assert_eq!(found(&format!("admin key: {admin}")), [admin]);
    assert!(kinds("sk-admin-short").is_empty());
}

#[test]
fn aws_secret_access_keys_under_their_name_or_beside_their_key_id() {
    let secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    for text in [
        format!("aws_secret_access_key = {secret}\n"),
        format!("AWS_SECRET_ACCESS_KEY={secret}"),
        format!("\"aws_secret_access_key\": \"{secret}\""),
        format!("export AWS_SECRET_ACCESS_KEY='{secret}'"),
    ] {
        assert_eq!(found(&text), [secret], "{text}");
        assert_eq!(kinds(&text), ["AWS secret access key"], "{text}");
    }
    for text in [
        format!("AKIAIOSFODNN7EXAMPLE {secret}"),
        format!("id: AKIAIOSFODNN7EXAMPLE\nsecret: {secret}\n"),
        format!("{secret},AKIAIOSFODNN7EXAMPLE"),
    ] {
        let mut got = kinds(&text);
        got.sort_unstable();
        assert_eq!(
            got,
            ["AWS access key id", "AWS secret access key"],
            "{text}"
        );
    }
    // Forty characters alone are no secret: a git commit id, a hash.
    assert!(kinds("commit 0123456789abcdef0123456789abcdef01234567").is_empty());
    assert!(kinds(&format!("some text {secret}")).is_empty());
}

#[test]
fn aws_key_ids_and_github_tokens_followed_by_a_suffix() {
    assert_eq!(found("AKIAIOSFODNN7EXAMPLE-old"), ["AKIAIOSFODNN7EXAMPLE"]);
    assert_eq!(found("AKIAIOSFODNN7EXAMPLE_x"), ["AKIAIOSFODNN7EXAMPLE"]);
    let gh = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    assert_eq!(found(&format!("{gh}-backup")), [gh]);
    // Still not inside a longer word of the key's own characters.
    assert!(kinds("AKIAIOSFODNN7EXAMPLEX").is_empty());
    assert!(kinds("AKIAIOSFODNN7EXAMPLEx").is_empty());
}

/// PKCS#8 RSA (`MIIEvQIBADAN…`), PKCS#1 RSA (`MIIEowIBAAKCAQEA…`), SEC1 EC
/// (`MHcCAQEE…`) and OpenSSH (`b3BlbnNzaC1rZXktdjE…`) key bodies.
const PKCS8: &str = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\nMzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu\nNMoSfm76oqFvAp8Gy0iz5sxjZmSnXyCdPEovGhLa0VzMaQ8s+CLOyS56YyCFGeJZ\n-----END PRIVATE KEY-----\n";

#[test]
fn pem_key_bodies_without_their_begin_line() {
    let rsa1 = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\nVTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n";
    let ec = "MHcCAQEEIIrYSSNQFaA2Hwf1duRSxKtLYX5CB04fSeQ6tF1aY/PuoAoGCCqGSM49\nAwEHoUQDQgAEPR3tU2Fta9ktY+6P9G0cWO+0kETA6SFs38GecTyudlHz6xvCdz8q\n";
    let ssh = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\nQyNTUxOQAAACCr9gYRyzgG3j0ZcBH/4FvEp8WeYQXoGTk0Wd5+yQ8yFAAAAJj9yqcW/cqn\n";
    for body in [PKCS8, rsa1, ec, ssh] {
        let text = format!("my key:\n{body}thanks\n");
        assert_eq!(kinds(&text), ["private key"], "{body}");
        let hit = found(&text)[0];
        assert!(
            body.starts_with(hit.lines().next().unwrap_or_default()),
            "{hit}"
        );
        assert!(!hit.contains("thanks"), "{hit}");
        // Every line of the body is covered.
        assert!(hit.len() >= body.trim_end().len() - 1, "{hit}");
    }
    // Public material is not a secret: a certificate and a public key.
    let cert = "MIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJ\nRTESMBAGA1UEChMJQmFsdGltb3JlMRMwEQYDVQQLEwpDeWJlclRydXN0MSIwIAYD\n";
    let public = "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAu1SU1LfVLPHCozMxH2Mo\n";
    for text in [
        cert,
        public,
        "aGVsbG8gd29ybGQgaGVsbG8gd29ybGQgaGVsbG8gd29ybGQgaGVsbG8=\n",
    ] {
        assert!(kinds(text).is_empty(), "{text}: {:?}", kinds(text));
    }
}

#[test]
fn card_numbers_with_dots() {
    assert_eq!(
        found("card 4111.1111.1111.1111 exp"),
        ["4111.1111.1111.1111"]
    );
    assert_eq!(found("amex 3782.822463.10005"), ["3782.822463.10005"]);
    // Decimal numbers are not cards, even when their digits pass Luhn.
    for text in [
        "pi is 3.14159265358979",
        "x = 4111111.111111111",
        "v1.2.3.4",
    ] {
        assert!(kinds(text).is_empty(), "{text}: {:?}", kinds(text));
    }
}

#[test]
fn a_secret_in_a_file_name_followed_by_a_suffix_is_refused() {
    for detector in [SecretDetector::reject(), SecretDetector::redact()] {
        let tool = MemoryTool::new(InMemoryStore::new()).with_policy(detector);
        let created = tool.dispatch(&json!({"command": "create",
            "path": "/memories/AKIAIOSFODNN7EXAMPLE-x.md", "file_text": "x"}));
        assert!(created.is_error, "{created:?}");
        assert!(
            created
                .text()
                .unwrap_or_default()
                .contains("AWS access key id"),
            "{created:?}"
        );
        let view = tool.dispatch(&json!({"command": "view", "path": "/memories"}));
        assert!(
            !view.text().unwrap_or_default().contains("AKIA"),
            "{view:?}"
        );
    }
}
