"""Stopping the worker and beat processes a test started, and its Redis database."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence


def stop_all(procs: Sequence[subprocess.Popen[str]], redis_db: int) -> None:
    """SIGTERM every process (SIGKILL after 30 s), then empty the test's Redis database."""
    import redis

    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
    redis.Redis(host="127.0.0.1", port=6379, db=redis_db).flushdb()
