"""A worker whose embedded graph server is killed starts it again (issue #54).

The worker's entry points run in this process, as in a worker: ``run_ingest`` then
``run_cluster`` on the cached stores (er.pipeline.stores), with the embedded FalkorDB
this process owns. The server is SIGKILLed between batches and during one; the next
run finds it dead, starts it again from its append-only log and resolves the batch.
Oracles: the server's process (a new pid), the batch rows, and the graph itself: every
mention node once with one current entity, nothing acknowledged lost.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.postgres, pytest.mark.graph, pytest.mark.slow]


def _server_pid(data_dir: Path) -> int:
    owner = json.loads((data_dir / "falkordb" / "server.lock").read_text() or "{}")
    return int(owner["server_pid"])


def _gone(pid: int, timeout: float = 30.0) -> None:
    """Wait until ``pid`` is dead or a zombie (its parent reaps it later)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return
        except OSError:
            return
        time.sleep(0.02)
    raise AssertionError(f"process {pid} did not die")


def test_a_killed_graph_server_is_started_again_and_loses_nothing(
    empty_pg_url: str, tmp_path: Path
) -> None:
    from er.config import Settings
    from er.demo import febrl_records
    from er.exceptions import TransientStoreError
    from er.pipeline import close_stores, run_cluster, run_ingest
    from er.pipeline.stores import _stores
    from er.stores.sql import upgrade

    data = tmp_path / "data"
    settings = Settings(database_url=empty_pg_url, graph_url="falkordb+embedded://", data_dir=data)
    records = febrl_records()[:600]
    try:
        engine, _ = _stores(settings)
        upgrade(engine)

        def batch(part: list[dict[str, Any]]) -> list[dict[str, Any]]:
            run_ingest(settings, collection="g", records=part, id_field="rec_id")
            return run_cluster(settings, "g", flush=False)

        assert [r["batch_seq"] for r in batch(records[:200])] == [1]
        first = _server_pid(data)
        os.kill(first, signal.SIGKILL)  # between batches: the next one finds it dead
        _gone(first)
        assert [r["batch_seq"] for r in batch(records[200:400])] == [2]
        second = _server_pid(data)
        assert second != first

        # during a batch: the task fails as transient (its retry resolves the batch)
        run_ingest(settings, collection="g", records=records[400:], id_field="rec_id")
        killer = threading.Timer(0.3, os.kill, (second, signal.SIGKILL))
        killer.start()
        try:
            reports = run_cluster(settings, "g", flush=False)
        except TransientStoreError:
            reports = []
        killer.join()
        _gone(second)
        if not reports:  # the kill came mid-batch: as the task's retry would
            reports = run_cluster(settings, "g", flush=False)
        assert [r["batch_seq"] for r in reports] == [3] and "error" not in reports[0]
        # the kill may land after the batch's last write (a loaded machine): then the
        # next task, here the stores asked for again, finds the server dead
        deadline = time.monotonic() + 10
        while _server_pid(data) in (first, second) and time.monotonic() < deadline:
            _stores(settings)
            time.sleep(0.2)
        assert _server_pid(data) not in (first, second)

        _, graph = _stores(settings)
        members = graph.memberships("g")
        assert len(members.mentions) == len(set(members.mentions.tolist())) == 600
    finally:
        close_stores()


def test_a_server_killed_while_its_schema_is_ensured_is_started_again(
    empty_pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first open of a worker's stores: the server starts, answers, then dies (a
    real SIGKILL) while the graph's indexes are ensured. That open fails; the next one
    starts a new server (it once found the data dir locked by the dead server's owner,
    itself, and every later task failed for good)."""
    from er.config import Settings
    from er.exceptions import TransientStoreError
    from er.pipeline import close_stores
    from er.pipeline.stores import _stores
    from er.stores.graph._falkordb import FalkorDBStore

    data = tmp_path / "data"
    settings = Settings(database_url=empty_pg_url, graph_url="falkordb+embedded://", data_dir=data)
    ensure = FalkorDBStore.init_schema
    killed: list[int] = []

    def dies_first(self: FalkorDBStore) -> None:
        if not killed:
            killed.append(_server_pid(data))
            os.kill(killed[0], signal.SIGKILL)
            _gone(killed[0])
        ensure(self)

    monkeypatch.setattr(FalkorDBStore, "init_schema", dies_first)
    try:
        with pytest.raises(TransientStoreError):  # the task would retry
            _stores(settings)
        _, graph = _stores(settings)
        assert _server_pid(data) != killed[0]
        assert graph.memberships("g").mentions.size == 0  # it answers
    finally:
        close_stores()


def _undecoded(client: Any) -> Any:
    """A connection to the same server as ``client`` that returns bytes (a DUMP is
    binary; the graph client decodes every reply)."""
    import redis

    pool = client.connection.connection_pool
    kwargs = {**pool.connection_kwargs, "decode_responses": False}
    return redis.Redis(
        connection_pool=redis.ConnectionPool(connection_class=pool.connection_class, **kwargs)
    )


def test_a_graph_that_lost_its_last_writes_catches_up(
    empty_pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A graph that lost the writes of batches done since the writer's checkpoint (a
    server's unsynced tail, a backup restored) gets them again from the next writer:
    the graph as of every batch, the mentions and the batch rows equal a run that lost
    nothing (a second collection of the same records). A graph behind the checkpoint
    itself can no longer be caught up, and the writer says so in one line."""
    from er.config import Settings
    from er.demo import febrl_records
    from er.exceptions import ERError
    from er.pipeline import close_stores, lane, run_cluster, run_ingest
    from er.pipeline.stores import _stores
    from er.stores.sql import upgrade

    from .test_pipeline import _snapshot

    data = tmp_path / "data"
    settings = Settings(database_url=empty_pg_url, graph_url="falkordb+embedded://", data_dir=data)
    records = febrl_records()[:800]
    parts = [records[start : start + 200] for start in range(0, 800, 200)]
    # checkpoints only where this test takes them: the first batch's (it trains the
    # model) and a run's end with flush
    monkeypatch.setattr(lane, "CHECKPOINT_WORK", 1e9)

    def resolve(name: str, batches: list[list[dict[str, Any]]], flush: bool) -> None:
        for part in batches:
            run_ingest(settings, collection=name, records=part, id_field="rec_id")
            run_cluster(settings, name, flush=flush)

    try:
        engine, store = _stores(settings)
        upgrade(engine)
        resolve("reference", parts, flush=True)
        expected = _snapshot(settings, "reference")
        resolve("g", parts[:2], flush=True)  # its checkpoint holds batch 2
        live = store._graph  # type: ignore[attr-defined]
        # the backup is the key's serialized form: GRAPH.COPY forks the server and
        # can hang there (FalkorDB/FalkorDB#1637); DUMP and RESTORE do not fork
        raw = _undecoded(live.client)
        backup = raw.dump(live.name)
        resolve("g", parts[2:], flush=False)  # done, kept in memory, not checkpointed
        assert store.applied_seq("g") == 4

        live.delete()
        raw.restore(live.name, 0, backup)  # lost batches 3 and 4
        assert store.applied_seq("g") == 2
        assert run_cluster(settings, "g") == []  # nothing pending: 3 and 4 written again
        assert store.applied_seq("g") == 4
        assert _snapshot(settings, "g") == expected

        live.delete()
        raw.restore(live.name, 0, backup)  # behind the checkpoint
        with pytest.raises(ERError, match=r"up to batch 2, its writer's checkpoint up to batch 4"):
            run_cluster(settings, "g")
    finally:
        close_stores()
