"""`er eval` at size (issue #31): wall time and peak memory of one evaluation run.

For each size, synthetic people (`people_real.py`, test seed) go through `er ingest`
with gold labels, embedded defaults, in a temporary data directory; then `er eval`
runs as its own process under `/usr/bin/time`, which reports its peak resident set.
The ingest is timed too, but it is not what this measures.

    python -m bench eval --n 100000 [--level hard] [--json bench/raw/eval-....jsonl]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from _rows import emit
from bench_quality import er_workspace
from people_real import TEST_SEED, real_people


def _run(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd[:4])} failed: {done.stderr[-2000:]}")
    return done


def measure(n: int, level: str) -> dict[str, Any]:
    """Ingest n people, then time `er eval` and read its peak RSS."""
    rows = real_people(n, level=level, seed=TEST_SEED)
    with tempfile.TemporaryDirectory() as tmp:
        path, er, env = er_workspace(Path(tmp), rows)
        started = time.perf_counter()
        ingest = [*er, "ingest", str(path), "--collection", "p", "--id-field", "rec_id"]
        _run([*ingest, "--gold-field", "entity", "--batch-size", "1000", "--json"], env)
        ingest_s = time.perf_counter() - started
        figures = timed_eval(er, "p", env)
    return {"n": n, "level": level, "ingest_seconds": round(ingest_s, 1), **figures}


def timed_eval(er: list[str], collection: str, env: dict[str, str]) -> dict[str, Any]:
    """`er eval` of a collection as its own process: seconds, peak RSS, pairwise F1."""
    started = time.perf_counter()
    done = _run(
        ["/usr/bin/time", "-f", "maxrss_kb=%M", *er, "eval", "--collection", collection, "--json"],
        env,
    )
    eval_s = time.perf_counter() - started
    rss_kb = int(done.stderr.rsplit("maxrss_kb=", 1)[1].split()[0])
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        "eval_seconds": round(eval_s, 1),
        "eval_peak_rss_mib": round(rss_kb / 1024, 1),
        "pairwise_f1": figures.get("pairwise_prf_at_cut", [None] * 3)[2],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, nargs="+", default=[100_000])
    ap.add_argument("--level", default="hard", choices=["medium", "hard"])
    ap.add_argument("--json", type=Path, help="append one JSON line per size")
    args = ap.parse_args()
    for n in args.n:
        emit(measure(n, args.level), args.json)


if __name__ == "__main__":
    main()
