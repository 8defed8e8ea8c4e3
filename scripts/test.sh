#!/usr/bin/env bash
# Set up and run er's whole test suite against real services on this machine.
# Creates .venv if needed, installs er with its test extras, makes sure PostgreSQL
# and Redis answer (starting the machine's own services if they are down), runs pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[test]"

if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  echo "PostgreSQL is not answering on 127.0.0.1:5432; starting the local cluster" >&2
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start
fi
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  echo "Redis is not answering on 127.0.0.1:6379; starting it" >&2
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no
fi

# Neo4j's own Cypher parser for the offline statement check (pinned by package-lock.json).
npm ci --prefix tools/cypherlint --no-audit --no-fund --loglevel=error >/dev/null

# Headless Chromium opens the HTML evaluation reports in the browser test.
if ! command -v chromium >/dev/null 2>&1; then
  echo "installing Debian's chromium for the report browser test" >&2
  (apt-get install -y -q chromium >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; })
fi

exec .venv/bin/python -m pytest "$@"
