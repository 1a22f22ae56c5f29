//! Says which tests need a server this run does not have, and how to run
//! them. (A test binary of its own, without the test harness, so its
//! report is printed by a plain `cargo test`: the harness hides what
//! passing tests print, and a skipped test passes.)
//!
//! Each server's tests skip themselves when the server is not configured
//! (and fail instead when its `CLAUDE_MEMORY_REQUIRE_*` variable is set, as
//! in CI). `.ci/with-services cargo test` starts every server and runs the
//! whole suite against them.

/// A group of tests that needs a server, and what tells them where it is.
struct Server {
    /// What the tests need.
    what: &'static str,
    /// The variable that configures them.
    variable: &'static str,
    /// The test files that use it.
    tests: &'static str,
}

const SERVERS: &[Server] = &[
    Server {
        what: "PostgreSQL",
        variable: "CLAUDE_MEMORY_TEST_POSTGRES_URL",
        tests: "tests/stores/postgres*.rs, tests/history/postgres*.rs, and the PostgreSQL parts of tests/stores/conformance.rs, cli/commands.rs, encrypted/conformance.rs, history/conformance.rs, history/many_writers.rs, handler/store_size_limit_races.rs",
    },
    Server {
        what: "an S3 server (moto)",
        variable: "CLAUDE_MEMORY_TEST_S3_ENDPOINT",
        tests: "the S3 parts of tests/cloud/*.rs, encrypted/conformance.rs and encrypted/tampering_and_keys.rs",
    },
    Server {
        what: "Azure's emulator (Azurite)",
        variable: "CLAUDE_MEMORY_TEST_AZURE_ENDPOINT",
        tests: "the Azure parts of tests/cloud/*.rs, encrypted/conformance.rs and encrypted/tampering_and_keys.rs",
    },
    Server {
        what: "the official MCP clients (Python and TypeScript SDKs)",
        variable: "CLAUDE_MEMORY_MCP_CLIENTS",
        tests: "tests/mcp/official_clients.rs",
    },
    Server {
        what: "the memory stores API emulator (checked by Anthropic's Python SDK)",
        variable: "CLAUDE_MEMORY_TEST_MANAGED_URL",
        tests: "tests/managed/*.rs",
    },
];

fn main() {
    let missing: Vec<&Server> = SERVERS
        .iter()
        .filter(|s| std::env::var_os(s.variable).is_none_or(|v| v.is_empty()))
        .collect();
    if missing.is_empty() {
        println!("servers: every server-backed test ran (all servers configured)");
    } else {
        println!();
        println!("servers: tests skipped for want of a server:");
        for s in &missing {
            println!("  - {} ({} is not set): {}", s.what, s.variable, s.tests);
        }
        println!(
            "  Run them with `.ci/with-services cargo test`: it installs and starts each server on \
             loopback (as root, from the system's packages), runs the command, and stops them."
        );
        println!();
    }
    println!(
        "servers: {} passed, 0 failed, {} skipped",
        SERVERS.len() - missing.len(),
        missing.len()
    );
}
