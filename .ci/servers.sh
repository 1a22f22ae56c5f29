#!/usr/bin/env bash
# Sourced first by .ci/run and .ci/with-services: free loopback ports for
# the servers the suite starts, and one EXIT trap that stops every server
# started, so two runs in a row (or beside a developer's own servers on
# the old fixed ports) never collide.

ci_stops=()

# A loopback port no one listens on now.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Runs "$@" when the shell exits (last registered, first run).
stop_at_exit() {
  ci_stops=("$(printf '%q ' "$@")" "${ci_stops[@]}")
}

ci_stop_all() {
  local cmd
  for cmd in "${ci_stops[@]}"; do
    eval "$cmd" >/dev/null 2>&1 || true
  done
}
trap ci_stop_all EXIT
