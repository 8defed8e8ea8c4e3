"""`er worker`'s processes: the writer, and the ingest process it keeps beside it.

Oracles: the broker's own view of who consumes which queue (Celery's remote control,
answered by each worker process over real Redis) and the operating system's process
table; the batches stored and resolved in PostgreSQL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from er.cli.service import INGEST_NICENESS

from ._procs import own_redis_db, stop_all

pytestmark = [pytest.mark.celery, pytest.mark.postgres, pytest.mark.graph, pytest.mark.slow]


def _env(pg_url: str, falkordb_server: Any, tmp_path: Path, db: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ER_")}
    graph = f"falkordb://:{falkordb_server.password}@127.0.0.1:{falkordb_server.port}"
    return {
        **env,
        "ER_DATABASE_URL": pg_url,
        "ER_GRAPH_URL": graph,
        "ER_DATA_DIR": str(tmp_path / "data"),
        "ER_BROKER_URL": f"redis://127.0.0.1:6379/{db}",
    }


def _start(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "er.cli", "worker", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def _queues(broker: str, expect: int, timeout: float = 60.0) -> dict[int, set[str]]:
    """pid -> queue names of each worker process answering on ``broker``, once
    ``expect`` of them answer."""
    from celery import Celery

    app = Celery(broker=broker)
    deadline = time.monotonic() + timeout
    found: dict[int, set[str]] = {}
    while time.monotonic() < deadline and len(found) < expect:
        replies = app.control.inspect(timeout=2.0).active_queues() or {}
        stats = app.control.inspect(timeout=2.0).stats() or {}
        found = {
            int(stats[node]["pid"]): {q["name"] for q in queues}
            for node, queues in replies.items()
            if node in stats
        }
    return found


def _ingest(env: dict[str, str], path: Path, collection: str) -> dict[str, Any]:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "er.cli", "ingest", str(path)),
            *("--collection", collection, "--id-field", "rec_id", "--batch-size", "100"),
            *("--wait", "--timeout", "300", "--json"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.fixture()
def records(tmp_path: Path) -> Path:
    from er.demo import febrl_records

    path = tmp_path / "people.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in febrl_records()[:600]))
    return path


def _ingesters(worker: subprocess.Popen[str]) -> list[psutil.Process]:
    children = psutil.Process(worker.pid).children()
    return [c for c in children if "--ingest-only" in c.cmdline()]


def test_ingest_runs_beside_the_writer_and_dies_with_it(
    pg_url: str, falkordb_server: Any, tmp_path: Path, records: Path
) -> None:
    db = own_redis_db()
    env = _env(pg_url, falkordb_server, tmp_path, db)
    worker = _start(env)
    try:
        queues = _queues(env["ER_BROKER_URL"], expect=2)
        (child,) = _ingesters(worker)
        # the writer takes only the writers' queue, its ingest process only ingest
        assert queues == {worker.pid: {"er.cluster"}, child.pid: {"celery"}}
        # and yields the processor to the writer, the collection's bottleneck
        assert child.nice() == psutil.Process(worker.pid).nice() + INGEST_NICENESS
        done = _ingest(env, records, "w")
        assert done["accepted"] == 600 and done["batch_seqs"] == list(range(1, 7))
        status = json.loads(
            subprocess.run(
                [sys.executable, "-m", "er.cli", "status", "--collection", "w", "--json"],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            ).stdout
        )[0]
        assert status["batches"] == {"done": 6} and status["mentions"] == 600
        # killed outright, the writer takes its ingest process with it
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=30)
        gone, alive = psutil.wait_procs([child], timeout=60)
        assert gone and not alive
    finally:
        stop_all([worker], db)


def test_a_warm_stop_ends_both_and_no_ingesters_is_one_process(
    pg_url: str, falkordb_server: Any, tmp_path: Path
) -> None:
    db = own_redis_db()
    env = _env(pg_url, falkordb_server, tmp_path, db)
    worker = _start(env, "--ingesters", "2")
    try:
        queues = _queues(env["ER_BROKER_URL"], expect=3)
        children = _ingesters(worker)
        assert len(children) == 2 and queues[worker.pid] == {"er.cluster"}
        assert all(queues[c.pid] == {"celery"} for c in children)
        worker.terminate()
        assert worker.wait(timeout=60) == 0
        gone, alive = psutil.wait_procs(children, timeout=60)
        assert len(gone) == 2 and not alive
        alone = _start(env, "--ingesters", "0", "--collection", "x")
        try:
            queues = _queues(env["ER_BROKER_URL"], expect=1)
            assert queues == {alone.pid: {"celery", "er.cluster", "er.x"}}
            assert _ingesters(alone) == []
        finally:
            stop_all([alone], db)
    finally:
        stop_all([worker], db)
