"""The embedded default end to end (issue #30): `er ingest FILE` with no broker.

Synthetic person records (``bench/people.py``) as one JSONL file, resolved by one
``er ingest`` process on the embedded defaults (PostgreSQL on the machine's server, a
fresh database; the embedded FalkorDB the command starts in its data dir): wall time,
mentions/s, peak resident memory of the command and of its graph database (sampled
every 2 s), the writer's seconds per batch around each ``--at`` point, and the F1 of
the exported entities against the generator's gold ids.

    python -m bench inprocess --n 1000000 --batch 1000 --at 10000 100000 1000000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _pg import fresh_database
from bench_e2e import PeakRss, _batches, _quality, _summary
from people import synthetic_people


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--batch", type=int, default=1_000)
    ap.add_argument("--at", type=int, nargs="+", default=[10_000])
    ap.add_argument("--width", type=int, default=9, help="batches summarised around each point")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    records = synthetic_people(args.n, seed=args.seed)
    with fresh_database() as url, tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "people.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        env = {k: v for k, v in os.environ.items() if not k.startswith("ER_")}
        env.update(ER_DATABASE_URL=url, ER_DATA_DIR=str(Path(tmp) / "data"))
        started = time.perf_counter()
        command = [
            *(sys.executable, "-m", "er.cli", "ingest", str(path), "--collection", "people"),
            *("--id-field", "rec_id", "--gold-field", "entity", "--batch-size", str(args.batch)),
        ]
        ingest = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        with PeakRss(ingest.pid) as rss:
            _, err = ingest.communicate()
        wall = time.perf_counter() - started
        if ingest.returncode != 0:
            raise SystemExit(err)
        batches = _batches(url)
        quality = _quality(env, records)
    print(
        json.dumps(
            {
                "n": args.n,
                "batch": args.batch,
                "wall_s": round(wall, 1),
                "mentions_per_s": round(args.n / wall, 1),
                **{k: round(v, 4) for k, v in quality.items()},
                "peak_rss_gib": rss.peak,
                "machine": f"{platform.machine()}, {os.cpu_count()} cpus, "
                f"Python {platform.python_version()}",
            }
        )
    )
    for at in args.at:
        print(json.dumps(_summary(batches, at, args.width)))


if __name__ == "__main__":
    main()
