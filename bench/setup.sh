#!/usr/bin/env bash
# Create bench/.venv (bench-only, git-ignored) with duly and every peer, from PyPI. Idempotent.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
VENV="$HERE/.venv"
PY="${BENCH_PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
# The PostgreSQL peers (procrastinate, pgqueuer) and duly/postgres run in their own database.
if command -v psql >/dev/null 2>&1; then
  psql -h 127.0.0.1 -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'bench'" \
    | grep -q 1 || psql -h 127.0.0.1 -U postgres -d postgres -qc "CREATE DATABASE bench"
fi
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
STAMP="$VENV/.bench-installed"
REQ="$HERE/requirements.txt"
want="$(cat "$REQ"; stat -c %Y "$ROOT/pyproject.toml")"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  echo "bench/.venv up to date"
  exit 0
fi
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q -e "$ROOT[all]"
# Peers: each installed separately so one failure does not block the others; failures are
# recorded in bench/.venv/install-failures.txt and shown in the table by run.py.
: > "$VENV/install-failures.txt"
while IFS= read -r spec; do
  case "$spec" in ''|'#'*) continue;; esac
  if ! "$VENV/bin/pip" install -q "$spec" >"$VENV/pip-last.log" 2>&1; then
    echo "install failed: $spec" >&2
    { echo "$spec"; tail -n 3 "$VENV/pip-last.log"; } >> "$VENV/install-failures.txt"
  fi
done < "$REQ"
# make sure duly's own deps were not downgraded by a peer's pins
"$VENV/bin/pip" install -q -e "$ROOT[all]"
"$VENV/bin/pip" check || true
printf '%s' "$want" > "$STAMP"
echo "bench/.venv ready"
