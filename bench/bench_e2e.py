"""End to end through the queue (issue #13): Redis, one `er worker`, PostgreSQL, FalkorDB.

Synthetic person records (``bench/people.py``) are written as JSONL and ingested with
``er ingest --batch-size B --wait`` through Redis; one ``er worker`` (the only writer;
it owns an embedded FalkorDB in a temporary data dir) runs the cluster tasks, and the
ingest process it starts beside it the ingest tasks. Reported: sustained mentions/s
(first enqueue to last batch done), per-batch processing time p50/p95 and queueing
latency (batch row created -> done) p50/p95 around 10k, 50k and 100k resolved, the mean
time per stage, pairwise/B-cubed F1 of the exported entities against the generator's
gold ids, and where the CPU went (psutil): core-seconds of the worker, its ingest
process, its graph database and PostgreSQL over the run, the machine's busy share of all
its cores, what no group holds (``er ingest``, Redis, the OS) and the hypervisor's
steal; the peak resident memory (PSS) of the worker and of its graph database (sampled
every 2 s). The clock starts once the worker has settled after its start-up.

A bulk load like this one is stored faster than it is clustered, so the writer finds
a backlog of pending batches: latency from the batch row's creation then includes the
wait behind the batches before it, and the processing time is the per-batch figure.
(Before the ingest process, the worker drained the ingest queue first and clustered
nothing until the whole load was stored.)

    python bench/bench_e2e.py --n 100000 --batch 1000 --at 10000 50000 100000

``--stream S`` sends, before each ``--at`` point, its last S batches one at a time,
each waited for (``er ingest --wait`` per batch): their latency (batch row created ->
done) is a stream's at that size, printed as ``stream_at`` rows; the rest of the
records go as backlogs.

Each summary row has ``joining``: the share of its batches' records that have an
earlier record of their entity (what a batch's work follows: a joining mention
changes its entity's clusters, a new one adds its own). In a shuffled stream it grows
from 0.23 at 100k of a million to 0.84 at the end; ``--window W`` sends the records as
a steady stream instead (``bench/people.py``), whose batches past the first W records
hold alike: the stream's cost at 100k and at 1M is then measured on like batches.

``--dim`` and ``--ngrams`` run another featurizer (the inferred one with that
dimension and those n-gram sizes), passed to ``er ingest --config``, to measure a
featurizer choice end to end. ``--peer PATH`` runs the worker and ingest on the er
of another checkout (``git worktree add``), measured by this script, for a peer in the
same session. ``--people real-sparse`` runs the second generator (#56 must-show 1).
``--ingesters N`` starts the worker with N ingest processes beside its writer (#56
must-show 3: the ingest processes make each batch's features, er.pipeline.features);
the CPU table then says what each stage costs per mention and where it ran.
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
from typing import Any, NamedTuple

import numpy as np
import psutil

from er.pipeline import recent_work, writer_seconds

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _pg import fresh_database
from people_real import PEOPLE, people_records


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
        if finished is None:  # not done (a run stopped by --limit-s)
            break
        resolved += n
        latency = (finished - created).total_seconds()
        out.append(
            {
                "seq": seq,
                "resolved": resolved,
                "timings": timings,
                "latency_s": latency,
            }
        )
    if not out:
        return out
    # the batches of one writer step carry the step's timings, each of them (two steps
    # of equal timings to the microsecond would count as one)
    step = np.cumsum([i == 0 or b["timings"] != out[i - 1]["timings"] for i, b in enumerate(out)])
    sizes = np.bincount(step)
    for b, g in zip(out, step, strict=True):
        b["step_batches"] = int(sizes[g])
    return out


def _quality(env: dict[str, str], records: list[dict[str, str]]) -> dict[str, float]:
    from er.evaluation import bcubed, pairwise_prf

    done = _er(env, "export", "entities", "--collection", "people")
    entity = {r["external_id"]: r["entity_id"] for r in csv.DictReader(io.StringIO(done.stdout))}
    ids = [r["rec_id"] for r in records]
    gold = np.unique([r["entity"] for r in records], return_inverse=True)[1]
    pred = np.unique([entity[i] for i in ids], return_inverse=True)[1]
    return {"pairwise_f1": pairwise_prf(gold, pred)[2], "bcubed_f1": bcubed(gold, pred)[2]}


def _summary(batches: list[dict[str, Any]], at: int, width: int) -> dict[str, Any]:
    ends = np.array([b["resolved"] for b in batches])
    near = [batches[i] for i in np.argsort(np.abs(ends - at), kind="stable")[:width]]
    work = [writer_seconds(b["timings"]) for b in near]
    per_batch = [w / b.get("step_batches", 1) for w, b in zip(work, near, strict=True)]
    lat = [b["latency_s"] for b in near]
    return {
        "resolved": at,
        "batches": len(near),
        "work_p50_s": round(float(np.percentile(work, 50)), 3),
        "work_p95_s": round(float(np.percentile(work, 95)), 3),
        "latency_p50_s": round(float(np.percentile(lat, 50)), 3),
        "latency_p95_s": round(float(np.percentile(lat, 95)), 3),
        # a step of several batches (a backlog) charged to each of them
        "work_per_batch_p50_s": round(float(np.percentile(per_batch, 50)), 3),
        "step_batches": [b.get("step_batches", 1) for b in near],
        "stages_s": recent_work([(0, b["timings"], None) for b in near])["stages_s"],
    }


def _joining(records: list[dict[str, Any]]) -> np.ndarray:
    """(n,) whether each record has an earlier record of its gold entity: the share of
    a batch's mentions that join an existing entity, which its work follows."""
    seen: set[str] = set()
    out = np.zeros(len(records), bool)
    for i, r in enumerate(records):
        out[i] = r["entity"] in seen
        seen.add(r["entity"])
    return out


def _run_means(batches: list[dict[str, Any]], batch: int) -> dict[str, Any]:
    """Means over every batch of the run (:func:`er.pipeline.recent_work`), and the
    writer's work without the wait for the graph write. ``ceiling_mentions_per_s``: what
    the one writer could sustain if the graph database cost it nothing."""
    means = recent_work([(batch, b["timings"], None) for b in batches])
    if not means["timed_batches"]:  # a peer that stores no timings
        return {"stages_mean_s": {}, "work_mean_s": None}
    own = means["writer_s_per_batch"] - means["stages_s"].get("graph_wait_s", 0.0)
    return {
        "stages_mean_s": means["stages_s"],
        "work_mean_s": means["writer_s_per_batch"],
        "own_work_mean_s": round(float(own), 4),
        "ceiling_mentions_per_s": round(batch / float(own), 1) if own > 0 else None,
    }


class CpuClock(NamedTuple):
    """CPU seconds (user + system) read at one moment, by process."""

    worker: dict[int, tuple[str, float]]  # pid -> (group, seconds): the worker's tree
    postgres: dict[int, float]  # pid -> seconds: the postmaster (with reaped backends), backends
    machine: float  # busy seconds of all cores
    steal: float  # seconds the hypervisor gave to other guests


def _seconds(proc: psutil.Process, reaped: bool = False) -> float:
    """user + system seconds of ``proc``; ``reaped``: with its exited children's."""
    t = proc.cpu_times()
    return t.user + t.system + ((t.children_user + t.children_system) if reaped else 0.0)


def _worker_tree(worker: int) -> dict[int, tuple[str, float]]:
    """pid -> (group, CPU seconds) of the worker and its descendants (its graph
    database as ``graph_db``, its ingest processes as ``ingest``)."""
    root = psutil.Process(worker)
    tree = {worker: ("worker", _seconds(root, reaped=True))}
    for child in root.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            tree[child.pid] = (_group(child), _seconds(child, reaped=True))
    return tree


def _group(proc: psutil.Process) -> str:
    """What a process of the worker's tree is: graph_db, ingest or its own name."""
    if "redis" in proc.name():
        return "graph_db"
    return "ingest" if "--ingest-only" in proc.cmdline() else proc.name()


def _read_clock(worker: int) -> CpuClock:
    """The worker's tree, PostgreSQL, the machine."""
    tree = _worker_tree(worker)
    procs = [p for p in psutil.process_iter(["name", "ppid"]) if p.info["name"] == "postgres"]
    pids = {p.pid for p in procs}
    pg = {}
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            # the postmaster (no postgres parent) also holds the backends that closed
            pg[proc.pid] = _seconds(proc, reaped=proc.info["ppid"] not in pids)
    t = psutil.cpu_times()
    # guest time is counted in user time already (Linux); iowait and steal are not work
    idle = t.idle + t.iowait + t.steal + t.guest + t.guest_nice
    return CpuClock(tree, pg, sum(t) - idle, t.steal)


def _cpu_use(before: CpuClock, after: CpuClock, wall: float) -> dict[str, Any]:
    """Where the run's CPU went between two readings ``wall`` seconds apart.

    Returns
    -------
    dict
        ``core_s``: core-seconds per group (worker, graph_db, postgres); the
        machine's busy core-seconds and their share of all cores over ``wall``;
        ``steal_core_s``; ``unattributed_core_s`` (``er ingest``, Redis, the OS).
    """
    used: dict[str, float] = {}
    for pid, (group, sec) in after.worker.items():
        used[group] = used.get(group, 0.0) + sec - before.worker.get(pid, (group, 0.0))[1]
    used["postgres"] = sum(
        sec - before.postgres.get(pid, 0.0) for pid, sec in after.postgres.items()
    )
    busy = after.machine - before.machine
    cores = os.cpu_count() or 1
    return {
        "core_s": {k: round(v, 1) for k, v in used.items()},
        "machine_busy_core_s": round(busy, 1),
        "machine_busy_share": round(busy / (wall * cores), 3),
        "unattributed_core_s": round(busy - sum(used.values()), 1),
        "steal_core_s": round(after.steal - before.steal, 1),
    }


class PeakRss:
    """Peak memory (PSS: resident, shared pages split among their sharers) of the
    worker's processes and of its graph database, sampled every ``every`` seconds in a
    thread while the run lasts (GiB)."""

    def __init__(self, worker: int, every: float = 2.0) -> None:
        import threading

        self.worker, self.every = worker, every
        self.peak: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            with contextlib.suppress(psutil.Error):
                now: dict[str, float] = {}
                root = psutil.Process(self.worker)
                for proc in [root, *root.children(recursive=True)]:
                    with contextlib.suppress(psutil.Error):
                        group = "graph_db" if _group(proc) == "graph_db" else "worker"
                        now[group] = now.get(group, 0.0) + _pss(proc) / 2**30
                now["together"] = sum(now.values())
                for group, gib in now.items():
                    self.peak[group] = max(self.peak.get(group, 0.0), round(gib, 2))


def _pss(proc: psutil.Process) -> float:
    """Bytes of memory ``proc`` holds, its shared pages split among their sharers (so a
    forked child, such as the graph database's background rewrite, is not counted
    twice); its resident size where PSS cannot be read."""
    try:
        return float(proc.memory_full_info().pss)
    except (AttributeError, psutil.AccessDenied):
        return float(proc.memory_info().rss)


def _wait_idle(pid: int, timeout: float = 120.0) -> None:
    """Wait until the worker's tree has used under 0.05 CPU s over a second: started
    (imports, broker connection), waiting for tasks."""
    deadline = time.monotonic() + timeout
    last = sum(sec for _, sec in _worker_tree(pid).values())
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = sum(sec for _, sec in _worker_tree(pid).values())
        if now - last < 0.05:
            return
        last = now
    raise SystemExit(f"the worker (pid {pid}) did not settle within {timeout:.0f} s")


def _featurizer_option(
    first: list[dict[str, Any]], dim: int | None, ngrams: list[int] | None
) -> dict[str, Any] | None:
    """The collection config for ``--dim``/``--ngrams``: the featurizer er would infer
    from the first batch, with that dimension and those n-gram sizes; None for er's own."""
    if dim is None and ngrams is None:
        return None
    from bench_featurize import with_encoding

    from er.featurize import infer_config

    cfg = infer_config(first, id_field="rec_id", gold_field="entity")
    return {"featurizer": with_encoding(cfg, dim, ngrams).to_json()}


def _packaged(checkout: Path) -> Path:
    """A checkout whose ``er._schema`` and ``er._migrations`` are its own: links to its
    ``schema/`` and ``migrations/``, as the wheel ships them (setup.py). Without them an
    editable install of this checkout serves its own schema to the peer's er."""
    for name, target in (("_schema", "schema"), ("_migrations", "migrations")):
        link = checkout / "er" / name
        if not link.exists():
            link.symlink_to(Path("..") / target)
    return checkout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--batch", type=int, default=1_000)
    ap.add_argument("--at", type=int, nargs="+", default=[10_000])
    ap.add_argument("--width", type=int, default=5, help="batches summarised around each point")
    ap.add_argument("--seed", type=int, default=None, help="default: the generator's own")
    ap.add_argument(
        "--people",
        choices=PEOPLE,
        default="people",
        help="people: bench/people.py; real-LEVEL: bench/people_real.py at that level "
        "(real-sparse: a third of the records two or three fields)",
    )
    ap.add_argument("--dim", type=int, default=None, help="featurizer dimension (default: er's)")
    ap.add_argument(
        "--ngrams", type=int, nargs="+", default=None, help="n-gram sizes (default: er's)"
    )
    ap.add_argument(
        "--limit-s",
        type=float,
        default=None,
        help="stop after this many seconds and report how far it got (a slow peer)",
    )
    ap.add_argument(
        "--stream",
        type=int,
        default=0,
        help="batches sent one at a time (each waited for) as each --at point is reached; "
        "the rest goes as a backlog",
    )
    ap.add_argument(
        "--window",
        type=int,
        default=None,
        help="records arrive as a steady stream, duplicates within this many records of "
        "their entity's first (bench/people.py); default: shuffled",
    )
    ap.add_argument("--ingesters", type=int, default=1, help="ingest processes beside the writer")
    ap.add_argument(
        "--peer",
        type=Path,
        default=None,
        help="checkout of another commit: its er runs the worker and ingest (the peer), "
        "this bench measures",
    )
    args = ap.parse_args()
    records = people_records(args.people, args.n, seed=args.seed, window=args.window)
    joining = _joining(records)
    config = _featurizer_option(records[: args.batch], args.dim, args.ngrams)
    # Redis database 0: the tests take 1-15 at random, and a test worker on the same
    # database would consume this run's tasks (seen once: 66 of 100 ingest tasks gone).
    db = 0
    import redis

    if redis.Redis(host="127.0.0.1", port=6379, db=db).dbsize():
        raise SystemExit("Redis database 0 is not empty: another run is using it.")
    # a peer's embedded FalkorDB may still write its append-only file as the directory
    # goes; that lost a whole run's figures once
    with fresh_database() as url, tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        path = Path(tmp) / "people.jsonl"
        probes: list[int] = []  # mentions resolved after each batch sent alone
        limit = args.limit_s or 86400.0
        base = {k: v for k, v in os.environ.items() if not k.startswith("ER_")}
        if args.peer is not None:  # safe path: `python -m` must not put the cwd's er first
            base.update(PYTHONPATH=str(_packaged(args.peer).resolve()), PYTHONSAFEPATH="1")
        env = {
            **base,
            "ER_DATABASE_URL": url,
            "ER_DATA_DIR": str(Path(tmp) / "data"),
            "ER_BROKER_URL": f"redis://127.0.0.1:6379/{db}",
        }
        worker = subprocess.Popen(
            [sys.executable, "-m", "er.cli", "worker", "--ingesters", str(args.ingesters)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            _wait_idle(worker.pid)  # its start-up is not the run's
            load_before = os.getloadavg()
            cpu_before = _read_clock(worker.pid)
            started = time.perf_counter()
            with PeakRss(worker.pid) as rss:
                for part in _parts(args.n, args.batch, args.at, args.stream):
                    part_path = path.with_suffix(f".{part.start}.jsonl")
                    part_path.write_text(
                        "".join(json.dumps(r) + "\n" for r in records[part.start : part.stop])
                    )
                    done = subprocess.run(
                        [
                            *(sys.executable, "-m", "er.cli", "ingest", str(part_path)),
                            *("--collection", "people", "--id-field", "rec_id"),
                            *("--gold-field", "entity", "--batch-size", str(args.batch)),
                            *("--wait", "--timeout", str(limit), "--json"),
                            *(("--config", json.dumps(config)) if config else ()),
                        ],
                        env=env,
                        capture_output=True,
                        text=True,
                    )
                    part_path.unlink()
                    if done.returncode != 0 or time.perf_counter() - started > limit:
                        break
                    if part.probe:
                        probes.append(part.stop)
                wall = time.perf_counter() - started
            limited = args.limit_s is not None and wall >= args.limit_s
            if done.returncode != 0 and not limited:
                raise SystemExit(done.stderr)
            cpu = _cpu_use(cpu_before, _read_clock(worker.pid), wall)
            batches = _batches(url)
            resolved = batches[-1]["resolved"] if batches else 0
            quality = {} if limited else _quality({**env, "ER_BROKER_URL": ""}, records)
        finally:
            worker.terminate()  # a warm shutdown waits for the task in hand
            try:
                worker.wait(timeout=120)
            except subprocess.TimeoutExpired:  # a backlog left by --limit-s
                worker.kill()
                worker.wait()
            import redis

            redis.Redis(host="127.0.0.1", port=6379, db=db).flushdb()
    out = {
        "n": args.n,
        "people": args.people,
        "batch": args.batch,
        "ingesters": args.ingesters,
        **({"window": args.window} if args.window else {}),
        **({"featurizer": {"dim": args.dim, "ngrams": args.ngrams}} if config else {}),
        "wall_s": round(wall, 1),
        "resolved": resolved,
        "mentions_per_s": round(resolved / wall, 1),
        **{k: round(v, 4) for k, v in quality.items()},
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus, "
        f"Python {platform.python_version()}",
        # other processes on the same cores slow every stage: the load, 1/5/15 min
        "load_at_start": [round(x, 2) for x in load_before],
        "load_at_end": [round(x, 2) for x in os.getloadavg()],
        "cpu": cpu,
        "peak_rss_gib": rss.peak,
        "run": _run_means(batches, args.batch),
    }
    print(json.dumps(out))
    for at in args.at:
        span = args.width * args.batch  # the summarised batches, about
        lo = min(max(at - span // 2, 0), max(args.n - span, 0))
        share = float(joining[lo : lo + span].mean())
        print(json.dumps({**_summary(batches, at, args.width), "joining": round(share, 3)}))
    if probes:  # each batch sent alone, waited for: its latency is the stream's
        ends = {b["resolved"]: b for b in batches}
        for at in args.at:
            alone = [ends[p] for p in probes if at - args.stream * args.batch < p <= at]
            if alone:  # a stopped peer never reaches its last points
                share = float(joining[at - args.stream * args.batch : at].mean())
                row = {"stream_at": at, **_summary(alone, at, len(alone))}
                print(json.dumps({**row, "joining": round(share, 3)}))


class Part(NamedTuple):
    start: int
    stop: int
    probe: bool  # one batch sent alone


def _parts(n: int, batch: int, at: list[int], stream: int) -> list[Part]:
    """The records in the order they are sent: backlogs, and before each ``at`` point
    ``stream`` single batches (all one backlog without ``stream``)."""
    if not stream:
        return [Part(0, n, False)]
    out, pos = [], 0
    for point in sorted(p for p in at if p <= n):
        first_probe = max(pos, point - stream * batch)
        if first_probe > pos:
            out.append(Part(pos, first_probe, False))
        out += [Part(s, min(s + batch, point), True) for s in range(first_probe, point, batch)]
        pos = point
    if pos < n:
        out.append(Part(pos, n, False))
    return out


if __name__ == "__main__":
    main()
