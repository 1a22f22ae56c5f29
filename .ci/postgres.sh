# Sourced by .ci/run: installs PostgreSQL from the system's packages if
# needed, starts a throwaway cluster on a local port, creates a database and
# exports its URL for the tests (CLAUDE_MEMORY_TEST_POSTGRES_URL).
# tests/stores/postgres_cluster.rs starts clusters of its own from the same
# binaries (initdb, pg_ctl under runuser -u postgres, on free ports) for the
# TLS and restart tests; CLAUDE_MEMORY_REQUIRE_POSTGRES makes them run.
# shellcheck source=.ci/servers.sh
declare -F free_port >/dev/null || source "$(dirname "${BASH_SOURCE[0]}")/servers.sh"
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  echo "== installing PostgreSQL"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
PG_BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
PG_PORT=${PG_PORT:-$(free_port)}
PG_DATA=$(mktemp -d /tmp/claude-memory-pg.XXXXXX)
chown postgres "$PG_DATA"
runuser -u postgres -- "$PG_BIN/initdb" -D "$PG_DATA" -A trust -U postgres >/dev/null
runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_DATA/server.log" -w \
  -o "-p $PG_PORT -k /tmp -c listen_addresses=127.0.0.1 -c fsync=on" start >/dev/null
stop_postgres() {
  runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$1" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$1"
}
stop_at_exit stop_postgres "$PG_DATA"
runuser -u postgres -- "$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U postgres claude_memory_test
export CLAUDE_MEMORY_TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$PG_PORT/claude_memory_test"
export CLAUDE_MEMORY_REQUIRE_POSTGRES=1
echo "== PostgreSQL ready at $CLAUDE_MEMORY_TEST_POSTGRES_URL"
