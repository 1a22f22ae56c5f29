# The filesystem store on other platforms, from Linux (sourced by .ci/run):
# clippy for Windows (MinGW) and macOS, then the library's, conformance and
# Windows tests built for Windows and run under Wine.
#
# MinGW is needed even for clippy: the CLI's bundled SQLite is compiled by a
# build script. No macOS SDK is available, so for the macOS check SQLite is
# declared as linked (clippy never links). Set CLAUDE_MEMORY_SKIP_WINE=1 to
# skip the Wine run (the clippy checks still run).
set -euo pipefail

rustup target add x86_64-pc-windows-gnu x86_64-apple-darwin >/dev/null
if ! command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 || ! [ -x /usr/lib/wine/wine64 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    gcc-mingw-w64-x86-64 wine64 >/dev/null
fi

echo "== cargo clippy --target x86_64-pc-windows-gnu (library, examples, CLI, tests)"
cargo clippy --target x86_64-pc-windows-gnu -p claude-memory --all-targets --features tokio,tracing -- -D warnings
cargo clippy --target x86_64-pc-windows-gnu -p claude-memory-cli -- -D warnings
cargo clippy --target x86_64-pc-windows-gnu -p claude-memory-suite --all-targets \
  --no-default-features --features cli,tokio,tracing,conformance -- -D warnings
echo "== cargo clippy --target x86_64-apple-darwin (library, examples, CLI)"
LIBSQLITE3_SYS_USE_PKG_CONFIG=1 SQLITE3_LIB_DIR=/nonexistent \
  cargo clippy --target x86_64-apple-darwin -p claude-memory --lib --examples --features tokio -- -D warnings
# The CLI's `dream` brings reqwest on rustls with ring, whose C and
# assembly need a macOS toolchain this machine has not: checked without it.
LIBSQLITE3_SYS_USE_PKG_CONFIG=1 SQLITE3_LIB_DIR=/nonexistent \
  cargo clippy --target x86_64-apple-darwin -p claude-memory-cli --no-default-features \
  --features sqlite,mcp,ui -- -D warnings

if [ "${CLAUDE_MEMORY_SKIP_WINE:-0}" = 1 ]; then
  echo "== Wine run skipped (CLAUDE_MEMORY_SKIP_WINE=1)"
  return 0
fi
echo "== Windows tests under Wine (library, conformance, tests/stores/windows.rs)"
export WINEDEBUG=-all WINEPREFIX="${WINEPREFIX:-$PWD/target/wineprefix}"
built=$(cargo test --target x86_64-pc-windows-gnu -p claude-memory-suite --no-default-features \
  --features conformance --no-run --lib --test stores_conformance --test stores_windows \
  --message-format=json 2>/dev/null | sed -n 's/.*"executable":"\([^"]*\.exe\)".*/\1/p')
if [ -z "$built" ]; then
  echo "no Windows test executables were built" >&2
  exit 1
fi
/usr/lib/wine/wine64 cmd /c exit 0 >/dev/null 2>&1 || true # creates the prefix
# Wine 8 lacks bcryptprimitives.dll (ProcessPrng), which Rust's std imports.
x86_64-w64-mingw32-gcc -shared -O2 -o "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll" \
  .ci/wine/bcryptprimitives.c -ladvapi32
# One persistent wineserver for every run: by default it exits a moment
# after its last client, and a test started in that moment dies with
# "wine client error:0: recvmsg: Connection reset by peer" (CI saw it).
/usr/lib/wine/wineserver -k >/dev/null 2>&1 || true
/usr/lib/wine/wineserver -p
trap '/usr/lib/wine/wineserver -k >/dev/null 2>&1 || true' EXIT
for exe in $built; do
  echo "-- $(basename "$exe")"
  timeout 600 /usr/lib/wine/wine64 "$exe"
done
/usr/lib/wine/wineserver -k >/dev/null 2>&1 || true
trap - EXIT
