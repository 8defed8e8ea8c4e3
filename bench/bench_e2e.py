"""End to end through the queue (issue #13): Redis, one `er worker`, PostgreSQL, FalkorDB.

Synthetic person records (``bench/people.py``) are written as JSONL and ingested with
``er ingest --batch-size B --wait`` through Redis; one ``er worker`` process (the
only writer; it owns an embedded FalkorDB in a temporary data dir) runs the ingest
and cluster tasks. Reported: sustained mentions/s (first enqueue to last batch
done), per-batch processing time p50/p95 and queueing latency (batch row created ->
done) p50/p95 around 10k, 50k and 100k resolved, the mean time per stage,
pairwise/B-cubed F1 of the exported entities against the generator's gold ids, and
where the CPU went: core-seconds of the worker, its graph database and PostgreSQL's
backends over the run, and the machine's busy share of all its cores (psutil).

The worker drains the ingest queue before the writers' queue (workers/app.py), so a
bulk load like this one is first stored as pending batches, then clustered as a
backlog: latency from the batch row's creation then includes the wait behind the
batches before it, and the processing time is the per-batch figure.

    python bench/bench_e2e.py --n 100000 --batch 1000 --at 10000 50000 100000
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _pg import fresh_database
from people import synthetic_people


def _er(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "er.cli", *args], env=env, capture_output=True, text=True
    )


def _batches(url: str) -> list[dict[str, Any]]:
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from er.stores.sql import Batch, make_engine

    engine = make_engine(url)
    with Session(engine) as s:
        rows = s.execute(
            select(
                Batch.seq, Batch.n_accepted, Batch.timings, Batch.created_at, Batch.finished_at
            ).order_by(Batch.seq)
        ).all()
    engine.dispose()
    out, resolved = [], 0
    for seq, n, timings, created, finished in rows:
        resolved += n
        latency = (finished - created).total_seconds()
        out.append({"seq": seq, "resolved": resolved, "timings": timings, "latency_s": latency})
    return out


def _quality(env: dict[str, str], records: list[dict[str, str]]) -> dict[str, float]:
    from er.evaluation import bcubed, pairwise_prf

    done = _er(env, "export", "entities", "--collection", "people")
    entity = {r["external_id"]: r["entity_id"] for r in csv.DictReader(io.StringIO(done.stdout))}
    ids = [r["rec_id"] for r in records]
    gold = np.unique([r["entity"] for r in records], return_inverse=True)[1]
    pred = np.unique([entity[i] for i in ids], return_inverse=True)[1]
    return {"pairwise_f1": pairwise_prf(gold, pred)[2], "bcubed_f1": bcubed(gold, pred)[2]}


def _work(timings: dict[str, float]) -> float:
    """A batch's own processing seconds. With ``graph_wait_s`` (the pipelined writer) the
    graph write ran beside the next batch's work and only that wait held this batch up,
    so ``graph_s`` is not added again."""
    spent = sum(timings.values())
    return spent - timings["graph_s"] if "graph_wait_s" in timings else spent


def _summary(batches: list[dict[str, Any]], at: int, width: int) -> dict[str, Any]:
    ends = np.array([b["resolved"] for b in batches])
    near = [batches[i] for i in np.argsort(np.abs(ends - at), kind="stable")[:width]]
    work = [_work(b["timings"]) for b in near]
    lat = [b["latency_s"] for b in near]
    stages = sorted({k for b in near for k in b["timings"]})
    return {
        "resolved": at,
        "batches": len(near),
        "work_p50_s": round(float(np.percentile(work, 50)), 3),
        "work_p95_s": round(float(np.percentile(work, 95)), 3),
        "latency_p50_s": round(float(np.percentile(lat, 50)), 3),
        "latency_p95_s": round(float(np.percentile(lat, 95)), 3),
        "stages_s": {
            k: round(float(np.mean([b["timings"].get(k, 0) for b in near])), 4) for k in stages
        },
    }


def _tree_cpu(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) of a live process and of its descendants by name."""
    import psutil

    root = psutil.Process(pid)
    out = {"worker": sum(root.cpu_times()[:2])}
    for child in root.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            name = "graph_db" if "redis" in child.name() else child.name()
            out[name] = out.get(name, 0.0) + sum(child.cpu_times()[:2])
    return out


def _postgres_cpu() -> dict[int, float]:
    """CPU seconds of each PostgreSQL process alive now, by pid."""
    import psutil

    out = {}
    for proc in psutil.process_iter(["name"]):
        if proc.info["name"] and proc.info["name"].startswith("postgres"):
            with contextlib.suppress(psutil.Error):
                out[proc.pid] = sum(proc.cpu_times()[:2])
    return out


def _busy() -> float:
    """Machine-wide busy CPU seconds so far (all cores, idle and iowait excluded)."""
    import psutil

    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0)


def _cpu_use(
    before: tuple[dict[str, float], dict[int, float], float], worker: int, wall: float
) -> dict[str, Any]:
    """Where the run's CPU went: core-seconds per process group, and the machine's use.

    ``before``: the worker tree's, PostgreSQL's and the machine's CPU seconds at the
    start. PostgreSQL counts the processes alive at the end (a connection that closed
    during the run is left out; the machine's figure holds it, with ``er ingest``).
    """
    tree, pg, busy = _tree_cpu(worker), _postgres_cpu(), _busy()
    used = {k: round(v - before[0].get(k, 0.0), 1) for k, v in tree.items()}
    used["postgres"] = round(sum(v - before[1].get(pid, 0.0) for pid, v in pg.items()), 1)
    cores = os.cpu_count() or 1
    return {
        "core_s": used,
        "machine_busy_core_s": round(busy - before[2], 1),
        "machine_busy_share": round((busy - before[2]) / (wall * cores), 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--batch", type=int, default=1_000)
    ap.add_argument("--at", type=int, nargs="+", default=[10_000])
    ap.add_argument("--width", type=int, default=5, help="batches summarised around each point")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    records = synthetic_people(args.n, seed=args.seed)
    # Redis database 0: the tests take 1-15 at random, and a test worker on the same
    # database would consume this run's tasks (seen once: 66 of 100 ingest tasks gone).
    db = 0
    import redis

    if redis.Redis(host="127.0.0.1", port=6379, db=db).dbsize():
        raise SystemExit("Redis database 0 is not empty: another run is using it.")
    with fresh_database() as url, tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "people.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        base = {k: v for k, v in os.environ.items() if not k.startswith("ER_")}
        env = {
            **base,
            "ER_DATABASE_URL": url,
            "ER_DATA_DIR": str(Path(tmp) / "data"),
            "ER_BROKER_URL": f"redis://127.0.0.1:6379/{db}",
        }
        worker = subprocess.Popen(
            [sys.executable, "-m", "er.cli", "worker"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            time.sleep(5)  # the worker's start-up (imports, the graph database) is not the run's
            load_before = os.getloadavg()
            cpu_before = (_tree_cpu(worker.pid), _postgres_cpu(), _busy())
            started = time.perf_counter()
            done = subprocess.run(
                [
                    *(sys.executable, "-m", "er.cli", "ingest", str(path)),
                    *("--collection", "people", "--id-field", "rec_id", "--gold-field", "entity"),
                    *("--batch-size", str(args.batch), "--wait", "--timeout", "86400", "--json"),
                ],
                env=env,
                capture_output=True,
                text=True,
            )
            wall = time.perf_counter() - started
            if done.returncode != 0:
                raise SystemExit(done.stderr)
            cpu = _cpu_use(cpu_before, worker.pid, wall)
            batches = _batches(url)
            quality = _quality({**env, "ER_BROKER_URL": ""}, records)
        finally:
            worker.terminate()
            worker.wait(timeout=120)
            import redis

            redis.Redis(host="127.0.0.1", port=6379, db=db).flushdb()
    out = {
        "n": args.n,
        "batch": args.batch,
        "wall_s": round(wall, 1),
        "mentions_per_s": round(args.n / wall, 1),
        **{k: round(v, 4) for k, v in quality.items()},
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus, "
        f"Python {platform.python_version()}",
        # other processes on the same cores slow every stage: the load, 1/5/15 min
        "load_at_start": [round(x, 2) for x in load_before],
        "load_at_end": [round(x, 2) for x in os.getloadavg()],
        "cpu": cpu,
    }
    print(json.dumps(out))
    for at in args.at:
        print(json.dumps(_summary(batches, at, args.width)))


if __name__ == "__main__":
    main()
