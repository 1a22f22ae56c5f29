//! The test suite's manifest (`suite/Cargo.toml`) stays in step with the
//! crate's: every file in `tests/` is one of its tests, and it declares the
//! crate's dependencies and features exactly (a feature or dependency added
//! to one and not the other would make the suite build a different crate
//! from the one users get).

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("suite/ has a parent")
        .to_path_buf()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The text of the manifest's `[name]` section, up to the next section.
fn section<'a>(manifest: &'a str, name: &str) -> &'a str {
    let header = format!("\n[{name}]\n");
    let start = manifest
        .find(&header)
        .unwrap_or_else(|| panic!("no [{name}] section"))
        + header.len();
    let rest = &manifest[start..];
    let end = rest.find("\n[").map_or(rest.len(), |i| i + 1);
    &rest[..end]
}

/// A suite section split at the line after which it adds what the CLI's
/// sources need (`cli/Cargo.toml`'s dependencies, the suite's `cli` feature).
fn without_cli(section: &str) -> (&str, &str) {
    const CLI: &str = "# The CLI's own (cli/Cargo.toml)";
    section
        .find(CLI)
        .map_or((section, ""), |at| (&section[..at], &section[at..]))
}

#[test]
fn every_file_in_tests_is_a_suite_test() {
    let manifest = read(&repo().join("suite/Cargo.toml"));
    let mut missing = Vec::new();
    let mut found = 0;
    for entry in std::fs::read_dir(repo().join("tests")).expect("tests/") {
        let entry = entry.expect("entry");
        let area = entry.file_name().to_string_lossy().into_owned();
        if !entry.path().is_dir() {
            // Tests live in a folder named for what they test.
            missing.push(format!("{area} (move it into an area folder)"));
            continue;
        }
        if entry.path().join("mod.rs").exists() {
            // A support module the tests include, not a test.
            continue;
        }
        for file in std::fs::read_dir(entry.path()).expect("area folder") {
            let name = file
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned();
            if let Some(stem) = name.strip_suffix(".rs") {
                found += 1;
                let declared = format!(
                    "[[test]]\nname = \"{area}_{stem}\"\npath = \"../tests/{area}/{name}\"\n"
                );
                if !manifest.contains(&declared) {
                    missing.push(format!("{area}/{name}"));
                }
            }
        }
    }
    assert!(found > 50, "only {found} test files found");
    assert!(
        missing.is_empty(),
        "tests/ files not declared as [[test]] in suite/Cargo.toml (they would never run): {missing:?}; run `python3 suite/sync-manifest.py`"
    );
}

#[test]
fn dependencies_and_features_mirror_the_crate() {
    let crate_manifest = read(&repo().join("Cargo.toml"));
    let suite = read(&repo().join("suite/Cargo.toml"));
    let cli_manifest = read(&repo().join("cli/Cargo.toml"));
    for name in [
        "dependencies",
        "target.'cfg(unix)'.dependencies",
        "target.'cfg(windows)'.dependencies",
    ] {
        let (suite_section, cli_part) = without_cli(section(&suite, name));
        // What the suite adds for the CLI is the CLI package's own
        // dependency, made optional behind the suite's `cli` feature.
        for line in cli_part.lines().filter(|l| l.contains(" = {")) {
            let plain = line.replace(", optional = true", "");
            assert!(
                cli_manifest.contains(&plain),
                "the suite's CLI dependency {line:?} differs from cli/Cargo.toml's"
            );
        }
        assert_eq!(
            suite_section.trim(),
            section(&crate_manifest, name).trim(),
            "[{name}] differs between Cargo.toml and suite/Cargo.toml: run `python3 suite/sync-manifest.py`"
        );
    }
    let suite_features: String = without_cli(section(&suite, "features"))
        .0
        .lines()
        .skip_while(|l| !l.starts_with("default = "))
        .skip(1)
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(
        suite_features.trim(),
        section(&crate_manifest, "features").trim(),
        "[features] differ between Cargo.toml and suite/Cargo.toml (beyond `default`): run `python3 suite/sync-manifest.py`"
    );
    let version = |m: &str| {
        m.lines()
            .find_map(|l| l.strip_prefix("version = "))
            .map(str::to_owned)
    };
    assert_eq!(
        version(section(&suite, "package")),
        version(section(&crate_manifest, "package")),
        "the suite's version is the crate's (the CLI tests compare --version)"
    );
}

/// The README's first command, `cargo run --example quickstart`, builds
/// the crate with no feature: Cargo unifies the features of every default
/// member a command builds, so a default member that turns features on
/// (the CLI's `sqlite`, `mcp`, `encryption`) would compile rusqlite, rmcp,
/// axum and argon2 into a newcomer's first build.
#[test]
fn the_quickstart_builds_the_crate_with_no_feature() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "tree",
            "--offline",
            "-e",
            "normal,build",
            "--prefix",
            "none",
        ])
        .current_dir(repo())
        .output()
        .expect("cargo tree");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    // The first tree is the root package's: what the quickstart builds.
    let first = text.split("\n\n").next().unwrap_or_default();
    assert!(first.starts_with("claude-memory v"), "{first}");
    let crates: std::collections::BTreeSet<&str> =
        first.lines().filter_map(|l| l.split(' ').next()).collect();
    for heavy in [
        "rusqlite",
        "rmcp",
        "axum",
        "argon2",
        "aes-gcm",
        "reqwest",
        "object_store",
    ] {
        assert!(
            !crates.contains(heavy),
            "{heavy} in the quickstart's build: {crates:?}"
        );
    }
    assert!(crates.len() <= 45, "{} crates: {crates:?}", crates.len());
}
