"""`er retry` and `er rejects` as an operator runs them, on real PostgreSQL and FalkorDB
(in process: no broker; the worker's side is in test_worker_processes.py).

The failure is a real one: the collection's stored pair model replaced by one this
release cannot read (as a newer release, or a hand edit, might leave it), so the
writer's step raises for the batch that needs it; the model put back is the mend.
Oracles: the records themselves (each accepted one resolved exactly once: one mention
node, one current entity) and the batch rows in PostgreSQL.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from ._cli import run_er

pytestmark = [pytest.mark.postgres, pytest.mark.graph]


@pytest.fixture(scope="module")
def env(pg_url: str, falkordb_server: Any, tmp_path_factory: Any) -> dict[str, str]:
    """ER_ variables for `er` processes on the test PostgreSQL and FalkorDB, no broker."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("ER_")}
    password = falkordb_server.password
    return {
        **base,
        "ER_DATABASE_URL": pg_url,
        "ER_GRAPH_URL": f"falkordb://:{password}@127.0.0.1:{falkordb_server.port}",
        "ER_DATA_DIR": str(tmp_path_factory.mktemp("er-ops")),
    }


def _er(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_er(env, *args, timeout=600)


def _ok(env: dict[str, str], *args: str) -> str:
    done = _er(env, *args)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _one_line(done: subprocess.CompletedProcess[str], needle: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], lines
    assert "Traceback" not in done.stderr


def _file(path: Path, records: list[Any], extra: str = "") -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + extra)
    return path


def _status(env: dict[str, str], name: str) -> dict[str, Any]:
    out = _ok(env, "status", "--collection", name, "--json", "--no-model-check")
    return dict(json.loads(out)[0])


def _batches(env: dict[str, str], name: str) -> list[tuple[int, str, Any]]:
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from er.stores.sql import Batch, find_collection, make_engine

    engine = make_engine(env["ER_DATABASE_URL"])
    with Session(engine) as session:
        coll = find_collection(session, name)
        rows = session.execute(
            select(Batch.seq, Batch.status, Batch.retries)
            .where(Batch.collection_id == coll.id)
            .order_by(Batch.seq)
        ).all()
    engine.dispose()
    return [(int(s), str(st), r) for s, st, r in rows]


class _PairModel:
    """The collection's stored pair model: taken away (one this release cannot read
    put in its place) and put back."""

    def __init__(self, url: str, collection: str) -> None:
        import psycopg

        self.conn = psycopg.connect(url.replace("+psycopg", ""), autocommit=True)
        self.collection = collection
        self.good = self._read()

    def _read(self) -> Any:
        query = "SELECT config -> 'pair_model' FROM collections WHERE name = %s"
        row = self.conn.execute(query, (self.collection,)).fetchone()
        assert row is not None and row[0] is not None
        return row[0]

    def _write(self, model: Any) -> None:
        self.conn.execute(
            "UPDATE collections SET config = jsonb_set(config, '{pair_model}', %s::jsonb) "
            "WHERE name = %s",
            (json.dumps(model), self.collection),
        )

    def break_(self) -> None:
        self._write({"version": self.good["version"] + 1})  # newer, and without its fields

    def mend(self) -> None:
        self._write(self.good)


def _resolved_once(env: dict[str, str], name: str, expected: set[str]) -> None:
    """Every record of ``expected`` has an entity in `er export`, and in the graph
    exactly one mention node with exactly one current entity."""
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from er.config import Settings
    from er.pipeline.stores import _stores
    from er.stores.sql import Mention, find_collection

    exported = list(csv.reader(io.StringIO(_ok(env, "export", "entities", "--collection", name))))
    rows = {ext: ent for ext, ent in exported[1:]}
    assert len(exported) - 1 == len(rows) == len(expected) and set(rows) == expected
    assert all(ent != "" for ent in rows.values())
    settings = Settings(
        database_url=env["ER_DATABASE_URL"],
        graph_url=env["ER_GRAPH_URL"],
        data_dir=Path(env["ER_DATA_DIR"]),
    )
    engine, graph = _stores(settings)
    with Session(engine) as session:
        coll = find_collection(session, name)
        nodes = session.scalars(select(Mention.node_id).where(Mention.collection_id == coll.id))
        nodes = list(nodes)
    members = graph.memberships(name)
    assert None not in nodes and len(set(nodes)) == len(expected)
    assert sorted(members.as_dict()) == sorted(nodes)  # each mention node once ...
    assert len(members.mentions) == len(nodes)  # ... with one current entity


def test_a_failed_batch_shows_then_er_retry_resolves_it_once_mended(
    env: dict[str, str], tmp_path: Path
) -> None:
    from er.demo import febrl_records

    records = febrl_records()[:400]
    name = f"r{uuid.uuid4().hex[:8]}"
    ingest = ["--collection", name, "--id-field", "rec_id", "--batch-size", "100"]
    _ok(env, "ingest", str(_file(tmp_path / "a.jsonl", records[:200])), *ingest)
    model = _PairModel(env["ER_DATABASE_URL"], name)

    # batch 3 fails in the writer's step; the ingest itself still stores it
    model.break_()
    _ok(env, "ingest", str(_file(tmp_path / "b.jsonl", records[200:300])), *ingest)
    status = _status(env, name)
    assert status["batches"] == {"done": 2, "failed": 1} and status["mentions"] == 300
    assert status["last_failed"] == {"batch_seq": 3, "error": "KeyError: 'fields'"}
    table = _ok(env, "status", "--collection", name, "--no-model-check")
    assert "failed: 1 batch; the last, batch 3: KeyError: 'fields'." in " ".join(table.split())

    _one_line(_er(env, "retry", "--collection", name, "--batch", "2"), "is done, not failed")
    _one_line(_er(env, "retry", "--collection", name, "--batch", "9"), "has no batch 9")
    # not mended: taken again, failed again, under its own seq (nothing came after it)
    again = _er(env, "retry", "--collection", name)
    assert again.returncode == 1, again.stderr[-2000:]
    assert "batch 3 queued again; it failed with KeyError: 'fields'" in again.stdout
    assert "batch 3 failed again with KeyError: 'fields'" in again.stdout
    model.mend()
    out = _ok(env, "retry", "--collection", name, "--batch", "3")
    assert out.splitlines() == [
        f"{name}: batch 3 queued again; it failed with KeyError: 'fields'",
        f"{name}: batch 3 done",
    ]
    assert [(s, st, len(r or [])) for s, st, r in _batches(env, name)] == [
        (1, "done", 0),
        (2, "done", 0),
        (3, "done", 2),  # its two failures kept
    ]

    # batch 4 fails, batch 5 is resolved after it: 4 is queued again as batch 6
    model.break_()
    _ok(env, "ingest", str(_file(tmp_path / "c.jsonl", records[300:350])), *ingest)
    model.mend()
    _ok(env, "ingest", str(_file(tmp_path / "d.jsonl", records[350:400])), *ingest)
    out = _ok(env, "retry", "--collection", name)
    assert out.splitlines() == [
        f"{name}: batch 4 queued again as batch 6 (batches after it were resolved); "
        "it failed with KeyError: 'fields'",
        f"{name}: batch 6 done",
    ]
    batches = _batches(env, name)
    assert [(s, st) for s, st, _ in batches] == [(s, "done") for s in (1, 2, 3, 5, 6)]
    assert batches[-1][2][0]["seq"] == 4 and batches[-1][2][0]["error"] == "KeyError: 'fields'"
    _resolved_once(env, name, {r["rec_id"] for r in records})
    status = _status(env, name)
    assert status["batches"] == {"done": 5} and status["last_failed"] is None
    _one_line(_er(env, "retry", "--collection", name), "nothing to retry")


def test_er_rejects_lists_each_refused_record_with_its_field(
    env: dict[str, str], tmp_path: Path
) -> None:
    name = f"j{uuid.uuid4().hex[:8]}"
    good = [{"rec_id": f"p{i}", "name": f"person {i}", "city": "leeds"} for i in range(8)]
    bad = [{"rec_id": "p8", "name": ["a", "list"], "city": "york"}, {"name": "no id"}]
    path = _file(tmp_path / "people.jsonl", good + bad, extra="{not json\n")
    _ok(env, "ingest", str(path), "--collection", name, "--id-field", "rec_id")
    expected = [
        ("p8", "name", "record 'p8': field 'name': "),
        ("", "rec_id", "people.jsonl line 10: field 'rec_id': required field is missing"),
        ("", "", "people.jsonl line 11: malformed JSON"),
    ]
    listed = list(csv.reader(io.StringIO(_ok(env, "rejects", "--collection", name))))
    assert listed[0] == ["external_id", "field", "reason"]
    assert sorted(r[:2] for r in listed[1:]) == sorted([list(e[:2]) for e in expected])
    for ext, field, reason in expected:
        assert any(r[0] == ext and r[1] == field and r[2].startswith(reason) for r in listed[1:])
    as_json = json.loads(_ok(env, "rejects", "--collection", name, "--format", "json"))
    assert [(r["external_id"] or "", r["field"] or "", r["reason"]) for r in as_json] == [
        tuple(r) for r in listed[1:]
    ]
    assert _status(env, name)["rejected"] == len(expected)
    _one_line(_er(env, "rejects", "--collection", "nope"), "no collection 'nope'")


# -- the rules beneath, on hand-made rows ------------------------------------------------------
@pytest.fixture
def session(pg_url: str) -> Any:
    """A session on the test PostgreSQL, rolled back after the test."""
    from sqlalchemy.orm import Session

    from er.stores.sql import make_engine, upgrade

    engine = make_engine(pg_url)
    upgrade(engine)
    with engine.connect() as conn:
        outer = conn.begin()
        with Session(bind=conn, join_transaction_mode="create_savepoint") as s:
            yield s
        outer.rollback()
    engine.dispose()


def _collection(session: Any, statuses: list[str]) -> Any:
    """A collection whose batches 1.. have ``statuses``, each with two mentions."""
    from er.stores.sql import Batch, get_or_create_collection, upsert_mentions

    coll = get_or_create_collection(session, f"h{uuid.uuid4().hex[:8]}", {})
    for seq, status in enumerate(statuses, start=1):
        session.add(
            Batch(collection_id=coll.id, seq=seq, status=status, n_accepted=2, n_rejected=0,
                  timings={}, error="E: boom" if status == "failed" else None, group_end=seq)
        )  # fmt: skip
        rows = [{"external_id": f"m{seq}-{i}", "payload": {}} for i in range(2)]
        upsert_mentions(session, coll.id, seq, rows)
    session.flush()
    return coll


def _rows(session: Any, coll: Any) -> list[tuple[int, str, int | None, list[str]]]:
    from sqlalchemy import select

    from er.stores.sql import Batch, Mention

    out = []
    for b in session.scalars(
        select(Batch).where(Batch.collection_id == coll.id).order_by(Batch.seq)
    ):
        exts = session.scalars(
            select(Mention.external_id)
            .where(Mention.collection_id == coll.id, Mention.batch_seq == b.seq)
            .order_by(Mention.external_id)
        )
        out.append((b.seq, b.status, b.group_end, list(exts)))
    return out


def test_a_retried_batch_keeps_its_seq_unless_resolved_batches_passed_it(session: Any) -> None:
    from er.stores.sql import retry_batches

    coll = _collection(session, ["done", "failed", "done", "failed", "failed"])
    assert retry_batches(session, coll.id, [2, 4, 5]) == [
        (4, 4, "E: boom"),  # the tail, failed: the writer has stepped nothing past them
        (5, 5, "E: boom"),
        (2, 6, "E: boom"),  # batch 3 was resolved after it: queued again at the end
    ]
    assert _rows(session, coll) == [
        (1, "done", 1, ["m1-0", "m1-1"]),
        (3, "done", 3, ["m3-0", "m3-1"]),
        (4, "pending", 4, ["m4-0", "m4-1"]),  # as stepped before, should a checkpoint hold it
        (5, "pending", 5, ["m5-0", "m5-1"]),
        (6, "pending", None, ["m2-0", "m2-1"]),  # its mentions with it; a new step
    ]
    coll = _collection(session, ["done", "failed", "failed"])
    assert retry_batches(session, coll.id, [2]) == [(2, 4, "E: boom")]  # 3 stays failed after it


def test_a_running_batch_is_stranded_by_a_silent_worker_or_a_free_writer_lock(
    session: Any, pg_url: str, tmp_path: Path
) -> None:
    import datetime as dt

    from er.pipeline.operations import stranded_batches, worker_rows
    from er.stores.sql import Batch, Worker, database_now, make_engine, writer_lock

    now = database_now(session)
    coll = _collection(session, ["running", "running", "running", "running"])
    ago = {"alive": 0.2, "gone": 10.0, "stopped": 10.0}
    workers = {}
    for name, seconds in ago.items():
        seen = now - dt.timedelta(seconds=seconds)
        w = Worker(name=name, host="h", pid=1, queues="er.cluster", interval_s=1.0,
                   last_seen=seen, stopped_at=seen if name == "stopped" else None)  # fmt: skip
        session.add(w)
        session.flush()
        workers[name] = w.id
    owners = [workers["alive"], workers["gone"], workers["stopped"], None]
    batches = session.query(Batch).filter_by(collection_id=coll.id).order_by(Batch.seq).all()
    for batch, owner in zip(batches, owners, strict=True):
        batch.worker_id = owner
    session.flush()
    rows = {w["name"]: w for w in worker_rows(session) if w["id"] in workers.values()}
    assert {name: w["state"] for name, w in rows.items()} == {
        "alive": "alive", "gone": "gone", "stopped": "stopped"
    }  # fmt: skip
    listed = list(rows.values())
    engine = make_engine(pg_url)
    try:
        with writer_lock(engine, coll.id, tmp_path):  # a live writer holds the collection
            held = stranded_batches(session, coll.id, listed)
    finally:
        engine.dispose()
    assert [(s["batch_seq"], s["worker"]) for s in held] == [(2, "gone"), (3, "stopped")]
    assert "worker gone (pid 1 on h) is gone: last seen 10.0 s ago" in held[0]["why"]
    free = stranded_batches(session, coll.id, listed)  # nobody holds it: every one
    assert [(s["batch_seq"], s["worker"]) for s in free] == [
        (1, "alive"), (2, "gone"), (3, "stopped"), (4, None)
    ]  # fmt: skip
    assert "no longer holds the collection's writer lock" in free[0]["why"]
    assert "no process holds the collection's writer lock" in free[3]["why"]
