"""The chaos run (issue #54): the same records twice through Redis, one ``er worker`` and
its embedded FalkorDB, once without faults (run A) and once with SIGKILLs of the worker
and of the graph server and one step failure retried with ``er retry`` (run B); the two
must end equal.

Each run has a fresh PostgreSQL database and data dir, and the same collection name.
The records go as batches of ``batch`` records, one ``er ingest`` (no ``--wait``) per
batch, each sent once the one before is resolved: every writer step is one batch, so
the graph as of every batch seq can be compared (a backlog would be grouped into steps
by timing, and a group's graph write is stamped with its last seq).

Run B's faults, drawn from ``seed``:

- ``kills`` SIGKILLs of the worker and ``kills`` of its graph server, each at a batch
  drawn at random and a random fraction of run A's time for that batch after the
  batch is stored (so most land while the writer steps it). A killed worker is started
  again at once; the graph server is started again by the worker itself
  (:mod:`er.pipeline.stores`). A kill waits for the batch's ingest task to be stored:
  on Redis a killed worker's unacknowledged message comes back only after the broker's
  visibility timeout (two hours), so the harness queues the writer's run once the
  worker is started again, as that redelivery would, and again if a batch makes no
  progress for ``stall_s`` seconds (counted in the report as ``nudges``).
- the last batch's step fails: the collection's stored pair model is replaced by one
  this release cannot read (as tests/integration/test_operations.py does) before the
  batch is sent; once it is marked failed the model is put back and ``er retry
  --collection C`` takes it again. It is the last batch, so it keeps its seq
  (er.pipeline.operations: a failed batch that resolved batches passed is renumbered).

Compared: ``er export entities``; the graph as of every batch seq (nodes with their
attributes, parent edges, and each mention's entity: sha256 of the columns); the SQL
rows (mentions with their batch seq, node id and gold entity; batches' seq, status,
accepted and rejected counts and group; the collection's config). Checked in both
runs: every accepted record has exactly one mention node, one current entity and one
row in the export.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

COLLECTION = "people"
CLUSTER_QUEUE = "er.cluster"  # workers.app.CLUSTER_QUEUE


@dataclass(frozen=True)
class Kill:
    """One fault of run B: SIGKILL ``target`` ("worker" or "graph") ``frac`` of run A's
    time for batch ``batch`` (0-based) after that batch is stored."""

    batch: int
    frac: float
    target: str


def kill_schedule(n_batches: int, kills: int, seed: int) -> list[Kill]:
    """``kills`` kills of each target at seeded batches (not the last, which fails) and
    moments, in the order they happen."""
    rng = random.Random(seed)
    last = max(n_batches - 2, 0)
    drawn = [
        Kill(rng.randint(0, last), rng.random(), target)
        for target in ("worker", "graph")
        for _ in range(kills)
    ]
    return sorted(drawn, key=lambda k: (k.batch, k.frac))


@dataclass
class _Run:
    """One run's stores and worker."""

    url: str
    data_dir: Path
    redis_db: int
    log_dir: Path
    collection: str = COLLECTION
    worker: subprocess.Popen[bytes] | None = None
    events: dict[str, int] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith("ER_")}
        return {
            **base,
            "ER_DATABASE_URL": self.url,
            "ER_DATA_DIR": str(self.data_dir),
            "ER_BROKER_URL": f"redis://127.0.0.1:6379/{self.redis_db}",
            "ER_HEARTBEAT_S": "1",
        }

    def count(self, event: str) -> None:
        self.events[event] = self.events.get(event, 0) + 1

    def er(self, *args: str, timeout: float = 600.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "er.cli", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def sql(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        """Run one statement; again while the server cannot be reached (the machine's
        PostgreSQL is shared, and restarted now and then)."""
        import psycopg

        for attempt in range(120):
            try:
                with psycopg.connect(self.url.replace("+psycopg", ""), autocommit=True) as conn:
                    cursor = conn.execute(query, params)
                    return list(cursor.fetchall()) if cursor.description else []
            except psycopg.OperationalError:
                if attempt == 119:
                    raise
                self.count("database_unreachable")
                time.sleep(1.0)
        raise AssertionError("unreachable")

    # -- the worker and its graph server -------------------------------------------------
    def start_worker(self) -> None:
        n = self.events.get("worker_starts", 0)
        self.count("worker_starts")
        with (self.log_dir / f"worker-{n}.log").open("wb") as log:
            self.worker = subprocess.Popen(
                [sys.executable, "-m", "er.cli", "worker"],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def worker_ready(self) -> bool:
        """The worker beats (celery is up, its stores' schemas made)."""
        assert self.worker is not None
        return bool(self.sql("SELECT 1 FROM workers WHERE pid = %s", self.worker.pid))

    def kill_worker(self) -> None:
        assert self.worker is not None
        os.kill(self.worker.pid, signal.SIGKILL)
        self.worker.wait()
        self.count("worker_kills")
        self.start_worker()
        self.nudge()

    def kill_graph(self, timeout: float = 600.0) -> bool:
        """SIGKILL the worker's graph server once it is up; False if it never was."""
        deadline = time.monotonic() + timeout
        asked = time.monotonic()
        while time.monotonic() < deadline:
            self.check_worker()
            pid = self._serving()
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
                self.count("graph_kills")
                return True
            # an idle worker starts its dead server again at its next task
            if time.monotonic() - asked > 10.0:
                self.nudge()
                asked = time.monotonic()
            time.sleep(0.05)
        self.count("graph_kills_skipped")
        return False

    def _serving(self) -> int | None:
        """The pid of the graph server the current worker owns, if it answers."""
        import redis

        assert self.worker is not None
        folder = self.data_dir / "falkordb"
        try:
            owner = json.loads((folder / "server.lock").read_text() or "{}")
            password = (folder / "password").read_text().strip()
        except (OSError, json.JSONDecodeError):
            return None
        if owner.get("pid") != self.worker.pid or not owner.get("server_pid"):
            return None
        if not self.worker_ready():
            return None
        client = redis.Redis(port=owner["port"], password=password, socket_timeout=2)
        try:
            ours = client.info("server").get("process_id") == owner["server_pid"]
            return int(owner["server_pid"]) if ours and client.ping() else None
        except redis.exceptions.RedisError:
            return None
        finally:
            client.close()

    def check_worker(self) -> None:
        """A worker that exited by itself is counted and started again."""
        assert self.worker is not None
        if self.worker.poll() is not None:
            self.count("worker_exits")
            self.start_worker()
            self.nudge()

    def nudge(self) -> None:
        """Queue the writer's run of the collection (as a redelivery would)."""
        from celery import Celery

        app = Celery(broker=self.env["ER_BROKER_URL"])
        try:
            app.send_task("er.cluster", kwargs={"collection": self.collection}, queue=CLUSTER_QUEUE)
        finally:
            app.close()
        self.count("nudges")

    # -- batches ---------------------------------------------------------------------------
    def statuses(self) -> dict[int, str]:
        return {int(s): str(st) for s, st in self.sql("SELECT seq, status FROM batches")}

    def send(self, path: Path, batch: int) -> None:
        """``er ingest`` the batch file; again while the database cannot be reached (it
        then queued nothing): the machine's PostgreSQL is shared."""
        for _ in range(30):
            done = self.er(
                *("ingest", str(path), "--collection", self.collection, "--id-field", "rec_id"),
                *("--gold-field", "entity", "--batch-size", str(batch)),
            )
            if done.returncode == 0:
                return
            if "cannot reach the database" not in done.stderr:
                break
            self.count("database_unreachable")
            time.sleep(2.0)
        raise RuntimeError(f"er ingest failed: {done.stderr[-2000:]}")

    def wait(self, seq: int, want: str, stall_s: float, timeout: float = 3600.0) -> float:
        """Wait until batch ``seq`` has status ``want`` ("stored": any); its time."""
        started = last = time.monotonic()
        seen: str | None = None
        while time.monotonic() - started < timeout:
            self.check_worker()
            status = self.statuses().get(seq)
            if status is not None and (want == "stored" or status == want):
                return time.monotonic()
            if status != seen:
                seen, last = status, time.monotonic()
            elif status is not None and time.monotonic() - last > stall_s:
                self.nudge()
                last = time.monotonic()
            time.sleep(0.02)
        raise TimeoutError(f"batch {seq} not {want} within {timeout:.0f} s (events {self.events})")


@contextlib.contextmanager
def _stores(redis_db: int, keep: Path | None) -> Iterator[_Run]:
    """A run's fresh database and data dir (its worker stopped on leaving)."""
    import redis

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _pg import fresh_database

    with (
        fresh_database() as url,
        tempfile.TemporaryDirectory(prefix="er-chaos-", ignore_cleanup_errors=True) as tmp,
    ):
        logs = keep or Path(tmp)
        logs.mkdir(parents=True, exist_ok=True)
        run = _Run(url, Path(tmp) / "data", redis_db, logs)
        try:
            yield run
        finally:
            if run.worker is not None:
                run.worker.terminate()
                try:
                    run.worker.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    run.worker.kill()
                    run.worker.wait()
            redis.Redis(host="127.0.0.1", port=6379, db=redis_db).flushdb()


def _one_run(
    records: list[dict[str, str]],
    batch: int,
    run: _Run,
    *,
    kills: list[Kill] | None,
    times: list[float] | None,
    stall_s: float,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Send the batches, with ``kills`` and the last batch's failure when given; the
    run's snapshot and each batch's time (stored -> done)."""
    from er.stores.sql import make_engine, upgrade

    engine = make_engine(run.url)
    upgrade(engine)
    engine.dispose()
    n = -(-len(records) // batch)
    chaos = kills is not None
    todo = list(kills or [])
    run.start_worker()
    _until(run.worker_ready, 300)
    spent: list[float] = []
    started = time.monotonic()
    for i in range(n):
        path = run.log_dir / "batch.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records[i * batch : (i + 1) * batch]))
        last = i == n - 1
        model = _PairModel(run) if chaos and last else None
        if model is not None:
            model.break_()
        run.send(path, batch)
        stored = run.wait(i + 1, "stored", stall_s)
        while todo and todo[0].batch == i:
            kill = todo.pop(0)
            wait_s = kill.frac * (times[i] if times else 1.0)
            time.sleep(max(stored + wait_s - time.monotonic(), 0.0))
            say(f"batch {i + 1}: kill the {kill.target} at {wait_s:.2f} s")
            run.kill_worker() if kill.target == "worker" else run.kill_graph()
        if model is not None:
            run.wait(i + 1, "failed", stall_s)
            model.mend()
            retried = run.er("retry", "--collection", run.collection)
            if retried.returncode != 0:
                raise RuntimeError(f"er retry failed: {retried.stderr[-2000:]}")
            run.count("retries")
            say(f"batch {i + 1}: failed, mended, retried: {retried.stdout.strip()}")
        spent.append(run.wait(i + 1, "done", stall_s) - stored)
    wall = time.monotonic() - started
    say(f"{n} batches done in {wall:.1f} s; events {run.events}")
    snap = snapshot(run, n)
    return {"snapshot": snap, "batch_s": spent, "wall_s": round(wall, 3), "events": run.events}


class _PairModel:
    """The collection's stored pair model, replaced by one this release cannot read
    (a newer version without its fields) and put back."""

    def __init__(self, run: _Run) -> None:
        self.run = run
        query = "SELECT config -> 'pair_model' FROM collections WHERE name = %s"
        self.good = run.sql(query, run.collection)[0][0]

    def _write(self, model: Any) -> None:
        self.run.sql(
            "UPDATE collections SET config = jsonb_set(config, '{pair_model}', %s::jsonb) "
            "WHERE name = %s",
            json.dumps(model),
            self.run.collection,
        )

    def break_(self) -> None:
        self._write({"version": self.good["version"] + 1})

    def mend(self) -> None:
        self._write(self.good)


def _until(check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {timeout:.0f} s")
        time.sleep(0.1)


def _digest(*arrays: Any) -> str:
    h = hashlib.sha256()
    for a in arrays:
        arr = np.ascontiguousarray(a)
        h.update(str((arr.dtype.str, arr.shape)).encode())
        h.update(arr.tobytes())
    return h.hexdigest()


def snapshot(run: _Run, n_batches: int) -> dict[str, Any]:
    """What runs A and B must agree on, and the exactly-once checks of this run."""
    from er.stores.graph import open_graph_store

    exported = run.er("export", "entities", "--collection", run.collection)
    if exported.returncode != 0:
        raise RuntimeError(f"er export failed: {exported.stderr[-2000:]}")
    rows = list(csv.reader(io.StringIO(exported.stdout)))[1:]
    mentions = run.sql(
        "SELECT external_id, batch_seq, node_id, gold_entity FROM mentions ORDER BY external_id"
    )
    batches = run.sql(
        "SELECT seq, status, n_accepted, n_rejected, group_end FROM batches ORDER BY seq"
    )
    config = run.sql("SELECT config FROM collections WHERE name = %s", run.collection)[0][0]
    graph_url = "falkordb+embedded://"
    with open_graph_store(graph_url, data_dir=run.data_dir) as graph:  # the worker's server
        as_of = {}
        for seq in range(1, n_batches + 1):
            s = graph.structure(run.collection, as_of=seq)
            m = graph.memberships(run.collection, as_of=seq)
            as_of[seq] = {
                "nodes": len(s.ids),
                "edges": len(s.edges),
                "members": len(m.mentions),
                "structure": _digest(
                    s.ids, s.leaf, s.size, s.score, s.level_lo, s.level_hi, s.edges
                ),
                "memberships": _digest(m.mentions, m.entities),
            }
        current = graph.memberships(run.collection)
    nodes = [node for _, _, node, _ in mentions]
    once = {
        "accepted": len(mentions),
        "exported_once": len(rows) == len({r[0] for r in rows}) == len(mentions)
        and {r[0] for r in rows} == {ext for ext, *_ in mentions}
        and all(r[1] != "" for r in rows),
        "one_node_each": None not in nodes and len(set(nodes)) == len(nodes),
        "one_entity_each": sorted(current.mentions.tolist()) == sorted(nodes),
    }
    return {
        "entities": _digest(np.array(sorted(map(tuple, rows)), dtype=str)),
        "n_entities": len({r[1] for r in rows}),
        "graph_as_of": as_of,
        "mentions": _digest(np.array([tuple(map(str, m)) for m in mentions], dtype=str)),
        "batches": [list(b) for b in batches],
        "config": hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest(),
        "once": once,
    }


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Where snapshot ``b`` differs from ``a``, a line each; and failed once-checks."""
    out = [
        f"{key} differ" for key in ("entities", "mentions", "batches", "config") if a[key] != b[key]
    ]
    for seq, want in a["graph_as_of"].items():
        got = b["graph_as_of"].get(seq)
        if got != want:
            out.append(f"graph as of batch {seq} differs: {want} vs {got}")
    for name, snap in (("A", a), ("B", b)):
        out += [f"run {name}: {k} fails" for k, v in snap["once"].items() if v is False]
    return out


def chaos_run(
    records: list[dict[str, str]],
    *,
    batch: int,
    kills: int,
    seed: int,
    redis_db: int,
    stall_s: float = 60.0,
    logs: Path | None = None,
    say: Callable[[str], None] = lambda line: None,
) -> dict[str, Any]:
    """Run A (no faults) then run B (the seeded kills and the failed last batch) on
    ``records``; both runs' snapshots, events and times, and their ``differences``.

    Parameters
    ----------
    records : list of dict
        Person records with ``rec_id`` and the gold ``entity`` (bench/people.py).
    batch : int
        Records per batch (one writer step each).
    kills : int
        SIGKILLs of the worker, and as many of the graph server, in run B.
    redis_db : int
        The Redis database of the runs' broker (emptied after each run).
    stall_s : float, default 60
        Seconds without progress on a batch after which the writer's run is queued again.
    logs : path, optional
        Where the workers' logs go (default: the run's temporary directory).
    """
    n = -(-len(records) // batch)
    say(f"run A: {len(records)} records in {n} batches of {batch}")
    with _stores(redis_db, None if logs is None else logs / "a") as run:
        a = _one_run(records, batch, run, kills=None, times=None, stall_s=stall_s, say=say)
    schedule = kill_schedule(n, kills, seed)
    say(f"run B: {len(schedule)} kills, the last batch failed and retried")
    with _stores(redis_db, None if logs is None else logs / "b") as run:
        b = _one_run(
            records, batch, run, kills=schedule, times=a["batch_s"], stall_s=stall_s, say=say
        )
    return {
        "n": len(records),
        "batch": batch,
        "batches": n,
        "kills": kills,
        "seed": seed,
        "a": a,
        "b": b,
        "differences": differences(a["snapshot"], b["snapshot"]),
    }
