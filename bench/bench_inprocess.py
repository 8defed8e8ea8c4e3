"""The embedded default end to end (issue #30): `er ingest FILE` with no broker.

Synthetic person records (``bench/people.py``, or ``--people real-LEVEL``) as one
JSONL file, resolved by one ``er ingest`` process on the embedded defaults (the SQLite
file and the embedded FalkorDB in its data dir; ``--database postgres``: a fresh
database on the machine's PostgreSQL server instead): wall time,
mentions/s, peak resident memory of the command and of its graph database (sampled
every 2 s), the writer's seconds per batch around each ``--at`` point, and the F1 of
the exported entities against the generator's gold ids.

    python -m bench inprocess --n 1000000 --batch 1000 --at 10000 100000 1000000 [--eval]
"""

from __future__ import annotations

import argparse
import contextlib
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
from bench_eval import timed_eval
from people_real import PEOPLE, people_records


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--batch", type=int, default=1_000)
    ap.add_argument("--at", type=int, nargs="+", default=[10_000])
    ap.add_argument("--width", type=int, default=9, help="batches summarised around each point")
    ap.add_argument("--seed", type=int, default=None, help="default: the generator's own")
    ap.add_argument(
        "--people",
        choices=PEOPLE,
        default="people",
        help="people: bench/people.py; real-LEVEL: bench/people_real.py at that level",
    )
    ap.add_argument(
        "--database",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help="sqlite: ER_DATABASE_URL unset, er's own default",
    )
    ap.add_argument(
        "--eval", action="store_true", help="then `er eval` in its own process (issue #31)"
    )
    args = ap.parse_args()
    records = people_records(args.people, args.n, seed=args.seed)
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        data = Path(tmp) / "data"
        env = {k: v for k, v in os.environ.items() if not k.startswith("ER_")}
        env.update(ER_DATA_DIR=str(data))
        if args.database == "postgres":
            url = env["ER_DATABASE_URL"] = stack.enter_context(fresh_database())
        else:  # the file er makes when ER_DATABASE_URL is unset (er/config.py)
            url = f"sqlite:///{(data / 'er.sqlite3').resolve()}"
        path = Path(tmp) / "people.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
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
        er = [sys.executable, "-m", "er.cli"]
        evaluated = {"eval": timed_eval(er, "people", env)} if args.eval else {}
    print(
        json.dumps(
            {
                "n": args.n,
                "people": args.people,
                "batch": args.batch,
                "database": args.database,
                "wall_s": round(wall, 1),
                "mentions_per_s": round(args.n / wall, 1),
                **{k: round(v, 4) for k, v in quality.items()},
                "peak_rss_gib": rss.peak,
                **evaluated,
                "machine": f"{platform.machine()}, {os.cpu_count()} cpus, "
                f"Python {platform.python_version()}",
            }
        )
    )
    for at in args.at:
        print(json.dumps(_summary(batches, at, args.width)))


if __name__ == "__main__":
    main()
