"""Chaos run (issue #54): worker and graph server SIGKILLed, a failed batch retried, vs no faults.

Synthetic people (``bench/people.py``, seeded) go through Redis, one ``er worker`` and
its embedded FalkorDB twice, in fresh databases and data dirs: run A without faults,
run B with ``--kills`` SIGKILLs of the worker and as many of the graph server at seeded
moments, and the last batch's step failed then retried with ``er retry`` (the harness
and what it compares: ``bench/chaos.py``). Written to ``bench/raw/chaos-<date>.json``
(or ``--out``): both runs' events, wall times and per-batch times, the differences
(none expected) and the exactly-once checks. Exit status 1 if the runs differ.

    python -m bench chaos --n 100000 --batch 1000 --kills 10 --seed 0
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import sys
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chaos import chaos_run
from people import synthetic_people


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="records (100,000)")
    ap.add_argument("--batch", type=int, default=1_000, help="records per batch (1,000)")
    ap.add_argument("--kills", type=int, default=10, help="SIGKILLs of each target (10)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stall-s", type=float, default=120.0, help="requeue after this long idle")
    ap.add_argument("--out", type=Path, default=None, help="the JSON report's path")
    args = ap.parse_args()
    # Redis database 0, as bench_e2e: the tests take 1-15 at random
    if redis.Redis(host="127.0.0.1", port=6379, db=0).dbsize():
        raise SystemExit("Redis database 0 is not empty: another run is using it.")
    out = chaos_run(
        synthetic_people(args.n, seed=args.seed),
        batch=args.batch,
        kills=args.kills,
        seed=args.seed,
        redis_db=0,
        stall_s=args.stall_s,
        say=lambda line: print(line, flush=True),
    )
    out["machine"] = {"python": platform.python_version(), "cpus": _cpus()}
    today = dt.date.today().isoformat()
    path = args.out or Path(__file__).resolve().parent / "raw" / f"chaos-{today}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"differences: {out['differences'] or 'none'}; events B: {out['b']['events']}")
    print(f"written {path}")
    return 1 if out["differences"] else 0


def _cpus() -> int | None:
    import os

    return os.cpu_count()


if __name__ == "__main__":
    sys.exit(main())
