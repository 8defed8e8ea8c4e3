"""Cost of stable entity ids per batch (issue #8): matching + their graph writes.

Runs the product pipeline in process (PostgreSQL on ER_BENCH_PG, default
127.0.0.1:5432, a fresh database; an embedded FalkorDB in a temporary data dir) on
synthetic person records (``bench/people.py``) in batches of ``--batch``, twice on
the same records: as shipped, and the peer with stable ids switched off (the
ledger step returns no changes and no NEAR edges are written), and reports per
batch the time of the entity matching (``entities_s``), the extra graph-write time
(graph_s minus the peer's) and their share of the batch time, around 10k and 100k
resolved mentions.

    python bench/bench_entities.py --n 100000 --batch 1000 --at 10000 100000
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _pg import fresh_database
from people import synthetic_people


@contextlib.contextmanager
def _without_stable_ids() -> Iterator[None]:
    """The peer: the pipeline as it was before stable ids (no ledger, no NEAR edges)."""
    import er.pipeline.writer as p
    from er.entities import ArrayLedger, EntityStep

    step, near = ArrayLedger.step_labels, p._near_rows
    ArrayLedger.step_labels = lambda self, batch, mentions, labels: EntityStep(batch)  # type: ignore[method-assign]
    p._near_rows = lambda *a, **k: []  # type: ignore[assignment]
    try:
        yield
    finally:
        ArrayLedger.step_labels, p._near_rows = step, near  # type: ignore[method-assign]


def run_pipeline(
    records: list[dict[str, Any]],
    batch: int,
    label: str,
    config: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Every batch through the product pipeline in process; the batch reports.
    ``config``: the collection's config given with its first batch."""
    from rich.progress import Progress

    from er.config import Settings
    from er.pipeline import close_stores, run_cluster, run_ingest
    from er.stores.sql import make_engine, upgrade

    reports: list[dict[str, Any]] = []
    with fresh_database() as url, tempfile.TemporaryDirectory() as tmp:
        engine = make_engine(url)
        upgrade(engine)
        engine.dispose()
        settings = Settings(database_url=url, graph_url="falkordb+embedded://", data_dir=Path(tmp))
        with Progress(transient=True) as bar:
            task = bar.add_task(label, total=len(records))
            for start in range(0, len(records), batch):
                chunk = records[start : start + batch]
                t0 = time.perf_counter()
                run_ingest(
                    settings,
                    collection="people",
                    records=chunk,
                    id_field="rec_id",
                    gold_field="entity",
                    config=config if start == 0 else None,
                )
                ingest_s = time.perf_counter() - t0
                [report] = run_cluster(settings, "people")
                report["timings"]["ingest_s"] = round(ingest_s, 6)
                report["resolved"] = start + len(chunk)
                reports.append(report)
                bar.advance(task, len(chunk))
        close_stores()
    return reports


def around(reports: list[dict[str, Any]], at: int, width: int = 3) -> list[int]:
    """Indices of the ``width`` batches ending nearest ``at`` resolved mentions."""
    ends = np.array([r["resolved"] for r in reports])
    return np.argsort(np.abs(ends - at), kind="stable")[:width].tolist()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--batch", type=int, default=1_000)
    ap.add_argument("--at", type=int, nargs="+", default=[10_000])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    records = synthetic_people(args.n, seed=args.seed)
    ours = run_pipeline(records, args.batch, "with stable ids")
    with _without_stable_ids():
        peer = run_pipeline(records, args.batch, "peer: without")
    machine = f"{platform.machine()}, {platform.python_version()}"
    for at in args.at:
        rows = around(ours, at)
        total = np.mean([sum(ours[i]["timings"].values()) for i in rows])
        total_peer = np.mean([sum(peer[i]["timings"].values()) for i in rows])
        match = np.mean([ours[i]["timings"]["entities_s"] for i in rows])
        extra = np.mean(
            [ours[i]["timings"]["graph_s"] - peer[i]["timings"]["graph_s"] for i in rows]
        )
        out = {
            "resolved": at,
            "batches": [ours[i]["batch_seq"] for i in rows],
            "batch_s": round(float(total), 3),
            "peer_batch_s": round(float(total_peer), 3),
            "matching_s": round(float(match), 4),
            "extra_graph_s": round(float(extra), 4),
            "share": round(float((match + extra) / total), 4),
            "graph_s": round(float(np.mean([ours[i]["timings"]["graph_s"] for i in rows])), 3),
            "machine": machine,
        }
        print(json.dumps(out))


if __name__ == "__main__":
    main()
