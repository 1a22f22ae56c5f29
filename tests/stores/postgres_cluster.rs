//! PostgreSQL against a throwaway cluster each test starts itself (initdb
//! and pg_ctl from /usr/lib/postgresql/*/bin, run as the `postgres` user,
//! on a free port): TLS with a CA and server certificate made here, and a
//! server restart and outage. Needs root (as CI runs) and PostgreSQL's
//! binaries (installed by .ci/postgres.sh); skipped with a printed reason
//! without them, unless CLAUDE_MEMORY_REQUIRE_POSTGRES is set.
#![cfg(all(feature = "postgres", unix))]

use std::error::Error as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use claude_memory::store::{MemoryStoreExt as _, WriteMode};
use claude_memory::{MemoryPath, MemoryStore, PostgresError, PostgresStore};

/// A CA and a server certificate for `localhost` it signed.
struct Certs {
    ca_pem: String,
    server_pem: String,
    server_key_pem: String,
}

fn certs() -> Certs {
    // Made with the openssl command (PostgreSQL's packages bring it), so
    // the crate needs no certificate library, even as a dev-dependency.
    let dir = tempfile::tempdir().expect("temporary directory");
    let d = |name: &str| dir.path().join(name);
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir.path())
            .output()
            .expect("run openssl");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    openssl(
        &[
            &["req", "-x509"][..],
            &ec,
            &[
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "2",
                "-subj",
                "/CN=claude-memory test CA",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
            ],
        ]
        .concat(),
    );
    openssl(
        &[
            &["req"][..],
            &ec,
            &[
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
                "-subj",
                "/CN=localhost",
            ],
        ]
        .concat(),
    );
    std::fs::write(
        d("server.ext"),
        "subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
    )
    .expect("extensions");
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "server.ext",
    ]);
    let read = |name: &str| std::fs::read_to_string(d(name)).expect("read a certificate file");
    Certs {
        ca_pem: read("ca.pem"),
        server_pem: read("server.pem"),
        server_key_pem: read("server.key"),
    }
}

/// A cluster of our own, stopped and removed on drop.
struct Cluster {
    bin: PathBuf,
    data: tempfile::TempDir,
    port: u16,
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("run a command");
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn as_postgres(program: &Path) -> Command {
    let mut c = Command::new("runuser");
    c.args(["-u", "postgres", "--"]).arg(program);
    c
}

impl Cluster {
    /// Starts a cluster with TLS on (`hostssl` only: a plain connection is
    /// refused), or `None` with the reason printed.
    fn start(certs: &Certs) -> Option<Cluster> {
        let skip = |why: &str| {
            assert!(
                std::env::var_os("CLAUDE_MEMORY_REQUIRE_POSTGRES").is_none(),
                "CLAUDE_MEMORY_REQUIRE_POSTGRES is set but {why}"
            );
            eprintln!("skipped: {why}");
            None
        };
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
            .filter(|b| b.join("initdb").exists())
            .max();
        let Some(bin) = bin else {
            return skip("PostgreSQL's binaries are not in /usr/lib/postgresql/*/bin");
        };
        let uid = Command::new("id").arg("-u").output().ok()?;
        if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
            return skip("starting a throwaway cluster needs root (runuser -u postgres)");
        }
        let ids = |flag: &str| -> u32 {
            let out = Command::new("id")
                .args([flag, "postgres"])
                .output()
                .expect("id");
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse()
                .expect("numeric id")
        };
        let (uid, gid) = (ids("-u"), ids("-g"));
        let data = tempfile::Builder::new()
            .prefix("claude-memory-pg-tls")
            .tempdir_in("/tmp")
            .expect("data directory");
        std::os::unix::fs::chown(data.path(), Some(uid), Some(gid)).expect("chown");
        let pgdata = data.path().join("pgdata");
        run(as_postgres(&bin.join("initdb"))
            .arg("-D")
            .arg(&pgdata)
            .args(["-A", "trust", "-U", "postgres"]));
        let write = |name: &str, text: &str, mode: u32| {
            use std::os::unix::fs::PermissionsExt;
            let p = pgdata.join(name);
            std::fs::write(&p, text).expect("write");
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
            std::os::unix::fs::chown(&p, Some(uid), Some(gid)).expect("chown");
        };
        write("server.crt", &certs.server_pem, 0o644);
        write("server.key", &certs.server_key_pem, 0o600);
        write(
            "pg_hba.conf",
            "local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostnossl all all 127.0.0.1/32 reject\n",
            0o600,
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let cluster = Cluster { bin, data, port };
        cluster.pg_ctl("start");
        Some(cluster)
    }

    fn pgdata(&self) -> PathBuf {
        self.data.path().join("pgdata")
    }

    fn pg_ctl(&self, action: &str) {
        let options = format!(
            "-p {} -k /tmp -c listen_addresses=127.0.0.1 -c ssl=on -c ssl_cert_file=server.crt -c ssl_key_file=server.key",
            self.port
        );
        let mut cmd = as_postgres(&self.bin.join("pg_ctl"));
        cmd.arg("-D").arg(self.pgdata()).arg("-l");
        cmd.arg(self.data.path().join("server.log"));
        cmd.args(["-w", "-m", "fast", "-o", &options, action]);
        run(&mut cmd);
    }

    fn url(&self, host: &str, query: &str) -> String {
        format!("postgres://postgres@{host}:{}/postgres?{query}", self.port)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = as_postgres(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.pgdata())
            .args(["-m", "immediate", "-w", "stop"])
            .output();
    }
}

fn path(p: &str) -> MemoryPath {
    MemoryPath::parse(p).expect("path")
}

/// A write and a read through `store`.
fn use_store(store: &PostgresStore) -> Result<(), claude_memory::StoreError> {
    store.write(&path("/memories/tls.md"), b"secret", WriteMode::Overwrite)?;
    assert_eq!(store.read(&path("/memories/tls.md"), 100)?.data, b"secret");
    Ok(())
}

/// The error's whole chain of sources, in words.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        out.push_str(": ");
        out.push_str(&s.to_string());
        next = s.source();
    }
    out
}

#[test]
fn tls_with_every_sslmode_against_a_server_with_a_test_ca() {
    let certs = certs();
    let Some(cluster) = Cluster::start(&certs) else {
        return;
    };
    let ca_file = cluster.data.path().join("ca.pem");
    std::fs::write(&ca_file, &certs.ca_pem).expect("CA file");
    let ca = ca_file.display();

    // verify-full: the chain and the host name (the certificate names
    // localhost) are checked, with the CA from the URL or from the builder.
    let store = PostgresStore::connect(
        &cluster.url(
            "localhost",
            &format!("sslmode=verify-full&sslrootcert={ca}"),
        ),
        2,
    )
    .expect("verify-full with the test CA");
    use_store(&store).expect("used over TLS");
    let store = PostgresStore::builder(&cluster.url("localhost", "sslmode=verify-full"))
        .ca_certificate_pem(certs.ca_pem.as_bytes())
        .connect()
        .expect("verify-full with the CA given in code");
    use_store(&store).expect("used over TLS");

    // verify-full refuses a name the certificate does not have, and a
    // certificate from another CA.
    let err = PostgresStore::connect(
        &cluster.url(
            "127.0.0.1",
            &format!("sslmode=verify-full&sslrootcert={ca}"),
        ),
        1,
    )
    .expect_err("127.0.0.1 is not in the certificate");
    assert!(matches!(err, PostgresError::Connect(_)), "{err:?}");
    assert!(chain(&err).contains("certificate"), "{}", chain(&err));
    let other = certs_ca_only();
    let err = PostgresStore::builder(&cluster.url("localhost", "sslmode=verify-full"))
        .ca_certificate_pem(other.as_bytes())
        .connect()
        .expect_err("another CA");
    assert!(chain(&err).contains("certificate"), "{}", chain(&err));

    // verify-ca checks the chain only.
    let store = PostgresStore::connect(
        &cluster.url("127.0.0.1", &format!("sslmode=verify-ca&sslrootcert={ca}")),
        1,
    )
    .expect("verify-ca ignores the host name");
    use_store(&store).expect("used over TLS");
    let err = PostgresStore::builder(&cluster.url("127.0.0.1", "sslmode=verify-ca"))
        .ca_certificate_pem(other.as_bytes())
        .connect()
        .expect_err("another CA");
    assert!(chain(&err).contains("certificate"), "{}", chain(&err));

    // require and prefer encrypt without checking; the server refuses
    // plain connections, so disable fails.
    for mode in ["require", "prefer"] {
        let store =
            PostgresStore::connect(&cluster.url("127.0.0.1", &format!("sslmode={mode}")), 1)
                .unwrap_or_else(|e| panic!("{mode}: {}", chain(&e)));
        use_store(&store).expect("used over TLS");
    }
    let err = PostgresStore::connect(&cluster.url("127.0.0.1", "sslmode=disable"), 1)
        .expect_err("the server takes TLS only");
    assert!(chain(&err).contains("no encryption"), "{}", chain(&err));

    let err = PostgresStore::connect(
        &cluster.url(
            "localhost",
            "sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
        ),
        1,
    )
    .expect_err("no such file");
    assert!(matches!(err, PostgresError::Tls(_)), "{err:?}");
}

/// A second CA's certificate, which signed nothing the server has.
fn certs_ca_only() -> String {
    certs().ca_pem
}

#[test]
fn a_server_restart_and_outage_end_in_recovery_or_a_clear_error() {
    let certs = certs();
    let Some(cluster) = Cluster::start(&certs) else {
        return;
    };
    let store = PostgresStore::builder(&cluster.url("127.0.0.1", "sslmode=require"))
        .max_connections(3)
        .connect_timeout(Duration::from_secs(2))
        .checkout_timeout(Duration::from_secs(5))
        .connect()
        .expect("connect");
    use_store(&store).expect("before the restart");

    // A restart: every pooled connection is dead; the next call takes new
    // ones.
    cluster.pg_ctl("restart");
    let start = Instant::now();
    use_store(&store).expect("after the restart");
    assert!(start.elapsed() < Duration::from_secs(10));

    // An outage: a clear error, within the timeouts, not a hang.
    cluster.pg_ctl("stop");
    let start = Instant::now();
    let err = use_store(&store).expect_err("the server is down");
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "{:?}",
        start.elapsed()
    );
    // SPEC §4's unreachable answer, the driver's error as its source.
    let claude_memory::StoreError::Unreachable {
        source: Some(source),
        cause,
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert!(
        matches!(
            cause,
            claude_memory::store::RemoteCause::ConnectionRefused
                | claude_memory::store::RemoteCause::TimedOut { .. }
        ),
        "{cause:?}"
    );
    let pg = source
        .downcast_ref::<PostgresError>()
        .expect("PostgresError");
    assert!(
        matches!(
            pg,
            PostgresError::Connect(_) | PostgresError::ConnectTimeout(_)
        ),
        "{pg:?}"
    );
    assert!(pg.source().is_some());
    // What the model reads while the database is down.
    let tool = claude_memory::MemoryTool::new(store.clone());
    let view = tool.dispatch(&serde_json::json!({"command": "view", "path": "/memories"}));
    assert!(view.is_error);
    let text = view.text().unwrap_or_default();
    assert!(
        text.starts_with("Error: Could not reach the memory store (")
            && text.ends_with(") for /memories"),
        "{text}"
    );

    // Back up: the next call succeeds.
    cluster.pg_ctl("start");
    use_store(&store).expect("after the outage");
}
