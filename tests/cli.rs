//! The `claude-memory` binary, run as a user would (feature `cli`).
#![cfg(feature = "cli")]

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime};

fn cli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_claude-memory"))
        .args(args)
        .env_remove("CLAUDE_MEMORY_DIR")
        .output()
        .expect("run claude-memory")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn help_everywhere_and_clear_usage_errors() {
    let o = cli(&["--help"]);
    assert!(o.status.success());
    assert!(stdout(&o).starts_with("claude-memory: operate a Claude memory store"));
    for c in ["serve", "view", "export", "import", "prune", "stats"] {
        let o = cli(&[c, "--help"]);
        assert!(o.status.success(), "{c}");
        assert!(
            stdout(&o).starts_with(&format!("Usage: claude-memory --root DIR {c}")),
            "{c}: {}",
            stdout(&o)
        );
        assert_eq!(stdout(&cli(&["help", c])), stdout(&o));
    }
    let o = cli(&["frobnicate"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        "claude-memory: unknown command `frobnicate`\nRun `claude-memory --help` for usage.\n"
    );
    let o = cli(&["stats"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--root DIR (or CLAUDE_MEMORY_DIR) is required"));
    let o = cli(&["--root", "/tmp/x", "prune", "--older-than", "soon"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--older-than takes an age like 30d, 12h, 45m or 90s, not `soon`"));
    let o = cli(&["--view-limit", "lots", "stats"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn serve_view_stats_export_import_prune() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let root = dir.path().join("mem");
    let root_s = root.to_str().expect("utf8 path");

    let mut child = Command::new(env!("CARGO_BIN_EXE_claude-memory"))
        .args(["--root", root_s, "serve"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("serve");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(concat!(
            "{\"command\":\"create\",\"path\":\"/memories/a.md\",\"file_text\":\"alpha\\n\"}\n",
            "\n",
            "{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"memory\",\"input\":{\"command\":\"create\",\"path\":\"/memories/old/b.md\",\"file_text\":\"beta beta\\n\"}}\n",
        ).as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success());
    assert_eq!(
        stdout(&out),
        "{\"type\":\"tool_result\",\"content\":\"File created successfully at: /memories/a.md\"}\n{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_1\",\"content\":\"File created successfully at: /memories/old/b.md\"}\n"
    );

    let o = cli(&["--root", root_s, "view", "/memories"]);
    assert!(o.status.success());
    assert_eq!(
        stdout(&o),
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n16B\t/memories\n6B\t/memories/a.md\n10B\t/memories/old/\n10B\t/memories/old/b.md\n"
    );
    let o = cli(&[
        "--root",
        root_s,
        "view",
        "/memories/old/b.md",
        "--range",
        "1:-1",
    ]);
    assert_eq!(
        stdout(&o),
        "Here's the content of /memories/old/b.md with line numbers:\n     1\tbeta beta\n"
    );
    let o = cli(&["--root", root_s, "view", "/memories/nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "The path /memories/nope does not exist. Please provide a valid path.\n"
    );

    let o = cli(&["--root", root_s, "stats"]);
    assert!(o.status.success());
    let s = stdout(&o);
    assert!(
        s.starts_with("files: 2\nbytes: 16 (16B)\nlargest: /memories/old/b.md (10B)\noldest: "),
        "{s}"
    );

    let export = dir.path().join("backup.json");
    let o = cli(&[
        "--root",
        root_s,
        "export",
        "--output",
        export.to_str().expect("utf8"),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let copy = dir.path().join("copy");
    let copy_s = copy.to_str().expect("utf8");
    let o = cli(&["--root", copy_s, "import", export.to_str().expect("utf8")]);
    assert_eq!(stdout(&o), "imported 2 files\n");
    assert_eq!(
        std::fs::read_to_string(copy.join("old/b.md")).expect("copied"),
        "beta beta\n"
    );
    let o = cli(&["--root", copy_s, "import", export.to_str().expect("utf8")]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "importing over existing files is refused"
    );
    assert!(
        cli(&[
            "--root",
            copy_s,
            "import",
            export.to_str().expect("utf8"),
            "--overwrite"
        ])
        .status
        .success()
    );

    let f = std::fs::File::options()
        .write(true)
        .open(root.join("old/b.md"))
        .expect("open");
    f.set_modified(SystemTime::now() - Duration::from_secs(40 * 86_400))
        .expect("backdate");
    let o = cli(&["--root", root_s, "prune", "--older-than", "30d"]);
    assert!(o.status.success());
    assert_eq!(
        stdout(&o),
        "removed /memories/old/b.md (10B)\nremoved empty directory /memories/old\nremoved 1 files (10B) and 1 directories; kept 1 files\n"
    );
    assert!(root.join("a.md").exists() && !root.join("old").exists());
}
