#!/usr/bin/env bash
# Installs and starts the object storage servers the cloud store's tests
# run against, on loopback: moto's S3 server (PyPI) and Azurite (npm),
# creates their buckets, and exports the variables the tests read.
#
# A developer: `source .ci/cloud.sh` (then `cargo test --features cloud-tests`
# style commands below); CI: sourced from .ci/run.
#   S3_PORT, AZURITE_PORT (default: free ports; .ci/servers.sh first)
#   CLOUD_DIR: where the servers' files go (default /tmp/claude-memory-cloud)
# shellcheck source=.ci/servers.sh
declare -F free_port >/dev/null || source "$(dirname "${BASH_SOURCE[0]}")/servers.sh"

S3_PORT="${S3_PORT:-$(free_port)}"
AZURITE_PORT="${AZURITE_PORT:-$(free_port)}"
CLOUD_DIR="${CLOUD_DIR:-/tmp/claude-memory-cloud}"
mkdir -p "$CLOUD_DIR"

cloud_wait() { # url
  for _ in $(seq 1 120); do
    if curl -s -o /dev/null "$1"; then return 0; fi
    sleep 0.5
  done
  echo "cloud.sh: $1 did not come up" >&2
  return 1
}

if ! python3 -c 'import moto.server' 2>/dev/null; then
  python3 -m pip install --quiet 'moto[server]' >&2
fi
if [ ! -x "$CLOUD_DIR/node_modules/.bin/azurite-blob" ]; then
  (cd "$CLOUD_DIR" && npm install --silent --no-audit --no-fund azurite >&2)
fi

if ! curl -s -o /dev/null "http://127.0.0.1:$S3_PORT/"; then
  nohup python3 "$(dirname "${BASH_SOURCE[0]}")/moto_server.py" 127.0.0.1 "$S3_PORT" >"$CLOUD_DIR/moto.log" 2>&1 &
  stop_at_exit kill "$!"
fi
# Azurite closes idle connections after 5 s by default; a request sent on
# a pooled connection as it closes is lost without retry (a PUT is not
# idempotent). Real services keep idle connections longer than reqwest's
# 90 s pool, so the emulator does too.
if ! curl -s -o /dev/null "http://127.0.0.1:$AZURITE_PORT/"; then
  nohup "$CLOUD_DIR/node_modules/.bin/azurite-blob" --blobHost 127.0.0.1 --blobPort "$AZURITE_PORT" \
    --location "$CLOUD_DIR/azurite" --skipApiVersionCheck --loose --blobKeepAliveTimeout 300 >"$CLOUD_DIR/azurite.log" 2>&1 &
  stop_at_exit kill "$!"
fi
cloud_wait "http://127.0.0.1:$S3_PORT/"
cloud_wait "http://127.0.0.1:$AZURITE_PORT/"

# The bucket and the container the tests use.
curl -s -o /dev/null -X PUT "http://127.0.0.1:$S3_PORT/claude-memory-test"
python3 - "$AZURITE_PORT" <<'PY'
import base64, hashlib, hmac, sys, urllib.request, email.utils
port = sys.argv[1]
account = "devstoreaccount1"
key = base64.b64decode("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==")
date = email.utils.formatdate(usegmt=True)
headers = f"x-ms-date:{date}\nx-ms-version:2021-08-06"
resource = f"/{account}/{account}/claude-memory-test\nrestype:container"
to_sign = f"PUT\n\n\n\n\n\n\n\n\n\n\n\n{headers}\n{resource}"
sig = base64.b64encode(hmac.new(key, to_sign.encode(), hashlib.sha256).digest()).decode()
req = urllib.request.Request(
    f"http://127.0.0.1:{port}/{account}/claude-memory-test?restype=container", method="PUT",
    headers={"x-ms-date": date, "x-ms-version": "2021-08-06",
             "Authorization": f"SharedKey {account}:{sig}", "Content-Length": "0"})
try:
    urllib.request.urlopen(req)
except urllib.error.HTTPError as e:
    if e.code != 409:  # already there
        raise
PY

# What the tests (and `claude-memory --store s3://…` / `az://…`) read.
export CLAUDE_MEMORY_TEST_S3_ENDPOINT="http://127.0.0.1:$S3_PORT"
export CLAUDE_MEMORY_TEST_AZURE_ENDPOINT="http://127.0.0.1:$AZURITE_PORT/devstoreaccount1"
# In CI the cloud tests must run, never skip.
if [ "${CI:-}" = true ]; then export CLAUDE_MEMORY_REQUIRE_CLOUD=1; fi
echo "cloud.sh: moto S3 on 127.0.0.1:$S3_PORT, Azurite blob on 127.0.0.1:$AZURITE_PORT" >&2
