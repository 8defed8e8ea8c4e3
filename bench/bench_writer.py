"""Writer stage times in process (issue #13): where a batch's time goes as n grows.

Runs the product pipeline in process (PostgreSQL on ER_BENCH_PG, a fresh database;
an embedded FalkorDB in a temporary data dir) on synthetic person records
(``bench/people.py``) in batches of ``--batch`` and prints, around each ``--at``
point, the mean seconds per stage of the ``--width`` batches ending nearest it.
Without the queue and the worker, this is the writer's own cost
(``bench/bench_e2e.py`` measures the whole path).

    python bench/bench_writer.py --n 30000 --batch 1000 --at 10000 30000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_entities import around, run_pipeline
from people import synthetic_people


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=1_000)
    ap.add_argument("--at", type=int, nargs="+", default=[10_000, 20_000])
    ap.add_argument("--width", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--config", type=json.loads, default=None, help="collection config (JSON)")
    args = ap.parse_args()
    import er

    people = synthetic_people(args.n, seed=args.seed)
    reports = run_pipeline(people, args.batch, "writer", args.config)
    for at in args.at:
        rows = [reports[i] for i in around(reports, at, args.width)]
        stages = sorted({k for r in rows for k in r["timings"]})
        mean = {
            s: round(float(np.mean([r["timings"].get(s, 0.0) for r in rows])), 3) for s in stages
        }
        out = {
            "resolved": at,
            "batches": [r["batch_seq"] for r in rows],
            "stages_s": mean,
            "work_s": round(sum(v for k, v in mean.items() if k != "ingest_s"), 3),
            "code": str(Path(er.__file__).parent.parent),
            "config": args.config,
            "load": os.getloadavg(),
            "machine": f"{platform.machine()}, {platform.python_version()}",
        }
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
