"""End to end through the queue: real Redis, real `er worker` processes, `er ingest --wait`.

The oracle is the in-process run of the same batches in the same order (no broker)
and the FEBRL3 gold ids. Two workers ingest batches in parallel, so the queued
collection's batch seqs follow arrival, not the file: the in-process run is fed the
records in the queued collection's batch order (incremental clustering and the model
trained on the first batch both depend on it).
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ._procs import own_redis_db, stop_all

pytestmark = [pytest.mark.celery, pytest.mark.postgres, pytest.mark.graph, pytest.mark.slow]


def _env(base: dict[str, str], **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ER_")}
    return {**env, **base, **extra}


def _er(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "er.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def _entities(env: dict[str, str], collection: str) -> dict[str, str]:
    done = _er(env, "export", "entities", "--collection", collection)
    assert done.returncode == 0, done.stderr
    return dict(line.split(",") for line in done.stdout.strip().splitlines()[1:])


def _in_batch_order(pg_url: str, collection: str, source: Path, out: Path) -> Path:
    """``source``'s rows in the order the collection's batches hold them (seq, then
    insertion), written to ``out``."""
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from er.stores.sql import Mention, find_collection, make_engine

    engine = make_engine(pg_url)
    with Session(engine) as s:
        coll = find_collection(s, collection)
        order = s.scalars(
            select(Mention.external_id)
            .where(Mention.collection_id == coll.id)
            .order_by(Mention.batch_seq, Mention.id)
        ).all()
    engine.dispose()
    with source.open(newline="") as f:
        rows = {r["rec_id"]: r for r in csv.DictReader(f)}
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(next(iter(rows.values()))))
        writer.writeheader()
        writer.writerows(rows[ext] for ext in order)
    return out


def _partition(entity: dict[str, str]) -> set[frozenset[str]]:
    groups: dict[str, set[str]] = {}
    for ext, ent in entity.items():
        groups.setdefault(ent, set()).add(ext)
    return {frozenset(g) for g in groups.values()}


@pytest.fixture(scope="module")
def febrl_csv(tmp_path_factory: Any) -> Path:
    from er.demo import febrl_records

    rows = febrl_records()
    path = tmp_path_factory.mktemp("febrl") / "febrl3.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_febrl3_through_redis_and_two_workers_equals_the_in_process_run(
    pg_url: str, falkordb_server: Any, tmp_path: Path, febrl_csv: Path
) -> None:
    from er.demo import febrl_records
    from er.evaluation import bcubed, pairwise_prf

    stores = {
        "ER_DATABASE_URL": pg_url,
        "ER_GRAPH_URL": f"falkordb://:{falkordb_server.password}@127.0.0.1:{falkordb_server.port}",
        "ER_DATA_DIR": str(tmp_path / "data"),
    }
    db = own_redis_db()
    queued = _env(stores, ER_BROKER_URL=f"redis://127.0.0.1:6379/{db}")
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "er.cli", "worker"],
            env=queued,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    args = ["--id-field", "rec_id", "--gold-field", "entity", "--batch-size", "500", "--json"]
    try:
        done = _er(queued, "ingest", str(febrl_csv), "--collection", "q", *args, "--wait")
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout.strip().splitlines()[-1])
        assert summary["batch_seqs"] == list(range(1, 11)) and summary["accepted"] == 5000
        stats = _er(queued, "query", "stats", "--collection", "q").stdout
        # the same er.cluster message delivered twice more: nothing left to apply
        from celery import Celery

        app = Celery(broker=queued["ER_BROKER_URL"], backend=queued["ER_BROKER_URL"])
        again = [app.send_task("er.cluster", kwargs={"collection": "q"}, queue="er.cluster")]
        again.append(app.send_task("er.cluster", kwargs={"collection": "q"}, queue="er.cluster"))
        assert [r.get(timeout=120) for r in again] == [[], []]
        assert _er(queued, "query", "stats", "--collection", "q").stdout == stats
        status = json.loads(_er(queued, "status", "--collection", "q", "--json").stdout)[0]
        assert status["batches"] == {"done": 10} and status["mentions"] == 5000
    finally:
        stop_all(workers, db)
    in_process = _env(stores, ER_DATA_DIR=str(tmp_path / "local"))
    replayed = _in_batch_order(pg_url, "q", febrl_csv, tmp_path / "ordered.csv")
    local = _er(in_process, "ingest", str(replayed), "--collection", "local", *args)
    assert local.returncode == 0, local.stderr
    # the same first batch trains the same model, whichever process ran it
    models = [
        json.loads(_er(env, "model", "--collection", c, "--json").stdout)["model"]
        for env, c in ((queued, "q"), (in_process, "local"))
    ]
    assert models[0] == models[1]
    ours, theirs = _entities(queued, "q"), _entities(in_process, "local")
    assert _partition(ours) == _partition(theirs)
    gold = {r["rec_id"]: r["entity"] for r in febrl_records()}
    ids = sorted(ours)
    pred, truth = [ours[i] for i in ids], [gold[i] for i in ids]
    assert pairwise_prf(truth, pred)[2] >= 0.998 and bcubed(truth, pred)[2] >= 0.998
