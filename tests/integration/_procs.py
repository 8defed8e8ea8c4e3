"""Stopping the worker and beat processes a test started, and its Redis database.

Redis databases: 0 is a user's (the README's broker), 1-13 are drawn at random by the
tests that start workers (:func:`own_redis_db`), 14 is the quick start test's alone and
15 is a broker no worker listens on (test_ingest_checks).
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Sequence

QUICKSTART_REDIS_DB = 14


def own_redis_db() -> int:
    """A Redis database for one test's broker, 1 to 13: no other test's, with luck."""
    return 1 + uuid.uuid4().int % 13


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
