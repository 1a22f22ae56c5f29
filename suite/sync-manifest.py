#!/usr/bin/env python3
"""Lists every file of ../tests as a [[test]], and copies the crate's [dependencies], target dependencies and [features]
from ../Cargo.toml into suite/Cargo.toml (keeping the suite's `default`),
and the crate's version, so the suite builds exactly the crate users get.
tests/project/suite_manifest.rs fails when they drift; run this to fix it:

    python3 suite/sync-manifest.py
"""
import pathlib
import re

here = pathlib.Path(__file__).resolve().parent
crate = (here.parent / "Cargo.toml").read_text()
suite_path = here / "Cargo.toml"
suite = suite_path.read_text()


def span(text, name):
    """(start, end) of the body of section [name], up to the next section."""
    m = re.search(r"^\[" + re.escape(name) + r"\]\n", text, re.M)
    if not m:
        raise SystemExit(f"no [{name}] section")
    nxt = re.search(r"^\[", text[m.end():], re.M)
    end = m.end() + nxt.start() if nxt else len(text)
    return m.end(), end


# What the suite adds for the CLI (cli/Cargo.toml), kept after this line.
CLI = "# The CLI's own (cli/Cargo.toml): the suite builds its sources too.\n"


def cli_tail(body):
    at = body.find(CLI)
    return "\n" + body[at:].rstrip("\n") + "\n\n" if at >= 0 else ""


for name in ["dependencies", "target.'cfg(unix)'.dependencies", "target.'cfg(windows)'.dependencies"]:
    cs, ce = span(crate, name)
    ss, se = span(suite, name)
    body = crate[cs:ce].rstrip("\n") + "\n" + cli_tail(suite[ss:se])
    suite = suite[:ss] + body + suite[se:]

cs, ce = span(crate, "features")
ss, se = span(suite, "features")
features = suite[ss:se]
default = re.search(r"^default = .*\n", features, re.M)
head = features[: default.end()]
suite = suite[:ss] + head + crate[cs:ce].rstrip("\n") + "\n" + cli_tail(features) + suite[se:]

version = re.search(r'^\[package\]\n(?:.*\n)*?version = "([^"]+)"', crate, re.M).group(1)
suite = re.sub(r'^(version = )"[^"]+"', lambda m: f'{m.group(1)}"{version}"', suite, count=1, flags=re.M)
# One [[test]] per file in ../tests/AREA/, named AREA_FILE; a folder
# holding mod.rs is a support module the tests include, not a test.
# project/servers.rs prints its own report, so it runs without the harness.
tests = sorted(
    f"{p.parent.name}/{p.stem}"
    for p in (here.parent / "tests").glob("*/*.rs")
    if not (p.parent / "mod.rs").exists()
)
block = "".join(
    f'[[test]]\nname = "{t.replace("/", "_")}"\npath = "../tests/{t}.rs"\n'
    + ("harness = false\n" if t == "project/servers" else "")
    for t in tests
)
start = suite.index("[[test]]\n")
end = suite.index("\n[dependencies]\n")
suite = suite[:start] + block + suite[end:]
suite_path.write_text(suite)
print("suite/Cargo.toml is in step with Cargo.toml")
