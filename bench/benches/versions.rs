//! 0.1 beside today's crate, in one run: `cargo bench -p claude-memory-bench --bench versions`.
//!
//! Issue 23's table: the same workload (`versions/driver.rs`), built in
//! release mode against 0.1 (commit `bf8ed8e`, extracted with `git
//! archive` into `target/versions/`) and against this checkout, both with
//! the same compiler, profile and dependency builds (`--offline`: no
//! network). The two drivers run alternately, three times each; each row
//! is the best of all rounds (each round the best of 5 runs of 1,000 or
//! 100 calls), so the next slowdown shows in review.
//!
//! Needs `git` and `tar`, and this checkout's history (a shallow clone
//! without `bf8ed8e` prints why it skipped).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The 0.1 release the workload is compared against.
const BASELINE: &str = "bf8ed8e";

fn run(cmd: &mut Command) -> Result<Vec<u8>, String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(out.stdout)
}

/// Extracts `BASELINE`'s source into `dir` (once).
fn extract(repo: &Path, dir: &Path) -> Result<(), String> {
    if dir.join("Cargo.toml").exists() {
        return Ok(());
    }
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let tar =
        run(Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(["archive", "--format=tar", BASELINE]))?;
    let mut child = Command::new("tar")
        .arg("-x")
        .arg("-C")
        .arg(dir)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    std::io::Write::write_all(child.stdin.as_mut().ok_or("no stdin")?, &tar)
        .map_err(|e| e.to_string())?;
    if !child.wait().map_err(|e| e.to_string())?.success() {
        return Err("tar failed".into());
    }
    Ok(())
}

/// Writes a driver project for the crate at `krate` and builds it; returns
/// the binary.
fn driver(out: &Path, name: &str, krate: &Path, lock: &Path) -> Result<PathBuf, String> {
    let dir = out.join(name);
    let io = |e: std::io::Error| e.to_string();
    std::fs::create_dir_all(dir.join("src")).map_err(io)?;
    let manifest = format!(
        "[package]\nname = \"{name}\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
         [dependencies]\nclaude-memory = {{ path = {krate:?} }}\nserde_json = \"1\"\n\n\
         [profile.release]\ndebug = \"line-tables-only\"\n\n[workspace]\n"
    );
    std::fs::write(dir.join("Cargo.toml"), manifest).map_err(io)?;
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("versions/driver.rs");
    std::fs::copy(source, dir.join("src/main.rs")).map_err(io)?;
    if !dir.join("Cargo.lock").exists() {
        std::fs::copy(lock, dir.join("Cargo.lock")).map_err(io)?;
    }
    run(Command::new(env!("CARGO"))
        .args([
            "build",
            "--release",
            "--offline",
            "--quiet",
            "--manifest-path",
        ])
        .arg(dir.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", out.join("target"))
        .env_remove("RUSTFLAGS"))?;
    Ok(out.join("target/release").join(name))
}

/// Each row's best µs per call over `rounds` runs of `bin`.
fn measure(bin: &Path, into: &mut BTreeMap<String, f64>) -> Result<Vec<String>, String> {
    let text = String::from_utf8(run(&mut Command::new(bin))?).map_err(|e| e.to_string())?;
    let mut order = Vec::new();
    for line in text.lines() {
        let Some((row, us)) = line.split_once('\t') else {
            continue;
        };
        let us: f64 = us.parse().map_err(|_| format!("bad line {line:?}"))?;
        let best = into.entry(row.to_owned()).or_insert(f64::MAX);
        *best = best.min(us);
        order.push(row.to_owned());
    }
    Ok(order)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the bench crate sits in the repository")
        .to_path_buf();
    let out = repo.join("target/versions");
    let old_src = out.join("src-0.1");
    let built = extract(&repo, &old_src).and_then(|()| {
        Ok((
            driver(&out, "driver-0-1", &old_src, &old_src.join("Cargo.lock"))?,
            driver(&out, "driver-current", &repo, &repo.join("Cargo.lock"))?,
        ))
    });
    let (old, new) = match built {
        Ok(bins) => bins,
        Err(e) => {
            println!("skipped: cannot build 0.1 ({BASELINE}) beside this checkout: {e}");
            return;
        }
    };
    let (mut a, mut b) = (BTreeMap::new(), BTreeMap::new());
    let mut order = Vec::new();
    for _ in 0..3 {
        order = measure(&old, &mut a).expect("the 0.1 driver runs");
        measure(&new, &mut b).expect("today's driver runs");
    }
    println!("| µs per call | 0.1 ({BASELINE}) | this checkout | change |");
    println!("|---|---|---|---|");
    for row in order {
        let (x, y) = (a[&row], b[&row]);
        println!(
            "| {row} | {x:.2} | {y:.2} | {:+.0}% |",
            (y / x - 1.0) * 100.0
        );
    }
}
