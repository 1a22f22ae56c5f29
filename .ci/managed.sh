#!/usr/bin/env bash
# Starts the emulator of Anthropic's managed memory stores API
# (tests/managed/emulator.py) on loopback, checks it with the official Python
# SDK (tests/managed/sdk_check.py, anthropic==2.14.0 from PyPI), and exports
# the variables the managed store's tests read.
#
# A developer: `source .ci/managed.sh`, then `cargo test`; CI: sourced from
# .ci/run (under `set -euo pipefail`: a failed step fails the run).
#   MANAGED_PORT (default 55520)
#   MANAGED_DIR: where the emulator's log goes (default /tmp/claude-memory-managed)
# shellcheck source=.ci/servers.sh
declare -F free_port >/dev/null || source "$(dirname "${BASH_SOURCE[0]}")/servers.sh"

MANAGED_PORT="${MANAGED_PORT:-$(free_port)}"
MANAGED_DIR="${MANAGED_DIR:-/tmp/claude-memory-managed}"
MANAGED_KEY=test-key
MANAGED_SDK_VERSION=2.14.0
managed_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mkdir -p "$MANAGED_DIR"

managed_up() {
  curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$MANAGED_PORT/_emulator/health"
}

# The official SDK, at the version sdk_check.py is written against.
if ! python3 -c "import anthropic, sys; sys.exit(anthropic.__version__ != '$MANAGED_SDK_VERSION')" 2>/dev/null; then
  python3 -m pip install --quiet --disable-pip-version-check "anthropic==$MANAGED_SDK_VERSION" >&2
fi
python3 -c "import anthropic; print('anthropic (Python SDK)', anthropic.__version__)"

managed_pid=""
if ! managed_up; then
  nohup python3 "$managed_root/tests/managed/emulator.py" --host 127.0.0.1 --port "$MANAGED_PORT" \
    --api-key "$MANAGED_KEY" >"$MANAGED_DIR/emulator.log" 2>&1 &
  managed_pid=$!
  stop_at_exit kill "$managed_pid"
fi
managed_ready=false
for _ in $(seq 1 60); do
  if managed_up; then
    managed_ready=true
    break
  fi
  # The emulator we started has exited (a port taken, say): stop waiting.
  if [ -n "$managed_pid" ] && ! kill -0 "$managed_pid" 2>/dev/null; then
    break
  fi
  sleep 0.5
done
if [ "$managed_ready" != true ]; then
  echo "managed.sh: the memory stores emulator did not come up on 127.0.0.1:$MANAGED_PORT" >&2
  cat "$MANAGED_DIR/emulator.log" >&2 || true
  return 1
fi

# The emulator, checked by the vendor's own client; a failure fails CI.
echo "== the memory stores emulator, checked by the official SDK"
if ! python3 "$managed_root/tests/managed/sdk_check.py" "http://127.0.0.1:$MANAGED_PORT" "$MANAGED_KEY"; then
  echo "managed.sh: sdk_check.py failed: the emulator disagrees with anthropic==$MANAGED_SDK_VERSION" >&2
  return 1
fi

# What the tests read. The managed tests must run, never skip.
export CLAUDE_MEMORY_TEST_MANAGED_URL="http://127.0.0.1:$MANAGED_PORT"
export CLAUDE_MEMORY_TEST_MANAGED_KEY="$MANAGED_KEY"
export CLAUDE_MEMORY_REQUIRE_MANAGED=1
echo "managed.sh: memory stores emulator on 127.0.0.1:$MANAGED_PORT" >&2
