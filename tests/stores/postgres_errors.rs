//! Issue 18, edge 10: `PostgresError` printed "could not connect to
//! PostgreSQL" with the cause two `source()` levels down.
#![cfg(feature = "postgres")]

use claude_memory::PostgresStore;

fn url() -> Option<String> {
    match std::env::var("CLAUDE_MEMORY_TEST_POSTGRES_URL") {
        Ok(url) => Some(url),
        Err(_) if std::env::var_os("CLAUDE_MEMORY_REQUIRE_POSTGRES").is_some() => {
            panic!(
                "CLAUDE_MEMORY_REQUIRE_POSTGRES is set but CLAUDE_MEMORY_TEST_POSTGRES_URL is not"
            )
        }
        Err(_) => {
            println!("skipped: set CLAUDE_MEMORY_TEST_POSTGRES_URL (see .ci/postgres.sh) to run");
            None
        }
    }
}

#[test]
fn a_connect_error_says_its_cause() {
    let Some(url) = url() else { return };
    // The same server, a database that does not exist.
    let (server, _db) = url.rsplit_once('/').expect("a URL with a database");
    let missing = format!("{server}/claude_memory_no_such_db");
    let e = PostgresStore::connect(&missing, 1).expect_err("no such database");
    let text = e.to_string();
    assert!(
        text.starts_with("could not connect to PostgreSQL: "),
        "{text}"
    );
    assert!(
        text.contains("database \"claude_memory_no_such_db\" does not exist"),
        "{text}"
    );
    // A refused connection: a port nothing listens on.
    let e = PostgresStore::connect("postgres://postgres@127.0.0.1:9/x?connect_timeout=2", 1)
        .expect_err("nothing listens");
    assert!(
        e.to_string().starts_with("could not connect to PostgreSQL"),
        "{e}"
    );
    assert!(
        e.to_string().len() > "could not connect to PostgreSQL".len() + 2,
        "{e}"
    );
}
