"""`er worker`'s processes: the writer, and the ingest process it keeps beside it; what
`er status` says of them (heartbeats, batches a killed worker stranded, tasks that
failed in a worker) and `er retry` taking that work again (issue #54).

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

from ._cli import run_er
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


# -- heartbeats, stranded batches, failed tasks (issue #54) ---------------------------------
BEAT_S = 1.0  # the workers' heartbeat interval in these tests (ER_HEARTBEAT_S)


def _until(check: Any, timeout: float, every: float = 0.05) -> Any:
    """``check()`` once it is truthy; AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found or time.monotonic() > deadline:
            assert found, f"not within {timeout} s"
            return found
        time.sleep(every)


def _er(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_er(env, *args, timeout=300)


def _sql(pg_url: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(pg_url.replace("+psycopg", ""), autocommit=True) as conn:
        cursor = conn.execute(query, params)
        return list(cursor.fetchall()) if cursor.description else []


def _running(pg_url: str) -> list[int]:
    return [seq for (seq,) in _sql(pg_url, "SELECT seq FROM batches WHERE status = 'running'")]


@pytest.fixture()
def operated(pg_url: str, falkordb_server: Any, tmp_path: Path) -> Any:
    """ER_ variables (heartbeats every BEAT_S), in-process settings for `er status`'s
    function on the same stores, and the Redis database, emptied after the test."""
    from er.config import Settings
    from er.stores.sql import make_engine, upgrade

    db = own_redis_db()
    env = {**_env(pg_url, falkordb_server, tmp_path, db), "ER_HEARTBEAT_S": str(BEAT_S)}
    engine = make_engine(pg_url)
    upgrade(engine)
    engine.dispose()
    settings = Settings(
        database_url=pg_url, graph_url=env["ER_GRAPH_URL"], data_dir=tmp_path / "data"
    )
    return env, settings, db


def _status(settings: Any, collection: str) -> dict[str, Any]:
    from er.pipeline import run_status

    [row] = run_status(settings, collection, agreement=False)
    return dict(row)


def test_status_names_the_batches_a_killed_worker_stranded_and_retry_takes_them(
    pg_url: str, operated: Any, tmp_path: Path
) -> None:
    """kill -9 of a worker mid-batch: within one heartbeat interval `er status` names
    the batches it left running and the worker; its heartbeat then reads gone. With the
    queue's messages lost too (a Redis without persistence restarted), a new worker
    leaves them stranded until `er retry`, which resolves every record.

    One process takes both queues (``--ingesters 0``), the ingest queue first: every
    batch is stored before the writer steps any, so the kill loses no queued ingest."""
    import redis

    from er.demo import febrl_records

    env, settings, db = operated
    path = tmp_path / "people.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in febrl_records()[:2000]))
    worker = _start(env, "--ingesters", "0")
    procs = [worker]
    try:
        own = _until(lambda: _worker(settings, worker.pid), 60)
        assert own["state"] == "alive" and own["interval_s"] == BEAT_S
        assert own["queues"] == ["celery", "er.cluster"]  # --ingesters 0: both, in one
        queued = _er(env, "ingest", str(path), "--collection", "k", "--id-field", "rec_id",
                     "--batch-size", "50")  # fmt: skip
        assert queued.returncode == 0, queued.stderr
        _until(lambda: _worker(settings, worker.pid).get("last_task") == "er.cluster k", 60)
        running = _stop_mid_batch(pg_url, worker)
        assert _status(settings, "k")["stranded"] == []  # stopped, not dead: it holds the lock
        os.kill(worker.pid, signal.SIGKILL)
        killed = time.monotonic()
        worker.wait(timeout=30)
        stranded = _until(lambda: _status(settings, "k")["stranded"], BEAT_S, every=0.01)
        assert time.monotonic() - killed <= BEAT_S
        assert [s["batch_seq"] for s in stranded] == running
        assert {(s["worker"], s["pid"]) for s in stranded} == {(f"celery@{_host()}", worker.pid)}
        # the heartbeat alone: gone once silent past two intervals
        _until(lambda: _worker(settings, worker.pid)["state"] == "gone", 2 * BEAT_S + 2)
        shown = _er(env, "status", "--collection", "k", "--no-model-check")
        line = " ".join(shown.stdout.split())
        batches = ", ".join(map(str, running))
        assert f"k, stranded: batch{'es' if len(running) > 1 else ''} {batches} marked" in line
        assert f"worker celery@{_host()} (pid {worker.pid} on {_host()}) is gone" in line
        as_json = json.loads(_er(env, "status", "--collection", "k", "--json").stdout)[0]
        assert [s["batch_seq"] for s in as_json["stranded"]] == running

        assert sum(_status(settings, "k")["batches"].values()) == 40  # every batch stored
        redis.Redis(host="127.0.0.1", port=6379, db=db).flushdb()  # the messages lost
        again = _start(env)
        procs.append(again)
        _until(lambda: _worker(settings, again.pid), 60)
        time.sleep(2 * BEAT_S)  # the new worker finds nothing to do by itself
        assert [s["batch_seq"] for s in _status(settings, "k")["stranded"]] == running
        retried = _er(env, "retry", "--collection", "k")
        assert retried.returncode == 0, retried.stderr
        assert f"stranded (worker celery@{_host()} (pid {worker.pid}" in retried.stdout
        done = _until(lambda: _all_done(settings, "k", 2000), 300, every=0.5)
        assert done["stranded"] == [] and _running(pg_url) == []
        assert _worker(settings, again.pid)["state"] == "alive"
    finally:
        stop_all(procs, db)


def _stop_mid_batch(pg_url: str, worker: subprocess.Popen[str]) -> list[int]:
    """SIGSTOP the writer while it has batches marked running; their seqs."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if not _running(pg_url):
            time.sleep(0.01)
            continue
        os.kill(worker.pid, signal.SIGSTOP)
        running = _running(pg_url)
        if running:
            return running
        os.kill(worker.pid, signal.SIGCONT)  # it finished them in between
    raise AssertionError("no batch was ever marked running")


def _host() -> str:
    import socket

    return socket.gethostname()


def _workers(settings: Any) -> list[dict[str, Any]]:
    from er.pipeline import run_workers

    return run_workers(settings)


def _worker(settings: Any, pid: int) -> dict[str, Any]:
    found = [w for w in _workers(settings) if w["pid"] == pid and w["name"].startswith("celery@")]
    return found[-1] if found else {}


def _all_done(settings: Any, collection: str, mentions: int) -> dict[str, Any] | None:
    status = _status(settings, collection)
    done = status["mentions"] == mentions and set(status["batches"]) == {"done"}
    return status if done else None


def test_a_task_that_fails_in_the_worker_shows_in_status_and_retry_takes_it_again(
    pg_url: str, operated: Any, records: Path, tmp_path: Path
) -> None:
    """The issue's queued ingest that failed only in the worker's log: its row and
    reason in `er status`, and once the cause is mended `er retry` stores it."""
    env, settings, db = operated
    worker = _start(env)
    try:
        _ingest(env, records, "t")  # 600 records, 6 batches, done
        conf = "SELECT config -> 'featurizer' FROM collections WHERE name = 't'"
        featurizer = _sql(pg_url, conf)[0][0]
        put = (
            "UPDATE collections SET config = jsonb_set(config, '{featurizer}', %s::jsonb) "
            "WHERE name = 't'"
        )
        # a featurizer key this release does not know (as a newer one might store)
        _sql(pg_url, put, json.dumps({**featurizer, "norm": "l1"}))
        more = tmp_path / "more.jsonl"
        more.write_text(
            "".join(
                json.dumps({"rec_id": f"new-{i}", "given_name": f"ann {i}", "surname": "lee"})
                + "\n"
                for i in range(40)
            )
        )
        queued = _er(env, "ingest", str(more), "--collection", "t")  # no --wait: exit 0
        assert queued.returncode == 0 and "queued 1 batch(es) of t" in queued.stderr
        tasks = _until(lambda: _status(settings, "t")["failed_tasks"]["count"], 60)
        status = _status(settings, "t")
        reason = "ConfigError: featurizer config: unknown key(s) ['norm']."
        assert tasks == 1 and status["failed_tasks"]["last"]["reason"] == reason
        assert status["failed_tasks"]["last"]["task"] == "er.ingest"
        assert status["mentions"] == 600  # nothing of it stored
        shown = " ".join(_er(env, "status", "--collection", "t", "--no-model-check").stdout.split())
        assert "t, failed in a worker: 1 task; the last, er.ingest at" in shown
        assert "unknown key(s) ['norm']. Mend the cause" in shown

        _sql(pg_url, put, json.dumps(featurizer))  # mended
        retried = _er(env, "retry", "--collection", "t")
        assert retried.returncode == 0, retried.stderr
        assert "(er.ingest) queued again; it failed with ConfigError" in retried.stdout
        done = _until(lambda: _all_done(settings, "t", 640), 120, every=0.5)
        assert done["failed_tasks"] == {"count": 0, "last": None}
        assert done["batches"] == {"done": 7}
    finally:
        stop_all([worker], db)
